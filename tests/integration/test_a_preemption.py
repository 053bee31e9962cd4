# SPDX-License-Identifier: GPL-3.0-or-later
"""Spot interruption: a worker's preemption watcher sees the notice on a fake IMDSv2 endpoint (loopback, inside
the worker) and drains its Ray node; Ray marks it so. The worker is restored afterwards."""

from __future__ import annotations

import datetime as dt
import json
import re
import time

import pytest
from conftest import (
    DASHBOARD,
    RAY,
    ROOT,
    SANDBOX,
    container,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    run_site,
    wait_for_cluster,
)

# Not in make test, to keep it well under 30 minutes (make test-full runs it): the watcher's notice reading and
# drain decisions are unit-tested (tests/unit/test_spot.py); this end-to-end drain takes about 50 s.
pytestmark = pytest.mark.extended

testinfra_hosts = [f"ansible://{SANDBOX}-worker2"]
PORT = 8111
NOTICE = "/run/fake-imds-notice"


def node_entry(head, head_ip: str, node_id: str) -> dict:
    """One node's entry in Ray's state API (ray list nodes --detail), by id."""
    out = head.run(f"cd /tmp && {RAY} list nodes --detail --format json --limit 1000 --address {DASHBOARD}")
    assert out.rc == 0, out.stderr
    return next(n for n in json.loads(out.stdout) if n["node_id"] == node_id)


@pytest.fixture()
def fake_imds(host):
    podman("cp", str(ROOT / "tests/integration/files/fake_imds.py"), f"{container(f'{SANDBOX}-worker2')}:/root/")
    host.run(f"sudo rm -f {NOTICE}")
    started = host.run(f"sudo systemd-run --unit fake-imds python3 /root/fake_imds.py {PORT} {NOTICE}")
    assert started.rc == 0, started.stderr
    yield
    host.run("sudo systemctl stop fake-imds")


def test_spot_notice_drains_the_worker(host, request, fake_imds):
    head = head_host(request)
    head_ip, worker_ip = node_ip(head), node_ip(host)
    limit = ("--tags", "ray", "--limit", f"{SANDBOX}-worker2")
    since = host.run("date +%s").stdout.strip()
    journal = f"sudo journalctl --no-pager -u rayfleet-preemption --since @{since}"
    on = run_site(*limit, "-e", "ray_preemption_watch=true", "-e", f"ray_preemption_metadata_url=http://127.0.0.1:{PORT}",
                  "-e", "ray_preemption_interval_s=1")
    try:
        assert on.returncode == 0, on.stdout[-3000:]
        watcher = host.service("rayfleet-preemption")
        assert watcher.is_running and watcher.is_enabled
        assert host.run("systemctl show -p User --value rayfleet-preemption").stdout.strip() == "rayfleet"
        time.sleep(3)
        assert "drained" not in host.run(journal).stdout, "no notice yet"

        deadline = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        notice = json.dumps({"action": "terminate", "time": deadline})
        assert host.run(f"echo '{notice}' | sudo tee {NOTICE}").rc == 0
        start = time.monotonic()
        while "drained Ray node" not in (log := host.run(journal).stdout):
            assert time.monotonic() - start < 60, f"no drain within 60 s:\n{log[-2000:]}"
            time.sleep(1)
        assert "interruption notice: aws terminate" in log
        node_id = re.search(r"drained Ray node ([0-9a-f]+)", log).group(1)
        # Ray's own view: the node is marked preempted (Ray ends an idle drained node at once: DEAD, with the reason)
        start = time.monotonic()
        while "preemption" not in ((node := node_entry(head, head_ip, node_id)).get("state_message") or ""):
            assert time.monotonic() - start < 60, f"Ray does not mark {worker_ip} as preempted: {node}"
            time.sleep(1)
        assert "aws terminate notice" in node["state_message"], node
    finally:
        # The drained node's raylet is gone while its unit still runs: the next run restarts it (a new node id)
        # because Ray no longer lists it alive, and removes the watcher. A plain run: the --tags run above changed
        # the ray stage on worker2, so the stage has no record there until a run applies it whole.
        off = run_site("--limit", f"{SANDBOX}-worker2")
        assert off.returncode == 0, off.stdout[-3000:]
        assert not host.file("/etc/systemd/system/rayfleet-preemption.service").exists
        wait_for_cluster(head, head_ip, list(inventory_ips(request).values()), timeout=120)
