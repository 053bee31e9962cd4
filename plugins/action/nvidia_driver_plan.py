# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.nvidia_driver_plan: the host's NVIDIA driver settings checked against its GPUs, the
driver's source, kernel module flavour, packages and NVIDIA's repository decided, on the controller."""

from __future__ import annotations

import os

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nvidia_driver_plan import (
    NVIDIA_DRIVER_VARS,
    OS_ARGS,
    nvidia_driver_plan,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*NVIDIA_DRIVER_VARS, *OS_ARGS, "hardware", "architecture", "distribution",
                             "distribution_version", "scope"))

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context)
        settings = {name: args.get(name) for name in NVIDIA_DRIVER_VARS if name in args}
        os_values = {name: args.get(name) for name in OS_ARGS}
        # the Secure Boot key pair is read on the controller (the role copies it from there)
        return nvidia_driver_plan(host, settings, os_values, args.get("hardware"),
                                  architecture=args.get("architecture"),
                                  os_facts=(args.get("distribution"), args.get("distribution_version")),
                                  scope=args.get("scope", "main"), is_file=os.path.isfile)
