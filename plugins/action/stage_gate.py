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
    SELECT,
    STAGES,
    VALIDATE,
    StageError,
    drifted_report,
    host_inputs,
    inputs_changed,
    renderer,
    roles_to_check,
    running_stages,
    stage,
    stage_groups,
    stage_verdict,
    supersedes_record,
    with_inputs,
)


def _result(value):
    if not isinstance(value, Mapping) or value.get("failed") or value.get("skipped"):
        return None
    return value


class _PerHost(Mapping):
    """host -> a value read from that host's variables on first use. Reading another host's variables makes Ansible
    compute all of them, so a gate reads only the hosts its verdict needs (its own, the head, and for the SSH trust
    stage the others), and its own from the task's variables."""

    def __init__(self, hosts, read):
        self._hosts = list(hosts)
        self._read = read
        self._seen = {}

    def __getitem__(self, host):
        if host not in self._hosts:
            raise KeyError(host)
        if host not in self._seen:
            self._seen[host] = self._read(host)
        return self._seen[host]

    def __iter__(self):
        return iter(self._hosts)

    def __len__(self):
        return len(self._hosts)


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
            if name not in (VALIDATE, SELECT):
                stage(name)
        except StageError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        host = task_vars["inventory_hostname"]
        hostvars = task_vars["hostvars"]
        play_hosts = list(task_vars.get("ansible_play_hosts_all") or [host])
        heads = list((task_vars.get("groups") or {}).get("ray_head") or [])

        read = {host: task_vars}

        def variables(other):
            # hostvars[other] computes all of that host's variables: once per host and task
            if other not in read:
                read[other] = hostvars.get(other, {})
            return read[other]

        # the stages whose inputs changed, per host: compared once for the run by the selection (below)
        compared = dict((_result(task_vars.get("__rayfleet_select")) or {}).get("inputs_changed") or {})

        def drift_of(other):
            return with_inputs(_result(variables(other).get("__rayfleet_drift")), compared.get(other))

        def records_of(other):
            # the records as the drift check read them, updated by the stages that ran on the host in this run
            mine = variables(other)
            now = dict((drift_of(other) or {}).get("records") or {})
            for earlier in STAGES:
                recorded = _result(mine.get("__rayfleet_record_%s" % earlier.name))
                if recorded and recorded.get("digest"):
                    now[earlier.name] = recorded["digest"]
                    now.update(recorded.get("digests") or {})
            return now

        everyone = list(dict.fromkeys(play_hosts + heads + [host]))
        drift, records_now = _PerHost(everyone, drift_of), _PerHost(everyone, records_of)
        full = boolean(task_vars.get("rayfleet_full", False), strict=False)
        if name == SELECT:
            # once for the run (run_once): every host of the play, by the groups site.yml's stage plays target
            inventory = task_vars.get("groups") or {}
            live = list(task_vars.get("ansible_play_hosts") or [host])
            compared.update(self._compare_inputs(live, variables, hostvars, inventory))
            host_groups = {other: [group for group, members in inventory.items() if other in members]
                           for other in live}
            result.update(changed=False, stage=name, drifted=drifted_report(live, drift), groups=stage_groups(
                drift, records_now, group_heads=heads, full=full, host_groups=host_groups), inputs_changed=compared)
            return result
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
        packages = (drift.get(host) or {}).get("packages")
        if isinstance(packages, list):
            result["installed_packages"] = packages
        if name != VALIDATE:
            result["supersede"] = run and supersedes_record(name, host, drift, task_vars.get("ansible_run_tags"))
        result.update(changed=False, stage=name, run=run, skip=not run, msg="%s: %s" % (
            "runs" if run else "skipped", reason), drifted_items=list(own.get("drifted_items") or []))
        return result

    def _compare_inputs(self, hosts, variables, hostvars, groups):
        """{host: the stages whose inputs changed} for the hosts a drift check reached: each stage's inputs digest
        now (the host's variables, facts and plan) against its record's."""
        out, memo = {}, {}
        for other in hosts:
            found = _result(variables(other).get("__rayfleet_drift"))
            if not found or not found.get("stages"):
                continue
            # a role default naming a controller file is rendered with that host's variables
            templar = self._templar.copy_with_new_env(available_variables=variables(other))
            out[other] = inputs_changed(found, host_inputs(hostvars, other, groups, template=renderer(templar),
                                                           memo=memo))
        return out
