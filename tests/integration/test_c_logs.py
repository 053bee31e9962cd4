# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/logs.yml brings every node's Ray logs and the rayfleet units' journal to the controller; site.yml does
it by itself for a node whose Ray does not start, and names the archive in its failure."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

from conftest import (
    CONTAINERS_CONF,
    ROOT,
    SANDBOX,
    ansible_env,
    container,
    inventory_ips,
    node_ip,
    ray_nodes,
    run_site,
    wait_for_cluster,
)

testinfra_hosts = [f"ansible://{SANDBOX}-head"]


def read_archive(path: Path) -> tuple[set[str], str]:
    """A node's log archive: the file names in it, and the text of its unit journal."""
    with tarfile.open(path) as tar:
        names = {n.rsplit("/", 1)[-1] for n in tar.getnames()}
        journal = next(m for m in tar.getmembers() if m.name.endswith(".journal.txt"))
        return names, tar.extractfile(journal).read().decode()


def test_logs_playbook_fetches_every_nodes_logs(request):
    before = set((ROOT / "artifacts/logs").glob("*")) if (ROOT / "artifacts/logs").is_dir() else set()
    proc = subprocess.run(["ansible-playbook", "playbooks/logs.yml", "-i", "inventories/sandbox"], cwd=ROOT,
                          env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    new = sorted(set((ROOT / "artifacts/logs").glob("*")) - before)
    assert len(new) == 1, new
    hosts = sorted(inventory_ips(request))
    assert sorted(p.name for p in new[0].glob("*.tar.gz")) == [f"{h}.tar.gz" for h in hosts]
    for host in hosts:
        names, text = read_archive(new[0] / f"{host}.tar.gz")
        assert {"raylet.out", "raylet.err"} <= names, (host, names)
        if host.endswith("-head"):
            assert "gcs_server.out" in names, names
        unit = "ray-head" if host.endswith("-head") else "ray-worker"
        assert f"{unit}.service" in text, text[-500:]
    summary = (new[0] / "summary.txt").read_text()
    assert all(f"{h}: " in summary for h in hosts), summary


def test_a_node_whose_ray_does_not_start_brings_its_logs_and_names_them(host, request):
    """Ray restarted on one worker with 1 s to register (a start takes several): the ray stage fails on that worker
    with ray_node's own message and the archive of its Ray logs and unit journal, already on the controller."""
    ips = inventory_ips(request)
    worker = f"{SANDBOX}-worker1"
    head_ip = node_ip(host)
    before = {n["node_id"] for n in ray_nodes(host, head_ip) if n["node_ip"] == ips[worker]}
    proc = run_site("--tags", "ray", "--limit", worker, "-e", "ray_state=restarted", "-e", "ray_wait_timeout=1")
    out = proc.stdout + proc.stderr
    try:
        assert proc.returncode != 0, out[-3000:]
        assert "did not register alive within 1 s" in out, out[-3000:]
        found = re.search(r"The Ray logs and the journal of ray-worker\.service from this node are on the "
                          r"controller: (\S+\.tar\.gz)", out)
        assert found, out[-3000:]
        archive = Path(found.group(1))
        assert archive.name == f"{worker}.tar.gz" and archive.is_file(), archive
        names, text = read_archive(archive)
        assert {"raylet.out", "raylet.err"} <= names, names
        assert "ray-worker.service" in text, text[-500:]
        summary = (archive.parent / "summary.txt").read_text()
        assert summary.startswith(f"{worker}: ") and len(summary.strip().splitlines()) == 1, summary
    finally:
        try:
            # systemd keeps the restarted unit running: the worker rejoins by itself, as a new node
            wait_for_cluster(host, head_ip, sorted(ips.values()), timeout=120, exclude_ids=before)
        except BaseException:
            # why it did not: its unit's journal and its admission's verdict
            print(_worker_state(worker))
            raise
        finally:
            # the ray stage stopped part way on the worker with other inputs: a whole run applies and records it
            # again (also after a failed wait: the next module starts from a converged sandbox)
            again = run_site("--limit", worker)
            assert again.returncode == 0, again.stdout[-3000:]


def _worker_state(worker: str) -> str:
    """A worker's Ray unit journal and admission record, for a test that waited for it in vain."""
    proc = subprocess.run(["podman", "exec", container(worker), "sh", "-c",
                           "journalctl -u ray-worker --no-pager -n 60; cat /tmp/ray*/rayfleet-admission.json"],
                          env=dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF), capture_output=True, text=True,
                          check=False)
    return proc.stdout[-5000:] + proc.stderr[-1000:]
