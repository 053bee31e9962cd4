# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.cuda_plan: the host's CUDA toolkit settings checked, its source, release, home and
packages decided, on the controller."""

from __future__ import annotations

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cuda_plan import CUDA_VARS, cuda_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*CUDA_VARS, "hardware", "default_source", "distribution_cuda", "distribution",
                             "distribution_version"))

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context)
        settings = {name: args.get(name) for name in CUDA_VARS if name in args}
        return cuda_plan(host, settings, args.get("hardware"), args.get("default_source"),
                         args.get("distribution_cuda"),
                         os_facts=(args.get("distribution"), args.get("distribution_version")))
