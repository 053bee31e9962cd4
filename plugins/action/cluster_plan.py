# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.cluster_plan: the host's plan and the cluster's, computed on the controller."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    HEALTH_VARS,
    PORT_VARS,
    PlanError,
    cluster_members,
    host_plan,
)

# The host's variables the plan reads (passed as the task's arguments, rendered in the host's context)
HOST_VARS = ("ray_node_role", "ray_node_ip", "ray_version", "ray_auth_mode", "ray_cluster_name", "ray_runtime",
             "ray_num_cpus", "ray_num_gpus", "ray_object_store_memory", "ray_temp_dir", "ray_node_instances",
             "ray_node_instance_slots", "ray_node_instance_port_step", *PORT_VARS.values(), *HEALTH_VARS)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset((*HOST_VARS, "left_out"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        host = task_vars["inventory_hostname"]
        args = {name: self._task.args.get(name) for name in HOST_VARS if name not in HEALTH_VARS}
        # the health timer's variables are checked when the task gives them (the ray role does)
        args.update((name, self._task.args[name]) for name in HEALTH_VARS if name in self._task.args)
        groups = task_vars.get("groups", {})
        hostvars = task_vars.get("hostvars", {})
        try:
            mine = host_plan(host, args, task_vars.get("group_names", []))
        except PlanError as exc:
            result.update(failed=True, msg=" ".join(exc.problems), problems=exc.problems)
            return result

        def hostvars_of(name):
            if name == host:  # this host's own values as the role sees them (with the role's defaults)
                return {"ray_node_ip": mine["node_ip"], "ray_node_instances": args["ray_node_instances"],
                        "ansible_facts": task_vars.get("ansible_facts") or {}}
            hv = hostvars.get(name, {})
            return {key: hv.get(key) for key in ("ray_node_ip", "ray_node_instances", "ansible_facts")}

        cluster = cluster_members(groups.get("ray_head", []), groups.get("ray_worker", []), hostvars_of,
                                  left_out=self._task.args.get("left_out") or ())
        result.update(changed=False, host=mine, cluster=cluster)
        return result
