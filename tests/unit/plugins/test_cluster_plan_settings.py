# SPDX-License-Identifier: GPL-3.0-or-later
"""The ray role's settings the cluster plan checks besides its nodes' shape (plugins/plugin_utils/cluster_plan.py):
the token, the cluster's name, a worker's head address, the timings, the preemption watcher, the dashboard's metrics
URLs and the container settings - one message per bad variable, naming the host, the variable, its value and what
was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    SETTING_NAMES,
    PlanError,
    host_plan,
    http_url,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import HOST_VARS, Call, run_plan

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())
FINGERPRINT = DEFAULTS["ray_container_nvidia_key_fingerprint"]
IMAGE = "registry.example.com/ray-node:2.60.0"


def worker(**extra) -> dict:
    """A worker's ray_* variables as the plan gets them (the role's defaults, rendered)."""
    return {**DEFAULTS, "ray_node_role": "worker", "ray_node_ip": "10.0.0.5", "ray_temp_dir": "/tmp/ray",
            "ray_head_address": "10.0.0.1", "ray_auth_token_path": "/srv/rayfleet/credentials/ray_auth_token",
            "ray_dashboard_prometheus_url": "http://127.0.0.1:9090", "ray_dashboard_grafana_url": "",
            "ray_dashboard_grafana_iframe_url": "", **extra}


def container(**extra) -> dict:
    return worker(**{"ray_runtime": "container", "ray_container_image": IMAGE, **extra})


def plan(v, groups=("ray_worker",), *, files=(), dirs=()):
    return host_plan("node7", v, list(groups), is_file=set(files).__contains__, is_dir=set(dirs).__contains__)


def problems(v, groups=("ray_worker",), **paths) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(v, groups, **paths)
    return info.value.problems


def only_problem(v, groups=("ray_worker",), **paths) -> str:
    (one,) = problems(v, groups, **paths)
    return one


def said(var, value, expected) -> str:
    return f"ray on node7: {var} is {json.dumps(value)}; expected {expected}"


# --- what passes ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("v", [
    worker(),
    worker(ray_node_role="head", ray_head_address=""),
    worker(ray_state="baked", ray_head_address=""),
    worker(ray_auth_mode="disabled", ray_auth_token_path=""),
    worker(ray_cluster_name="teamb-2", ray_stop_drain_s=0, ray_liveness_check_interval_s="1"),
    worker(ray_cluster_name="a" * 31),
    worker(ray_restart_running_jobs="true", ray_restart_wait_s="600"),
    worker(ray_preemption_provider="gcp", ray_preemption_metadata_url="http://metadata.google.internal",
           ray_preemption_interval_s="10"),
    worker(ray_preemption_metadata_url="http://169.254.169.254/"),
    worker(ray_preemption_metadata_url="http://[fd00:ec2::254]:80"),
    worker(ray_dashboard_prometheus_url="http://[::1]:9090", ray_dashboard_grafana_url="https://grafana.example.com/g",
           ray_dashboard_grafana_iframe_url="http://localhost:3000/?orgId=1"),
    worker(ray_dashboard_prometheus_url=""),
    # the container settings are read with ray_runtime container only
    worker(ray_container_engine="lxc", ray_container_image="", ray_container_gpus="bogus",
           ray_container_nvidia_key_fingerprint=""),
    container(),
    container(ray_container_engine="docker", ray_container_pull="always", ray_container_python="/usr/bin/python3.12",
              ray_container_shm_size_mb=2048, ray_container_image="ghcr.io/org/ray@sha256:abc123"),
    container(ray_container_shm_size_mb="512", ray_container_gpus=[]),
])
def test_good_settings_pass(v):
    assert plan(v)["role"] == v["ray_node_role"]


def test_a_gpu_hosts_container_passes_with_its_gpus_and_a_pin_written_as_people_write_it():
    spaced = " ".join(FINGERPRINT[i:i + 4] for i in range(0, 40, 4)).lower()
    for v in (container(), container(ray_container_gpus=[0, "1", "GPU-3f5e0f1c-aaaa", "MIG-GPU-1/2/0"],
                                     ray_container_nvidia_key_fingerprint=spaced),
              container(ray_container_nvidia_key_fingerprint="AB" * 32), container(ray_container_gpus="all")):
        assert plan(v, ("ray_worker", "gpu"))["role"] == "worker"


def test_an_all_digit_pin_yaml_reads_as_a_number_passes():
    assert plan(container(ray_container_nvidia_key_fingerprint=int("1" * 40)), ("gpu",))["role"] == "worker"


def test_controller_paths_are_looked_up_there():
    archive = "/srv/images/ray-node.tar"
    assert plan(container(ray_container_image_archive=archive), files=[archive])["role"] == "worker"
    text = only_problem(container(ray_container_image_archive=archive))
    assert text == said("ray_container_image_archive", archive, "empty, or an image archive file on the controller "
                        "(podman save or docker save).")
    assert only_problem(worker(ray_auth_token_path="/srv/rayfleet"), dirs=["/srv/rayfleet"]).startswith(
        said("ray_auth_token_path", "/srv/rayfleet", "the absolute path on the controller of the file"))


# --- what fails, and how it is named -------------------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "var", "expected"), [
    ({"ray_auth_mode": "bogus"}, "ray_auth_mode", "token or disabled."),
    ({"ray_auth_mode": None}, "ray_auth_mode", "token or disabled."),
    ({"ray_auth_token_path": "credentials/token"}, "ray_auth_token_path",
     "the absolute path on the controller of the file that holds the cluster's Ray token (made there once; read with "
     "ray_auth_mode token), not a directory."),
    ({"ray_auth_token_path": ""}, "ray_auth_token_path", "the absolute path on the controller"),
    ({"ray_auth_token_path": None}, "ray_auth_token_path", "the absolute path on the controller"),
    ({"ray_cluster_name": "Team_B"}, "ray_cluster_name",
     "lowercase letters, digits and '-', starting with a letter or digit, at most 31, or empty for the host's one "
     "unnamed cluster."),
    ({"ray_cluster_name": "-teamb"}, "ray_cluster_name", "lowercase letters"),
    ({"ray_cluster_name": "a" * 32}, "ray_cluster_name", "lowercase letters"),
    ({"ray_cluster_name": "teamb\n"}, "ray_cluster_name", "lowercase letters"),
    ({"ray_cluster_name": None}, "ray_cluster_name", "lowercase letters"),
    ({"ray_head_address": ""}, "ray_head_address",
     "the head's host name or IP address (empty: the cluster IP of the host in the ray_head group - is that group "
     "empty?)."),
    ({"ray_head_address": "head 1"}, "ray_head_address", "the head's host name or IP address"),
    ({"ray_state": "running"}, "ray_state", "started, stopped, restarted or baked."),
    ({"ray_stop_drain_s": -1}, "ray_stop_drain_s", "whole seconds, at least 0."),
    ({"ray_stop_drain_s": "20s"}, "ray_stop_drain_s", "whole seconds, at least 0."),
    ({"ray_stop_drain_s": True}, "ray_stop_drain_s", "whole seconds, at least 0."),
    ({"ray_restart_running_jobs": "maybe"}, "ray_restart_running_jobs",
     "true (a restart may end running jobs) or false."),
    ({"ray_restart_wait_s": -5}, "ray_restart_wait_s", "whole seconds a restart waits for running jobs to end, at "
     "least 0 (0: it does not wait)."),
    ({"ray_liveness_check_interval_s": 0}, "ray_liveness_check_interval_s", "whole seconds, at least 1."),
    ({"ray_liveness_check_interval_s": 1.5}, "ray_liveness_check_interval_s", "whole seconds, at least 1."),
    ({"ray_preemption_provider": "azure"}, "ray_preemption_provider", "aws or gcp."),
    ({"ray_preemption_metadata_url": "169.254.169.254"}, "ray_preemption_metadata_url",
     "empty for the provider's own endpoint, or http(s)://host[:port]."),
    ({"ray_preemption_metadata_url": "http://169.254.169.254/latest"}, "ray_preemption_metadata_url",
     "empty for the provider's own endpoint"),
    ({"ray_preemption_metadata_url": "http://meta data"}, "ray_preemption_metadata_url", "empty for the provider's"),
    ({"ray_preemption_metadata_url": None}, "ray_preemption_metadata_url", "empty for the provider's own endpoint"),
    ({"ray_preemption_interval_s": 0}, "ray_preemption_interval_s", "whole seconds between polls, at least 1."),
    ({"ray_preemption_interval_s": "often"}, "ray_preemption_interval_s", "whole seconds between polls, at least 1."),
    ({"ray_dashboard_prometheus_url": "127.0.0.1:9090"}, "ray_dashboard_prometheus_url",
     "an http(s):// URL (e.g. http://127.0.0.1:9090) or empty; by default it is built from "
     "monitoring_prometheus_listen."),
    ({"ray_dashboard_grafana_url": "ftp://grafana"}, "ray_dashboard_grafana_url", "an http(s):// URL"),
    ({"ray_dashboard_grafana_iframe_url": "http://grafana host:3000"}, "ray_dashboard_grafana_iframe_url",
     "an http(s):// URL"),
    ({"ray_dashboard_grafana_url": "http://127.0.0.1:99999"}, "ray_dashboard_grafana_url", "an http(s):// URL"),
    ({"ray_dashboard_grafana_url": None}, "ray_dashboard_grafana_url", "an http(s):// URL"),
    ({"ray_runtime": "vm"}, "ray_runtime", "host or container."),
])
def test_a_bad_setting_is_named_with_its_value_and_what_was_expected(extra, var, expected):
    assert only_problem(worker(**extra)).startswith(said(var, extra[var], expected))


@pytest.mark.parametrize(("extra", "var", "expected"), [
    ({"ray_container_engine": "lxc"}, "ray_container_engine", "podman or docker."),
    ({"ray_container_image": ""}, "ray_container_image",
     "the node image, registry/name:tag in lowercase (required with ray_runtime container)."),
    ({"ray_container_image": "Registry/Ray:2.60.0"}, "ray_container_image", "the node image"),
    ({"ray_container_image": "ray node:2.60.0"}, "ray_container_image", "the node image"),
    ({"ray_container_pull": "never"}, "ray_container_pull", "missing or always."),
    ({"ray_container_image_archive": None}, "ray_container_image_archive", "empty, or an image archive file"),
    ({"ray_container_python": "python -u"}, "ray_container_python",
     "the command of the image's Python, one word of letters, digits, '.', '_', '/' and '-'."),
    ({"ray_container_shm_size_mb": "1g"}, "ray_container_shm_size_mb",
     "MiB, a whole number, or null for the object store's size + 1024."),
    ({"ray_container_shm_size_mb": -1}, "ray_container_shm_size_mb", "MiB, a whole number"),
    ({"ray_state": "baked"}, "ray_state",
     "started, stopped or restarted with ray_runtime container (a baked image runs Ray on the host: bake with "
     "ray_runtime host)."),
])
def test_a_bad_container_setting_is_named_with_runtime_container(extra, var, expected):
    assert only_problem(container(**extra)).startswith(said(var, extra[var], expected))


GPUS_EXPECTED = "all, or a list of this host's GPU indices or UUIDs (GPU-... or MIG-...), each once"


@pytest.mark.parametrize("gpus", ["0,1", [0, 0], [0, "0"], ["gpu0"], [True], [[0]], {"0": 1}, None, ""])
def test_a_bad_gpu_list_is_named(gpus):
    assert only_problem(container(ray_container_gpus=gpus), ("gpu",)) == said("ray_container_gpus", gpus,
                                                                              GPUS_EXPECTED + ".")


def test_gpus_on_a_host_without_gpus_are_refused_with_the_reason():
    assert only_problem(container(ray_container_gpus=[0])) == said(
        "ray_container_gpus", [0], GPUS_EXPECTED + " - and this host is not in group gpu, so it has no GPUs to give: "
        "leave it all or [].")


@pytest.mark.parametrize("pin", ["", "abc", "C95B321B61E88C1809C4F759DDCAE044F796ECB", FINGERPRINT + "0", True,
                                 None, ["C95B"]])
def test_a_bad_toolkit_key_pin_is_named_on_a_gpu_host(pin):
    text = only_problem(container(ray_container_nvidia_key_fingerprint=pin), ("ray_worker", "gpu"))
    assert text == said(
        "ray_container_nvidia_key_fingerprint", pin, "the fingerprint of the signing key "
        "(https://nvidia.github.io/libnvidia-container/gpgkey) of the NVIDIA Container Toolkit, which a GPU host with "
        "ray_runtime container installs, checked against it before apt trusts it: 40 hex digits, or 64 for a version "
        "5 or 6 key; spaces allowed.")
    # a host without GPUs installs no toolkit: its pin is not read
    assert plan(container(ray_container_nvidia_key_fingerprint=pin))["role"] == "worker"


def test_every_bad_setting_is_named_at_once():
    v = container(ray_auth_mode="bogus", ray_cluster_name="Team_B", ray_stop_drain_s=-1,
                  ray_liveness_check_interval_s=0, ray_preemption_provider="azure",
                  ray_preemption_metadata_url="metadata", ray_preemption_interval_s=0,
                  ray_dashboard_grafana_url="grafana:3000", ray_container_engine="lxc", ray_container_image="",
                  ray_container_pull="never", ray_container_python="python -u", ray_container_shm_size_mb="1g",
                  ray_container_gpus=[0, 0], ray_container_nvidia_key_fingerprint="abc", ray_head_address="",
                  ray_num_cpus=-1)
    found = problems(v, ("ray_worker", "gpu"))
    named = [text.split(" is ", 1)[0].removeprefix("ray on node7: ") for text in found]
    assert named == ["ray_num_cpus", "ray_auth_mode", "ray_cluster_name", "ray_head_address", "ray_stop_drain_s",
                     "ray_liveness_check_interval_s", "ray_preemption_provider", "ray_preemption_metadata_url",
                     "ray_preemption_interval_s", "ray_dashboard_grafana_url", "ray_container_engine",
                     "ray_container_image", "ray_container_pull", "ray_container_python", "ray_container_shm_size_mb",
                     "ray_container_gpus", "ray_container_nvidia_key_fingerprint"]


@pytest.mark.parametrize(("url", "with_path", "bare"), [
    ("http://127.0.0.1:9090", True, True), ("https://[::1]:3000/", True, True), ("http://localhost", True, True),
    ("http://grafana.example.com/d/x?orgId=1", True, False), ("http://h:65535", True, True),
    ("http://h:0", False, False), ("http://h:65536", False, False), ("http://300.1.2.3", False, False),
    ("http://[fd00::zz]", False, False), ("http://[10.0.0.1]", False, False), ("http://user@h", False, False),
    ("http://h/a b", False, False), ("http://h\n", False, False), ("http://", False, False), ("h:80", False, False),
    ("http://-h", False, False), ("http://hé", False, False), (None, False, False), (80, False, False),
])
def test_http_urls(url, with_path, bare):
    assert (http_url(url), http_url(url, path=False)) == (with_path, bare)


# --- the action, the module's documentation and the role's task agree ---------------------------------------------

def test_the_settings_are_the_roles_declared_and_defaulted_variables():
    options = yaml.safe_load((ROOT / "roles/ray/meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    for var in SETTING_NAMES:
        assert var in DEFAULTS and var in options["options"], var


def ray_plan(args, task_vars, role_default=lambda var: None):
    """The ray role's plan of node7 from its variables (args) as the plan action asks for it."""
    return run_plan("ray", Call("node7", args, {}, task_vars, role_default=role_default))


def action_plan(args, group_names=("ray_worker",)):
    task_vars = {"groups": {"ray_head": [], "ray_worker": ["node7"]}, "hostvars": {}, "group_names": list(group_names)}
    return ray_plan(args, task_vars)


def test_the_plan_reads_a_setting_the_host_leaves_unset_as_the_roles_default():
    """The ray role's defaults/main.yml is the one home of its defaults: a variable the host's values lack reads as
    the default there (the plan action's Variables), and a path with none is named."""
    from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import Variables, plan_variables

    given = ("ray_node_role", "ray_node_ip", "ray_temp_dir", "ray_head_address", "ray_auth_token_path")
    mine = {**{name: worker()[name] for name in given},
            "ray_dashboard_prometheus_url": "", "ray_dashboard_grafana_url": "", "ray_dashboard_grafana_iframe_url": "",
            "ray_version": DEFAULTS["ray_version"]}

    def planned(**extra):
        task_vars = {**mine, **extra}
        return action_plan(Variables(plan_variables("ray"), task_vars, lambda value: value))

    assert planned()["host"]["role"] == "worker"
    with pytest.raises(PlanError, match='ray_container_image is ""; expected the node image'):
        planned(ray_runtime="container")
    with pytest.raises(PlanError, match="ray_auth_token_path is null"):
        planned(ray_auth_token_path=None)


def test_a_worker_reaches_the_head_at_its_cluster_ip_unless_ray_head_address_names_it():
    """ray_head_address empty (the role's default): the head's ray_node_ip where its inventory sets it, else its
    default-route address, read by the cluster plan (not through hostvars in the role); a name given is kept; the
    head reaches itself at its own IP; with no head in the inventory the worker's plan fails naming the variable."""
    required = {name: worker()[name] for name in HOST_VARS}

    def head_address(head_vars, role="worker", address="", heads=("h",)):
        task_vars = {"groups": {"ray_head": list(heads), "ray_worker": ["node7"]}, "hostvars": {"h": head_vars},
                     "group_names": ["ray_worker"]}
        args = {**required, "ray_node_role": role, "ray_head_address": address}
        return ray_plan(args, task_vars)["host"]["head_address"]

    facts = {"ansible_facts": {"default_ipv4": {"address": "10.0.0.9"}}}
    assert head_address(facts) == "10.0.0.9"
    assert head_address({**facts, "ray_node_ip": "192.168.7.1"}) == "192.168.7.1"
    assert head_address({**facts, "ray_node_ip": "192.168.7.1"}, address="head.example.com") == "head.example.com"
    assert head_address(facts, role="head") == required["ray_node_ip"]
    with pytest.raises(PlanError, match=r'ray_head_address is ""; expected .*is that group empty\?'):
        head_address({}, heads=())


def test_the_cluster_is_planned_once_for_the_run_and_is_the_same_whichever_member_plans_it():
    """The cluster section (given cluster: true, a run_once task) reads every member as its inventory and facts set
    it, the same from any member; a host's own plan holds its nodes alone, so it costs the same at any cluster
    size."""

    def member(ip, key, **extra):
        return {"ray_node_ip": ip, "ansible_host": ip, "ansible_facts": {
            "all_ipv4_addresses": [ip], "hostname": key, "ssh_host_key_ed25519_public": "AAAA" + key}, **extra}

    hostvars = {"h": member("10.0.0.1", "h"), "w1": member("10.0.0.2", "w1", monitoring_node_exporter_port=9200),
                "node7": member("10.0.0.7", "node7", ray_node_instances=[{"name": "a"}])}
    task_vars = {"groups": {"ray_head": ["h"], "ray_worker": ["w1", "node7"]}, "hostvars": hostvars,
                 "group_names": ["ray_worker"], "ansible_facts": hostvars["node7"]["ansible_facts"]}
    args = container(ray_node_ip="10.0.0.7", ray_head_address="", ray_node_instances=[{"name": "a"}])
    cluster = run_plan("ray", Call("node7", args, {"cluster": True, "left_out": ["w1"]}, task_vars))
    assert list(cluster) == ["cluster"]
    cluster = cluster["cluster"]
    from_head = run_plan("ray", Call("h", args, {"cluster": True, "left_out": ["w1"]},
                                     {**task_vars, "group_names": ["ray_head"]}))["cluster"]
    assert from_head == cluster
    assert cluster["members"] == ["h", "w1", "node7"] and cluster["left_out"] == ["w1"]
    assert cluster["scrape"]["monitoring"]["w1"] == {"monitoring_node_exporter_port": 9200}
    assert sorted(cluster["expected_nodes"]) == ["10.0.0.1", "10.0.0.2", "10.0.0.7/a"]
    # the host that is left out keeps its nodes in the cluster's configuration, and the run does not wait for them
    assert sorted(cluster["awaited_nodes"]) == ["10.0.0.1", "10.0.0.7/a"]
    assert cluster["known_hosts"]["node7"] == {"names": ["node7", "10.0.0.7"], "key": "AAAAnode7"}
    mine = run_plan("ray", Call("node7", args, {}, task_vars))
    assert list(mine) == ["host"] and mine["host"]["node_ip"] == "10.0.0.7"


class _Role:
    """The ray role as the plan action sees it through its task: its defaults."""

    @staticmethod
    def get_default_vars():
        return {var: DEFAULTS[var] for var in ("ray_gcs_port", "ray_version", "ray_auth_mode")}


def _gcs_address(hostvars, role="worker", address="", **extra):
    required = {name: worker()[name] for name in HOST_VARS} | extra
    task_vars = {"groups": {"ray_head": ["h"], "ray_worker": ["node7"]}, "hostvars": hostvars,
                 "group_names": ["ray_worker"]}
    args = {**required, "ray_node_role": role, "ray_head_address": address,
            "ray_gcs_port": (hostvars.get("node7") or {}).get("ray_gcs_port", DEFAULTS["ray_gcs_port"]), **extra}
    return ray_plan(args, task_vars, _Role.get_default_vars().get)["host"]["gcs_address"]


def test_a_worker_follows_the_heads_gcs_port_whoever_sets_it():
    """The GCS port is the head's: ray_gcs_port in the head's host_vars alone moves every worker's head address with
    it; a worker's own value that the head does not share is not where the head listens, so the worker still goes
    to the head's (the role's default)."""
    head = {"ray_node_ip": "10.0.0.1"}
    assert _gcs_address({"h": head}) == "10.0.0.1:6379"
    assert _gcs_address({"h": {**head, "ray_gcs_port": 6390}}) == "10.0.0.1:6390"
    assert _gcs_address({"h": {**head, "ray_gcs_port": 6390}, "node7": {"ray_gcs_port": 6400}}) == "10.0.0.1:6390"
    assert _gcs_address({"h": head, "node7": {"ray_gcs_port": 6400}}) == "10.0.0.1:6379"
    assert _gcs_address({"h": {"ray_node_ip": "fd00::1", "ray_gcs_port": 6390}}) == "[fd00::1]:6390"
    assert _gcs_address({"h": head}, address="head.example.com:7000") == "head.example.com:7000"
    assert _gcs_address({"h": head}, role="head") == "10.0.0.5:6379"


def test_a_heads_gcs_port_that_is_no_port_fails_on_the_worker_too():
    with pytest.raises(PlanError, match=r"ray on node7: the head's ray_gcs_port is \"sixty\"; expected a port"):
        _gcs_address({"h": {"ray_node_ip": "10.0.0.1", "ray_gcs_port": "sixty"}})


@pytest.mark.parametrize(("var", "head_value", "mine"), [("ray_version", "2.61.0", "2.60.0"),
                                                         ("ray_auth_mode", "disabled", "token")])
def test_a_worker_whose_ray_release_or_token_mode_is_not_the_heads_is_refused(var, head_value, mine):
    """Ray refuses a node of another release, and a head with token authentication one without the token: a value set
    for the head alone (or a worker alone) fails on the worker, naming both, before anything changes."""
    with pytest.raises(PlanError) as info:
        _gcs_address({"h": {"ray_node_ip": "10.0.0.1", var: head_value}, "node7": {var: mine}}, **{var: mine})
    assert (f'ray on node7: {var} is "{mine}", but the head (h) has "{head_value}"; expected the head\'s value on '
            "every node of the cluster") in str(info.value)
    assert _gcs_address({"h": {"ray_node_ip": "10.0.0.1", var: mine}}, **{var: mine}) == "10.0.0.1:6379"


# --- membership: static (the members' addresses) or network (the cluster's networks) -------------------------------

def test_network_membership_passes_with_the_token_and_the_node_inside_the_networks():
    assert plan(worker(ray_membership="network", ray_cluster_networks=["10.0.0.0/24", "fd00::/64"]))["node_ip"]
    # a host address with its bits set is read as its network
    assert plan(worker(ray_membership="network", ray_cluster_networks=["10.0.0.77/24"]))["node_ip"] == "10.0.0.5"


@pytest.mark.parametrize(("extra", "var", "expected"), [
    ({"ray_membership": "dynamic"}, "ray_membership", "static or network"),
    ({"ray_cluster_networks": "10.0.0.0/24"}, "ray_cluster_networks", "a list of CIDRs (10.0.0.0/16, fd00::/64)"),
    ({"ray_cluster_networks": ["10.0.0.0/33"]}, "ray_cluster_networks", "a list of CIDRs"),
    ({"ray_membership": "network"}, "ray_cluster_networks", "at least one CIDR"),
    ({"ray_membership": "network", "ray_cluster_networks": ["10.0.0.0/24"], "ray_auth_mode": "disabled",
      "ray_auth_token_path": ""}, "ray_membership",
     'static unless ray_auth_mode is token (it is "disabled"): network membership admits every host of '
     "ray_cluster_networks, so the cluster's token must be the lock"),
])
def test_a_bad_membership_setting_is_named(extra, var, expected):
    found = only_problem(worker(**extra))
    assert found.startswith(said(var, worker(**extra)[var], expected)), found


def test_a_node_outside_the_cluster_networks_is_named():
    found = only_problem(worker(ray_membership="network", ray_cluster_networks=["10.1.0.0/16", "fd00::/64"]))
    assert found == ('ray on node7: ray_node_ip 10.0.0.5 is in none of ray_cluster_networks ["10.1.0.0/16", '
                     '"fd00::/64"]; expected every node\'s address in the cluster\'s networks (ray_membership network '
                     "admits those only).")


def test_with_network_membership_the_clusters_sources_are_its_networks():
    """A member that joins or leaves changes the members, never the sources the firewall, from= and the NFS exports
    are made of."""
    required = {name: worker()[name] for name in HOST_VARS}
    facts = {"ansible_facts": {"default_ipv4": {"address": "10.0.0.1"}, "all_ipv4_addresses": ["10.0.0.1"]}}

    def cluster(workers, **extra):
        task_vars = {"groups": {"ray_head": ["h"], "ray_worker": list(workers)},
                     "hostvars": {"h": facts, "w9": {"ansible_facts": {"all_ipv4_addresses": ["10.0.0.9"]}}},
                     "group_names": ["ray_worker"]}
        return run_plan("ray", Call("node7", {**required, **extra}, {"cluster": True}, task_vars))["cluster"]

    static = cluster(["node7"]), cluster(["node7", "w9"])
    assert [c["membership"] for c in static] == ["static", "static"]
    assert static[0]["sources"] != static[1]["sources"] and "10.0.0.9" in static[1]["sources"]
    network = {"ray_membership": "network", "ray_cluster_networks": ["fd00::/64", "10.0.0.0/24"]}
    joined = cluster(["node7"], **network), cluster(["node7", "w9"], **network)
    assert [c["membership"] for c in joined] == ["network", "network"]
    assert joined[0]["sources"] == joined[1]["sources"] == ["10.0.0.0/24", "fd00::/64"]
    assert joined[1]["members"] == ["h", "node7", "w9"]
