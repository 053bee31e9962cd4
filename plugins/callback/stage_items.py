# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
name: stage_items
type: aggregate
short_description: Collect the items each rayfleet stage manages on each host, for its record
version_added: "0.1.0"
description:
  - Watches the results of the tasks between a stage's M(rayfleet.cluster.stage_gate) and its
    M(rayfleet.cluster.stage_record) on each host, and collects the items they managed there - files written
    (copy, template, file, lineinfile, get_url, ...), units (systemd_service), packages (apt, dnf, package), pip
    packages, mounts, users, groups, kernel modules, and the items the collection's own modules and
    M(rayfleet.cluster.stage_items) report.
  - M(rayfleet.cluster.stage_record) records their state on the host, and the next run's
    M(rayfleet.cluster.drift_check) compares the host with it. The record is taken from what the stage did, so no
    second list of managed items is kept by hand.
  - The collection's playbooks load it with no configuration, from the C(callback_plugins/) directory beside them.
    A playbook of your own that calls the stage modules without importing one of the collection's enables it in
    C(ansible.cfg) (C(callbacks_enabled = rayfleet.cluster.stage_items)); without it no record is written and every
    stage runs on every run. It prints nothing.
"""

import os
import shutil
import tempfile

from ansible.plugins.callback import CallbackBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    SPOOL_ENV,
    collection_code,
    collection_root,
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
        self._changed = {}  # host -> the stages a task changed something in

    def _spool_host(self, host):
        spool_write(self._spool, host, self._items[host], self._changed.get(host, ()))

    def _result(self, result):
        # ansible-core 2.19 names these host, task, task_fields and result; earlier releases only with a "_"
        host = (getattr(result, "host", None) or result._host).get_name()
        fields = getattr(result, "task_fields", None) or result._task_fields or {}
        action = short_action(fields.get("action") or (getattr(result, "task", None) or result._task).action)
        data = getattr(result, "result", None)
        data = data if data is not None else result._result
        if action == "stage_gate":
            if data.get("stage") and data.get("run"):
                self._current[host] = data["stage"]
                self._items.setdefault(host, {})[data["stage"]] = []
                self._changed.setdefault(host, set()).discard(data["stage"])
                self._spool_host(host)
            return
        if action == "stage_record":
            # the record written (or settled) at the stage's end closes it; setting the record aside at its start
            # does not
            if data.get("state", "present") != "aside":
                self._current.pop(host, None)
            return
        name = self._current.get(host)
        if name is None:
            return
        if data.get("changed") and name not in self._changed.setdefault(host, set()):
            self._changed[host].add(name)
            self._spool_host(host)
        if self._items[host][name] is None:
            return
        items = items_of_task_result(action, data, fields.get("args"))
        if items:
            self._items[host][name].extend(items)
            self._spool_host(host)

    def v2_runner_on_ok(self, result):
        try:
            self._result(result)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A result this callback cannot read: the open stage writes no record rather than an incomplete one.
            host = getattr(getattr(result, "_host", None), "name", None)
            if host in self._current:
                # nor can it tell whether the task changed something: it counts as a change
                self._items[host][self._current[host]] = None
                self._changed.setdefault(host, set()).add(self._current[host])
                self._spool_host(host)
            self._display.warning("rayfleet.cluster.stage_items: %s; no stage record for %s this run" % (exc, host))

    def v2_playbook_on_start(self, playbook):
        # The collection's code digest and what each stage reads, computed here in the main process: the workers
        # forked for each task inherit them (the drift check and the stage records of every host need them).
        try:
            collection_code(collection_root())
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # each worker computes them then
            self._display.vvv("rayfleet.cluster.stage_items: the collection's code is read per task: %s" % exc)

    def v2_playbook_on_stats(self, stats):
        shutil.rmtree(self._spool, ignore_errors=True)
