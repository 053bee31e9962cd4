# SPDX-License-Identifier: GPL-3.0-or-later
"""The ray role's second plan call: the settings of a host's Ray nodes that depend on what the role read on the host
(the container probe, the nccl role's settings, the checkpoint store's environment file), worked out on the
controller from the role's own defaults and the host's variables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import Call, Variables, plan_variables, run_plan

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())


def node(given=None, **host_vars):
    """The node settings of a host with host_vars over the ray role's defaults."""
    task_vars = {name: trust_as_template(value) if isinstance(value, str) else value
                 for name, value in {**DEFAULTS, **host_vars}.items()}
    variables = Variables(plan_variables("ray"), task_vars, Templar(loader=DataLoader(), variables=task_vars).template)
    given = {"slots": 1, "probe": {}, "nccl": {}, "checkpoint_env_sha256": None, **(given or {})}
    return run_plan("ray", Call("node7", variables, {"node": given}, task_vars))["node"]


def test_a_hosts_one_node_leaves_cpus_and_object_store_to_ray_and_its_shm_holds_30_percent():
    got = node(given={"probe": {"cpus": 16, "memtotal_mb": 10000}})
    assert got["num_cpus"] is None and got["object_store_memory"] is None
    assert got["container_shm_mb"] == 3000 + 1024


def test_node_instances_get_one_slots_share_of_the_hosts_cpus_and_memory():
    got = node(given={"slots": 4, "probe": {"cpus": 16, "memtotal_mb": 8192}},
               ray_node_instances=[{"name": "gpu0", "gpus": [0]}])
    assert got["num_cpus"] == 4
    assert got["object_store_memory"] == int(8192 * 1048576 * 0.3 / 4)
    assert got["container_shm_mb"] == got["object_store_memory"] // 1048576 + 1024
    # a host with fewer CPUs than slots: one each, never none
    assert node(given={"slots": 4, "probe": {"cpus": 2}}, ray_node_instances=[{"name": "a"}])["num_cpus"] == 1


def test_what_the_inventory_sets_wins():
    got = node(given={"slots": 4, "probe": {"cpus": 16, "memtotal_mb": 8192}}, ray_node_instances=[{"name": "a"}],
               ray_num_cpus=3, ray_object_store_memory=2 << 30, ray_container_shm_size_mb=512)
    assert (got["num_cpus"], got["object_store_memory"], got["container_shm_mb"]) == (3, 2 << 30, 512)


def test_the_environment_merges_nccl_checkpoint_dashboard_then_ray_env():
    got = node(given={"nccl": {"env": {"NCCL_SOCKET_IFNAME": "eth1", "A": "nccl"}, "socket_ifname": "eth1"},
                      "checkpoint_env_sha256": "ab" * 32},
               ray_env={"A": "mine"}, ray_dashboard_grafana_url="http://g:3000",
               ray_dashboard_prometheus_url="http://p:9090")
    assert got["env"] == {"NCCL_SOCKET_IFNAME": "eth1", "A": "mine", "RAYFLEET_CHECKPOINT_ENV_SHA256": "ab" * 32,
                          "RAY_PROMETHEUS_HOST": "http://p:9090", "RAY_GRAFANA_HOST": "http://g:3000",
                          "RAY_GRAFANA_IFRAME_HOST": "http://g:3000"}
    assert got["socket_ifname"] == "eth1"
    assert node(ray_dashboard_prometheus_url="")["env"] == {"RAY_GRAFANA_HOST": "DISABLED"}


def test_the_interface_is_ray_socket_ifname_else_the_nccl_roles_and_none_where_ray_env_names_one():
    nccl = {"nccl": {"socket_ifname": "eth1"}}
    assert node(given=nccl)["socket_ifname"] == "eth1"
    assert node(given=nccl, ray_socket_ifname="ens5")["socket_ifname"] == "ens5"
    assert node(given=nccl, ray_socket_ifname="ens5", ray_env={"GLOO_SOCKET_IFNAME": "lo"})["socket_ifname"] == ""


def test_the_link_check_follows_the_preflights_pair_size_and_ratio_and_is_off_when_turned_off():
    got = node(preflight_pair_bytes="4M", preflight_pair_ratio=0.5)["link_check"]
    assert got == {"bytes": 4 << 20, "warmup": 2, "iters": 5, "ratio": 0.5, "min_busbw_gbps": None,
                   "timeout_s": 60.0}
    assert node()["link_check"]["bytes"] == 16 << 20
    assert node(ray_admission_link_check=False)["link_check"] is None


def test_a_link_size_that_is_no_size_is_named():
    with pytest.raises(PlanError, match=r'ray on node7: ray_admission_link_bytes is "lots"; expected a size'):
        node(ray_admission_link_bytes="lots")
