# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.pytorch_plan: the host's PyTorch settings checked, and what pip installs into the Ray
venv worked out, on the controller."""

from __future__ import annotations

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.pytorch_plan import PYTORCH_VARS, pytorch_plan


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset(PYTORCH_VARS)

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context)
        return pytorch_plan(host, {name: args.get(name) for name in PYTORCH_VARS})
