# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.firewall_plan: the host's firewall tables, sets and ports, computed on the controller."""

from __future__ import annotations

import contextlib

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.firewall_plan import firewall_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction

# The host's variables the plan reads (passed as the task's arguments, rendered in the host's context)
FIREWALL_VARS = ("ray_cluster_name", "firewall_ray_allowed_sources", "firewall_ssh_allowed_sources",
                 "firewall_ray_ports", "firewall_host_ports", "firewall_ray_port_range",
                 "firewall_restrict_ephemeral_ports")


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*FIREWALL_VARS, "cluster_addresses", "extra_ports", "nfs_server_enabled",
                             "nfs_server_port", "nfs_server_extra_clients", "ip_local_port_range"))

    def plan(self, host, args, task_vars, result):
        groups = task_vars.get("groups", {})
        # an NFS server of the cluster (group nfs_server, its role on) is closed to all but the cluster and its
        # extra clients
        serves_nfs = host in groups.get("nfs_server", []) and boolean(args.get("nfs_server_enabled", True))
        settings = {name: args.get(name) for name in FIREWALL_VARS}
        with contextlib.suppress(TypeError):  # else left as written: the plan names it
            settings["firewall_restrict_ephemeral_ports"] = boolean(settings["firewall_restrict_ephemeral_ports"])
        try:
            return firewall_plan(
                host, settings, args.get("cluster_addresses") or [],
                ray_ports_extra=args.get("extra_ports") or (),
                nfs_port=args.get("nfs_server_port", 2049) if serves_nfs else 0,
                nfs_extra_clients=(args.get("nfs_server_extra_clients") or []) if serves_nfs else [],
                ephemeral_text=args.get("ip_local_port_range"))
        except PlanError:
            raise
        except ValueError as exc:  # the host's ephemeral port range, unreadable
            raise PlanError(["firewall on %s: %s" % (host, exc)]) from exc
