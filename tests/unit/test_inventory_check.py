# SPDX-License-Identifier: GPL-3.0-or-later
"""The offline inventory check (playbooks/check.yml, rayfleet.cluster.inventory_check): run as a user runs it, with
ansible-playbook on inventories whose hosts do not exist. Nothing is contacted: every host's address is in a
documentation range, and a run that tried to connect would fail unreachable."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.inventory_check import (
    checked_roles,
    contract_problems,
    offline_node_ip,
)

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def check(tmp_path, inventory, *extra, facts=None):
    """ansible-playbook playbooks/check.yml on inventory (a dict, written as YAML); facts: a fact cache's contents
    by host. Returns (rc, the check's result, the output)."""
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    cache = tmp_path / "facts"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CALLBACKS_ENABLED="rayfleet.cluster.stage_items",
               ANSIBLE_INVENTORY_ENABLED="yaml")
    for host, host_facts in (facts or {}).items():
        # as a run that gathered them leaves them: in the fact cache (set_fact cacheable, which contacts no host)
        args = json.dumps({**{"ansible_" + key: value for key, value in host_facts.items()}, "cacheable": True})
        subprocess.run([str(Path(PLAYBOOK).parent / "ansible"), host, "-i", str(path), "-m",
                        "ansible.builtin.set_fact", "-a", args], cwd=ROOT, env=env, capture_output=True,
                       timeout=120, check=True)
    proc = subprocess.run([PLAYBOOK, "playbooks/check.yml", "-i", str(path), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    out = json.loads(proc.stdout)
    tasks = out["plays"][0]["tasks"]
    assert out["stats"]["localhost"]["unreachable"] == 0
    return proc.returncode, tasks[0]["hosts"]["localhost"], proc.stdout + proc.stderr


def inventory(head=None, workers=None, **groups):
    """An inventory of one head and workers (name: host variables), in documentation addresses."""
    children = {"ray_head": {"hosts": head or {"h0": {"ansible_host": "192.0.2.10"}}},
                "ray_worker": {"hosts": workers if workers is not None else {
                    "w1": {"ansible_host": "192.0.2.11"}, "w2": {"ansible_host": "192.0.2.12"}}}}
    children.update({name: {"hosts": hosts} for name, hosts in groups.items()})
    return {"all": {"vars": {"ansible_user": "ops"}, "children": children}}


def test_the_example_inventory_passes_and_the_checks_only_hosts_can_make_are_listed(tmp_path):
    path = ROOT / "inventories" / "example"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path))
    proc = subprocess.run([PLAYBOOK, "playbooks/check.yml", "-i", str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "The inventory passes the offline check: 3 hosts" in proc.stdout
    # the GPU roles run on group gpu: their checks against the PCI bus wait for the hosts
    assert "nvidia_driver: the driver's source and packages for the host's OS" in proc.stdout
    assert "[WARNING]" not in proc.stdout + proc.stderr


def test_each_bad_setting_is_named_with_its_host_and_variable(tmp_path):
    rc, result, output = check(tmp_path, inventory(workers={
        "w1": {"ansible_host": "192.0.2.11", "ray_gcs_port": "abc", "ray_num_gpus": -1},
        "w2": {"ansible_host": "192.0.2.12", "firewall_ray_ports": [70000], "nccl_env": {"NCCL_X": None}},
        "w3": {"ansible_host": "192.0.2.13", "ray_object_store_memory": "{{ my_store_bytes }}",
               "pytorch_version": 12},
    }))
    assert rc == 2, output
    problems = result["problems"]

    def named(*words):
        return [p for p in problems if all(word in p for word in words)]

    # the argument spec's types, and the plans' checks, each naming host and variable
    assert named("ray on w1", "ray_gcs_port", "convert to int")
    assert named("ray on w1", "ray_num_gpus is -1")
    assert named("firewall on w2", "firewall_ray_ports has [70000]")
    assert named("nccl on w2", "NCCL_X is null")
    assert named("pytorch on w3", "pytorch_version is 12")
    # a template of a variable nothing defines
    assert named("ray_object_store_memory on w3 cannot be rendered", "my_store_bytes")
    # the head is clean
    assert not named(" h0")
    assert result["failed"] and "ray on w1" in result["msg"]


def test_the_group_contract_is_checked_first(tmp_path):
    rc, result, _output = check(tmp_path, inventory(workers={"h0": {}, "w1": {"ansible_host": "192.0.2.11"}}))
    assert rc == 2
    assert result["problems"] == [
        'Inventory contract: exactly one host in group ray_head (found ["h0"]), a group ray_worker (may be empty; '
        'found ["h0", "w1"]), and no host in both (in both: h0).']


def test_cluster_wide_settings_and_networks_are_checked_across_hosts(tmp_path):
    networks = {"ray_membership": "network", "ray_cluster_networks": ["10.0.0.0/24"]}
    inv = inventory(head={"h0": {"ansible_host": "10.0.0.10"}}, workers={
        "w1": {"ansible_host": "10.0.1.5"},  # outside the cluster's network
        "w2": {"ansible_host": "node-w2.example"},  # no address in the inventory: it waits for the host's facts
        "w3": {"ansible_host": "10.0.0.13", "ray_version": "2.59.0"},  # not the head's Ray
    })
    inv["all"]["vars"].update(networks)
    rc, result, output = check(tmp_path, inv)
    assert rc == 2, output
    problems = " ".join(result["problems"])
    assert "ray_node_ip 10.0.1.5 is in none of ray_cluster_networks" in problems
    assert re.search(r"w3.*ray_version", problems)
    assert "w2" not in problems
    assert any("ray_node_ip" in line and "w2" in line for line in result["deferred"])


def test_facts_in_the_fact_cache_are_checked_not_deferred(tmp_path):
    inv = inventory(nfs_server={"h0": {}})
    rc, result, output = check(tmp_path, inv, facts={"h0": {"os_family": "Suse", "distribution": "SLES"}})
    assert rc == 2, output
    assert any(p.startswith("nfs_server on h0: the OS family is \"Suse\"") for p in result["problems"]), \
        result["problems"]
    (tmp_path / "without").mkdir()
    rc, result, output = check(tmp_path / "without", inv)
    assert rc == 0, output
    assert any(line.startswith("nfs_server: the NFS server's packages") for line in result["deferred"])


def test_a_hundred_hosts_pass(tmp_path):
    workers = {f"w{i:03d}": {"ansible_host": f"10.1.{i // 200}.{i % 200 + 10}"} for i in range(99)}
    inv = inventory(head={"h0": {"ansible_host": "10.1.9.1"}}, workers=workers, gpu={name: {} for name in workers})
    rc, result, output = check(tmp_path, inv)
    assert rc == 0, output
    assert result["hosts"] == 100
    assert result["checked"]["ray"] == 100 and result["checked"]["nvidia_driver"] == 99


def test_contract_problems():
    assert contract_problems({"ray_head": ["a"], "ray_worker": []}) == []
    assert "no such group" in contract_problems({"ray_head": ["a"]})[0]
    assert contract_problems({"ray_head": [], "ray_worker": ["b"]})


def test_roles_are_checked_in_stage_order_with_the_ray_plan_first():
    roles = checked_roles()
    names = [role for role, _groups in roles]
    assert names[:2] == ["common", "ray"]
    assert len(names) == len(set(names))
    assert dict(roles)["nvidia_driver"] == ("gpu",)
    assert dict(roles)["submit_host"] == ("ray_submit",)


@pytest.mark.parametrize("inventory_ip, ansible_host, networks, expected", [
    ("10.0.0.5", "10.0.0.9", None, ("10.0.0.5", True)),
    ("", "10.0.0.9", None, ("10.0.0.9", True)),
    ("", "node.example", None, ("198.18.0.4", False)),
])
def test_offline_node_ip(inventory_ip, ansible_host, networks, expected):
    assert offline_node_ip(3, inventory_ip, ansible_host, networks) == expected


def test_offline_node_ip_stands_in_inside_the_cluster_network():
    import ipaddress
    address, known = offline_node_ip(0, "", "node.example", [ipaddress.ip_network("10.9.0.0/16")])
    assert address == "10.9.0.1" and not known
