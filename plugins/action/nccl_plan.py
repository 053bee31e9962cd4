# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.nccl_plan: the host's NCCL settings checked, its NCCL source and EFA use decided, on the
controller."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nccl_plan import NCCL_VARS, PlanError, nccl_plan


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset((*NCCL_VARS, "hardware", "interfaces", "architecture"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        host = task_vars["inventory_hostname"]
        args = self._task.args
        # the variables the task was given (nvidia_driver_force: false when not given)
        settings = {name: args.get(name) for name in NCCL_VARS if name in args}
        settings.setdefault("nvidia_driver_force", False)
        try:
            plan = nccl_plan(host, settings, args.get("hardware"), args.get("interfaces"), args.get("architecture"))
        except PlanError as exc:
            result.update(failed=True, msg=" ".join(exc.problems), problems=exc.problems)
            return result
        result.update(changed=False, **plan)
        return result
