# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/ray/files/clusters_probe.py: the clusters a host already belongs to, read from its settings files."""

import json
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[2] / "roles/ray/files/clusters_probe.py"


def probe(root: Path) -> list[dict]:
    out = subprocess.run([sys.executable, str(PROBE), str(root)], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_names_roles_ports_and_venv_requirements(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".rayfleet-requirements").write_text("ray[default]==2.60.0\n")
    settings = {"ray_bin": str(venv / "bin/ray"), "node_ip": "10.0.0.11", "head_address": "10.0.0.10:6379",
                "ports": {"gcs": 6379}, "temp_dir": "/tmp/ray"}
    (tmp_path / "ray-worker.json").write_text(json.dumps(settings))
    (tmp_path / "ray-team-b-head.json").write_text(json.dumps(dict(settings, head_address=None, temp_dir="/tmp/x")))
    (tmp_path / "ray-teamc-worker.json").write_text("{broken")
    (tmp_path / "nccl.json").write_text("{}")
    (tmp_path / "ray-head.json.bak").write_text("{}")
    found = {(c["name"], c["role"]): c for c in probe(tmp_path)}
    assert sorted(found) == [("", "worker"), ("team-b", "head"), ("teamc", "worker")]
    assert found[("", "worker")]["head_address"] == "10.0.0.10:6379"
    assert found[("", "worker")]["venv"] == str(venv)
    assert found[("", "worker")]["requirements"] == "ray[default]==2.60.0\n"
    assert found[("team-b", "head")]["head_address"] == "" and found[("team-b", "head")]["temp_dir"] == "/tmp/x"
    assert "error" in found[("teamc", "worker")]


def test_a_host_without_rayfleet_has_no_clusters(tmp_path):
    assert probe(tmp_path / "missing") == []


def test_a_container_node_reports_what_its_container_runs(tmp_path):
    settings = {"ray_bin": "/opt/rayfleet/venv/bin/ray", "node_ip": "10.0.0.11", "head_address": "10.0.0.10:6379"}
    record = {"name": "ray-teamb-worker", "engine": "podman", "image_id": "sha256:ab", "gpus": ["GPU-1"]}
    (tmp_path / "ray-teamb-worker.json").write_text(json.dumps(settings))
    (tmp_path / "ray-teamb-worker.container.json").write_text(json.dumps(record))
    (tmp_path / "ray-worker.json").write_text(json.dumps(settings))
    found = {c["name"]: c for c in probe(tmp_path)}
    assert sorted(found) == ["", "teamb"], "a container record is not a cluster of its own"
    assert found["teamb"]["container"] == record
    assert "container" not in found[""]


def test_node_instances_are_told_from_cluster_names(tmp_path):
    """ray[-<cluster>]-<role>[-<instance>].json: a host's several nodes of one cluster (ray_node_instances). An
    instance name has no '-' and is never head or worker, so ray-worker-head.json is cluster worker's head."""
    settings = {"ray_bin": "/opt/rayfleet/venv/bin/ray", "node_ip": "10.0.0.11", "head_address": "10.0.0.10:6379"}
    for name in ("ray-worker-gpu0.json", "ray-worker-gpu1.json", "ray-team-b-worker-gpu0.json", "ray-worker-head.json",
                 "ray-worker.json"):
        (tmp_path / name).write_text(json.dumps(settings))
    (tmp_path / "ray-worker-gpu1.container.json").write_text(json.dumps({"gpus": ["GPU-1"]}))
    found = sorted((c["name"], c["role"], c["instance"]) for c in probe(tmp_path))
    assert found == [("", "worker", ""), ("", "worker", "gpu0"), ("", "worker", "gpu1"), ("team-b", "worker", "gpu0"),
                     ("worker", "head", "")]
    gpu1 = next(c for c in probe(tmp_path) if c["instance"] == "gpu1")
    assert gpu1["container"] == {"gpus": ["GPU-1"]}
