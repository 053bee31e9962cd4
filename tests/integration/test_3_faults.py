# SPDX-License-Identifier: GPL-3.0-or-later
"""Faults, injected for real: a killed raylet, a restarted worker host, a restarted head host.

Each test injects the fault from the controller (podman), then watches Ray's own view of the cluster
from the head until every inventory node is alive again — as a new Ray node where the old one died.
"""

from __future__ import annotations

import time

from conftest import (
    container,
    inventory_ips,
    journal,
    node_ip,
    podman,
    ray_nodes,
    wait_for_cluster,
)

testinfra_hosts = ["ansible://ray_head"]


def _worker(request) -> tuple[str, str]:
    ips = inventory_ips(request)
    workers = sorted(name for name in ips if not name.endswith("head"))
    assert workers, "fault tests need at least one worker"
    return workers[0], ips[workers[0]]


def _ids_at(nodes: list[dict], ip: str) -> set[str]:
    return {n["node_id"] for n in nodes if n["node_ip"] == ip and n["state"] == "ALIVE"}


def _wait_ssh(host, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if host.run("true").rc == 0:
                return
        except Exception:  # connection refused while the container boots
            pass
        time.sleep(1)


def test_killed_raylet_is_restarted_by_systemd_and_rejoins(host, request):
    name, ip = _worker(request)
    before = ray_nodes(host, node_ip(host))
    old = _ids_at(before, ip)
    assert old, f"{name} not alive before the fault"
    podman("exec", container(name), "pkill", "-9", "-x", "raylet")
    took = wait_for_cluster(host, node_ip(host), sorted(inventory_ips(request).values()), 60,
                            exclude_ids=old)[0]
    restarts = podman("exec", container(name), "systemctl", "show", "-p", "NRestarts", "--value",
                      "ray-worker.service").strip()
    assert int(restarts) >= 1, "systemd did not restart ray-worker after its raylet was killed"
    print(f"\n{name}: raylet killed -> rejoined as a new node in {took:.1f} s (NRestarts={restarts})")


def test_restarted_worker_host_rejoins_at_boot(host, request):
    name, ip = _worker(request)
    old = _ids_at(ray_nodes(host, node_ip(host)), ip)
    start = time.monotonic()
    podman("restart", "--time", "10", container(name))
    took = wait_for_cluster(host, node_ip(host), sorted(inventory_ips(request).values()),
                            120 - (time.monotonic() - start), exclude_ids=old)[0]
    print(f"\n{name}: host restarted -> rejoined in {time.monotonic() - start:.1f} s ({took:.1f} s after restart)")


def test_restarted_head_host_brings_the_whole_cluster_back(host, request):
    ips = inventory_ips(request)
    head_name = next(n for n in ips if n.endswith("head"))
    old = {n["node_id"] for n in ray_nodes(host, node_ip(host)) if n["state"] == "ALIVE"}
    start, since = time.monotonic(), f"@{int(time.time())}"
    podman("restart", "--time", "10", container(head_name))
    _wait_ssh(host)
    try:
        wait_for_cluster(host, node_ip(host), sorted(ips.values()),
                         120 - (time.monotonic() - start), exclude_ids=old)
    except BaseException:
        print(journal(host, "ray-head.service"))
        raise
    total = time.monotonic() - start
    print(f"\nhead restarted -> {len(ips)} nodes alive again in {total:.1f} s")
    # Each worker's Ray exited by itself (refused by the new GCS) and came back at once: nothing Ray left behind
    # (its dashboard agent has been seen to ignore SIGTERM) held the unit in its 30 s stop timeout.
    for name in (n for n in ips if n != head_name):
        log = podman("exec", container(name), "journalctl", "--no-pager", "-u", "ray-worker.service",
                     "--since", since)
        assert "timed out" not in log, f"{name}: the worker's restart waited out a stop timeout:\n{log[-3000:]}"
