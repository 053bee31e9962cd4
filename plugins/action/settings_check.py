# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.settings_check: one role's variables checked on the controller (the roles that derive
nothing from them: common, image_cleanup, preflight, bake)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError, _json
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.settings_check import settings_check


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset(("role", "settings"))

    def plan(self, host, args, task_vars, result):
        settings = args.get("settings")
        if not isinstance(settings, Mapping):
            raise PlanError(["settings_check on %s: settings is %s; expected a mapping of the role's variables."
                             % (host, _json(settings))])
        groups = task_vars.get("groups", {})
        # the Ray nodes of the inventory (a host in both groups counts once)
        nodes = set(groups.get("ray_head", [])) | set(groups.get("ray_worker", []))
        # the CA certificates are the controller's files (the action runs there)
        return settings_check(args.get("role"), host, dict(settings), inventory_nodes=len(nodes),
                              is_file=os.path.isfile)
