# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.submit_host_plan: the submit host's variables and the inventory checked, and the names
of this cluster's client computed, on the controller."""

from __future__ import annotations

import os

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.submit_host_plan import (
    SUBMIT_HOST_VARS,
    submit_host_plan,
)


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset(SUBMIT_HOST_VARS)

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context)
        settings = {name: args.get(name) for name in SUBMIT_HOST_VARS}
        groups = task_vars.get("groups", {})
        heads = groups.get("ray_head", [])
        # the head's cluster name (its settings file's) and address, as the inventory gives them
        head_vars = {}
        if heads:
            hostvars = (task_vars.get("hostvars") or {}).get(heads[0]) or {}
            head_vars = {key: hostvars.get(key) for key in ("ray_cluster_name", "ansible_host")}
        # the user Ansible logs in as here, else the controller's user (as ansible_user | default($USER) read it)
        login_user = self._templar.template(task_vars.get("ansible_user")) or os.environ.get("USER", "")
        return submit_host_plan(host, settings, heads, groups.get("ray_worker", []), head_vars=head_vars,
                                login_user=login_user)
