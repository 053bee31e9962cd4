# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
name: stage_items
type: aggregate
short_description: Collect the items each rayfleet stage manages on each host, for its record
version_added: "0.2.0"
description:
  - Watches the results of the tasks between a stage's M(rayfleet.cluster.stage_gate) and its
    M(rayfleet.cluster.stage_record) on each host, and collects the items they managed there - files written
    (copy, template, file, lineinfile, get_url, ...), units (systemd_service), packages (apt, dnf, package), pip
    packages, mounts, users, groups, kernel modules, and the items the collection's own modules and
    M(rayfleet.cluster.stage_items) report.
  - M(rayfleet.cluster.stage_record) records their state on the host, and the next run's
    M(rayfleet.cluster.drift_check) compares the host with it. The record is taken from what the stage did, so no
    second list of managed items is kept by hand.
  - Without this callback no record is written and every stage runs on every run.
  - Enable it in C(ansible.cfg) (C(callbacks_enabled = rayfleet.cluster.stage_items)); it prints nothing.
requirements:
  - enabled in callbacks_enabled
"""

import os
import shutil
import tempfile

from ansible.plugins.callback import CallbackBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    SPOOL_ENV,
    items_of_task_result,
    short_action,
    spool_write,
)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "rayfleet.cluster.stage_items"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        # The workers (forked from this process) find the spool through the environment.
        self._spool = tempfile.mkdtemp(prefix="rayfleet-stages-")
        os.environ[SPOOL_ENV] = self._spool
        self._current = {}  # host -> the stage open on it
        self._items = {}  # host -> {stage: [items]}

    def _result(self, result):
        host = result.host.get_name()
        fields = result.task_fields or {}
        action = short_action(fields.get("action") or result.task.action)
        data = result.result
        if action == "stage_gate":
            if data.get("stage") and data.get("run"):
                self._current[host] = data["stage"]
                self._items.setdefault(host, {})[data["stage"]] = []
                spool_write(self._spool, host, self._items[host])
            return
        if action == "stage_record":
            self._current.pop(host, None)
            return
        name = self._current.get(host)
        if name is None:
            return
        items = items_of_task_result(action, data, fields.get("args"))
        if items:
            self._items[host][name].extend(items)
            spool_write(self._spool, host, self._items[host])

    def v2_runner_on_ok(self, result):
        self._result(result)

    def v2_playbook_on_stats(self, stats):
        shutil.rmtree(self._spool, ignore_errors=True)
