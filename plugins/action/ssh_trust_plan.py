# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.ssh_trust_plan: the SSH trust's variables checked, and who holds the cluster key and
which sshd settings must be in effect computed, on the controller."""

from __future__ import annotations

import os

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plan_action import PlanAction
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.ssh_trust_plan import (
    PASSWORD_VARS,
    SSH_TRUST_VARS,
    host_principals,
    ssh_trust_plan,
)


class ActionModule(PlanAction):
    _VALID_ARGS = frozenset((*SSH_TRUST_VARS, "membership", "node_ip"))

    def plan(self, host, args, task_vars, result):
        # the variables the task was given (passed as its arguments, rendered in the host's context)
        settings = {name: args.get(name) for name in SSH_TRUST_VARS}
        groups = task_vars.get("groups", {})
        # whether Ansible logs in with a password (only the variables' names are read, never their values)
        password_vars = [name for name in PASSWORD_VARS if name in task_vars]
        login_user = self._templar.template(task_vars.get("ansible_user")) if password_vars else None
        # the host's certificate names it as other hosts reach it: its names and addresses, from its facts
        own = {"ansible_host": self._templar.template(task_vars.get("ansible_host")),
               "ansible_facts": task_vars.get("ansible_facts") or {}}
        principals = host_principals(host, own, args.get("node_ip"))
        # the key pair is on the controller, where this runs
        return ssh_trust_plan(host, settings, groups.get("ray_head", []), groups.get("ray_worker", []),
                              password_vars=password_vars, login_user=login_user, is_dir=os.path.isdir,
                              membership=args.get("membership") or "static", principals=principals)
