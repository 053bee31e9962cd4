# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/down.yml stops Ray everywhere (workers first) and keeps it stopped; site.yml brings it back.
Runs last: it takes the cluster down and up again."""

from __future__ import annotations

import re
import subprocess

from conftest import (
    ROOT,
    SANDBOX,
    ansible_env,
    head_host,
    inventory_ips,
    node_ip,
    run_site,
    stop_lets_running_task_finish,
    wait_for_cluster,
)

testinfra_hosts = ["ansible://ray_head"]


def down() -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "playbooks/down.yml", "-i", "inventories/sandbox"], cwd=ROOT,
                          env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)


def test_a_stopped_worker_lets_its_running_task_finish(request):
    """Stopping a worker's unit (maintenance, down.yml, an upgrade) drains the node: the task running there
    finishes before Ray stops, instead of dying with its node (systemd's SIGTERM goes to Ray's main process alone)."""
    stop_lets_running_task_finish(request, f"{SANDBOX}-worker1")


def test_down_stops_workers_then_head_and_site_brings_it_back(request):
    from testinfra import get_host

    inv = request.config.option.ansible_inventory
    hosts = {name: get_host(f"ansible://{name}", ansible_inventory=inv) for name in inventory_ips(request)}
    proc = down()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert out.index("Stop and disable the Ray worker unit") < out.index("Stop and disable the Ray head unit")
    for name, h in hosts.items():
        unit = "ray-head" if name.endswith("-head") else "ray-worker"
        assert not h.service(unit).is_running and not h.service(unit).is_enabled, f"{unit} still up on {name}"
        assert h.run("pgrep -u rayfleet raylet").rc == 1, f"a raylet survived on {name}"
    again = down()
    assert again.returncode == 0 and not re.search(r"changed=[1-9]", again.stdout), again.stdout[-2000:]
    up = run_site("--tags", "ray")
    assert up.returncode == 0, up.stdout[-3000:]
    head = head_host(request)
    wait_for_cluster(head, node_ip(head), list(inventory_ips(request).values()), timeout=120)
