# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.rocm_plan: the host's ROCm settings checked, its source, release, SMI tool and the
amdgpu-install package's checked download decided, on the controller."""

from __future__ import annotations

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.rocm_plan import ROCM_VARS, rocm_plan


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*ROCM_VARS, "hardware", "default_source", "distribution_rocm", "installer_url",
                             "distribution", "distribution_version"))

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context)
        settings = {name: args.get(name) for name in ROCM_VARS if name in args}
        return rocm_plan(host, settings, args.get("hardware"), args.get("default_source"),
                         args.get("distribution_rocm"), installer_url=args.get("installer_url") or "",
                         os_facts=(args.get("distribution"), args.get("distribution_version")))
