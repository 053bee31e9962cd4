# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.cluster_plan: the host's plan and the cluster's, computed on the controller."""

from __future__ import annotations

import os

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    CLUSTER_WIDE_VARS,
    HEALTH_VARS,
    MEMBER_MONITORING_VARS,
    PORT_VARS,
    SETTING_DEFAULTS,
    SETTING_VARS,
    cluster_members,
    cluster_networks,
    host_plan,
    member_ip,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction

# The host's variables the plan reads (passed as the task's arguments, rendered in the host's context)
HOST_VARS = ("ray_node_role", "ray_node_ip", "ray_version", "ray_auth_mode", "ray_num_cpus", "ray_num_gpus",
             "ray_object_store_memory", "ray_temp_dir", "ray_node_instances", "ray_node_instance_slots",
             "ray_node_instance_port_step", *PORT_VARS.values(), *SETTING_VARS, *HEALTH_VARS)


# Each other member's variables and facts the cluster plan reads (its address, node instances, names and host key,
# and the head's cluster name)
MEMBER_VARS = ("ray_node_ip", "ray_node_instances", "ansible_host", "ansible_facts", "ray_cluster_name")


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*HOST_VARS, "left_out"))
    # the other members' entries, kept across the plans of many hosts from the same variables (None: not kept)
    member_memo = None

    def plan(self, host, args, task_vars, result):
        # an optional argument the task leaves out reads as the role's default (the ray role gives every one)
        settings = {name: args.get(name, SETTING_DEFAULTS.get(name)) for name in HOST_VARS if name not in HEALTH_VARS}
        # the health timer's variables are checked when the task gives them (the ray role does)
        settings.update((name, args[name]) for name in HEALTH_VARS if name in args)
        groups = task_vars.get("groups", {})
        hostvars = task_vars.get("hostvars", {})
        heads = groups.get("ray_head", [])
        # a worker reaches the head at its cluster IP unless ray_head_address names it otherwise
        if settings.get("ray_node_role") == "worker" and not settings.get("ray_head_address") and heads:
            head_vars = hostvars.get(heads[0], {})
            settings["ray_head_address"] = member_ip(heads[0], {key: head_vars.get(key) for key in MEMBER_VARS})
        # the GCS port is the head's: a worker follows the head's ray_gcs_port, whichever host or group sets it; the
        # Ray release and the token mode are the cluster's: a worker's must be the head's
        if settings.get("ray_node_role") == "worker" and heads:
            settings["ray_head_gcs_port"] = self._heads_value(host, heads[0], "ray_gcs_port", args, hostvars)
            settings["ray_head_shared"] = {var: self._heads_value(host, heads[0], var, args, hostvars)
                                           for var in CLUSTER_WIDE_VARS}
            settings["ray_head_name"] = heads[0]
        # the token's path and the image archive are the controller's (the action runs there)
        mine = host_plan(host, settings, task_vars.get("group_names", []), is_file=os.path.isfile,
                         is_dir=os.path.isdir)

        def hostvars_of(name):
            hv = hostvars.get(name, {})
            # every member's exporter settings as its inventory sets them (no role's defaults), this host's too
            monitoring = {key: hv.get(key) for key in MEMBER_MONITORING_VARS}
            if name == host:  # this host's own values as the role sees them (with the role's defaults)
                return {"ray_node_ip": mine["node_ip"], "ray_node_instances": settings["ray_node_instances"],
                        "ansible_host": task_vars.get("ansible_host"), "ray_cluster_name": settings["ray_cluster_name"],
                        "ansible_facts": task_vars.get("ansible_facts") or {}, **monitoring}
            theirs = {key: hv.get(key) for key in MEMBER_VARS}
            return {**theirs, **monitoring}

        network = settings.get("ray_membership") == "network"
        cluster = cluster_members(heads, groups.get("ray_worker", []), hostvars_of,
                                  left_out=args.get("left_out") or (),
                                  networks=cluster_networks(settings.get("ray_cluster_networks")) if network else None,
                                  gpu_hosts=groups.get("gpu", []), memo=self.member_memo, own=host)
        return {"host": mine, "cluster": cluster}

    def _heads_value(self, host, head, var, args, hostvars):
        """The head's value of one of the ray role's variables: as the head's inventory (or -e) sets it; where it sets
        none, the ray role's default, which is this host's own value unless its own inventory sets one."""
        head_vars = hostvars.get(head) or {}
        if head_vars.get(var) is not None:
            return head_vars[var]
        mine = args.get(var, SETTING_DEFAULTS.get(var))
        if var not in (hostvars.get(host) or {}):
            return mine
        default = self._role_default(var)
        return default if default is not None else mine

    def _role_default(self, var):
        """The ray role's default of var, rendered in this host's context (None: the role gives none)."""
        role = getattr(self._task, "_role", None)
        default = role.get_default_vars().get(var) if role is not None else None
        return self._templar.template(default) if default is not None else None
