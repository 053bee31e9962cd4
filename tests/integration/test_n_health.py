# SPDX-License-Identifier: GPL-3.0-or-later
"""Node health: worker1's health timer, its interval shortened and draining on, finds a site script in
/etc/rayfleet/health.d failing and drains the node in Ray, which then places no task there; the state file and the
metric (on the node and through Prometheus) name the failed check. Once the script passes again the next run restarts
the node's unit: it rejoins with a new node id and takes work, the metric is 1 again, and with the script removed
its check is no longer reported. No other node's id changes. The ray stage is
applied again with the inventory's values afterwards (the timer back to its interval, draining off in the sandbox)."""

from __future__ import annotations

import json
import shlex
import time
import urllib.parse

import pytest
from conftest import (
    DASHBOARD,
    PYTHON_AS_RAY,
    RAY,
    RAY_DEFAULTS,
    SANDBOX,
    head_host,
    inventory_ips,
    node_ip,
    ray_nodes,
    run_site,
    wait,
    wait_for_cluster,
)
from test_b_monitoring import api as prometheus_api

# Not in make test, to keep it well under 30 minutes (make test-full runs it): the checks, the drain and the
# recovery decisions are unit-tested (tests/unit/test_health.py); this end-to-end round takes about 3 minutes.
pytestmark = pytest.mark.extended

testinfra_hosts = [f"ansible://{SANDBOX}-worker1"]
INTERVAL = 15
SCRIPT_NAME = "50-rayfleet-verify"
SCRIPT = f"/etc/rayfleet/health.d/{SCRIPT_NAME}"
CHECK = f"script:{SCRIPT_NAME}"
STATE = "/etc/rayfleet/health.json"
PROM = f"{RAY_DEFAULTS['ray_health_textfile_dir']}/rayfleet-health.prom"
TIMER = "/etc/systemd/system/rayfleet-health.timer"
# A task pinned to one node (its node:<ip> resource), asked for with a time limit: whether Ray places it there
PINNED = """
import ray
ray.init(address="{gcs}")
@ray.remote(max_retries=0, resources={{"node:{ip}": 0.01}})
def where():
    return ray.get_runtime_context().get_node_id()
try:
    print("RESULT placed", ray.get(where.remote(), timeout={timeout}), flush=True)
except ray.exceptions.GetTimeoutError:
    print("RESULT not placed", flush=True)
"""


def state(host) -> dict:
    out = host.run(f"sudo cat {STATE}")
    return json.loads(out.stdout) if out.rc == 0 else {}


def metric(host, check: str) -> str | None:
    """The value the textfile collector file gives rayfleet_health_ok for one check of this host's node."""
    text = host.run(f"cat {PROM}").stdout
    prefix = f'rayfleet_health_ok{{check="{check}",node="{node_ip(host)}",rayfleet_cluster="default"}} '
    return next((line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)), None)


def prometheus_value(head, check: str, ip: str) -> str | None:
    query = urllib.parse.quote(f'rayfleet_health_ok{{check="{check}",node="{ip}"}}')
    result = prometheus_api(head, f"/api/v1/query?query={query}")["result"]
    return result[0]["value"][1] if result else None


def node_entry(head, node_id: str) -> dict:
    out = head.run(f"cd /tmp && {RAY} list nodes --detail --format json --limit 1000 --address {DASHBOARD}")
    assert out.rc == 0, out.stderr
    return next(n for n in json.loads(out.stdout) if n["node_id"] == node_id)


def pinned(head, ip: str, timeout: float) -> str:
    script = PINNED.format(gcs=f"{node_ip(head)}:{RAY_DEFAULTS['ray_gcs_port']}", ip=ip, timeout=timeout)
    out = head.run(f"{PYTHON_AS_RAY} -c {shlex.quote(script)}")
    return next((line for line in out.stdout.splitlines() if line.startswith("RESULT")), out.stdout + out.stderr)


def alive(head, head_ip: str) -> dict[str, str]:
    return {n["node_ip"]: n["node_id"] for n in ray_nodes(head, head_ip) if n["state"] == "ALIVE"}


def test_a_failing_site_check_drains_the_node_and_a_passing_one_brings_it_back(host, request):
    head = head_host(request)
    head_ip, ip = node_ip(head), node_ip(host)
    ips = inventory_ips(request)
    limit = ("--tags", "ray", "--limit", f"{SANDBOX}-worker1")
    host.run(f"sudo rm -f {SCRIPT}")
    # A run limited to worker1 reads the other hosts' facts (their host keys) from the fact cache: a plain site.yml
    # fills it, whatever ran before this module
    setup = run_site()
    assert setup.returncode == 0, setup.stdout[-3000:]
    before = alive(head, head_ip)
    others = {k: v for k, v in before.items() if k != ip}
    old_id = before[ip]
    on = run_site(*limit, "-e", f"ray_health_interval_s={INTERVAL}", "-e", "ray_health_drain=true")
    try:
        assert on.returncode == 0, on.stdout[-3000:]
        timer = host.service("rayfleet-health.timer")
        assert timer.is_running and timer.is_enabled
        assert f"OnUnitActiveSec={INTERVAL}\n" in host.file(TIMER).content_string
        assert host.run("systemctl show -p User --value rayfleet-health.service").stdout.strip() in ("", "root")
        assert host.file("/etc/rayfleet/health.d").mode == 0o755 and host.file("/etc/rayfleet/health.d").user == "root"
        started = time.time()

        # A healthy run first: every check passes or does not apply (no GPU in the sandbox)
        first = wait("a health run after the timer was set", lambda: (s := state(host)).get("timestamp", 0) > started
                     and s, 2 * INTERVAL + 30)
        assert first["ok"], json.dumps(first, indent=2)
        checks = {c["name"]: c for c in first["nodes"][0]["checks"]}
        assert checks["gpu"]["state"] == "n/a" and checks["raylet"]["state"] == "ok", checks
        assert metric(host, "raylet") == "1"

        # The site's check fails: the node is drained within two intervals
        put = host.run(f"printf '#!/bin/sh\\necho checking ib0\\necho \"ib0: link down\" >&2\\nexit 1\\n' "
                       f"| sudo tee {SCRIPT} >/dev/null && sudo chmod 0755 {SCRIPT}")
        assert put.rc == 0, put.stderr
        failed_at = time.monotonic()
        drained = wait("the drain", lambda: (s := state(host)) and s["nodes"][0].get("drained") and s,
                       2 * INTERVAL + 20)
        entry = drained["nodes"][0]
        assert entry["drained"]["node_id"] == old_id, entry
        check = next(c for c in entry["checks"] if c["name"] == CHECK)
        assert check == {"name": CHECK, "ok": False, "state": "failed",
                         "reason": "exit 1: checking ib0 | ib0: link down"}, entry["checks"]
        assert drained["ok"] is False and entry["ok"] is False
        # Ray's view: the node no longer takes work (idle, it leaves the cluster at once, with the reason)
        gone = wait("Ray's record of the drain", lambda: (n := node_entry(head, old_id))["state"] == "DEAD" and n,
                    30)
        assert "rayfleet health: " in (gone.get("state_message") or "") and CHECK in gone["state_message"], gone
        assert pinned(head, ip, 10) == "RESULT not placed"
        print(f"\n{ip}: drained {time.monotonic() - failed_at:.1f} s after the site's check began to fail")
        assert metric(host, CHECK) == "0"
        assert wait("the metric through Prometheus", lambda: prometheus_value(head, CHECK, ip) == "0", 60)

        # The check passes again: the node is restarted and rejoins with a new node id
        assert host.run(f"printf '#!/bin/sh\\necho ib0 up\\n' | sudo tee {SCRIPT} >/dev/null").rc == 0
        passed_at = time.monotonic()
        new_id = wait("the node back in the cluster", lambda: (n := alive(head, head_ip).get(ip)) != old_id and n,
                      2 * INTERVAL + 45)
        print(f"{ip}: back as a new node {time.monotonic() - passed_at:.1f} s after the check passed again")
        back = wait("the health record of the restart", lambda: (s := state(host)) and s["ok"]
                    and s["nodes"][0]["node_id"] == new_id and s, 2 * INTERVAL + 20)
        entry = back["nodes"][0]
        assert entry["drained"] is None and entry["restarted"]["unit"] == "ray-worker.service", entry
        assert entry["restarted"]["drained_node_id"] == old_id
        raylet = next(c for c in entry["checks"] if c["name"] == "raylet")
        assert raylet["reason"] == f"node {new_id[:12]} alive", raylet  # alive, and not draining
        assert next(c for c in entry["checks"] if c["name"] == CHECK)["reason"] == "ib0 up"
        assert node_entry(head, new_id).get("state_message") is None
        assert pinned(head, ip, 60) == f"RESULT placed {new_id}"
        assert metric(host, CHECK) == "1" and metric(host, "raylet") == "1"
        assert wait("the metric through Prometheus", lambda: prometheus_value(head, CHECK, ip) == "1", 60)

        # The script removed, its check is no longer reported; the node stays
        assert host.run(f"sudo rm -f {SCRIPT}").rc == 0
        wait("the check gone from the metrics", lambda: metric(host, CHECK) is None, 2 * INTERVAL + 20)
        assert alive(head, head_ip).get(ip) == new_id and state(host)["ok"]
        assert {k: v for k, v in alive(head, head_ip).items() if k != ip} == others, "another node was restarted"
    finally:
        host.run(f"sudo rm -f {SCRIPT}")
        off = run_site("--limit", f"{SANDBOX}-worker1")  # whole: the --tags run left the ray stage unrecorded
        assert off.returncode == 0, off.stdout[-3000:]
        assert f"OnUnitActiveSec={RAY_DEFAULTS['ray_health_interval_s']}\n" in host.file(TIMER).content_string
        wait_for_cluster(head, head_ip, list(ips.values()), timeout=120)
