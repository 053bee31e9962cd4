# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/plugin_utils/reach.py: the unreachable-host policy (rayfleet_max_unreachable), and what a host left out
means for the stages' inputs."""

from __future__ import annotations

import pytest
from ansible_collections.rayfleet.cluster.plugins.plugin_utils import stages
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.reach import ReachError, allowed, decide

DOWN = {"unreachable": True, "msg": "Failed to connect to the host via ssh: No route to host"}
UP = {"changed": False, "ansible_facts": {"ansible_hostname": "h"}}


@pytest.mark.parametrize(("policy", "hosts", "count"), [
    (0, 10, 0), (2, 10, 2), ("3", 10, 3), ("10%", 10, 1), ("25%", 10, 2), ("0%", 10, 0), ("100%", 4, 4),
    (" 50 % ", 3, 1), ("12.5%", 16, 2),
])
def test_a_count_or_a_percentage_of_the_hosts(policy, hosts, count):
    assert allowed(policy, hosts) == count


@pytest.mark.parametrize("policy", [-1, "-1", "x", "101%", "%", True, None, 1.5, [1]])
def test_a_bad_policy_names_the_variable_and_what_is_expected(policy):
    with pytest.raises(ReachError, match=r"rayfleet_max_unreachable is .*expected a count of hosts .* percentage"):
        allowed(policy, 10)


def test_every_host_up_leaves_nobody_out():
    assert decide({"h": UP, "w1": UP, "w2": UP}, ["h"], 0) == {"left_out": {}, "allowed": 0, "hosts": 3}


def test_within_the_policy_the_run_goes_on_without_the_unreachable_host():
    verdict = decide({"h": UP, "w1": UP, "w2": DOWN}, ["h"], 1)
    assert verdict["left_out"] == {"w2": DOWN["msg"]} and verdict["allowed"] == 1


def test_policy_0_stops_the_run_naming_the_host_and_its_error():
    with pytest.raises(ReachError) as exc:
        decide({"h": UP, "w1": UP, "w2": DOWN}, ["h"], 0)
    assert "1 of 3 host(s) unreachable, more than rayfleet_max_unreachable=0 allows (0)" in str(exc.value)
    assert "w2 (Failed to connect to the host via ssh: No route to host)" in str(exc.value)
    assert "Nothing was changed" in str(exc.value)


def test_beyond_a_percentage_the_run_stops():
    results = {"h": UP, **{f"w{i}": (DOWN if i < 3 else UP) for i in range(10)}}
    assert len(decide(results, ["h"], "30%")["left_out"]) == 3
    with pytest.raises(ReachError, match="3 of 11 host"):
        decide(results, ["h"], "20%")


def test_a_host_reached_whose_facts_were_not_read_stops_the_run_naming_it():
    """The first contact runs with failed_when false: a host with no Python (or a become that is refused) comes back
    not failed, with gather_facts' failed_modules and no facts."""
    no_python = {"ansible_facts": {}, "failed": False, "failed_when_result": False, "changed": False,
                 "msg": "The following modules failed to execute: ansible.legacy.setup.",
                 "failed_modules": {"ansible.legacy.setup": {
                     "failed": True, "rc": 127, "msg": "The module interpreter '/usr/bin/python3' was not found."}}}
    with pytest.raises(ReachError) as exc:
        decide({"h": UP, "w1": no_python, "w2": DOWN}, ["h"], 1)
    assert str(exc.value) == ("reached, but the facts could not be read (become, Python?): w1 (The module "
                              "interpreter '/usr/bin/python3' was not found.). Nothing was changed.")
    # setup (not gather_facts): the module's own message
    with pytest.raises(ReachError, match=r"w1 \(sudo: a password is required\)"):
        decide({"h": UP, "w1": {"failed": False, "msg": "sudo: a password is required", "rc": 1}}, ["h"], 0)


def test_the_head_is_never_optional():
    with pytest.raises(ReachError, match=r"the head h is unreachable: a run never goes on without it"):
        decide({"h": DOWN, "w1": UP}, ["h"], "100%")


def test_a_host_left_out_changes_no_stage_input():
    """The run waits for fewer nodes, but the cluster's configuration (its members, their IPs, every expected node)
    is the same: the firewall, SSH trust and monitoring stages do not run again because a host is down."""
    plan = {"members": ["h", "w"], "ips": {"h": "10.0.0.1", "w": "10.0.0.2"},
            "expected_nodes": {"10.0.0.1": "h", "10.0.0.2": "w"}, "head": "h", "head_ip": "10.0.0.1"}
    groups = {"ray_head": ["h"], "ray_worker": ["w"]}
    everyone = stages.cluster_inputs(groups, dict(plan, awaited_nodes=plan["expected_nodes"], left_out=[]))
    without_w = stages.cluster_inputs(groups, dict(plan, awaited_nodes={"10.0.0.1": "h"}, left_out=["w"]))
    assert everyone == without_w
    assert "rayfleet_max_unreachable" in stages.RUN_OPTIONS


def test_the_messages_name_the_variable_that_set_the_policy():
    """playbooks/preflight.yml leaves unreachable nodes out under preflight_allow_missing."""
    with pytest.raises(ReachError) as exc:
        decide({"h": UP, "w1": DOWN, "w2": DOWN}, ["h"], 1, "preflight_allow_missing")
    assert ("2 of 3 host(s) unreachable, more than preflight_allow_missing=1 allows (1)" in str(exc.value)
            and "raise preflight_allow_missing to go on without them" in str(exc.value))
    with pytest.raises(ReachError, match="preflight_allow_missing is 'x'; expected a count"):
        allowed("x", 3, "preflight_allow_missing")


class HostVars(dict):
    """Ansible's hostvars as host_inputs reads them (raw_get only for a broken template)."""

    def raw_get(self, host):
        return self[host]


def test_a_run_limited_to_a_worker_gives_it_the_same_stage_inputs_as_a_full_run():
    """A run limited to a worker plans on that worker only (the head's plan is not in the run): the worker's own plan
    of the cluster is the input, the same as the head's in a full run, so its records match the next full run's."""
    cluster = {"members": ["h", "w"], "ips": {"h": "10.0.0.1", "w": "10.0.0.2"}, "head": "h",
               "sources": ["10.0.0.1", "10.0.0.2"], "awaited_nodes": {}, "left_out": []}
    groups = {"ray_head": ["h"], "ray_worker": ["w"]}
    worker = {"group_names": ["ray_worker"], "firewall_enabled": True}
    full = HostVars(h={"group_names": ["ray_head"], "__ray_cluster_plan": {"cluster": cluster}},
                    w=dict(worker, __ray_cluster_plan={"cluster": cluster}))
    limited = HostVars(h={"group_names": ["ray_head"]}, w=dict(worker, __ray_cluster_plan={"cluster": cluster}))
    outside = HostVars(h=full["h"], w=worker)  # a host with no plan of its own reads the head's
    assert stages.host_inputs(limited, "w", groups) == stages.host_inputs(full, "w", groups)
    assert stages.host_inputs(outside, "w", groups) == stages.host_inputs(full, "w", groups)
    # a member's addresses are an input of the stages that name them
    moved = HostVars(h=full["h"], w=dict(worker, __ray_cluster_plan={"cluster": dict(cluster, sources=["10.0.0.9"])}))
    changed = stages.host_inputs(moved, "w", groups)
    assert changed["firewall"] != stages.host_inputs(full, "w", groups)["firewall"]
    assert changed["common"] == stages.host_inputs(full, "w", groups)["common"]
