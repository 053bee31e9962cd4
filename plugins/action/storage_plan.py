# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.storage_plan: the host's shared-storage mounts, checked and resolved on the controller."""

from __future__ import annotations

import os

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.storage_plan import (
    EFS_UTILS_VARS,
    file_sha256,
    storage_plan,
)

# The variables the plan reads (passed as the task's arguments, rendered in the host's context)
PLAN_VARS = ("shared_storage_mounts", "shared_storage_efs_tls", "shared_storage_efs_region",
             "shared_storage_nfs_options", "shared_storage_boot_options", "shared_storage_on_degraded",
             "shared_storage_probe_timeout", "common_user", "common_group", *EFS_UTILS_VARS)


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*PLAN_VARS, "os_family", "distribution"))

    def plan(self, host, args, task_vars, result):
        settings = {name: args[name] for name in PLAN_VARS if name in args}
        settings.setdefault("shared_storage_mounts", [])
        hostvars = task_vars.get("hostvars", {})

        def address_of(name):
            """An NFS server host's address: its ansible_host, else its inventory name."""
            return (hostvars.get(name) or {}).get("ansible_host") or name

        # where amazon-efs-utils comes from is checked given the host's OS family; efs-utils' source release is a file
        # on the controller (the action runs there)
        return storage_plan(host, settings, task_vars.get("groups", {}).get("nfs_server", []), address_of,
                            os_family=args.get("os_family"), distribution=args.get("distribution"),
                            is_file=os.path.isfile, sha256_of=file_sha256)
