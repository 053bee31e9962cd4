# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.nccl_plan: the host's NCCL settings checked, its NCCL source and EFA use decided, on the
controller."""

from __future__ import annotations

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nccl_plan import NCCL_VARS, nccl_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*NCCL_VARS, "hardware", "interfaces", "architecture"))

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (nvidia_driver_force: false when not given)
        settings = {name: args.get(name) for name in NCCL_VARS if name in args}
        settings.setdefault("nvidia_driver_force", False)
        return nccl_plan(host, settings, args.get("hardware"), args.get("interfaces"), args.get("architecture"))
