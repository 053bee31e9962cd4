# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.stage_gate: whether a stage runs on this host, decided on the controller from the
drift check's results and the records this run's earlier stages wrote."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    STAGES,
    VALIDATE,
    StageError,
    roles_to_check,
    running_stages,
    stage,
    stage_verdict,
)


def _registered(hostvars, host, name):
    value = hostvars[host].get(name) if host in hostvars else None
    if not isinstance(value, Mapping) or value.get("failed") or value.get("skipped"):
        return None
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("stage",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        name = self._task.args.get("stage")
        try:
            if name != VALIDATE:
                stage(name)
        except StageError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        host = task_vars["inventory_hostname"]
        hostvars = task_vars["hostvars"]
        play_hosts = list(task_vars.get("ansible_play_hosts_all") or [host])
        heads = list((task_vars.get("groups") or {}).get("ray_head") or [])
        drift, records_now = {}, {}
        for other in dict.fromkeys(play_hosts + heads + [host]):
            checked = _registered(hostvars, other, "__rayfleet_drift")
            drift[other] = checked
            now = dict((checked or {}).get("records") or {})
            for earlier in STAGES:
                recorded = _registered(hostvars, other, "__rayfleet_record_%s" % earlier.name)
                if recorded and recorded.get("digest"):
                    now[earlier.name] = recorded["digest"]
            records_now[other] = now
        full = boolean(task_vars.get("rayfleet_full", False), strict=False)
        run, reason = stage_verdict(name, host, drift, records_now, group_heads=heads, play_hosts=play_hosts,
                                    full=full)
        if name == VALIDATE:
            running = None
            if not full:
                running = running_stages(host, drift, records_now, group_heads=heads, play_hosts=play_hosts)
            roles = roles_to_check(running)
            result["roles"] = roles if roles is not None else sorted(
                {role for item in STAGES for role in item.roles})
        own = ((drift.get(host) or {}).get("stages") or {}).get(name) or {}
        result.update(changed=False, stage=name, run=run, skip=not run, msg="%s: %s" % (
            "runs" if run else "skipped", reason), drifted_items=list(own.get("drifted_items") or []))
        return result
