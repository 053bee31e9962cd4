# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.monitoring_plan: the monitoring role's variables checked on the controller."""

from __future__ import annotations

import contextlib
import os

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import MEMBER_MONITORING_VARS
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.monitoring_plan import monitoring_plan, scrape_targets
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction

# The host's variables the plan reads (passed as the task's arguments, rendered in the host's context)
MONITORING_VARS = ("monitoring_host", "monitoring_prometheus_listen", "monitoring_prometheus_retention",
                   "monitoring_scrape_interval", "monitoring_node_exporter_port", "monitoring_dcgm_exporter_port",
                   "monitoring_dcgm_version", "monitoring_dcgm_exporter_version", "monitoring_dcgm_cuda_major",
                   "monitoring_dcgm_exporter_collectors", "monitoring_grafana", "monitoring_grafana_version",
                   "monitoring_grafana_listen", "monitoring_grafana_key_fingerprint",
                   "monitoring_grafana_rpm_key_fingerprint")


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*MONITORING_VARS, "os_family", "monitoring_node_exporter", "monitoring_dcgm_exporter",
                             "cluster", "gpu_hosts", "membership"))

    def plan(self, host, args, task_vars, result):
        settings = {name: args.get(name) for name in MONITORING_VARS}
        with contextlib.suppress(TypeError):  # else left as written: the plan names it
            settings["monitoring_grafana"] = boolean(settings["monitoring_grafana"])
        inventory_hosts = task_vars.get("groups", {}).get("all", [])
        # the counters file is read on the controller (the role copies it from there)
        plan = monitoring_plan(host, settings, inventory_hosts, os_family=args.get("os_family"),
                               is_file=os.path.isfile)
        plan["scrape_targets"] = None
        # network membership: the exporters are discovered from Ray's node table on the monitoring host
        # (rayfleet.targets), so no host's configuration lists another
        plan["discovered"] = args.get("membership") == "network"
        if plan["is_monitoring_host"] and plan["discovered"]:
            plan["scrape_targets"] = {"node": [], "dcgm": {}}
        elif plan["is_monitoring_host"] and args.get("cluster") is not None:
            # what a member's inventory leaves unset is this host's (the task's arguments: the role's defaults)
            own = {"monitoring_enabled": True, **{name: args.get(name) for name in MEMBER_MONITORING_VARS
                                                  if args.get(name) is not None}}
            plan["scrape_targets"] = scrape_targets(args["cluster"], args.get("gpu_hosts") or [], own)
        return plan
