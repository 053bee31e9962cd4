# SPDX-License-Identifier: GPL-3.0-or-later
"""Containerized Ray nodes (ray_runtime: container): worker2 (a privileged sandbox host, as podman in podman needs)
runs its Ray node in a podman container of the node image (images/ray-node, built by `tools/sandbox.py node-image`
and loaded from its archive: the sandbox has no registry), in the same cluster as the head and worker1, which stay
on the host venv (tests/integration/files/containers.yml picks the mode per host). The same systemd unit name and
ray_node contract; a re-run changes nothing; the preflight's collective runs a rank inside the container (the node
image has the sandbox's CPU torch); a killed container comes back; a new tag upgrades the node; bad images and GPU
lists fail before anything changes; several instances (the preflight's ring never pairs two nodes of one host, and
with worker1's link throttled by tc tbf, worker1 alone of the four nodes is named) and fixed slots; the node goes
back to the host venv. No GPU
here: the GPU half (CDI, one GPU per container, gpu_check inside the container) is unit-tested only
(tests/unit/test_gpu.py)."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import time

import pytest
from conftest import (
    ROOT,
    SANDBOX,
    VENV,
    ansible_env,
    container,
    head_host,
    node_ip,
    podman,
    ray_nodes,
    run_site,
    stop_lets_running_task_finish,
)
from testinfra import get_host

# Not in make test, to keep it short (make test-full runs it):
# Ray in a podman container on worker2, from the node image (about 3 min).
pytestmark = pytest.mark.extended

CONTAINERS = ROOT / "tests/integration/files/containers.yml"
SANDBOX_CPUS = int(re.search(r"^ray_num_cpus: (\d+)", (ROOT / "inventories/sandbox/group_vars/all/ray.yml").read_text(),
                             re.M)[1])
VERSION = re.search(r'^ray_version: "(.*)"', (ROOT / "roles/ray/defaults/main.yml").read_text(), re.M)[1]
IMAGE = f"localhost/rayfleet-ray:{VERSION}"
NEXT = f"{IMAGE}-r2"
UNIT = "/etc/systemd/system/ray-worker.service"
RECORD = "/etc/rayfleet/ray-worker.container.json"


def run_playbook(name: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", f"playbooks/{name}", "-i", "inventories/sandbox", "-e", f"@{CONTAINERS}",
                           *extra], cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False,
                          timeout=600)


def play(*extra: str, containers: bool = True, worker2_only: bool = False) -> subprocess.CompletedProcess:
    args = ["-e", f"@{CONTAINERS}"] if containers else []
    args += ["--limit", f"{SANDBOX}-worker2"] if worker2_only else []
    return subprocess.run(["ansible-playbook", "playbooks/ray.yml", "-i", "inventories/sandbox", *args, *extra],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)


def changed(proc: subprocess.CompletedProcess) -> dict[str, int]:
    return {h: int(n) for h, n in re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M)}


def changed_tasks(proc: subprocess.CompletedProcess) -> list[str]:
    """'host: task' for every task a play reported changed (for failure messages)."""
    out, task = [], ""
    for line in proc.stdout.splitlines():
        if line.startswith("TASK ["):
            task = line[6:].split("]")[0]
        elif line.startswith("changed: ["):
            out.append(f"{line[10:].split(']')[0]}: {task}")
    return out


def ids_by_ip(head, timeout: float = 60) -> dict[str, str]:
    """Each node IP's alive Ray node, once Ray lists one per IP (a node killed without a goodbye stays listed alive
    until Ray's health check gives up on it, beside its successor)."""
    deadline = time.monotonic() + timeout
    while True:
        alive: dict[str, list[str]] = {}
        for n in ray_nodes(head, node_ip(head)):
            if n["state"] == "ALIVE":
                alive.setdefault(n["node_ip"], []).append(n["node_id"])
        if all(len(ids) == 1 for ids in alive.values()) or time.monotonic() > deadline:
            assert all(len(ids) == 1 for ids in alive.values()), f"several alive nodes per IP: {alive}"
            return {ip: ids[0] for ip, ids in alive.items()}
        time.sleep(2)


def wait_new_id(head, ip: str, old: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = ids_by_ip(head).get(ip)
        if now and now != old:
            return now
        time.sleep(2)
    pytest.fail(f"{ip} did not come back as a new Ray node within {timeout} s (alive: {ids_by_ip(head)})")


def raylet(host) -> tuple[str, bool, str]:
    """The raylet's executable, whether it runs in a PID namespace of its own (a container), and its user."""
    pid, exe = host.check_output("pgrep -a -o -x raylet").split()[:2]
    own_ns = host.check_output(f"sudo readlink /proc/{pid}/ns/pid") != host.check_output("sudo readlink /proc/1/ns/pid")
    user = host.check_output(f"ps -o user= -p {pid}")
    return exe, own_ns, user


@pytest.fixture(scope="module")
def boxed(request):
    head = head_host(request)
    worker2 = get_host(f"ansible://{SANDBOX}-worker2",
                       ansible_inventory=request.config.option.ansible_inventory)
    ip = node_ip(worker2)
    # Earlier modules leave the cluster as their last play did: converge it as ray.yml would first, so that what
    # follows is the container's doing alone.
    settle = play(containers=False)
    assert settle.returncode == 0, settle.stdout[-4000:]
    before = ids_by_ip(head)
    proc = play()
    assert proc.returncode == 0, proc.stdout[-4000:]
    state = {"head": head, "worker2": worker2, "ip": ip, "before": before, "back": False,
             "changed_tasks": changed_tasks(proc)}
    yield state
    if not state["back"]:  # leave the sandbox as the later tests expect it, also when a test failed
        play(containers=False)
    # ray.yml runs the ray stage alone: a plain site.yml converges the stages that read its record (ml) too
    site = run_site()
    assert site.returncode == 0, site.stdout[-3000:]


def test_worker2_runs_its_node_in_a_container_of_the_image(boxed):
    head, worker2, ip = boxed["head"], boxed["worker2"], boxed["ip"]
    names = worker2.check_output("sudo podman ps --format '{{.Names}} {{.ImageID}}'").split()
    record = json.loads(worker2.check_output(f"cat {RECORD}"))
    assert names[0] == "ray-worker" and record["image_id"].startswith(names[1]), (names, record)
    assert record["image"] == IMAGE and record["gpus"] == []
    exe, contained, user = raylet(worker2)
    assert exe.startswith("/opt/ray/"), f"raylet runs from {exe}, not the image's venv"
    assert contained and user == "rayfleet"
    assert worker2.service("ray-worker.service").is_running
    unit = worker2.file(UNIT).content_string
    assert "/usr/bin/podman run " in unit and f"{record['image_id']} python -m rayfleet.raynode exec" in unit
    # Ray's object store lives in /dev/shm: sized from ray_object_store_memory (256 MiB) + 1024 MiB
    assert worker2.check_output("sudo podman exec ray-worker df -m --output=size /dev/shm").split()[-1] == "1280"
    # The token is mounted read-only, never in the container's configuration
    token = worker2.check_output("sudo cat /etc/rayfleet/auth-token")
    inspect = worker2.check_output("sudo podman inspect ray-worker")
    assert token not in inspect and "RAY_AUTH_TOKEN_PATH" not in inspect
    # The same cluster: worker2 is a new node; the head and worker1, on the host venv, were not restarted
    now = ids_by_ip(head)
    assert now[ip] != boxed["before"][ip]
    assert {k: v for k, v in now.items() if k != ip} == {k: v for k, v in boxed["before"].items() if k != ip}, \
        boxed["changed_tasks"]
    exe_head = head.check_output("pgrep -a -o -x raylet").split()[1]
    assert exe_head.startswith(VENV), exe_head


def rerun_changes_nothing(state: dict, *extra: str) -> None:
    """ray.yml again with the same settings: changed=0 everywhere, the same Ray nodes."""
    before = ids_by_ip(state["head"])
    proc = play(*extra)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert set(changed(proc).values()) == {0}, changed_tasks(proc)
    assert ids_by_ip(state["head"]) == before


def killed_container_comes_back(state: dict, engine: str) -> None:
    """`<engine> kill` of worker2's node container: systemd starts it again and a new Ray node joins."""
    head, worker2, ip = state["head"], state["worker2"], state["ip"]
    old = ids_by_ip(head)[ip]
    worker2.check_output(f"sudo {engine} kill ray-worker")
    wait_new_id(head, ip, old)
    assert worker2.service("ray-worker.service").is_running
    assert worker2.check_output(f"sudo {engine} ps --format '{{{{.Names}}}}'") == "ray-worker"


def test_a_rerun_changes_nothing(boxed):
    rerun_changes_nothing(boxed)


def test_a_killed_container_is_started_again_by_systemd(boxed):
    killed_container_comes_back(boxed, "podman")


def preflight_across(report_dir, want: dict[str, str], *extra: str) -> dict:
    """preflight.yml with worker2's nodes in containers: it passes, and the collective had one rank on each Ray node
    (want: node id -> node name), worker2's inside their containers (the image's torch, host networking, the
    firewall's ports); returns the report."""
    proc = run_playbook("preflight.yml", "-e", f"preflight_report_dir={report_dir}", *extra)
    assert proc.returncode == 0, proc.stdout[-4000:]
    result = json.loads((report_dir / "result.json").read_text())
    assert result["ok"] and result["collective"]["ok"], result.get("problems") or result["collective"]["problems"]
    assert result["collective"]["backend"] == "gloo" and result["collective"]["world_size"] == len(want)
    assert sorted(n["node_id"] for n in result["collective"]["nodes"]) == sorted(want), result["collective"]["nodes"]
    assert not any(r["wrong"] for r in result["collective"]["rows"])
    assert result["cluster"]["alive_nodes"] == len(want)
    return result


def test_the_preflight_passes_across_the_container_node(boxed, tmp_path):
    head, ip = boxed["head"], boxed["ip"]
    ids = ids_by_ip(head)
    result = preflight_across(tmp_path, {node_id: node for node, node_id in ids.items()})
    ranks = {n["node_id"]: n for n in result["collective"]["nodes"]}
    assert ranks[ids[ip]]["ip"] == ip


def test_a_stopped_container_node_lets_its_running_task_finish(request, boxed):
    """`podman stop` signals the container's PID 1 (rayfleet.raynode exec) only: Ray drains the node first."""
    del boxed
    stop_lets_running_task_finish(request, f"{SANDBOX}-worker2")


def test_a_new_tag_upgrades_the_node(boxed):
    head, worker2, ip = boxed["head"], boxed["worker2"], boxed["ip"]
    before = ids_by_ip(head)
    proc = play("-e", f"ray_container_image={NEXT}", worker2_only=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert worker2.check_output("sudo podman ps --format '{{.Image}}'") == NEXT
    assert json.loads(worker2.check_output(f"cat {RECORD}"))["image"] == NEXT
    now = ids_by_ip(head)
    assert now[ip] != before[ip]
    assert {k: v for k, v in now.items() if k != ip} == {k: v for k, v in before.items() if k != ip}


@pytest.mark.parametrize(("extra", "words"), [
    (["-e", f"ray_container_image={IMAGE}-no-such", "-e", "ray_container_image_archive="],
     ["ray_container_image", f"{IMAGE}-no-such", "not in podman's store after pulling it", "Ray was not changed"]),
    (["-e", "ray_container_image=localhost/rayfleet-no-ray:1"],
     ["localhost/rayfleet-no-ray:1", "has no Ray that `python` imports", f"expected Ray {VERSION}"]),
    (["-e", '{"ray_container_gpus": [0]}'],
     ["ray_container_gpus is [0]", "not in group gpu"]),
])
def test_a_bad_image_or_gpu_list_fails_before_anything_changes(boxed, extra, words):
    head, worker2 = boxed["head"], boxed["worker2"]
    if any("rayfleet-no-ray" in e for e in extra):  # an image without Ray, made on worker2 from the node image
        worker2.check_output(f"printf 'FROM {NEXT}\\nRUN pip uninstall -q -y ray\\n' "
                             "| sudo podman build -q -t localhost/rayfleet-no-ray:1 -f - /tmp")
    unit = worker2.check_output(f"sha256sum {UNIT}")
    before = ids_by_ip(head)
    proc = play(*extra, worker2_only=True)
    assert proc.returncode != 0
    fatal = "\n".join(line for line in proc.stdout.splitlines() if line.startswith("fatal:"))
    assert f"ray on {SANDBOX}-worker2" in fatal, proc.stdout[-3000:]
    for word in words:
        assert word in fatal.replace('\\"', '"'), fatal
    assert worker2.check_output(f"sha256sum {UNIT}") == unit
    assert ids_by_ip(head) == before


def instances_by_name(head, ip: str, names: set[str], timeout: float = 90) -> dict[str, dict]:
    """worker2's alive Ray nodes by node name, once they are exactly <ip>/<name> for names."""
    want = {f"{ip}/{name}" for name in names}
    deadline = time.monotonic() + timeout
    while True:
        alive = {n["node_name"]: n for n in ray_nodes(head, node_ip(head)) if n["state"] == "ALIVE"
                 and n["node_ip"] == ip}
        if set(alive) == want or time.monotonic() > deadline:
            assert set(alive) == want, f"worker2's alive Ray nodes: {sorted(alive)}, expected {sorted(want)}"
            return alive
        time.sleep(2)


def on_worker2(*names: str, slots: dict[str, int] | None = None) -> str:
    """-e ray_node_instances for worker2 alone (the head and worker1 keep their one node each); with slots, worker2
    is cut into 2 fixed slots and each instance takes the one given."""
    listed = json.dumps([{"name": name, **({"slot": slots[name]} if slots else {})} for name in names])
    here = "inventory_hostname is search('worker2$')"
    return json.dumps({"ray_node_instances": f"{{{{ {listed} if {here} else [] }}}}",
                       **({"ray_node_instance_slots": 2} if slots else {}),
                       # worker2's instances share its CPUs; the others keep the sandbox's ray_num_cpus (group_vars)
                       "ray_num_cpus": f"{{{{ none if {here} else {SANDBOX_CPUS} }}}}"})


def slow_node_of_four_is_named(report_dir, two: str) -> None:
    victim = f"{SANDBOX}-worker1"
    report_dir.mkdir()
    podman("exec", container(victim), "tc", "qdisc", "add", "dev", "eth0", "root", "tbf",
           "rate", "100mbit", "burst", "64kb", "latency", "50ms")
    try:
        proc = run_playbook("preflight.yml", "-e", f"preflight_report_dir={report_dir}", "-e", two)
    finally:
        podman("exec", container(victim), "tc", "qdisc", "del", "dev", "eth0", "root")
    assert proc.returncode != 0, "the preflight passed with a throttled node"
    assert f"slow node(s): {victim}" in proc.stdout, proc.stdout[-4000:]
    findings = json.loads((report_dir / "result.json").read_text())["collective"]["pair_findings"]
    assert findings["suspects"] == [victim], findings
    assert any(test["phase"] != "ring" for test in findings["tests"]), findings["tests"]
    assert all(victim in pair["nodes"] for pair in findings["slow_pairs"]), findings["slow_pairs"]


def test_two_node_instances_on_worker2_then_one(boxed, tmp_path):
    """ray_node_instances: two Ray nodes of the cluster on worker2, each in a container of its own with its own unit,
    settings, ports, temp dir, half the host's CPUs and Ray node name <ip>/<name>; the single node they replace is
    stopped and removed. A re-run changes nothing; logs.yml, the firewall and down.yml act on both. Taking an instance
    out of the list stops and removes it, and the other takes the host's whole share."""
    head, worker2, ip = boxed["head"], boxed["worker2"], boxed["ip"]
    two = on_worker2("a", "b")
    proc = play("-e", two)
    assert proc.returncode == 0, proc.stdout[-4000:]
    nodes = instances_by_name(head, ip, {"a", "b"})
    assert not worker2.file(UNIT).exists and not worker2.file(RECORD).exists
    assert not worker2.file("/etc/rayfleet/ray-worker.json").exists
    names = sorted(worker2.check_output("sudo podman ps --format '{{.Names}}'").split())
    assert names == ["ray-worker-a", "ray-worker-b"]
    cpus = int(worker2.check_output("nproc"))
    settings = {}
    for name, step in (("a", 0), ("b", 100)):
        assert worker2.service(f"ray-worker-{name}.service").is_running
        settings[name] = json.loads(worker2.check_output(f"cat /etc/rayfleet/ray-worker-{name}.json"))
        assert settings[name]["node_name"] == f"{ip}/{name}" and settings[name]["temp_dir"] == f"/tmp/ray_{name}"
        assert settings[name]["ports"]["node_manager"] == 8077 + step
        assert settings[name]["ports"]["metrics_export"] == 8080 + step
        # each raylet listens on its own node manager port
        assert worker2.socket(f"tcp://0.0.0.0:{8077 + step}").is_listening or \
            worker2.socket(f"tcp://{ip}:{8077 + step}").is_listening
        assert nodes[f"{ip}/{name}"]["resources_total"]["CPU"] == max(cpus // 2, 1)
        record = json.loads(worker2.check_output(f"cat /etc/rayfleet/ray-worker-{name}.container.json"))
        assert record["name"] == f"ray-worker-{name}" and record["gpus"] == []
    a, b = settings["a"]["ports"], settings["b"]["ports"]
    assert a["min_worker"] < a["max_worker"] < b["min_worker"] < b["max_worker"], (a, b)
    # the firewall (its own play) and the head's cluster check know both: the play's cluster check waited for them
    rerun = play("-e", two)
    assert rerun.returncode == 0 and set(changed(rerun).values()) == {0}, changed_tasks(rerun)
    assert {k: n["node_id"] for k, n in instances_by_name(head, ip, {"a", "b"}).items()} == \
        {k: n["node_id"] for k, n in nodes.items()}
    # the preflight: four Ray nodes, four ranks of the collective, two of them in worker2's two containers
    others = {n["node_id"]: n["node_ip"] for n in ray_nodes(head, node_ip(head))
              if n["state"] == "ALIVE" and n["node_ip"] != ip}
    report = preflight_across(tmp_path, {**others, **{n["node_id"]: name for name, n in nodes.items()}}, "-e", two)
    # the pair tests: no ring pair of worker2's two nodes (they share the host: such a pair measures no link), and
    # worker2 has a host line naming both
    collective = report["collective"]
    host_of = {node["name"]: node["ip"] for node in collective["nodes"]}
    ring = [pair for pair in collective["pairs"] if pair["phase"] == "ring"]
    assert len(ring) >= 2 and all(host_of[a] != host_of[b] for a, b in (pair["nodes"] for pair in ring)), ring
    assert sum(1 for pair in ring for name in pair["nodes"] if host_of[name] == ip) >= 2, ring
    lines = [line for line in collective["pair_findings"]["hosts"] if line["host"] == ip]
    assert len(lines) == 1 and len(lines[0]["nodes"]) == 2, collective["pair_findings"]["hosts"]
    # four nodes, worker1's link throttled (tc tbf): the ring's slow pairs are re-tested with nodes that passed, and
    # worker1 alone is named - not worker2's nodes, which were in its slow pairs
    slow_node_of_four_is_named(tmp_path / "throttled", two)
    # logs.yml reads both instances' temp dirs and units; the firewall opens b's shifted ports and orders itself
    # before both units
    new_logs = run_playbook("logs.yml", "-e", two, "--limit", f"{SANDBOX}-worker2")
    with tarfile.open(max((ROOT / "artifacts/logs").glob("*/")) / f"{SANDBOX}-worker2.tar.gz") as tar:
        names = tar.getnames()
        journal = tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith(".journal.txt"))).read()
    assert new_logs.returncode == 0 and all(any(f"ray_{x}/" in n and n.endswith("raylet.out") for n in names)
                                            for x in "ab"), names
    assert b"ray-worker-a.service" in journal and b"ray-worker-b.service" in journal
    fw = run_playbook("firewall.yml", "-e", two)
    assert fw.returncode == 0, fw.stdout[-3000:]
    ruleset = worker2.check_output("sudo nft list table inet rayfleet")
    assert "8176-8180" in ruleset and "52465" in ruleset, ruleset  # nft merges 8176..8180 into a range
    assert "ray-worker-a.service ray-worker-b.service" in worker2.file(
        "/etc/systemd/system/rayfleet-firewall.service").content_string
    # down.yml stops and disables both instances, and finds none of their processes left
    down = run_playbook("down.yml", "-e", two, "--limit", f"{SANDBOX}-worker2", "--tags", "ray")
    assert down.returncode == 0, down.stdout[-3000:]
    for name in "ab":
        assert not worker2.service(f"ray-worker-{name}.service").is_running
        assert not worker2.service(f"ray-worker-{name}.service").is_enabled
    assert worker2.check_output("sudo podman ps --format '{{.Names}}'") == ""
    up = play("-e", two)
    assert up.returncode == 0, up.stdout[-4000:]
    instances_by_name(head, ip, {"a", "b"})
    one = play("-e", on_worker2("a"))
    assert one.returncode == 0, one.stdout[-4000:]
    # a takes the whole share now (all CPUs, the whole worker port range): it restarted with them, b is gone
    left = instances_by_name(head, ip, {"a"})
    assert left[f"{ip}/a"]["resources_total"]["CPU"] == cpus
    after = json.loads(worker2.check_output("cat /etc/rayfleet/ray-worker-a.json"))["ports"]
    assert (after["min_worker"], after["max_worker"]) == (a["min_worker"], b["max_worker"])
    assert not worker2.file("/etc/systemd/system/ray-worker-b.service").exists
    assert not worker2.file("/etc/rayfleet/ray-worker-b.json").exists
    assert worker2.check_output("sudo podman ps -a --format '{{.Names}}'") == "ray-worker-a"


def test_fixed_slots_leave_the_other_instance_running(boxed):
    """ray_node_instance_slots with each instance's slot: taking one instance out leaves the other untouched - the
    same Ray node, its settings file not rewritten, its container not restarted - where without fixed slots it would
    take the whole host's share and restart (the test before)."""
    head, worker2, ip = boxed["head"], boxed["worker2"], boxed["ip"]
    slots = {"a": 0, "b": 1}
    proc = play("-e", on_worker2("a", "b", slots=slots))
    assert proc.returncode == 0, proc.stdout[-4000:]
    nodes = instances_by_name(head, ip, {"a", "b"})
    cpus = int(worker2.check_output("nproc"))
    assert nodes[f"{ip}/b"]["resources_total"]["CPU"] == max(cpus // 2, 1)
    settings = "/etc/rayfleet/ray-worker-b.json"
    before = (worker2.check_output(f"stat -c %Y {settings}"), worker2.check_output(f"cat {settings}"),
              worker2.check_output("sudo podman inspect --format '{{.State.StartedAt}}' ray-worker-b"))
    one = play("-e", on_worker2("b", slots=slots))
    assert one.returncode == 0, one.stdout[-4000:]
    left = instances_by_name(head, ip, {"b"})
    assert left[f"{ip}/b"]["node_id"] == nodes[f"{ip}/b"]["node_id"]
    assert left[f"{ip}/b"]["resources_total"]["CPU"] == max(cpus // 2, 1)
    assert (worker2.check_output(f"stat -c %Y {settings}"), worker2.check_output(f"cat {settings}"),
            worker2.check_output("sudo podman inspect --format '{{.State.StartedAt}}' ray-worker-b")) == before
    assert json.loads(before[1])["ports"]["node_manager"] == 8177
    assert not worker2.file("/etc/systemd/system/ray-worker-a.service").exists
    assert worker2.check_output("sudo podman ps -a --format '{{.Names}}'") == "ray-worker-b"


def back_to_the_host_venv(state: dict, engine: str) -> None:
    """ray.yml without the container settings: the engine's container goes, the node runs from the host venv."""
    head, worker2, ip = state["head"], state["worker2"], state["ip"]
    old = ids_by_ip(head)[ip]
    proc = play(containers=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    state["back"] = True
    assert worker2.check_output(f"sudo {engine} ps -a --format '{{{{.Names}}}}'") == ""
    assert not worker2.file(RECORD).exists
    # and a node instance left from the tests before (podman: instance b) is gone with its unit
    for name in "ab":
        assert not worker2.file(f"/etc/systemd/system/ray-worker-{name}.service").exists
    exe, contained, _user = raylet(worker2)
    assert exe.startswith(VENV) and not contained
    assert ids_by_ip(head)[ip] != old


def test_back_to_the_host_venv(boxed):
    back_to_the_host_venv(boxed, "podman")
