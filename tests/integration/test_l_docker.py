# SPDX-License-Identifier: GPL-3.0-or-later
"""Containerized Ray nodes on the Docker engine (ray_container_engine: docker): worker2 (a privileged sandbox host)
gets Debian's docker.io from the ray role, loads the node image from its archive into docker, and runs its Ray node
in a docker container under the same systemd unit and ray_node contract as podman's (test_k_containers), in the
same cluster as the head and worker1 on the host venv. The docker daemon here runs inside a container (vfs storage,
cgroup v1): no GPU, so the --gpus path (NVIDIA runtime) is unit-tested only."""

from __future__ import annotations

import json

import pytest
from conftest import SANDBOX, head_host, node_ip, run_site, stop_lets_running_task_finish
from test_k_containers import (
    IMAGE,
    RECORD,
    UNIT,
    back_to_the_host_venv,
    changed_tasks,
    ids_by_ip,
    killed_container_comes_back,
    play,
    raylet,
    rerun_changes_nothing,
)
from testinfra import get_host

# Not in make test, to keep it short (make test-full runs it): docker installed and the node image loaded into it.
pytestmark = pytest.mark.extended

DOCKER = ("-e", "ray_container_engine=docker")


@pytest.fixture(scope="module")
def docked(request):
    head = head_host(request)
    worker2 = get_host(f"ansible://{SANDBOX}-worker2", ansible_inventory=request.config.option.ansible_inventory)
    ip = node_ip(worker2)
    settle = play(containers=False)
    assert settle.returncode == 0, settle.stdout[-4000:]
    before = ids_by_ip(head)
    proc = play(*DOCKER)
    assert proc.returncode == 0, proc.stdout[-4000:]
    state = {"head": head, "worker2": worker2, "ip": ip, "before": before, "back": False,
             "changed_tasks": changed_tasks(proc)}
    yield state
    if not state["back"]:
        play(containers=False)
    # ray.yml runs the ray stage alone: a plain site.yml converges the stages that read its record (ml) too
    site = run_site()
    assert site.returncode == 0, site.stdout[-3000:]


def test_worker2_runs_its_node_in_a_docker_container(docked):
    head, worker2, ip = docked["head"], docked["worker2"], docked["ip"]
    assert worker2.service("docker.service").is_running
    names = worker2.check_output("sudo docker ps --no-trunc --format '{{.Names}} {{.Image}}'").split()
    record = json.loads(worker2.check_output(f"cat {RECORD}"))
    assert names == ["ray-worker", record["image_id"]], (names, record)
    assert record["image"] == IMAGE and record["gpus"] == []
    if worker2.exists("podman"):  # test_k_containers ran its node in podman before
        assert worker2.check_output("sudo podman ps -a --format '{{.Names}}'") == "", "podman still runs a node"
    exe, contained, user = raylet(worker2)
    assert exe.startswith("/opt/ray/") and contained and user == "rayfleet", (exe, contained, user)
    unit = worker2.file(UNIT).content_string
    assert "/usr/bin/docker run " in unit and "--cgroupns=private" in unit and "--network=host" in unit
    assert worker2.check_output("sudo docker exec ray-worker df -m --output=size /dev/shm").split()[-1] == "1280"
    token = worker2.check_output("sudo cat /etc/rayfleet/auth-token")
    inspect = worker2.check_output("sudo docker inspect ray-worker")
    assert token not in inspect and "RAY_AUTH_TOKEN_PATH" not in inspect
    now = ids_by_ip(head)
    assert now[ip] != docked["before"][ip]
    assert {k: v for k, v in now.items() if k != ip} == {k: v for k, v in docked["before"].items() if k != ip}, \
        docked["changed_tasks"]


def test_a_rerun_changes_nothing(docked):
    rerun_changes_nothing(docked, *DOCKER)


def test_a_killed_container_is_started_again_by_systemd(docked):
    killed_container_comes_back(docked, "docker")


def test_a_stopped_container_node_lets_its_running_task_finish(request, docked):
    """`docker stop` signals the container's PID 1 (rayfleet.raynode exec) only: Ray drains the node first."""
    del docked
    stop_lets_running_task_finish(request, f"{SANDBOX}-worker2")


def test_a_tag_docker_cannot_find_fails_before_anything_changes(docked):
    head, worker2 = docked["head"], docked["worker2"]
    unit = worker2.check_output(f"sha256sum {UNIT}")
    before = ids_by_ip(head)
    proc = play(*DOCKER, "-e", f"ray_container_image={IMAGE}-no-such", "-e", "ray_container_image_archive=",
                worker2_only=True)
    assert proc.returncode != 0
    fatal = "\n".join(line for line in proc.stdout.splitlines() if line.startswith("fatal:"))
    assert f"ray on {SANDBOX}-worker2" in fatal, proc.stdout[-3000:]
    for word in (f"{IMAGE}-no-such", "not in docker's store after pulling it", "Ray was not changed"):
        assert word in fatal.replace('\\"', '"'), fatal
    assert worker2.check_output(f"sha256sum {UNIT}") == unit
    assert ids_by_ip(head) == before


def test_switching_engines_stops_the_old_container_first(docked):
    """docker -> podman -> docker: each switch stops the node with the engine it was started with; one node, one
    raylet, the other engine's container gone."""
    head, worker2, ip = docked["head"], docked["worker2"], docked["ip"]
    for engine, extra in (("podman", ()), ("docker", DOCKER)):
        old = ids_by_ip(head)[ip]
        proc = play(*extra, worker2_only=True)
        assert proc.returncode == 0, proc.stdout[-4000:]
        other = "docker" if engine == "podman" else "podman"
        assert worker2.check_output(f"sudo {engine} ps --format '{{{{.Names}}}}'") == "ray-worker", engine
        assert worker2.check_output(f"sudo {other} ps -a --format '{{{{.Names}}}}'") == "", f"{other} kept a node"
        assert worker2.check_output("pgrep -c -x raylet") == "1"
        assert json.loads(worker2.check_output(f"cat {RECORD}"))["engine"] == engine
        assert ids_by_ip(head)[ip] != old


def test_back_to_the_host_venv(docked):
    back_to_the_host_venv(docked, "docker")
