# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.checkpoint_store_plan: the checkpoint store's variables checked, its URI and the shared
directory's marker computed, on the controller."""

from __future__ import annotations

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.checkpoint_store_plan import (
    CHECKPOINT_STORE_VARS,
    checkpoint_store_plan,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction

# read from the host's variables, never passed as an argument: a task's arguments can be shown (the task header with
# ANSIBLE_DISPLAY_ARGS_TO_STDOUT, -vvv invocations)
SECRET_VARS = ("checkpoint_store_secret_access_key",)


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset(CHECKPOINT_STORE_VARS) - frozenset(SECRET_VARS)

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context)
        settings = {name: args.get(name) for name in CHECKPOINT_STORE_VARS if name in args}
        for name in SECRET_VARS:
            if name in task_vars:
                settings[name] = self._templar.template(task_vars[name])
        settings.setdefault("shared_storage_mounts", [])
        return checkpoint_store_plan(host, settings, task_vars.get("groups", {}).get("ray_head", []))
