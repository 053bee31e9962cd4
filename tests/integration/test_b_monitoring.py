# SPDX-License-Identifier: GPL-3.0-or-later
"""Prometheus on the head (loopback only) scrapes every Ray node through Ray's service discovery and every node
exporter; a Ray metric is queryable through its HTTP API."""

from __future__ import annotations

import json
import time
import urllib.parse

from conftest import SANDBOX, inventory_ips, node_ip

testinfra_hosts = [f"ansible://{SANDBOX}-head"]
PROM = "http://127.0.0.1:9090"


def api(host, path: str) -> dict:
    out = host.run(f"curl -sf '{PROM}{path}'")
    assert out.rc == 0, f"Prometheus API {path}: rc={out.rc} {out.stderr}"
    body = json.loads(out.stdout)
    assert body["status"] == "success", body
    return body["data"]


def test_prometheus_listens_on_loopback_only(host):
    assert host.service("prometheus").is_running and host.service("prometheus").is_enabled
    assert host.socket("tcp://127.0.0.1:9090").is_listening
    assert not host.socket(f"tcp://{node_ip(host)}:9090").is_listening
    assert not host.socket("tcp://0.0.0.0:9090").is_listening


def test_every_ray_node_and_node_exporter_is_scraped(host, request):
    ips = sorted(inventory_ips(request).values())
    deadline = time.monotonic() + 90  # first scrapes happen within a scrape interval (15 s) of start
    while True:
        targets = api(host, "/api/v1/targets?state=active")["activeTargets"]
        up = {(t["labels"]["job"], t["labels"]["instance"].rsplit(":", 1)[0]) for t in targets if t["health"] == "up"}
        want = {("ray", ip) for ip in ips} | {("node", ip) for ip in ips}
        if want <= up:
            break
        assert time.monotonic() < deadline, f"not up after 90 s: {sorted(want - up)}; targets: {targets}"
        time.sleep(3)


def test_a_ray_metric_is_queryable(host, request):
    ips = sorted(inventory_ips(request).values())
    query = urllib.parse.quote('count by (instance) (ray_node_cpu_count)')
    deadline = time.monotonic() + 60
    while True:
        result = api(host, f"/api/v1/query?query={query}")["result"]
        seen = sorted(r["metric"]["instance"].rsplit(":", 1)[0] for r in result)
        if seen == ips:
            break
        assert time.monotonic() < deadline, f"ray_node_cpu_count from {seen}, expected {ips}"
        time.sleep(3)
