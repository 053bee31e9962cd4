# SPDX-License-Identifier: GPL-3.0-or-later
"""The firewall plan (plugins/plugin_utils/firewall_plan.py): each host's tables, address sets and port lists, and
every bad firewall setting named with the host before anything changes."""

from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    cluster_members,
    member_addresses,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.firewall_plan import firewall_plan

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/firewall/defaults/main.yml").read_text())
# the role's defaults as the play renders them
SETTINGS = {**DEFAULTS, "ray_cluster_name": "", "firewall_host_ports": ["9100", "9400"]}
# the Ray nodes' ports and worker range as the cluster plan gives them for the ray role's defaults
RAY_PORTS = [6379, 8076, 8077, 8078, 8079, 8080, 8265, 10001, 44217, 44227, 52365]
WORKER_RANGE = "10002-11999"
MEMBERS = ("10.89.0.2", "10.89.0.3", "10.89.0.4", "fd00::2")
EPHEMERAL = "32768\t60999\n"


def plan(members=MEMBERS, ephemeral=EPHEMERAL, **settings):
    return firewall_plan("worker1", {**SETTINGS, **settings}, members, ray_ports=RAY_PORTS,
                         worker_port_range=WORKER_RANGE, ephemeral_text=ephemeral)


def problems(**kwargs) -> str:
    with pytest.raises(PlanError) as err:
        plan(**kwargs)
    return " ".join(err.value.problems)


def test_defaults_open_the_ray_ports_and_the_worker_range_to_the_cluster():
    got = plan()
    assert got["table"] == "rayfleet" and got["unit_name"] == "rayfleet-firewall.service"
    assert got["rules_path"] == "/etc/nftables.rayfleet.nft"
    assert got["members_path"] == "/etc/rayfleet/firewall.d/rayfleet.nft"
    assert got["tcp_ports"] == "6379, 8076, 8077, 8078, 8079, 8080, 8265, 10001, 44217, 44227, 52365, 10002-11999"
    # every member address
    assert got["cluster_v4"] == ["10.89.0.2", "10.89.0.3", "10.89.0.4"] and got["cluster_v6"] == ["fd00::2"]
    # SSH is not restricted unless sources are given
    assert got["ssh_v4"] == [] and got["ssh_v6"] == []
    assert got["ephemeral_range"] == "32768-60999" and got["host_tcp_ports"] == "9100, 9400, 32768-60999"
    assert got["nfs_port"] == 0 and got["nfs_extra_clients"] == []


def test_a_named_cluster_gets_its_own_table_unit_and_files():
    got = plan(ray_cluster_name="team-b")
    assert got["table"] == "rayfleet_team_b" and got["unit_name"] == "rayfleet-firewall-team-b.service"
    assert got["rules_path"] == "/etc/nftables.rayfleet-team-b.nft"
    assert got["members_path"] == "/etc/rayfleet/firewall.d/rayfleet_team_b.nft"
    # the shared table is the host's, whatever the cluster
    assert got["ephemeral_table"] == plan()["ephemeral_table"] == "rayfleet_ephemeral"


def test_sources_are_normalised_and_those_inside_another_left_out():
    """An nftables interval set refuses overlapping elements: a member inside an allowed CIDR is left to the CIDR."""
    got = plan(firewall_ray_allowed_sources=["10.89.0.0/24", "192.0.2.7/24", "2001:db8::1"])
    assert got["cluster_v4"] == ["10.89.0.0/24", "192.0.2.0/24"]
    assert got["cluster_v6"] == ["2001:db8::1", "fd00::2"]


def test_ssh_restricted_to_sources_keeps_the_cluster_and_ipv6():
    got = plan(firewall_ssh_allowed_sources=["203.0.113.9", "2001:db8:1::/48"])
    assert got["ssh_v4"] == ["10.89.0.2", "10.89.0.3", "10.89.0.4", "203.0.113.9"]
    assert got["ssh_v6"] == ["2001:db8:1::/48", "fd00::2"]


def test_more_ports_and_another_worker_range_are_the_firewalls_own_settings():
    """The Ray ports are the ray role's (its plan's): firewall_ray_ports adds to them, firewall_ray_port_range set
    replaces the ray role's worker range."""
    got = plan(firewall_ray_ports=[7000, 6379], firewall_ray_port_range="20000-20999")
    assert got["tcp_ports"] == "6379, 7000, 8076, 8077, 8078, 8079, 8080, 8265, 10001, 44217, 44227, 52365, 20000-20999"


def test_instance_ports_and_nfs_are_opened():
    got = firewall_plan("nfs1", SETTINGS, MEMBERS, ray_ports=[*RAY_PORTS, 8176, 8177], worker_port_range=WORKER_RANGE,
                        nfs_port="2049", nfs_extra_clients=["192.0.2.0/24", "2001:db8::5"], ephemeral_text=EPHEMERAL)
    assert got["tcp_ports"].startswith("2049, 6379, 8076, 8077, 8078, 8079, 8080, 8176, 8177, 8265")
    assert got["nfs_port"] == 2049
    assert got["nfs_extra_clients"] == [{"family": "ip", "source": "192.0.2.0/24"},
                                        {"family": "ip6", "source": "2001:db8::5"}]


def test_host_ports_inside_the_ephemeral_range_are_left_to_the_range():
    got = plan(firewall_host_ports=[9100, 40000])
    assert got["host_tcp_ports"] == "9100, 32768-60999"
    unrestricted = plan(ephemeral=None, firewall_restrict_ephemeral_ports=False, firewall_host_ports=[9100, 40000])
    assert unrestricted["host_tcp_ports"] == "9100, 40000" and unrestricted["ephemeral_range"] == ""
    assert plan(ephemeral=None, firewall_restrict_ephemeral_ports=False, firewall_host_ports=[])["host_tcp_ports"] == ""


@pytest.mark.parametrize(("settings", "wanted"), [
    ({"firewall_ray_allowed_sources": ["cafe"]}, 'firewall_ray_allowed_sources has ["cafe"]'),
    ({"firewall_ray_allowed_sources": ["10.0.0.0/33"]}, 'firewall_ray_allowed_sources has ["10.0.0.0/33"]'),
    ({"firewall_ssh_allowed_sources": "10.0.0.1"}, 'firewall_ssh_allowed_sources is "10.0.0.1": expected a list'),
    ({"firewall_ray_ports": [6379, 70000, "x"]}, 'firewall_ray_ports has [70000, "x"]: expected TCP ports'),
    ({"firewall_host_ports": [0]}, "firewall_host_ports has [0]"),
    ({"firewall_ray_port_range": "11999-10002"}, 'firewall_ray_port_range is "11999-10002": expected low-high'),
    ({"firewall_ray_port_range": "10002"}, 'firewall_ray_port_range is "10002"'),
    ({"firewall_restrict_ephemeral_ports": "maybe"}, 'firewall_restrict_ephemeral_ports is "maybe"'),
])
def test_bad_settings_name_the_variable_and_the_host(settings, wanted):
    found = problems(**settings)
    assert found.startswith("firewall on worker1: ") and wanted in found


def test_every_problem_is_reported_at_once():
    found = problems(firewall_ray_allowed_sources=["cafe"], firewall_ray_port_range="x")
    assert "firewall_ray_allowed_sources" in found and "firewall_ray_port_range" in found


def test_restricted_ephemeral_ports_need_the_hosts_range():
    assert "ip_local_port_range was not read" in problems(ephemeral=None)
    with pytest.raises(ValueError, match="ip_local_port_range reads"):
        plan(ephemeral="garbage")


def test_the_cluster_plans_sources_are_every_address_from_facts_else_the_cluster_ip():
    """The cluster plan gives the firewall (and SSH trust) every member's addresses: IPv4 first, no IPv6 link-local
    (on every interface, routed nowhere); a host whose facts this run has not (a limited run without a fact cache)
    by its cluster IP."""
    hostvars = {"head": {"ansible_facts": {"all_ipv4_addresses": ["10.89.0.2", "172.17.0.1"],
                                           "all_ipv6_addresses": ["fe80::1", "fd00::2"]}},
                "worker1": {"ray_node_ip": "10.89.0.3"},
                "worker2": {"ansible_facts": {"default_ipv4": {"address": "10.89.0.4"},
                                              "all_ipv4_addresses": ["10.89.0.4", "10.89.0.2"]}}}
    cluster = cluster_members(["head"], ["worker1", "worker2"], hostvars.get)
    assert cluster["addresses"] == {"head": ["10.89.0.2", "172.17.0.1", "fd00::2"], "worker1": ["10.89.0.3"],
                                    "worker2": ["10.89.0.4", "10.89.0.2"]}
    assert cluster["sources"] == ["10.89.0.2", "172.17.0.1", "10.89.0.3", "10.89.0.4", "fd00::2"]


def test_the_addresses_of_local_container_and_vm_bridges_are_no_member_addresses():
    """docker0 (and docker's br-<id> networks, podman's, libvirt's) come and go with their engine, and nothing
    leaves the host from them: their addresses are neither firewall sources nor cluster inputs. A second real
    interface stays, and so does a bridge that carries the host's cluster IP (a host bridged onto its own NIC)."""
    facts = {
        "interfaces": ["lo", "eth0", "eth1", "docker0", "br-0123456789ab", "veth9f2c1e0", "virbr0"],
        "eth0": {"ipv4": {"address": "10.89.0.12"}},
        "eth1": {"ipv4": {"address": "192.168.50.12"}},
        "docker0": {"ipv4": {"address": "172.17.0.1"}, "ipv6": [{"address": "fd00:dead::1"}]},
        "br_0123456789ab": {"ipv4": {"address": "172.18.0.1"}, "ipv4_secondaries": [{"address": "172.18.1.1"}]},
        "virbr0": {"ipv4": {"address": "192.168.122.1"}},
        "all_ipv4_addresses": ["10.89.0.12", "192.168.50.12", "172.17.0.1", "172.18.0.1", "172.18.1.1",
                               "192.168.122.1"],
        "all_ipv6_addresses": ["fe80::1", "fd00:dead::1", "fd00:beef::12"],
    }
    assert member_addresses("10.89.0.12", facts) == ["10.89.0.12", "192.168.50.12", "fd00:beef::12"]
    bridged = {"interfaces": ["br-0123456789ab"], "br_0123456789ab": {"ipv4": {"address": "10.0.0.5"}},
               "all_ipv4_addresses": ["10.0.0.5"]}
    assert member_addresses("10.0.0.5", bridged) == ["10.0.0.5"]


def test_the_clusters_networks_fill_the_sets_with_network_membership():
    """ray_membership network: the cluster plan's sources are the cluster's networks, which the sets hold whole (a
    member's own address inside one of them is left to the network)."""
    got = plan(members=["10.89.0.0/24", "fd00:1::/64", "10.89.0.7"])
    assert got["cluster_v4"] == ["10.89.0.0/24"] and got["cluster_v6"] == ["fd00:1::/64"]
