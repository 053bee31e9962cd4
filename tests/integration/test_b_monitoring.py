# SPDX-License-Identifier: GPL-3.0-or-later
"""Prometheus on the head (loopback only) scrapes every Ray node through Ray's service discovery and every node
exporter; a Ray metric is queryable through its HTTP API; the head's Ray dashboard reads that Prometheus (its own
health check says so), shows no Metrics tab for a Grafana the sandbox does not run (no Grafana repository is
reachable here), and writes the Grafana dashboards the monitoring role would provision."""

from __future__ import annotations

import json
import shlex
import time
import urllib.parse

from conftest import DASHBOARD, SANDBOX, TOKEN_PATH, inventory_ips, node_ip, run_site
from test_0_drift import changed, gates

testinfra_hosts = [f"ansible://{SANDBOX}-head"]
WORKER1 = f"{SANDBOX}-worker1"
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


def _node_targets(host, ip: str) -> dict[str, str]:
    """The node job's targets at ip: instance -> health."""
    targets = api(host, "/api/v1/targets?state=active")["activeTargets"]
    return {t["labels"]["instance"]: t["health"] for t in targets
            if t["labels"]["job"] == "node" and t["labels"]["instance"].rsplit(":", 1)[0] == ip}


def test_a_workers_own_node_exporter_port_is_scraped_there(host, request, tmp_path):
    """A worker's own monitoring_node_exporter_port (its inventory's, not the head's) moves its exporter and is an
    input of the head's monitoring stage through the cluster plan: the head's Prometheus scrapes the worker at the
    new port, up (its firewall opened it), and at the inventory's port again after the next plain run."""
    ip = inventory_ips(request)[WORKER1]
    extra = tmp_path / "worker1.yml"
    extra.write_text(json.dumps({"all": {"hosts": {WORKER1: {"monitoring_node_exporter_port": 9101}}}}))
    restored = False
    try:
        for args, port in ((("-i", str(extra)), 9101), ((), 9100)):
            proc = run_site(*args)
            assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
            ran = gates(proc)
            assert f"{SANDBOX}-head" in ran.get("monitoring", set()), ran
            assert changed(proc)[WORKER1] > 0, proc.stdout[-3000:]
            deadline = time.monotonic() + 90
            while _node_targets(host, ip) != {f"{ip}:{port}": "up"}:
                assert time.monotonic() < deadline, f"node target of {WORKER1}: {_node_targets(host, ip)}"
                time.sleep(3)
            restored = not args
    finally:
        if not restored:
            run_site()


def test_a_ray_metric_is_queryable(host, request):
    ips = sorted(inventory_ips(request).values())
    # This cluster's series (the monitoring role labels each cluster's Ray targets; test_j adds a second one)
    query = urllib.parse.quote('count by (instance) (ray_node_cpu_count{rayfleet_cluster="default"})')
    deadline = time.monotonic() + 60
    while True:
        result = api(host, f"/api/v1/query?query={query}")["result"]
        seen = sorted(r["metric"]["instance"].rsplit(":", 1)[0] for r in result)
        if seen == ips:
            break
        assert time.monotonic() < deadline, f"ray_node_cpu_count from {seen}, expected {ips}"
        time.sleep(3)


def _dashboard(host, path: str) -> dict:
    """GET on the head's dashboard (loopback) with the cluster's token, as the Ray user; its JSON body."""
    script = ("import json, sys, urllib.error, urllib.request\n"
              f"token = open({TOKEN_PATH!r}).read().strip()\n"
              f"req = urllib.request.Request({DASHBOARD + path!r}, headers={{'Authorization': 'Bearer ' + token}})\n"
              "try:\n    body = urllib.request.urlopen(req, timeout=20).read()\n"
              "except urllib.error.HTTPError as exc:\n    body = exc.read()\n"
              "print(body.decode())\n")
    out = host.run(f"sudo -u rayfleet python3 -c {shlex.quote(script)}")
    assert out.rc == 0, out.stderr
    return json.loads(out.stdout)


def test_the_ray_dashboard_reads_this_prometheus(host):
    settings = json.loads(host.file("/etc/rayfleet/ray-head.json").content_string)
    assert settings["env"]["RAY_PROMETHEUS_HOST"] == PROM
    health = _dashboard(host, "/api/prometheus_health")
    assert health["result"] is True and health["msg"] == "prometheus running", health


def test_no_grafana_means_no_metrics_tab(host):
    """Without monitoring_grafana the head's dashboard is told so (RAY_GRAFANA_HOST=DISABLED) instead of probing a
    Grafana at localhost:3000 that is not there."""
    settings = json.loads(host.file("/etc/rayfleet/ray-head.json").content_string)
    assert settings["env"]["RAY_GRAFANA_HOST"] == "DISABLED"
    health = _dashboard(host, "/api/grafana_health")
    assert health["result"] is True and health["msg"] == "Grafana disabled", health
    assert not host.service("grafana-server").is_running


def test_ray_writes_the_dashboards_grafana_would_provision(host):
    """The monitoring role's Grafana provisions <ray temp dir>/session_latest/metrics/grafana/dashboards: Ray's head
    writes its dashboards there at start."""
    boards = host.run("ls /tmp/ray/session_latest/metrics/grafana/dashboards")
    assert boards.rc == 0, boards.stderr
    names = boards.stdout.split()
    assert "default_grafana_dashboard.json" in names, names
    board = json.loads(host.file(f"/tmp/ray/session_latest/metrics/grafana/dashboards/{names[0]}").content_string)
    assert board.get("panels") or board.get("rows"), f"{names[0]} has no panels"
