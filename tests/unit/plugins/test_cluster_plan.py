# SPDX-License-Identifier: GPL-3.0-or-later
"""The cluster plan (plugins/plugin_utils/cluster_plan.py) as a Python function: what it checks, and the shape it
computes for a host's nodes and the cluster's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    cluster_members,
    host_plan,
    version_tuple,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())


def worker(**extra) -> dict:
    """A worker's ray_* variables as the plan gets them (the role's defaults, rendered; an image for the cases that
    run Ray in containers)."""
    return {**DEFAULTS, "ray_node_role": "worker", "ray_node_ip": "10.0.0.5", "ray_temp_dir": "/tmp/ray",
            "ray_cluster_name": "", "ray_head_address": "10.0.0.1",
            "ray_auth_token_path": "/srv/rayfleet/credentials/ray_auth_token",
            "ray_dashboard_prometheus_url": "http://127.0.0.1:9090", "ray_dashboard_grafana_url": "",
            "ray_dashboard_grafana_iframe_url": "", "ray_container_image": "registry.example.com/ray-node:2.60.0",
            **extra}


def problems(extra: dict, groups=("ray_worker",)) -> str:
    with pytest.raises(PlanError) as info:
        host_plan("node7", worker(**extra), list(groups))
    return str(info.value)


@pytest.mark.parametrize(("ip", "ok"), [("10.1.2.3", True), ("fd00::5", True), ("cafe", False), ("10.1.2", False),
                                        ("300.1.2.3", False), ("", False), ("10.0.0.1/24", False)])
def test_the_node_ip_is_an_ip_address(ip, ok):
    if ok:
        assert host_plan("node7", worker(ray_node_ip=ip))["node_ip"] == ip
    else:
        text = problems({"ray_node_ip": ip})
        assert f'ray_node_ip on node7 is "{ip}"; expected this host\'s IP address' in text


@pytest.mark.parametrize("version", ["2.60.0", "2.52.0", "3.0", "2.60.0rc1", "2.60.0.post1"])
def test_a_pep440_ray_version_passes(version):
    assert host_plan("node7", worker(ray_version=version))["role"] == "worker"


@pytest.mark.parametrize("version", ["latest", "2.60.*", ">=2.52", "v2.60.0", ""])
def test_a_ray_version_that_is_not_a_release_fails(version):
    assert f'ray on node7: ray_version is "{version}"; expected a Ray release' in problems({"ray_version": version})


def test_token_auth_needs_a_ray_that_enforces_it():
    text = problems({"ray_version": "2.51.1", "ray_auth_mode": "token"})
    assert "ray_version 2.51.1 with ray_auth_mode token" in text and "Expected ray_version >= 2.52" in text
    assert host_plan("node7", worker(ray_version="2.51.1", ray_auth_mode="disabled"))["role"] == "worker"


@pytest.mark.parametrize(("var", "value", "words"), [
    ("ray_num_cpus", -1, "ray_num_cpus is -1; expected a whole number >= 0"),
    ("ray_num_cpus", "four", 'ray_num_cpus is "four"'),
    ("ray_num_gpus", 1.5, "ray_num_gpus is 1.5; expected a whole number >= 0"),
    ("ray_object_store_memory", 1000, "ray_object_store_memory is 1000; expected bytes, at least 78643200"),
    ("ray_temp_dir", "tmp/ray", 'ray_temp_dir is "tmp/ray"; expected an absolute path'),
    ("ray_node_role", "boss", 'ray_node_role is "boss"; expected head or worker'),
    ("ray_gcs_port", "sixty", 'ray_gcs_port is "sixty"; expected a port number'),
])
def test_node_settings_fail_in_the_plan_naming_the_variable_and_host(var, value, words):
    assert f"ray on node7: {words}" in problems({var: value})


def test_every_problem_is_reported_at_once():
    text = problems({"ray_node_ip": "cafe", "ray_num_cpus": -1, "ray_version": "latest"})
    assert "ray_node_ip on node7" in text and "ray_num_cpus is -1" in text and 'ray_version is "latest"' in text


def test_node_instances_are_checked_as_before():
    text = problems({"ray_node_instances": [{"name": "a"}, {"name": "a"}, {"name": "Head"}]})
    assert text.startswith("ray on node7: ray_node_instances ")
    for words in ("the name a is given twice", 'item 3 has the name "Head"',
                  "ray_runtime is host (instances run in containers)", "Nothing was changed."):
        assert words in text
    text = problems({"ray_runtime": "container", "ray_node_instance_slots": 5, "ray_node_instances": [
        {"name": "a", "slot": 5}, {"name": "b", "slot": 0}, {"name": "c", "slot": "x"}, {"name": "d", "slot": 0}]})
    for words in ("a: slot 5, but the host has 5 slots (0 to 4", 'c: slot "x" is not a whole number >= 0',
                  "d: slot 0 is taken by another instance too"):
        assert words in text
    assert "ray_node_instance_slots is 1 (null, or a whole number >= the 2 instances)" in problems(
        {"ray_runtime": "container", "ray_node_instance_slots": 1,
         "ray_node_instances": [{"name": "a"}, {"name": "b"}]})


def test_gpus_of_instances():
    many = [{"name": "g0", "gpus": [0]}, {"name": "g1", "gpus": [0, "bogus"]}, {"name": "g2"}]
    text = problems({"ray_runtime": "container", "ray_node_instances": many}, groups=("ray_worker", "gpu"))
    assert "g1: GPU 0 is also given to another instance" in text and 'g1: "bogus" is not a GPU index' in text
    assert "g2: no gpus (this host is in group gpu" in text
    assert "g0: gpus [0], but this host is not in group gpu" in problems(
        {"ray_runtime": "container", "ray_node_instances": [{"name": "g0", "gpus": [0]}]})


def test_instances_on_the_head_are_refused():
    extra = {"ray_node_role": "head", "ray_runtime": "container", "ray_node_instances": [{"name": "a"}]}
    assert "this host is the head (instances are workers)" in problems(extra)


@pytest.mark.parametrize(("extra", "words"), [
    ({"ray_dashboard_port": 6379},
     ["ray on node7: ray_gcs_port and ray_dashboard_port are both 6379; expected each Ray port different."]),
    ({"ray_gcs_port": 70000}, ["ray on node7: ray_gcs_port is 70000; expected a port number 1024-65535 (Ray runs as "
                               "an unprivileged user: a port below 1024 needs root)."]),
    ({"ray_max_worker_port": 0}, ["ray on node7: ray_max_worker_port is 0; expected a port number 1024-65535",
                                  "ray_min_worker_port 10002 is not below ray_max_worker_port 0"]),
    ({"ray_node_manager_port": 10500},
     ["ray on node7: ray_node_manager_port is 10500, inside the worker port range 10002-11999 "
      "(ray_min_worker_port-ray_max_worker_port); expected a port outside it."]),
    ({"ray_min_worker_port": 12000}, ["ray_min_worker_port 12000 is not below ray_max_worker_port"]),
    ({"ray_runtime": "container", "ray_node_instance_port_step": 1,
      "ray_node_instances": [{"name": "a"}, {"name": "b"}]},
     ["ray_node_manager_port and ray_object_manager_port + 1 x ray_node_instance_port_step 1 (instance b) are both "
      "8077; expected each Ray port different."]),
])
def test_ports_that_clash_fail_naming_the_variables_and_the_host(extra, words):
    """Each problem is named by the ray_*_port variables the ports come from, not by the plan's derived ports."""
    text = problems(extra)
    for expected in words:
        assert expected in text
    assert '"dashboard":' not in text and '"gcs":' not in text


@pytest.mark.parametrize(("var", "value", "words"), [
    ("ray_health_interval_s", 5, "ray_health_interval_s is 5; expected whole seconds, at least 10"),
    ("ray_health_interval_s", "5m", 'ray_health_interval_s is "5m"; expected whole seconds, at least 10'),
    ("ray_health_script_timeout_s", 0, "ray_health_script_timeout_s is 0; expected whole seconds, at least 1"),
    ("ray_health_dir", "health.d", 'ray_health_dir is "health.d"; expected the directory of the site\'s health '
     "scripts, an absolute path"),
    ("ray_health_dir", "/", 'ray_health_dir is "/"; expected the directory'),
    ("ray_health_textfile_dir", "/var/lib/node exporter", 'ray_health_textfile_dir is "/var/lib/node exporter"; '
     "expected node exporter's textfile collector directory, an absolute path without spaces"),
    ("ray_health_drain", "maybe", 'ray_health_drain is "maybe"; expected true or false'),
    ("ray_health_enabled", None, "ray_health_enabled is null; expected true or false"),
])
def test_the_health_settings_fail_in_the_plan_naming_the_variable_and_host(var, value, words):
    assert f"ray on node7: {words}" in problems({var: value})


def test_the_health_settings_pass_as_the_defaults_are_and_are_not_checked_when_off():
    assert host_plan("node7", worker(ray_health_enabled="yes", ray_health_drain=False))["role"] == "worker"
    off = worker(ray_health_enabled=False, ray_health_interval_s=1, ray_health_dir="x")
    assert host_plan("node7", off)["role"] == "worker"
    assert host_plan("node7", {k: v for k, v in worker().items() if not k.startswith("ray_health_")})


def test_a_hosts_one_node():
    plan = host_plan("node7", worker(ray_cluster_name="teamb", ray_temp_dir="/tmp/ray-teamb"))
    (one,) = plan["instances"]
    assert one["unit"] == "ray-teamb-worker.service" and one["config_path"] == "/etc/rayfleet/ray-teamb-worker.json"
    assert one["temp_dir"] == "/tmp/ray-teamb" and one["node_name"] == "" and one["label"] == "worker"
    assert one["container_record"] == "/etc/rayfleet/ray-teamb-worker.container.json" and one["suffix"] == ""
    assert plan["expected_nodes"] == {"10.0.0.5": "node7"}
    # what the firewall opens: every single port of the node, the head's metrics ports, and the worker range
    assert plan["ray_ports"] == [6379, 8076, 8077, 8078, 8079, 8080, 8265, 10001, 44217, 44227, 52365]
    assert plan["worker_port_range"] == "10002-11999"
    assert one["ports"]["min_worker"] == 10002 and one["ports"]["max_worker"] == 11999


def test_instances_in_fixed_slots():
    plan = host_plan("node7", worker(ray_runtime="container", ray_node_instance_slots=4, ray_node_instances=[
        {"name": "gpu1", "slot": 1}, {"name": "gpu3", "slot": 3}]))
    assert [i["unit"] for i in plan["instances"]] == ["ray-worker-gpu1.service", "ray-worker-gpu3.service"]
    assert [i["node_name"] for i in plan["instances"]] == ["10.0.0.5/gpu1", "10.0.0.5/gpu3"]
    assert [i["temp_dir"] for i in plan["instances"]] == ["/tmp/ray_gpu1", "/tmp/ray_gpu3"]
    assert plan["slot_count"] == 4
    assert plan["expected_nodes"] == {"10.0.0.5/gpu1": "node7/gpu1", "10.0.0.5/gpu3": "node7/gpu3"}
    shifted = sorted(p + 100 * s for s in (1, 3) for p in (8076, 8077, 8078, 8079, 8080, 52365))
    assert set(shifted) < set(plan["ray_ports"])
    # slot 0, which no instance holds, opens no node port of its own beyond the head's single ones
    assert not {8076, 8077, 8078, 8079, 8080, 52365} & set(plan["ray_ports"])


def test_the_cluster_members_ips_and_expected_nodes():
    hostvars = {
        "h": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.1"}}},
        "w1": {"ray_node_ip": "10.9.0.2", "ansible_facts": {"default_ipv4": {"address": "10.0.0.2"}}},
        "w2": {"ray_node_instances": [{"name": "a"}, {"name": "b"}],
               "ansible_facts": {"default_ipv4": {"address": "10.0.0.3"}}},
    }
    cluster = cluster_members(["h"], ["w1", "w2"], hostvars.__getitem__)
    assert cluster["members"] == ["h", "w1", "w2"] and cluster["head"] == "h" and cluster["head_ip"] == "10.0.0.1"
    assert cluster["ips"] == {"h": "10.0.0.1", "w1": "10.9.0.2", "w2": "10.0.0.3"}
    assert cluster["expected_nodes"] == {"10.0.0.1": "h", "10.9.0.2": "w1", "10.0.0.3/a": "w2/a",
                                         "10.0.0.3/b": "w2/b"}
    assert cluster["awaited_nodes"] == cluster["expected_nodes"] and cluster["left_out"] == []


def test_each_members_exporter_settings_as_its_inventory_sets_them():
    """The monitoring host scrapes every member by its own exporter settings: the plan holds those its inventory
    sets (a GPU group's DCGM port), and nothing for the others (the monitoring role's defaults)."""
    hostvars = {
        "h": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.1"}}, "monitoring_node_exporter_port": None},
        "g1": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.3"}}, "monitoring_dcgm_exporter_port": 9500,
               "monitoring_node_exporter": False, "ray_num_cpus": 8},
    }
    cluster = cluster_members(["h"], ["g1"], hostvars.__getitem__)
    assert cluster["scrape"]["monitoring"] == {
        "h": {}, "g1": {"monitoring_dcgm_exporter_port": 9500, "monitoring_node_exporter": False}}


def test_a_host_left_out_keeps_its_place_but_is_not_awaited():
    """A host the run goes on without (unreachable) is still a member with its IP (from its last known facts) and
    its nodes expected - the firewall, known hosts and monitoring keep it - but the run does not wait for them."""
    hostvars = {
        "h": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.1"}}},
        "w1": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.2"}}},
        "w2": {"ray_node_instances": [{"name": "a"}], "ansible_facts": {"default_ipv4": {"address": "10.0.0.3"}}},
    }
    everyone = cluster_members(["h"], ["w1", "w2"], hostvars.__getitem__)
    cluster = cluster_members(["h"], ["w1", "w2"], hostvars.__getitem__, left_out=["w2"])
    assert cluster["members"] == everyone["members"] and cluster["ips"] == everyone["ips"]
    assert cluster["expected_nodes"] == everyone["expected_nodes"]
    assert cluster["awaited_nodes"] == {"10.0.0.1": "h", "10.0.0.2": "w1"} and cluster["left_out"] == ["w2"]


def test_each_members_known_hosts_entry_names_it_by_every_name_and_address_with_its_host_key():
    """SSH trust's known_hosts comes from the plan: the inventory name, ansible_host, hostname, FQDN and the member
    addresses (a docker0 bridge's is none: every docker host has 172.17.0.1), each once, with the ed25519 host key;
    a host whose facts hold no key gets an empty one (SSH trust's check names it)."""
    hostvars = {
        "h": {"ansible_host": "10.0.0.1", "ansible_facts": {
            "default_ipv4": {"address": "10.0.0.1"}, "hostname": "head", "fqdn": "head.example.com",
            "interfaces": ["eth0", "docker0"], "docker0": {"ipv4": {"address": "172.17.0.1"}},
            "all_ipv4_addresses": ["10.0.0.1", "172.17.0.1"], "all_ipv6_addresses": ["fe80::1", "fd00::1"],
            "ssh_host_key_ed25519_public": "AAAAC3Nz-head"}},
        "w1": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.2"}}},
    }
    cluster = cluster_members(["h"], ["w1"], hostvars.__getitem__)
    assert cluster["known_hosts"] == {
        "h": {"names": ["h", "10.0.0.1", "head", "head.example.com", "fd00::1"], "key": "AAAAC3Nz-head"},
        "w1": {"names": ["w1", "10.0.0.2"], "key": ""},
    }


def test_version_tuple():
    assert version_tuple("2.60.0") == (2, 60, 0) and version_tuple("1!2.3rc1") == (2, 3)
    assert version_tuple("2.60") == (2, 60) and version_tuple("x") is None


@pytest.mark.parametrize(("value", "address", "network"), [
    ("10.1.2.3", True, True), ("fd00::5", True, True), ("10.0.0.0/8", False, True), ("10.1.2.3/24", False, True),
    ("fd00::/64", False, True), ("10.0.0.1/33", False, False), ("cafe", False, False), ("", False, False),
    (None, False, False), ("10.1.2", False, False),
])
def test_the_ip_tests(value, address, network):
    from ansible_collections.rayfleet.cluster.plugins.test.ip import TestModule

    tests = TestModule().tests()
    assert (tests["ip_address"](value), tests["ip_network"](value)) == (address, network)


def test_the_units_the_firewall_starts_before():
    assert host_plan("node7", worker())["any_role_units"] == ["ray-head.service", "ray-worker.service"]
    assert host_plan("node7", worker(ray_node_role="head", ray_cluster_name="teamb"))["any_role_units"] == [
        "ray-teamb-head.service", "ray-teamb-worker.service"]
    plan = host_plan("node7", worker(ray_runtime="container", ray_node_instances=[{"name": "a"}, {"name": "b"}]))
    assert plan["any_role_units"] == ["ray-head.service", "ray-worker-a.service", "ray-worker-b.service"]


@pytest.mark.parametrize("name", ["team a", "team/a", "Team"])
def test_a_bad_cluster_name_is_named_itself_not_the_temp_dir_made_from_it(name):
    text = problems({"ray_cluster_name": name, "ray_temp_dir": "/tmp/ray-" + name})
    assert f'ray on node7: ray_cluster_name is "{name}"; expected lowercase letters, digits' in text
    assert "ray_temp_dir" not in text


def test_a_temp_dir_of_its_own_with_a_space_is_still_named():
    text = problems({"ray_cluster_name": "team a", "ray_temp_dir": "/scratch/ray tmp"})
    assert 'ray_temp_dir is "/scratch/ray tmp"; expected an absolute path without spaces' in text


@pytest.mark.parametrize(("var", "value", "words"), [
    ("ray_restart_sec", 0, "ray_restart_sec is 0; expected whole seconds systemd waits before it restarts a failed "
                           "node, at least 1"),
    ("ray_gcs_reconnect_timeout_s", -1, "ray_gcs_reconnect_timeout_s is -1; expected whole seconds a node waits"),
    ("ray_wait_timeout", "soon", 'ray_wait_timeout is "soon"; expected whole seconds this run waits'),
    ("ray_limit_nofile", 0, "ray_limit_nofile is 0; expected open files of the node's unit (LimitNOFILE), a whole "
                            "number 1-1073741816"),
    ("ray_limit_nofile", 2**31, "ray_limit_nofile is 2147483648; expected open files"),
    ("ray_resources", {"accel": -1}, 'ray_resources is {"accel": -1}; expected a mapping of custom resource names to '
                                     "amounts >= 0"),
    ("ray_resources", {"GPU": 1}, 'ray_resources is {"GPU": 1}; expected a mapping of custom resource names'),
    ("ray_resources", ["accel"], 'ray_resources is ["accel"]; expected a mapping'),
    ("ray_labels", ["spot"], 'ray_labels is ["spot"]; expected a mapping of Ray node label keys to text values'),
    ("ray_labels", {"market": {"a": 1}}, 'ray_labels is {"market": {"a": 1}}; expected a mapping of Ray node label'),
])
def test_the_units_numbers_and_resources_are_checked_before_anything_changes(var, value, words):
    """What the unit and ray start are given (RestartSec, the GCS reconnect timeout, LimitNOFILE, --resources) is
    checked in the plan, before a unit is written."""
    assert f"ray on node7: {words}" in problems({var: value})


def test_good_unit_numbers_and_resources_pass():
    assert host_plan("node7", worker(ray_restart_sec="2", ray_limit_nofile=1048576, ray_resources={"accel": 0.5},
                                     ray_gcs_reconnect_timeout_s=60, ray_wait_timeout=600))["role"] == "worker"


def test_a_port_below_1024_is_refused_for_the_unprivileged_ray():
    assert ("ray on node7: ray_dashboard_port is 80; expected a port number 1024-65535 (Ray runs as an unprivileged "
            "user: a port below 1024 needs root).") in problems({"ray_dashboard_port": 80})
