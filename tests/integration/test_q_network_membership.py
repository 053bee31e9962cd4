# SPDX-License-Identifier: GPL-3.0-or-later
"""Network membership on real hosts: switched on for the running cluster (ray_membership network with the cluster's
network), the firewall's sets and the NFS exports hold that network instead of the members' addresses, SSH trust is
by certificate (every host key and the cluster key signed by the cluster's authority, the user certificate valid
from the network only, no member listed in known_hosts or authorized_keys), a host outside the network reaches no
Ray port while one inside reaches them (the token is the lock: test_7_auth), and switching back to static membership
restores the member lists - each switch converges and keeps every Ray node id."""

from __future__ import annotations

import ipaddress
import json
import re

from conftest import container, head_host, inventory_ips, node_ip, podman, ray_nodes, run_site, stranger, wait

testinfra_hosts = ["ansible://ray_head"]

SSH_DIR = "/var/lib/rayfleet/.ssh"
KEYS = f"{SSH_DIR}/authorized_keys"
HOST_CERT = "/etc/ssh/ssh_host_ed25519_key-cert.pub"
TARGETS = "/var/lib/rayfleet/targets/default/node.json"
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


def sh(member: str, script: str) -> str:
    return podman("exec", container(member), "sh", "-c", script)


def ssh_from_head(head, target: str) -> str:
    """The head's Ray user logs in to target as itself, strict host key checking on (its ~/.ssh/config)."""
    return sh(head, f"runuser -u rayfleet -- ssh -o BatchMode=yes -o ConnectTimeout=10 rayfleet@{target} hostname")


def discovered_node_exporters(head) -> set[str]:
    """The IPs of the node exporters Prometheus scrapes up from the discovered targets file."""
    found = json.loads(sh(head, "curl -sf 'http://127.0.0.1:9090/api/v1/targets?state=active'"))
    return {t["labels"]["instance"].rsplit(":", 1)[0] for t in found["data"]["activeTargets"]
            if t["labels"]["job"] == "node" and t["health"] == "up"
            and t["discoveredLabels"].get("__meta_filepath") == TARGETS}


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
        heads = [m for m in ips if m.endswith("head")]
        for member, ip in ips.items():
            nft = cluster_set(member)
            assert str(net) in nft and ip not in nft.replace(str(net), ""), (member, nft)
            # trust by certificate: no member's key is listed, the host key is signed for the member's address
            assert "rayfleet-cluster" not in sh(member, f"cat {KEYS}"), member
            known = sh(member, f"cat {SSH_DIR}/known_hosts")
            assert "@cert-authority * ssh-ed25519 " in known and not any(a in known for a in ips.values()), known
            cert = sh(member, f"ssh-keygen -L -f {HOST_CERT}")
            assert "host certificate" in cert and ip in cert.split("Principals:")[1], cert
            assert ssh_from_head(heads[0], ip).strip() == container(member), member
        # the node exporters are discovered from Ray's node table on the monitoring host (the head), not listed
        listed = {g["targets"][0].rsplit(":", 1)[0] for g in json.loads(sh(heads[0], f"cat {TARGETS}"))}
        assert listed == set(ips.values()), listed
        assert wait("every node exporter scraped from the discovered targets",
                    lambda: discovered_node_exporters(heads[0]) >= set(ips.values()) or None, 90)
        user_cert = sh(heads[0], f"ssh-keygen -L -f {SSH_DIR}/id_ed25519-cert.pub")
        assert "user certificate" in user_cert and f"source-address {net}" in user_cert, user_cert
        # SSH trust applied again in full changes nothing: no certificate is signed again, no file rewritten
        again = run_site("--tags", "ssh", "-e", json.dumps({"ray_membership": "network",
                                                            "ray_cluster_networks": [str(net)], "rayfleet_full": True}))
        assert again.returncode == 0, again.stdout[-4000:]
        counts = re.findall(r"^\S+\s+:\s+ok=\d+\s+changed=(\d+)", again.stdout, re.M)
        assert len(counts) >= len(ips) and set(counts) == {"0"}, again.stdout[-3000:]
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
        assert "rayfleet-cluster" in sh(member, f"cat {KEYS}"), member
        assert "@cert-authority" not in sh(member, f"cat {SSH_DIR}/known_hosts"), member
        assert sh(member, f"test -e {HOST_CERT} && echo present || echo absent").strip() == "absent", member
        assert ssh_from_head(heads[0], ips[member]).strip() == container(member), member
    assert sh(heads[0], f"test -e {TARGETS} && echo present || echo absent").strip() == "absent"
    assert sh(heads[0], "grep -c rayfleet/targets /etc/prometheus/prometheus.yml || true").strip() == "0"


def test_network_membership_without_the_token_is_refused_before_anything_changes(request):
    head = head_host(request)
    net = covering_network(sorted(inventory_ips(request).values()))
    proc = run_site("-e", json.dumps({"ray_membership": "network", "ray_cluster_networks": [str(net)],
                                      "ray_auth_mode": "disabled"}))
    assert proc.returncode != 0
    assert ("ray_membership is \"network\"; expected static unless ray_auth_mode is token (it is \"disabled\")"
            in proc.stdout), proc.stdout[-3000:]
    assert sorted(node_ids(head)) == sorted(inventory_ips(request).values())
