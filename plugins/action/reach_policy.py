# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.reach_policy: which hosts the run leaves out, decided on the controller."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.reach import POLICY_VAR, ReachError, decide

REACH_VAR = "__rayfleet_reach"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("max_unreachable", "policy_var", "reach_var"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        hostvars = task_vars.get("hostvars", {})
        hosts = task_vars.get("ansible_play_hosts_all") or []
        reach_var = self._task.args.get("reach_var") or REACH_VAR
        results = {}
        for host in hosts:
            try:
                reach = hostvars[host].get(reach_var)
            except KeyError:
                reach = None
            results[host] = dict(reach) if hasattr(reach, "keys") else {}
            lock = results[host].get("lock")
            if isinstance(lock, dict) and lock.get("failed"):
                # the head refused this run the converge lock (drift_check's first contact): nothing changed
                result.update(failed=True, msg="%s Nothing was changed." % results[host].get("msg", lock.get("msg")))
                return result
        policy_var = self._task.args.get("policy_var") or POLICY_VAR
        try:
            verdict = decide(results, list(task_vars.get("groups", {}).get("ray_head") or []),
                             self._task.args.get("max_unreachable", 0), policy_var)
        except ReachError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(changed=False, policy_var=policy_var, **verdict)
        if verdict["left_out"]:
            result["warnings"] = ["%s is unreachable and left out of this run (%s %s): %s" % (
                host, policy_var, self._task.args.get("max_unreachable", 0), error)
                for host, error in verdict["left_out"].items()]
        return result
