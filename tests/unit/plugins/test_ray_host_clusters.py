# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/ray_host_clusters.py: the Ray clusters a host already runs, read from real settings files,
and whether another cluster fits beside them (the ray role's check before anything changes)."""

from __future__ import annotations

import json

from ansible_collections.rayfleet.cluster.plugins.module_utils.ray_host_clusters import (
    collisions,
    gpu_collisions,
    ports_of,
    read_clusters,
    unwanted,
)

PORTS = {"gcs": 6379, "node_manager": 8077, "min_worker": 10002, "max_worker": 10010}


def settings(root, name, venv=None, requirements="ray[default]==2.60.0\n", container=None, **data):
    """Write a node's settings file (and its venv's requirements, its container record) as ray_node would."""
    venv = venv or root / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / ".rayfleet-requirements").write_text(requirements)
    values = {"ray_bin": str(venv / "bin/ray"), "node_ip": "10.0.0.11", "head_address": "10.0.0.10:6379",
              "ports": PORTS, "temp_dir": "/tmp/ray"}
    values.update(data)
    (root / f"{name}.json").write_text(json.dumps(values))
    if container is not None:
        (root / f"{name}.container.json").write_text(json.dumps(container))


def me(**over):
    base = {"name": "", "role": "worker", "head": "10.0.0.10:6379", "ports": ports_of(PORTS), "temp_dir": "/tmp/ray",
            "venv": "/opt/rayfleet/venv", "requirements": "ray[default]==2.60.0\n"}
    base.update(over)
    return base


def test_reads_names_roles_instances_ports_venv_and_container(tmp_path):
    settings(tmp_path, "ray-worker")
    settings(tmp_path, "ray-team-b-head", head_address=None, temp_dir="/tmp/x")
    settings(tmp_path, "ray-worker-gpu0", container={"name": "ray-worker-gpu0", "gpus": ["GPU-1"]})
    (tmp_path / "ray-teamc-worker.json").write_text("{broken")
    (tmp_path / "nccl.json").write_text("{}")
    (tmp_path / "ray-head.json.bak").write_text("{}")
    found = {(c["name"], c["role"], c["instance"]): c for c in read_clusters(str(tmp_path))}
    assert sorted(found) == [("", "worker", ""), ("", "worker", "gpu0"), ("team-b", "head", ""),
                             ("teamc", "worker", "")]
    plain = found[("", "worker", "")]
    assert plain["head_address"] == "10.0.0.10:6379" and plain["venv"] == str(tmp_path / "venv")
    assert plain["requirements"] == "ray[default]==2.60.0\n" and "container" not in plain
    assert found[("team-b", "head", "")]["head_address"] == "" and found[("team-b", "head", "")]["temp_dir"] == "/tmp/x"
    assert found[("", "worker", "gpu0")]["container"]["gpus"] == ["GPU-1"]
    assert "error" in found[("teamc", "worker", "")]


def test_a_host_without_rayfleet_runs_no_cluster(tmp_path):
    assert read_clusters(str(tmp_path / "missing")) == []


def test_a_cluster_alone_on_its_host_fits(tmp_path):
    settings(tmp_path, "ray-worker", venv=tmp_path / "venv")
    found = read_clusters(str(tmp_path))
    assert collisions(found, me(venv=str(tmp_path / "venv"))) == []


def test_a_worker_whose_name_is_another_heads_cluster_is_refused(tmp_path):
    settings(tmp_path, "ray-teamb-worker", head_address="10.0.0.99:6380", ports={}, temp_dir="/tmp/ray-teamb")
    mine = me(name="teamb", head="10.0.0.10:6380", temp_dir="/tmp/ray-teamb")
    problems = collisions(read_clusters(str(tmp_path)), mine)
    assert len(problems) == 1
    assert "the name is already the cluster whose head is 10.0.0.99:6380" in problems[0]
    assert "not 10.0.0.10:6380" in problems[0] and "ray_cluster_name" in problems[0]
    # a head of that name is the cluster's own head, not a claim
    assert collisions(read_clusters(str(tmp_path)), me(name="teamb", role="head", head="10.0.0.99:6380",
                                                       temp_dir="/tmp/ray-teamb")) == []


def test_a_head_that_moves_its_gcs_port_is_the_same_cluster(tmp_path):
    """ray_gcs_port changed on the head: the worker's settings still name the old port, and the worker follows."""
    settings(tmp_path, "ray-teamb-worker", head_address="10.0.0.99:6379", ports={}, temp_dir="/tmp/ray-teamb")
    assert collisions(read_clusters(str(tmp_path)), me(name="teamb", head="10.0.0.99:6390",
                                                       temp_dir="/tmp/ray-teamb")) == []
    settings(tmp_path, "ray-teamc-worker", head_address="[fd00::9]:6379", ports={}, temp_dir="/tmp/ray-teamc")
    assert collisions(read_clusters(str(tmp_path)), me(name="teamc", head="[fd00::9]:6390",
                                                       temp_dir="/tmp/ray-teamc")) == []


def test_another_clusters_ports_temp_dir_and_venv_are_named(tmp_path):
    settings(tmp_path, "ray-teamb-worker", venv=tmp_path / "shared", requirements="ray[default]==2.50.0\n",
             ports={"gcs": 6380, "node_manager": 8077, "min_worker": 10005, "max_worker": 20000})
    problems = collisions(read_clusters(str(tmp_path)), me(venv=str(tmp_path / "shared")))
    assert len(problems) == 3, problems
    ports, temp, venv = problems
    # the node manager port, and the worker ranges' overlap; five shown at most
    assert ports.startswith("port(s) 8077, 10005, 10006, 10007, 10008, ... are also cluster teamb's on this host")
    assert "ray_*_port" in ports
    assert temp.startswith("ray_temp_dir /tmp/ray is also cluster teamb's")
    assert "with other packages (ray[default]==2.50.0)" in venv and "ray_venv_dir" in venv


def test_the_same_venv_with_the_same_packages_is_shared(tmp_path):
    settings(tmp_path, "ray-teamb-worker", venv=tmp_path / "shared", ports={"gcs": 6380}, temp_dir="/tmp/ray-teamb")
    assert collisions(read_clusters(str(tmp_path)), me(venv=str(tmp_path / "shared"))) == []


def test_an_unreadable_settings_file_is_left_out_of_every_comparison(tmp_path):
    (tmp_path / "ray-teamb-worker.json").write_text("{broken")
    found = read_clusters(str(tmp_path))
    assert collisions(found, me(name="teamb")) == [] and unwanted(found, "teamb", "worker", [""]) == []


def test_nodes_no_longer_wanted_are_this_clusters_alone(tmp_path):
    """Instances taken out of the list and the one node they replace go; so do instances of a host that became the
    head (its plain worker unit is the role's other_role step); another cluster's nodes never."""
    for name in ("ray-worker", "ray-worker-gpu0", "ray-worker-gpu9", "ray-head", "ray-teamb-worker-gpu0"):
        settings(tmp_path, name)
    found = read_clusters(str(tmp_path))
    assert unwanted(found, "", "worker", [""]) == [
        {"unit": u, "files": [f"/etc/systemd/system/{u}", str(tmp_path / f"{n}.json"),
                              str(tmp_path / f"{n}.container.json")]}
        for n, u in (("ray-worker-gpu0", "ray-worker-gpu0.service"), ("ray-worker-gpu9", "ray-worker-gpu9.service"))]
    units = sorted(u["unit"] for u in unwanted(found, "", "worker", ["gpu0"]))
    assert units == ["ray-worker-gpu9.service", "ray-worker.service"]
    units = [u["unit"] for u in unwanted(found, "", "head", [""])]
    assert units == ["ray-worker-gpu0.service", "ray-worker-gpu9.service"]
    assert [u["unit"] for u in unwanted(found, "teamb", "worker", ["gpu1"])] == ["ray-teamb-worker-gpu0.service"]


def test_a_gpu_another_clusters_container_has_is_named(tmp_path):
    settings(tmp_path, "ray-teamb-worker-gpu0", container={"name": "ray-teamb-worker-gpu0", "gpus": ["GPU-a", "GPU-b"]})
    settings(tmp_path, "ray-worker-gpu1", container={"name": "ray-worker-gpu1", "gpus": ["GPU-c"]})
    found = read_clusters(str(tmp_path))
    assert gpu_collisions(found, "", ["GPU-b", "GPU-c"]) == [
        f"GPU(s) GPU-b are also given to container ray-teamb-worker-gpu0 of cluster teamb "
        f"({tmp_path / 'ray-teamb-worker-gpu0.json'})."]
    assert gpu_collisions(found, "teamb", ["GPU-a"]) == []
