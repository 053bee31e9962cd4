# SPDX-License-Identifier: GPL-3.0-or-later
"""One dead host does not stop the fleet: a worker powered off while a static inventory still lists it. Within
rayfleet_max_unreachable the run converges the others, names it and exits non-zero, and it keeps its place in the
cluster (the firewall still admits it); powered on, its Ray node rejoins by itself and the next run changes nothing.
Beyond the policy, and whenever the head is down, the run stops before anything changes."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    RAY_DEFAULTS,
    ROOT,
    SANDBOX,
    ansible_env,
    container,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    ray_nodes,
    wait_for_cluster,
)

HEAD, WORKER1, WORKER2 = f"{SANDBOX}-head", f"{SANDBOX}-worker1", f"{SANDBOX}-worker2"


def recap(proc: subprocess.CompletedProcess) -> dict[str, dict[str, int]]:
    return {h: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", rest)}
            for h, rest in re.findall(r"^(\S+)\s+: (ok=.*)$", proc.stdout, re.M)}


@pytest.fixture(scope="module")
def static_inventory(tmp_path_factory) -> Path:
    """The sandbox's inventory written out as a static one (the dynamic one lists running containers only), with
    the same group variables: a powered-off host stays in it, as on a real fleet."""
    listed = json.loads(subprocess.run([str(ROOT / "inventories/sandbox/podman_hosts.py")], env=ansible_env(),
                                       capture_output=True, text=True, check=True).stdout)
    hostvars = listed.pop("_meta")["hostvars"]
    children = {}
    for group, body in listed.items():
        entry = {}
        if body.get("hosts"):
            entry["hosts"] = {h: hostvars[h] for h in body["hosts"]}
        if body.get("children"):
            entry["children"] = {c: {} for c in body["children"]}
        children[group] = entry
    inv = tmp_path_factory.mktemp("static-inventory")
    (inv / "hosts.yml").write_text(json.dumps({"all": {"children": children}}))
    (inv / "group_vars").symlink_to(ROOT / "inventories/sandbox/group_vars")
    return inv


def said(proc: subprocess.CompletedProcess) -> str:
    """The run's output and its warnings (stderr) with their line breaks and indents folded (messages may wrap)."""
    return " ".join((proc.stdout + proc.stderr).split())


def play(playbook: str, inventory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", playbook, "-i", str(inventory), *args], cwd=ROOT,
                          env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)


def site(inventory: Path, *args: str) -> subprocess.CompletedProcess:
    return play("site.yml", inventory, *args)


def alive_ids(head) -> dict[str, str]:
    return {n["node_ip"]: n["node_id"] for n in ray_nodes(head, "") if n["state"] == "ALIVE"}


def wait_ssh(host: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while subprocess.run(["podman", "exec", container(host), "systemctl", "is-active", "--quiet", "ssh"],
                         env=ansible_env(), capture_output=True, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"{host} did not boot to sshd in {timeout:g} s"
        time.sleep(1)


def test_a_dead_worker_within_the_policy_leaves_the_fleet_converged(static_inventory, request):
    head = head_host(request)
    ips = inventory_ips(request)
    # the sandbox converged through the static inventory, whatever earlier modules left behind
    setup = site(static_inventory)
    assert setup.returncode == 0, setup.stdout[-3000:]
    before = alive_ids(head)
    podman("stop", "--time", "5", container(WORKER2))
    try:
        # policy 0 (the default): the run stops at the first contact, naming the host, before anything changes
        strict = site(static_inventory)
        assert strict.returncode != 0
        assert re.search(rf"1 of 3 host\(s\) unreachable, more than rayfleet_max_unreachable=0 allows \(0\): "
                         rf"{WORKER2} \(", said(strict)), strict.stdout[-3000:]
        assert "Nothing was changed" in said(strict)
        assert "Record what" not in strict.stdout, "a stage ran although the run was to stop"

        # policy 1: the others converge (nothing to change, Ray untouched); the dead host is named, rc != 0
        lenient = site(static_inventory, "-e", "rayfleet_max_unreachable=1")
        counts = recap(lenient)
        assert lenient.returncode != 0, "a run that left a host out exited 0"
        assert counts[HEAD]["changed"] == 0 and counts[WORKER1]["changed"] == 0, lenient.stdout[-3000:]
        assert counts[HEAD]["failed"] == 0 and counts[WORKER1]["failed"] == 0, lenient.stdout[-3000:]
        assert counts[WORKER2]["unreachable"] == 1, counts
        assert f"{WORKER2} is unreachable and left out of this run" in said(lenient), lenient.stdout[-3000:]
        assert re.search(rf"Left out of this run, unreachable .*: {WORKER2}\.", said(lenient)), lenient.stdout[-3000:]
        alive = alive_ids(head)
        assert alive[ips[HEAD]] == before[ips[HEAD]] and alive[ips[WORKER1]] == before[ips[WORKER1]]
        assert ips[WORKER2] not in alive
        # the dead host keeps its place: the head's firewall still admits its address
        rules = podman("exec", container(HEAD), "nft", "-s", "list", "table", "inet", "rayfleet")
        assert ips[WORKER2] in rules, f"the firewall dropped {WORKER2}'s address:\n{rules}"
    finally:
        podman("start", container(WORKER2))
    wait_ssh(WORKER2)
    # powered on, no run: its Ray node rejoins by itself
    wait_for_cluster(head, node_ip(head), sorted(ips.values()), timeout=120)
    again = site(static_inventory)
    assert again.returncode == 0, again.stdout[-3000:]
    assert {r["changed"] for r in recap(again).values()} == {0}, again.stdout[-3000:]


VERDICT = "/etc/rayfleet/preflight.json"


def test_b_the_preflight_and_the_gate_go_on_without_a_dead_worker_only_when_allowed(
        static_inventory, request, tmp_path):
    head = head_host(request)
    ips = inventory_ips(request)
    report = ["-e", f"preflight_report_dir={tmp_path}"]
    job = ["-e", json.dumps({"submit_entrypoint": "python -c 'print(6 * 7)'"}), "-e", "submit_preflight=recent"]
    kept = podman("exec", container(HEAD), "sh", "-c", f"cat {VERDICT} 2>/dev/null || :")
    podman("stop", "--time", "5", container(WORKER2))
    try:
        # by default a missing node stops the preflight at its first contact, named
        strict = play("playbooks/preflight.yml", static_inventory, *report)
        assert strict.returncode != 0
        assert re.search(rf"1 of 3 host\(s\) unreachable, more than preflight_allow_missing=0 allows \(0\): "
                         rf"{WORKER2} \(", said(strict)), strict.stdout[-3000:]

        # allowed: the others are checked and measured, and the verdict names the node it went on without
        lenient = play("playbooks/preflight.yml", static_inventory, *report, "-e", "preflight_allow_missing=1")
        assert lenient.returncode == 0, lenient.stdout[-3000:]
        verdict = json.loads(podman("exec", container(HEAD), "cat", VERDICT))
        assert verdict["ok"] and verdict["missing_nodes"] == [WORKER2], verdict
        assert verdict["bandwidth_measured"] and verdict["ranks"] == 2, verdict
        assert f"Went on without {WORKER2} (preflight_allow_missing 1)" in said(lenient), lenient.stdout[-3000:]
        assert f"**missing**, not checked (preflight_allow_missing): {WORKER2}" in (tmp_path / "report.md").read_text()

        # the gate: shut while the node is missing (the wait for it cut short), open within submit_allow_missing
        shut = play("playbooks/submit.yml", static_inventory, *job, "-e", "ray_wait_timeout=10")
        assert shut.returncode != 0
        assert re.search(rf"not registered alive: {WORKER2} \({ips[WORKER2]}\)", said(shut)), shut.stdout[-3000:]
        assert "SUCCEEDED" not in shut.stdout
        opened = play("playbooks/submit.yml", static_inventory, *job, "-e", "submit_allow_missing=1")
        assert opened.returncode == 0, opened.stdout[-3000:]
        assert (f"Missing, within submit_allow_missing=1: the preflight went on without 1 node(s): {WORKER2}."
                in said(opened)), opened.stdout[-3000:]
        assert re.search(r": SUCCEEDED - .*42", said(opened)), opened.stdout[-3000:]
        # the same verdict from a gate that allows nothing (as a submit host's gate runs it): shut, the node named
        gate = podman("exec", container(HEAD), "sh", "-c",
                      f"{RAY_DEFAULTS['ray_venv_dir']}/bin/python -m rayfleet.gate --state {VERDICT} --max-age 600 "
                      f"--config /etc/rayfleet/ray-head.json || :")
        assert (f"the preflight went on without 1 node(s): {WORKER2} - more than submit_allow_missing=0 allows"
                in gate), gate
    finally:
        podman("start", container(WORKER2))
        podman("exec", container(HEAD), "sh", "-c",
               f"printf %s {json.dumps(kept)} > {VERDICT}" if kept else f"rm -f {VERDICT}")
    wait_ssh(WORKER2)
    wait_for_cluster(head, node_ip(head), sorted(ips.values()), timeout=120)


def test_a_dead_head_stops_the_run_whatever_the_policy(static_inventory, request):
    head = head_host(request)
    ips = inventory_ips(request)
    podman("stop", "--time", "10", container(HEAD))
    try:
        proc = site(static_inventory, "-e", "rayfleet_max_unreachable=100%")
        assert proc.returncode != 0
        assert f"the head {HEAD} is unreachable: a run never goes on without it" in said(proc), proc.stdout[-3000:]
        assert "Record what" not in proc.stdout
        assert {r.get("changed", 0) for r in recap(proc).values()} == {0}
    finally:
        podman("start", container(HEAD))
    wait_ssh(HEAD)
    # the head is back (a new GCS, which knows no earlier node): its workers rejoin it by themselves
    wait_for_cluster(head, node_ip(head), sorted(ips.values()), timeout=180)
