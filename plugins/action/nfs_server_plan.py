# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.nfs_server_plan: the host's NFS exports and their clients, computed on the controller."""

from __future__ import annotations

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nfs_server_plan import (
    nfs_server_plan,
    run_cluster_sources,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction

# The host's variables the plan reads (passed as the task's arguments, rendered in the host's context)
NFS_SERVER_VARS = ("nfs_server_implementation", "nfs_server_port", "nfs_server_exports", "nfs_server_extra_clients",
                   "nfs_server_ganesha_grace_period", "nfs_server_ganesha_lease_lifetime")


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*NFS_SERVER_VARS, "os_family", "cluster_addresses"))

    def plan(self, host, args, task_vars, result):
        settings = {name: args.get(name) for name in NFS_SERVER_VARS}
        if args.get("cluster_addresses") is not None:
            addresses, source = args["cluster_addresses"], "the task's cluster_addresses"
        else:
            hostvars = task_vars.get("hostvars", {})

            def plan_of(name):
                if name == host:
                    return task_vars.get("__ray_plan_result")
                return (hostvars.get(name) or {}).get("__ray_plan_result")

            def hostvars_of(name):
                hv = hostvars.get(name) or {}
                return {key: hv.get(key) for key in ("ray_node_ip", "ray_node_instances", "ansible_facts",
                                                     "ray_membership", "ray_cluster_networks")}

            addresses, source = run_cluster_sources(host, plan_of, task_vars.get("groups", {}), hostvars_of)
        result["cluster_source"] = source
        return nfs_server_plan(host, settings, addresses, args.get("os_family"))
