# SPDX-License-Identifier: GPL-3.0-or-later
"""Two Ray clusters on the same sandbox hosts: the first (unnamed) and "teamb" (tests/integration/files/teamb.yml:
its own ports, token, temp dir, units and firewall table). Each sees only its own 3 nodes; a port of the first or
a head other than teamb's fails before anything changes; down.yml for teamb leaves the first cluster running."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
import yaml
from conftest import (
    RAY_DEFAULTS,
    ROOT,
    SANDBOX,
    VENV,
    ansible_env,
    head_host,
    inventory_ips,
    node_ip,
    ray_nodes,
    run_site,
    stranger,
)
from test_8_firewall import NODE_EXPORTER_PORT as NODE_EXPORTER
from test_8_firewall import _probe as probe
from test_8_firewall import ephemeral_listener
from test_b_monitoring import api as prometheus_api
from testinfra import get_host

TEAMB = ROOT / "tests/integration/files/teamb.yml"
B = yaml.safe_load(TEAMB.read_text())


def play(playbook: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", playbook, "-i", "inventories/sandbox", "-e", f"@{TEAMB}", *extra],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)


def teamb_nodes(head) -> list[dict]:
    cmd = head.run(f"cd /tmp && sudo -u rayfleet env RAY_AUTH_MODE=token "
                   f"RAY_AUTH_TOKEN_PATH=/etc/rayfleet/auth-token-teamb {VENV}/bin/ray list nodes "
                   "--format json --limit 100 "
                   f"--address http://127.0.0.1:{B['ray_dashboard_port']}")  # its dashboard, on the head's loopback
    assert cmd.rc == 0, cmd.stderr
    return json.loads(cmd.stdout)


def alive_ids(nodes: list[dict]) -> set[str]:
    return {n["node_id"] for n in nodes if n["state"] == "ALIVE"}


def changed(proc: subprocess.CompletedProcess) -> int:
    return sum(int(n) for n in re.findall(r"changed=(\d+)", proc.stdout))


# What teamb leaves on a host once down.yml stopped it: its units, settings, token, firewall (table, rules, unit,
# its hosts in the shared ephemeral table), temp dir and the monitoring host's record of its scrape targets
TEAMB_FILES = ["/etc/systemd/system/ray-teamb-head.service", "/etc/systemd/system/ray-teamb-worker.service",
               "/etc/systemd/system/rayfleet-firewall-teamb.service", "/etc/rayfleet/ray-teamb-head.json",
               "/etc/rayfleet/ray-teamb-worker.json", "/etc/rayfleet/auth-token-teamb",
               "/etc/nftables.rayfleet-teamb.nft", "/etc/rayfleet/firewall.d/rayfleet_teamb.nft",
               "/etc/rayfleet/monitoring-teamb.json", "/tmp/ray-teamb"]


def remove_teamb(request) -> None:
    """Take teamb off the sandbox's hosts, so that later modules find the hosts as this module found them (a stopped
    cluster's settings still claim its ports: a later node on them would fail the collision check)."""
    down = play("playbooks/down.yml", "--tags", "ray")
    assert down.returncode == 0, down.stdout[-3000:]
    for name in inventory_ips(request):
        host = get_host(f"ansible://{name}", ansible_inventory=request.config.option.ansible_inventory)
        host.run("sudo systemctl disable --now rayfleet-firewall-teamb.service")
        assert host.run(f"sudo rm -rf {' '.join(TEAMB_FILES)}").rc == 0
        host.run("sudo nft delete table inet rayfleet_teamb")
        reload = "sudo systemctl daemon-reload && sudo systemctl restart rayfleet-firewall-ephemeral.service"
        assert host.run(reload).rc == 0
        assert "rayfleet_teamb" not in host.run("sudo nft list tables").stdout
    # the head's Prometheus without teamb's scrape pool
    proc = subprocess.run(["ansible-playbook", "playbooks/monitoring.yml", "-i", "inventories/sandbox"], cwd=ROOT,
                          env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # and what teamb's stages rewrote that the first cluster shares (the ephemeral ports' firewall unit) as the first
    # cluster's site.yml has it
    site = run_site()
    assert site.returncode == 0, site.stdout[-3000:]


@pytest.fixture(scope="module")
def two_clusters(request):
    head = head_host(request)
    first = alive_ids(ray_nodes(head, node_ip(head)))
    try:
        for playbook in ("playbooks/firewall.yml", "playbooks/ray.yml"):
            proc = play(playbook)
            assert proc.returncode == 0, f"{playbook}:\n{proc.stdout[-4000:]}"
        yield head, first
    finally:
        remove_teamb(request)


def test_each_cluster_sees_its_own_nodes_only(two_clusters, request):
    head, first = two_clusters
    ips = sorted(inventory_ips(request).values())
    b_nodes = [n for n in teamb_nodes(head) if n["state"] == "ALIVE"]
    assert sorted(n["node_ip"] for n in b_nodes) == ips
    assert alive_ids(ray_nodes(head, node_ip(head))) == first, "the first cluster's nodes changed"
    assert not alive_ids(b_nodes) & first
    assert {n["resources_total"].get("CPU") for n in b_nodes} == {float(B["ray_num_cpus"])}


def test_names_keep_units_files_and_firewall_apart(two_clusters, request):
    head = two_clusters[0]
    for name in inventory_ips(request):
        role = "head" if name.endswith("-head") else "worker"
        host = head if role == "head" else get_host(f"ansible://{name}",
                                                    ansible_inventory=request.config.option.ansible_inventory)
        assert host.run(f"systemctl is-active ray-{role}.service ray-teamb-{role}.service").stdout.split() == [
            "active", "active"], name
        assert host.run("sudo stat -c '%U %a' /etc/rayfleet/auth-token-teamb").stdout.strip() == "rayfleet 600"
        settings = json.loads(host.check_output(f"cat /etc/rayfleet/ray-teamb-{role}.json"))
        assert settings["temp_dir"] == "/tmp/ray-teamb" and settings["ports"]["gcs"] == B["ray_gcs_port"]
        tables = host.check_output("sudo nft list tables")
        assert "table inet rayfleet\n" in tables + "\n" and "table inet rayfleet_teamb" in tables, tables
    a = head.check_output("sudo cat /etc/rayfleet/auth-token")
    b = head.check_output("sudo cat /etc/rayfleet/auth-token-teamb")
    assert a and b and a != b, "the two clusters share a token"


def test_the_shared_host_ports_admit_both_clusters_hosts_only(two_clusters, request):
    """NCCL's and gloo's sockets sit in the host's ephemeral range, and node exporter serves every cluster's
    Prometheus: both clusters restrict them, in one shared table. A host only teamb admits (.251) reaches a port-0
    listener and node exporter on a shared host; a host neither admits (.250) is reset."""
    ips = inventory_ips(request)
    name = f"{SANDBOX}-worker1"
    worker = get_host(f"ansible://{name}", ansible_inventory=request.config.option.ansible_inventory)
    subnet = ips[name].rsplit(".", 1)[0]
    assert f"{subnet}.251" in worker.check_output("sudo nft list set inet rayfleet_ephemeral members_v4")
    with ephemeral_listener(worker) as port:
        seen = {}
        for last in ("251", "250"):
            with stranger(f"{subnet}.{last}") as run:
                seen[last] = [run(["bash", "-c", probe(ips[name], p)]).stdout.strip() for p in (port, NODE_EXPORTER)]
    assert seen == {"251": [f"{port}:open", f"{NODE_EXPORTER}:open"],
                    "250": [f"{port}:closed", f"{NODE_EXPORTER}:closed"]}, seen


def test_a_port_of_the_other_cluster_fails_before_anything_changes(two_clusters):
    head, first = two_clusters
    before = alive_ids(teamb_nodes(head))
    proc = play("site.yml", "--tags", "ray", "-e", "ray_gcs_port=6379")
    assert proc.returncode != 0 and changed(proc) == 0, proc.stdout[-3000:]
    words = "port(s) 6379 are also cluster (unnamed)'s on this host (/etc/rayfleet/ray-"
    assert words in proc.stdout, proc.stdout[-3000:]
    assert alive_ids(teamb_nodes(head)) == before and alive_ids(ray_nodes(head, node_ip(head))) == first


def test_a_second_cluster_claiming_the_name_fails_before_anything_changes(two_clusters, request):
    head = two_clusters[0]
    other_head = inventory_ips(request)[f"{SANDBOX}-worker1"]
    proc = play("site.yml", "--tags", "ray", "-e", f"ray_head_address={other_head}")
    assert proc.returncode != 0 and changed(proc) == 0, proc.stdout[-3000:]
    assert (f"the name is already the cluster whose head is {node_ip(head)}:{B['ray_gcs_port']}" in proc.stdout
            and "another cluster claims this name" in proc.stdout), proc.stdout[-3000:]


def test_one_prometheus_scrapes_both_clusters(two_clusters, request):
    """One head, one Prometheus: teamb's monitoring run adds teamb's Ray nodes (scrape pool ray-teamb, label
    rayfleet_cluster=teamb; Ray's own service discovery keeps job="ray" for Ray's dashboards) and keeps the first
    cluster's (pool ray, rayfleet_cluster=default)."""
    head = two_clusters[0]
    proc = play("playbooks/monitoring.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]
    ips = sorted(inventory_ips(request).values())
    want = ({("ray", "default", f"{ip}:{RAY_DEFAULTS['ray_metrics_export_port']}") for ip in ips}
            | {("ray-teamb", "teamb", f"{ip}:{B['ray_metrics_export_port']}") for ip in ips})
    deadline = time.monotonic() + 90
    while True:
        targets = prometheus_api(head, "/api/v1/targets?state=active")["activeTargets"]
        up = {(t["scrapePool"], t["labels"].get("rayfleet_cluster"), t["labels"]["instance"])
              for t in targets if t["health"] == "up" and t["labels"]["job"] == "ray"}
        if want <= up:
            break
        assert time.monotonic() < deadline, f"not up after 90 s: {sorted(want - up)}"
        time.sleep(3)


def test_down_for_one_cluster_leaves_the_other(two_clusters, request):
    head, first = two_clusters
    proc = play("playbooks/down.yml", "--tags", "ray")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert head.run("systemctl is-active ray-teamb-head.service").stdout.strip() == "inactive"
    assert head.run("pgrep -u rayfleet -f /tmp/ray-teamb/").rc == 1
    assert alive_ids(ray_nodes(head, node_ip(head))) == first
