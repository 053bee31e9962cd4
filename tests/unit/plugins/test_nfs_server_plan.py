# SPDX-License-Identifier: GPL-3.0-or-later
"""The NFS server plan (plugins/plugin_utils/nfs_server_plan.py): the exports and clients the nfs_server role's
templates print (the same lines the role's Jinja wrote before, for the same addresses), and every bad input named with
the host before anything changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nfs_server_plan import (
    EXPORT_KEYS,
    PlanError,
    client_text,
    nfs_server_plan,
    run_cluster_sources,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/nfs_server/defaults/main.yml").read_text())
# The cluster plan's sources: every address of every member, IPv4 first (10.89.0.10 sorts before 10.89.0.2 as text)
MEMBERS = ["10.89.0.2", "10.89.0.3", "10.89.0.10"]
SHARED = {"path": "/srv/rayfleet/shared", "owner": "rayfleet", "group": "rayfleet", "mode": "2775", "access": "rw",
          "squash": "root_squash", "clients": []}
RW = "(rw,sync,no_subtree_check,sec=sys,root_squash)"
RO_ALL = "(ro,sync,no_subtree_check,sec=sys,all_squash)"


def settings(**extra) -> dict:
    """The nfs_server role's variables as the plan gets them (the role's defaults, rendered)."""
    return {**DEFAULTS, "nfs_server_exports": [SHARED], **extra}


def plan(members=None, os_family="Debian", **extra) -> dict:
    return nfs_server_plan("nfs1", settings(**extra), MEMBERS if members is None else members, os_family)


def problems(members=None, os_family="Debian", **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(members, os_family, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("nfs_server on nfs1: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def test_defaults_export_the_shared_directory_to_the_cluster():
    got = plan()
    assert got["implementation"] == "kernel" and got["port"] == 2049
    assert got["packages"] == ["nfs-kernel-server"] and got["service"] == "nfs-server.service"
    # sorted as text, as the role's Jinja sorted them: a converged server keeps its exports file
    assert got["cluster_clients"] == ["10.89.0.10", "10.89.0.2", "10.89.0.3"]
    (export,) = got["exports"]
    assert export["export_id"] == 1 and export["path"] == "/srv/rayfleet/shared"
    assert (export["owner"], export["group"], export["mode"]) == ("rayfleet", "rayfleet", "2775")
    assert export["entries"] == ["10.89.0.10" + RW, "10.89.0.2" + RW, "10.89.0.3" + RW]
    # the exports file's line: each entry followed by a blank, as the template always wrote it
    assert export["exports_line"] == f"/srv/rayfleet/shared 10.89.0.10{RW} 10.89.0.2{RW} 10.89.0.3{RW} "
    assert export["ganesha_clients"] == "10.89.0.10, 10.89.0.2, 10.89.0.3"
    assert export["ganesha_access_type"] == "RW"


def test_kernel_and_ganesha_lines_of_several_exports_with_extra_and_own_clients():
    exports = [SHARED,
               {"path": "/srv/results", "access": "ro", "squash": "all_squash",
                "clients": ["192.168.7.0/24", "10.89.0.2", "2001:db8::/64"]},
               {"path": "/srv/scratch"}]
    extra = ["203.0.113.7", "10.89.0.3", "fd00::/64"]
    kernel = plan(nfs_server_exports=exports, nfs_server_extra_clients=extra)
    # the cluster's addresses and the extra clients, each once, IPv4 first; then an export's own clients in order
    assert kernel["cluster_clients"] == ["10.89.0.10", "10.89.0.2", "10.89.0.3", "203.0.113.7", "fd00::/64"]
    assert [e["exports_line"] for e in kernel["exports"]] == [
        f"/srv/rayfleet/shared 10.89.0.10{RW} 10.89.0.2{RW} 10.89.0.3{RW} 203.0.113.7{RW} fd00::/64{RW} ",
        f"/srv/results 10.89.0.10{RO_ALL} 10.89.0.2{RO_ALL} 10.89.0.3{RO_ALL} 203.0.113.7{RO_ALL} fd00::/64{RO_ALL} "
        f"192.168.7.0/24{RO_ALL} 2001:db8::/64{RO_ALL} ",
        f"/srv/scratch 10.89.0.10{RW} 10.89.0.2{RW} 10.89.0.3{RW} 203.0.113.7{RW} fd00::/64{RW} ",
    ]
    # defaults of an export given its path only
    scratch = kernel["exports"][2]
    assert (scratch["owner"], scratch["group"], scratch["mode"], scratch["access"], scratch["squash"]) == (
        "root", "root", "0755", "rw", "root_squash")
    ganesha = plan(os_family="RedHat", nfs_server_implementation="ganesha", nfs_server_exports=exports,
                   nfs_server_extra_clients=extra, nfs_server_port="2050")
    assert ganesha["packages"] == ["nfs-ganesha", "nfs-ganesha-vfs"] and ganesha["service"] == "nfs-ganesha.service"
    assert ganesha["port"] == 2050
    assert (ganesha["ganesha_grace_period"], ganesha["ganesha_lease_lifetime"]) == (90, 60)
    assert [(e["export_id"], e["ganesha_clients"], e["ganesha_access_type"], e["squash"])
            for e in ganesha["exports"]] == [
        (1, "10.89.0.10, 10.89.0.2, 10.89.0.3, 203.0.113.7, fd00::/64", "RW", "root_squash"),
        (2, "10.89.0.10, 10.89.0.2, 10.89.0.3, 203.0.113.7, fd00::/64, 192.168.7.0/24, 2001:db8::/64", "RO",
         "all_squash"),
        (3, "10.89.0.10, 10.89.0.2, 10.89.0.3, 203.0.113.7, fd00::/64", "RW", "root_squash"),
    ]


def test_ipv6_members_come_after_ipv4_and_clients_are_normalised():
    got = plan(members=["fd00::2", "10.89.0.2"],
               nfs_server_extra_clients=[" 10.1.2.3/16", "2001:DB8:0::7", "10.0.0.5/32", "10.0.0.5"])
    assert got["cluster_clients"] == ["10.0.0.5", "10.0.0.5/32", "10.1.0.0/16", "10.89.0.2", "2001:db8::7",
                                      "fd00::2"]


@pytest.mark.parametrize(("value", "text"), [
    ("10.0.0.1", "10.0.0.1"), ("10.0.0.1/8", "10.0.0.0/8"), ("10.0.0.0/255.255.0.0", "10.0.0.0/16"),
    ("fd00::1", "fd00::1"), ("FD00::1/64", "fd00::/64"), ("10.0.0.0/33", None), ("999.1.1.1", None),
    ("999.1.1.1/99", None), ("fd00::/129", None), ("cafe", None), ("", None), (10, None), (None, None),
])
def test_client_text(value, text):
    assert client_text(value) == text


@pytest.mark.parametrize(("extra", "wanted"), [
    ({"nfs_server_implementation": "zfs"}, 'nfs_server_implementation is "zfs"; expected kernel or ganesha.'),
    ({"nfs_server_port": 0}, "nfs_server_port is 0; expected a TCP port (1-65535)."),
    ({"nfs_server_port": 65536}, "nfs_server_port is 65536; expected a TCP port (1-65535)."),
    ({"nfs_server_port": "nfs"}, 'nfs_server_port is "nfs"; expected a TCP port'),
    ({"nfs_server_port": True}, "nfs_server_port is true; expected a TCP port"),
    ({"nfs_server_exports": []}, "nfs_server_exports is []; expected a list of at least one export."),
    ({"nfs_server_exports": {"path": "/srv/a"}}, 'nfs_server_exports is {"path": "/srv/a"}; expected a list'),
    ({"nfs_server_exports": None}, "nfs_server_exports is null; expected a list"),
    ({"nfs_server_exports": ["/srv/a"]}, 'nfs_server_exports[0] is "/srv/a"; expected a dict.'),
    ({"nfs_server_extra_clients": ["999.1.1.1", "10.0.0.0/8", "10.0.0.0/33"]},
     'nfs_server_extra_clients has ["999.1.1.1", "10.0.0.0/33"]; expected IP addresses or CIDRs'),
    ({"nfs_server_extra_clients": ["999.1.1.1/99"]}, 'nfs_server_extra_clients has ["999.1.1.1/99"]'),
    ({"nfs_server_extra_clients": "10.0.0.1"},
     'nfs_server_extra_clients is "10.0.0.1"; expected a list of IP addresses or CIDRs'),
    ({"nfs_server_implementation": "ganesha", "nfs_server_ganesha_grace_period": "soon"},
     'nfs_server_ganesha_grace_period is "soon"; expected whole seconds, 1-180 (NFS-Ganesha refuses a longer grace '
     "period)."),
    ({"nfs_server_implementation": "ganesha", "nfs_server_ganesha_grace_period": 1000},
     "nfs_server_ganesha_grace_period is 1000; expected whole seconds, 1-180"),
    ({"nfs_server_implementation": "ganesha", "nfs_server_ganesha_lease_lifetime": 0},
     "nfs_server_ganesha_lease_lifetime is 0; expected whole seconds, 1-120 (NFS-Ganesha refuses a longer lease)."),
    ({"nfs_server_implementation": "ganesha", "nfs_server_ganesha_grace_period": 180,
      "nfs_server_ganesha_lease_lifetime": 150}, "nfs_server_ganesha_lease_lifetime is 150; expected whole seconds, "
                                                 "1-120"),
    ({"nfs_server_port": 2050}, "nfs_server_port is 2050; expected 2049 with nfs_server_implementation kernel"),
    ({"nfs_server_implementation": "ganesha", "nfs_server_ganesha_lease_lifetime": 120},
     "nfs_server_ganesha_lease_lifetime is 120, above nfs_server_ganesha_grace_period 90; expected a lease no "
     "longer than the grace period."),
])
def test_bad_settings_name_the_variable_and_the_host(extra, wanted):
    found = problems(**extra)
    assert any(wanted in p for p in found), found


def test_ganesha_settings_are_not_checked_for_the_kernel_server():
    assert plan(nfs_server_ganesha_lease_lifetime=120)["implementation"] == "kernel"


def test_an_os_family_without_packages_is_refused():
    assert problems(os_family="Suse") == [
        'nfs_server on nfs1: the OS family is "Suse"; expected Debian or RedHat (the families the nfs_server role '
        "installs kernel for)."]


def export_problems(**export) -> list[str]:
    return problems(nfs_server_exports=[export])


@pytest.mark.parametrize(("export", "wanted"), [
    ({"access": "rw"}, "nfs_server_exports[0]: path is not set; expected the exported directory, an absolute path "
                       '(the paths given: ["<no path>"]).'),
    ({"path": "srv/a"}, 'nfs_server_exports[0]: path is "srv/a"; expected an absolute path'),
    ({"path": "/srv/a/"}, 'nfs_server_exports[0]: path is "/srv/a/"; expected an absolute path'),
    ({"path": "/srv/my share"}, 'nfs_server_exports[0]: path is "/srv/my share"; expected an absolute path'),
    ({"path": "/"}, 'nfs_server_exports[0]: path is "/"; expected an absolute path'),
    ({"path": '/srv/"a"'}, "nfs_server_exports[0]: path is \"/srv/\\\"a\\\"\"; expected an absolute path"),
    ({"path": "/srv/a", "access": "rx"}, 'nfs_server_exports[0] (/srv/a): access is "rx"; expected rw or ro.'),
    ({"path": "/srv/a", "squash": "root"},
     'nfs_server_exports[0] (/srv/a): squash is "root"; expected root_squash, all_squash or no_root_squash.'),
    ({"path": "/srv/a", "mode": 775},
     "nfs_server_exports[0] (/srv/a): mode is 775; expected the exported directory's mode as a quoted octal"),
    ({"path": "/srv/a", "mode": "rwx"}, 'nfs_server_exports[0] (/srv/a): mode is "rwx"; expected'),
    ({"path": "/srv/a", "owner": "ray fleet"}, 'nfs_server_exports[0] (/srv/a): owner is "ray fleet"; expected a'),
    ({"path": "/srv/a", "group": "a:b"}, 'nfs_server_exports[0] (/srv/a): group is "a:b"; expected a user or group'),
    ({"path": "/srv/a", "clients": ["10.0.0.0/33", "10.0.0.1"]},
     'nfs_server_exports[0] (/srv/a): clients has ["10.0.0.0/33"]; expected IP addresses or CIDRs (10.0.0.0/8, '
     "fd00::/64; a prefix no longer than the address: /32 for IPv4, /128 for IPv6)."),
    ({"path": "/srv/a", "clients": "10.0.0.1"},
     'nfs_server_exports[0] (/srv/a): clients is "10.0.0.1"; expected a list of IP addresses or CIDRs'),
    ({"path": "/srv/a", "client": ["10.0.0.1"]},
     'nfs_server_exports[0] (/srv/a): unknown key "client" (did you mean clients?); expected only '
     + ", ".join(EXPORT_KEYS) + "."),
    ({"path": "/srv/a", "colour": "blue"}, 'nfs_server_exports[0] (/srv/a): unknown key "colour"; expected only path,'),
])
def test_bad_exports_name_the_export_and_the_field(export, wanted):
    found = export_problems(**export)
    assert any(p.startswith("nfs_server on nfs1: " + wanted) for p in found), found


def test_owner_and_group_may_be_numbers():
    (export,) = plan(nfs_server_exports=[{"path": "/srv/a", "owner": 1000, "group": 0}])["exports"]
    assert (export["owner"], export["group"]) == (1000, 0)


def test_each_path_once():
    found = problems(nfs_server_exports=[SHARED, {"path": "/srv/b"}, dict(SHARED, access="ro")])
    assert found == ['nfs_server on nfs1: nfs_server_exports[2] (/srv/rayfleet/shared): path /srv/rayfleet/shared '
                     "is also the path of nfs_server_exports[0]; expected each path once (the paths given: "
                     '["/srv/rayfleet/shared", "/srv/b", "/srv/rayfleet/shared"]).']


def test_every_problem_is_reported_at_once():
    found = problems(nfs_server_implementation="zfs", nfs_server_port=70000, nfs_server_extra_clients=["cafe"],
                     nfs_server_exports=[{"path": "/srv/a", "access": "rx", "clients": ["999.1.1.1"]}, {"pat": "/x"}])
    assert len(found) == 7, found
    for wanted in ("nfs_server_implementation", "nfs_server_port", "nfs_server_extra_clients has",
                   "nfs_server_exports[0] (/srv/a): access", "nfs_server_exports[0] (/srv/a): clients has",
                   "nfs_server_exports[1]: path is not set", 'nfs_server_exports[1]: unknown key "pat" (did you mean '
                   "path?)"):
        assert any(wanted in p for p in found), (wanted, found)


def test_no_client_at_all_is_refused():
    found = problems(members=[], nfs_server_exports=[SHARED, {"path": "/srv/b", "clients": ["10.0.0.0/8"]}])
    assert found == [
        "nfs_server on nfs1: no client address to export /srv/rayfleet/shared to: the cluster plan lists no address "
        "of a ray_head or ray_worker host, and neither nfs_server_extra_clients nor the export's clients name one. "
        "Expected the cluster's hosts in groups ray_head and ray_worker with their facts gathered in the same run "
        "(playbooks/storage.yml gathers them), or nfs_server_extra_clients."]
    # the extra clients, or an export's own, are enough
    assert plan(members=[], nfs_server_extra_clients=["192.0.2.0/24"])["cluster_clients"] == ["192.0.2.0/24"]
    (export,) = plan(members=[], nfs_server_exports=[dict(SHARED, clients=["192.0.2.9"])])["exports"]
    assert export["clients"] == ["192.0.2.9"] and export["exports_line"] == f"/srv/rayfleet/shared 192.0.2.9{RW} "


def test_bad_cluster_addresses_are_named():
    assert problems(members=["10.89.0.2", "head.example"]) == [
        'nfs_server on nfs1: a cluster host\'s address "head.example" is not an IP address.']
    assert "the cluster's addresses are" in problems(members={"head": ["10.89.0.2"]})[0]


PLAN = {"cluster": {"sources": ["10.89.0.2", "fd00::2"]}}


def test_the_cluster_sources_are_the_hosts_own_plan_else_the_heads():
    groups = {"ray_head": ["head"], "ray_worker": ["w1"], "nfs_server": ["nfs1", "w1"]}
    plans = {"w1": {"cluster": {"sources": ["10.89.0.3"]}}, "head": PLAN}
    # a member reads its own plan
    assert run_cluster_sources("w1", plans.get, groups, {}.get) == (["10.89.0.3"], "the cluster plan of w1")
    # a host outside the cluster reads the head's; a skipped plan (no cluster) is no plan
    assert run_cluster_sources("nfs1", {**plans, "nfs1": {"skipped": True}}.get, groups, {}.get) == (
        ["10.89.0.2", "fd00::2"], "the cluster plan of head")


def test_the_cluster_sources_without_a_plan_come_from_the_members_facts():
    groups = {"ray_head": ["head"], "ray_worker": ["w1"]}
    hostvars = {"head": {"ansible_facts": {"all_ipv4_addresses": ["10.89.0.2"],
                                           "all_ipv6_addresses": ["fe80::1", "fd00::2"]}},
                "w1": {"ray_node_ip": "10.89.0.3"}}
    assert run_cluster_sources("nfs1", {}.get, groups, hostvars.get) == (
        ["10.89.0.2", "10.89.0.3", "fd00::2"], "the members' facts (no cluster plan in this run)")


def test_the_clusters_networks_are_its_clients_with_network_membership():
    got = plan(members=["10.89.0.0/24", "fd00::/64"])
    assert got["cluster_clients"] == ["10.89.0.0/24", "fd00::/64"]
    assert problems(members=["10.89.0.0/33"]) == [
        'nfs_server on nfs1: a cluster host\'s address "10.89.0.0/33" is not an IP address.']
