# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/logs.yml brings every node's Ray logs and the rayfleet units' journal to the controller."""

from __future__ import annotations

import subprocess
import tarfile

from conftest import ROOT, SANDBOX, ansible_env, inventory_ips

testinfra_hosts = [f"ansible://{SANDBOX}-head"]


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
        with tarfile.open(new[0] / f"{host}.tar.gz") as tar:
            names = {n.rsplit("/", 1)[-1] for n in tar.getnames()}
            journal = next(m for m in tar.getmembers() if m.name.endswith(".journal.txt"))
            text = tar.extractfile(journal).read().decode()
        assert {"raylet.out", "raylet.err"} <= names, (host, names)
        if host.endswith("-head"):
            assert "gcs_server.out" in names, names
        unit = "ray-head" if host.endswith("-head") else "ray-worker"
        assert f"{unit}.service" in text, text[-500:]
    summary = (new[0] / "summary.txt").read_text()
    assert all(f"{h}: " in summary for h in hosts), summary
