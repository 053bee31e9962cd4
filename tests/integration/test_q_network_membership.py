# SPDX-License-Identifier: GPL-3.0-or-later
"""Network membership on real hosts: switched on for the running cluster (ray_membership network with the cluster's
network), the firewall's sets, the from= of SSH trust's key and the NFS exports hold that network instead of the
members' addresses, a host outside it reaches no Ray port while one inside reaches them (the token is the lock:
test_7_auth), and switching back to static membership restores the member lists - each switch converges and keeps
every Ray node id."""

from __future__ import annotations

import ipaddress
import json

from conftest import container, head_host, inventory_ips, node_ip, podman, ray_nodes, run_site, stranger

testinfra_hosts = ["ansible://ray_head"]

KEYS = "/var/lib/rayfleet/.ssh/authorized_keys"
GCS_PORT = 6379
GANESHA = "/etc/ganesha/ganesha.conf"


def covering_network(addresses: list[str]) -> ipaddress.IPv4Network:
    """The smallest network holding every address."""
    for prefix in range(30, 8, -1):
        net = ipaddress.ip_network(f"{addresses[0]}/{prefix}", strict=False)
        if all(ipaddress.ip_address(a) in net for a in addresses):
            return net
    raise AssertionError(f"no network holds {addresses}")


def node_ids(head) -> dict[str, str]:
    return {n["node_ip"]: n["node_id"] for n in ray_nodes(head, node_ip(head)) if n["state"] == "ALIVE"}


def cluster_set(member: str) -> str:
    return podman("exec", container(member), "nft", "list", "set", "inet", "rayfleet", "cluster_v4")


def reaches(run, address: str, port: int) -> bool:
    probe = run(["python3", "-c", "import socket, sys; s = socket.socket(); s.settimeout(3); "
                 f"sys.exit(s.connect_ex(({address!r}, {port})))"])
    return probe.returncode == 0


def test_switching_to_network_membership_and_back_keeps_every_node(request):
    head = head_host(request)
    ips = inventory_ips(request)
    net = covering_network(sorted(ips.values()))
    before = node_ids(head)
    assert sorted(before) == sorted(ips.values())
    switched = run_site("-e", json.dumps({"ray_membership": "network", "ray_cluster_networks": [str(net)]}))
    try:
        assert switched.returncode == 0, switched.stdout[-4000:]
        assert node_ids(head) == before, "a Ray node restarted when the membership changed"
        for member, ip in ips.items():
            nft = cluster_set(member)
            assert str(net) in nft and ip not in nft.replace(str(net), ""), (member, nft)
            keys = podman("exec", container(member), "cat", KEYS)
            assert f'from="{net}"' in keys, (member, keys)
        # the sandbox's NFS server (NFS-Ganesha on the head) exports to the network
        ganesha = podman("exec", container(next(m for m in ips if m.endswith("head"))), "cat", GANESHA)
        assert str(net) in ganesha, ganesha[-2000:]
        # the fence: a host of the sandbox network outside the cluster's network is reset on every Ray port, one
        # inside it gets through to the GCS (where only the cluster's token lets it in)
        subnet = ipaddress.ip_network(f"{node_ip(head)}/24", strict=False)
        outside = next(str(a) for a in reversed(list(subnet.hosts())) if a not in net)
        inside = next(str(a) for a in net.hosts() if str(a) not in ips.values())
        with stranger(outside) as run:
            assert not reaches(run, node_ip(head), GCS_PORT), f"{outside}, outside {net}, reached the GCS"
        with stranger(inside) as run:
            assert reaches(run, node_ip(head), GCS_PORT), f"{inside}, inside {net}, did not reach the GCS"
    finally:
        back = run_site()
    assert back.returncode == 0, back.stdout[-4000:]
    assert node_ids(head) == before, "a Ray node restarted when the membership changed back"
    for member in ips:
        nft = cluster_set(member)
        assert str(net) not in nft and all(address in nft for address in ips.values()), (member, nft)
        assert f'from="{net}"' not in podman("exec", container(member), "cat", KEYS)


def test_network_membership_without_the_token_is_refused_before_anything_changes(request):
    head = head_host(request)
    net = covering_network(sorted(inventory_ips(request).values()))
    proc = run_site("-e", json.dumps({"ray_membership": "network", "ray_cluster_networks": [str(net)],
                                      "ray_auth_mode": "disabled"}))
    assert proc.returncode != 0
    assert ("ray_membership is \"network\"; expected static unless ray_auth_mode is token (it is \"disabled\")"
            in proc.stdout), proc.stdout[-3000:]
    assert sorted(node_ids(head)) == sorted(inventory_ips(request).values())
