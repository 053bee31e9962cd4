# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.apex_plan: the host's Apex settings checked, and how Apex is built there (the source,
the flags, the build key), worked out on the controller."""

from __future__ import annotations

import os

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.apex_plan import APEX_VARS, apex_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*APEX_VARS, "venv", "hardware", "cuda_home"))

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context); apex_source
        # given as a path is the controller's (the action runs there)
        settings = {name: args.get(name) for name in APEX_VARS}
        return apex_plan(host, settings, args.get("venv"), args.get("hardware"), args.get("cuda_home"),
                         is_dir=os.path.isdir, exists=os.path.exists)
