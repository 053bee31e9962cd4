# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/bake.yml end to end in the sandbox (podman backend), on real hosts:

a bare builder host -> bake (same roles as site.yml, Ray Train for the checkpoint store, image_cleanup and its
hygiene checks, podman commit) ->
three hosts booted from the image start Ray by themselves from their launch file -> site.yml on them installs no
package (but the NFS server's, which no node image holds), leaves Ray untouched and skips the base stage (recorded for
the image) -> with network membership, one more host booted from the image proves itself (its link pair-tested
against the proved nodes before its Ray starts), takes a task and changes nothing on the hosts already there -> a
worker under a Ray Train run is reclaimed abruptly, as a spot instance is, and the run resumes from its last
checkpoint on a host freshly booted from the image in its place.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from bakeflow import (
    TOKEN_PATH,
    VENV,
    alive_nodes,
    bake,
    changed_tasks,
    exec_on,
    host_state,
    installed_in_image,
    installed_on,
    package_changes,
    playbook,
    remove_image,
    task_on,
    wait_alive,
)

from sandbox import ROOT, Sandbox, build_image, podman

IMAGE_NAME, TAG = "rayfleet-node-test", "ci"
IMAGE = f"localhost/{IMAGE_NAME}:{TAG}"
HYGIENE = ROOT / "roles/image_cleanup/files/image_hygiene.py"
# On the volume every sandbox host mounts (tools/sandbox.py SHARED_MOUNT)
CHECKPOINTS = "/mnt/checkpoints/rayfleet"


@pytest.fixture(scope="module")
def builder():
    sb = Sandbox("bake-builder")
    sb.down()
    remove_image(IMAGE)
    build_image()
    sb.up(0)
    yield sb
    sb.down()


# What a builder that was once a node of the named cluster "alice" (ray_cluster_name) still holds: its token, its
# node settings and verdict, the checkpoint store's credentials, its firewall rules and hosts, its scrape targets,
# the cluster's SSH key in the Ray user's home (/var/lib/rayfleet), and its Ray and firewall units, enabled.
LEFTOVERS = ["/etc/rayfleet/auth-token-alice", "/etc/rayfleet/ray-alice-worker.json",
             "/etc/rayfleet/preflight-alice.json", "/etc/rayfleet/checkpoint.env",
             "/etc/rayfleet/firewall.d/rayfleet_alice.nft", "/etc/rayfleet/monitoring-alice.json",
             "/etc/nftables.rayfleet-alice.nft", "/var/lib/rayfleet/.ssh/id_ed25519"]
LEFTOVER_UNITS = ["ray-alice-worker.service", "rayfleet-firewall-alice.service"]


@pytest.fixture(scope="module")
def baked(builder):
    unit = "[Service]\\nExecStart=/bin/sleep infinity\\n[Install]\\nWantedBy=multi-user.target\\n"
    exec_on(builder, "head", "useradd --system --user-group --home-dir /var/lib/rayfleet --create-home rayfleet"
                             " && mkdir -p /etc/rayfleet/firewall.d /var/lib/rayfleet/.ssh"
                             f" && for f in {' '.join(LEFTOVERS)}; do echo secret > $f; done"
                             f" && for u in {' '.join(LEFTOVER_UNITS)}; do printf '{unit}' > /etc/systemd/system/$u;"
                             " done && systemctl daemon-reload"
                             f" && systemctl enable --now {' '.join(LEFTOVER_UNITS)}")
    # the nodes keep checkpoints on the volume every sandbox host mounts: the image holds Ray Train for them
    proc = bake(builder, IMAGE_NAME, TAG, "-e", "checkpoint_store_backend=shared",
                "-e", f"checkpoint_store_path={CHECKPOINTS}")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    yield proc
    remove_image(IMAGE)


@pytest.fixture(scope="module")
def cluster(baked):
    sb = Sandbox("bake-cluster")
    sb.down()
    hosts = sb.up(2, image=IMAGE, launch=True)
    yield sb, hosts[0]["address"], [h["address"] for h in hosts]
    sb.down()


def test_bad_input_stops_before_the_builder_changes(builder):
    proc = bake(builder, IMAGE_NAME, "bad", "-e", "bake_podman_container=rayfleet-no-such-container")
    assert proc.returncode != 0
    assert "bake_podman_container on bake-builder-head is" in proc.stdout, proc.stdout[-3000:]
    assert "rayfleet-no-such-container" in proc.stdout and "not a container on this controller" in proc.stdout
    assert exec_on(builder, "head", "test -e /opt/rayfleet && echo changed || echo untouched").strip() == "untouched"
    assert podman("image", "exists", f"localhost/{IMAGE_NAME}:bad", check=False).returncode != 0


def test_bake_checks_hygiene_and_labels_the_image(baked):
    labels = json.loads(podman("image", "inspect", IMAGE, "--format", "{{json .Labels}}").stdout)
    assert labels["io.rayfleet.ray"] == "2.60.0"
    assert labels["io.rayfleet.torch"].startswith("2.13.0")
    assert labels["io.rayfleet.image-version"] == TAG
    manifest = json.loads((ROOT / f"artifacts/bake/{IMAGE_NAME}-{TAG}/manifest.json").read_text())
    assert manifest["image"] == IMAGE and manifest["backend"] == "podman"
    # The hygiene checks ran on the builder before the commit, and all passed
    assert manifest["hygiene"]["ok"] is True and len(manifest["hygiene"]["checks"]) == 11
    assert podman("inspect", "rayfleet-bake-builder-head", "--format", "{{.State.Status}}").stdout.strip() == "exited"


def test_published_image_passes_the_hygiene_checks(baked):
    """The committed image itself, read from a throwaway container of it (no boot): what every node starts from."""
    proc = subprocess.run(["podman", "run", "--rm", "-i", "--network", "none", "--entrypoint", "python3", IMAGE, "-",
                           "--root", "/", "--hold", "nvidia-*", "--hold", "cuda-*", "--hold", "libnccl*"],
                          input=HYGIENE.read_text(), capture_output=True, text=True, check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], [c for c in report["checks"] if not c["ok"]]
    # The named cluster's leftovers the builder held before the bake (the fixture) are not in the image
    paths = LEFTOVERS + [f"/etc/systemd/system/multi-user.target.wants/{u}" for u in LEFTOVER_UNITS]
    left = subprocess.run(["podman", "run", "--rm", "--network", "none", "--entrypoint", "sh", IMAGE, "-c",
                           'for p in "$@"; do [ -e "$p" ] && echo "$p"; done; echo checked', "sh", *paths],
                          capture_output=True, text=True, check=False)
    # "checked" alone: the image was read and holds none of them
    assert left.returncode == 0 and left.stdout.split() == ["checked"], left.stdout + left.stderr


def test_hosts_from_the_image_start_ray_by_themselves(cluster):
    sb, head_ip, addresses = cluster
    nodes = wait_alive(sb, head_ip, 3, timeout=120)
    assert set(nodes) == set(addresses)
    hosts = ["head", "worker1", "worker2"]
    # Every node made its own identity at first boot: nothing shared from the image.
    machine_ids = {exec_on(sb, h, "cat /etc/machine-id").strip() for h in hosts}
    host_keys = {exec_on(sb, h, "cat /etc/ssh/ssh_host_ed25519_key.pub").split()[1] for h in hosts}
    assert len(machine_ids) == 3 and "" not in machine_ids
    assert len(host_keys) == 3
    assert exec_on(sb, "worker1", "stat -c '%U %a' /etc/rayfleet/auth-token").strip() == "rayfleet 600"


ADMISSION_RECORD = "/tmp/ray/rayfleet-admission.json"  # the image's ray_temp_dir


def test_hosts_from_the_image_were_admitted_before_their_ray_started(cluster):
    """No Ansible: each booted host ran its admission checks before its raylet started, and passed them."""
    sb, head_ip, _addresses = cluster
    wait_alive(sb, head_ip, 3, timeout=120)
    for host in ("head", "worker1", "worker2"):
        record = json.loads(exec_on(sb, host, f"cat {ADMISSION_RECORD}"))
        checks = {c["name"]: c["state"] for c in record["checks"]}
        assert record["ok"] is True and record["role"] == ("head" if host == "head" else "worker"), (host, record)
        # a worker compared its Ray, Python and node library with the head's (the image's: the same)
        assert checks["versions"] == ("n/a" if host == "head" else "ok"), (host, record)


def test_a_booted_host_whose_checks_fail_does_not_join_and_is_named(cluster):
    """A worker launched with a GPU in its launch file, on a host without one: refused before its Ray starts."""
    sb, head_ip, addresses = cluster
    wait_alive(sb, head_ip, 3, timeout=120)
    try:
        hosts = sb.up(3, image=IMAGE, launch=True, launch_extra={"worker3": {"num_gpus": 1}})
        address = next(h["address"] for h in hosts if h["host"].endswith("-worker3"))
        deadline = time.monotonic() + 90
        while exec_on(sb, "worker3", "systemctl show --property=ActiveState --value ray-worker.service",
                      check=False).strip() != "failed":
            assert time.monotonic() < deadline, exec_on(sb, "worker3", "journalctl --no-pager -n 40", check=False)
            time.sleep(1)
        record = json.loads(exec_on(sb, "worker3", f"cat {ADMISSION_RECORD}"))
        assert record["ok"] is False and record["node"] == address
        gpu = next(c for c in record["checks"] if c["name"] == "gpu")
        assert gpu["reason"].startswith("the node is given 1 GPU(s) (num_gpus), but "), record
        journal = exec_on(sb, "worker3", "journalctl --no-pager -n 80 -u ray-worker.service")
        assert f"rayfleet.admission: {address} refused: gpu: the node is given 1 GPU(s)" in journal, journal[-3000:]
        assert set(alive_nodes(sb, head_ip)) == set(addresses), "the refused host joined, or another left"
    finally:
        sb.remove("worker3")


def test_site_yml_on_the_image_installs_only_the_nfs_server_and_keeps_ray(cluster):
    sb, head_ip, _addresses = cluster
    before = wait_alive(sb, head_ip, 3, timeout=120)
    in_image = installed_in_image(IMAGE)
    assert "deb nftables" in in_image and "pip ray" in in_image and "pip torch" in in_image, sorted(in_image)[:20]
    proc = playbook(sb, "site.yml")
    assert proc.returncode == 0, proc.stdout[-6000:]
    changed = changed_tasks(proc.stdout)
    # Debian's packages and the Ray venv's as the image holds them; the one exception is the head, which also
    # serves the sandbox's shared storage (group nfs_server): an NFS server is no node's role, so no image holds
    # it, and site.yml adds its packages there (adds only: nothing removed or upgraded)
    for host in ("worker1", "worker2"):
        assert package_changes(in_image, installed_on(sb, host)) == [], host
    on_head = package_changes(in_image, installed_on(sb, "head"))
    assert all(change.startswith("+deb ") for change in on_head), on_head
    assert any(change.startswith("+deb nfs-ganesha ") for change in on_head), on_head
    assert [t for t in changed if "Ensure Ray runs with these settings" in t] == [], changed
    assert alive_nodes(sb, head_ip) == before, "Ray was restarted: the baked settings differ from site.yml's"
    # The base stage was recorded for the image on the builder: each node's drift check took that record and no
    # node ran the stage again (it would have recorded it for the cluster), while the stages that read the
    # cluster ran and recorded.
    for host in ("head", "worker1", "worker2"):
        records = exec_on(sb, host, "ls /var/lib/rayfleet/image-stages; echo --; ls /var/lib/rayfleet/stages/*/")
        image, cluster = (part.split() for part in records.split("--"))
        assert image == ["common.json"], (host, records)
        assert "common.json" not in cluster and {"ray.json", "firewall.json", "ssh_trust.json"} <= set(cluster), (
            host, records)


def test_a_host_booted_into_the_running_cluster_is_pair_tested_gets_a_task_and_changes_no_other_host(cluster):
    """The autoscaler's or a spot replacement's path: the cluster has network membership; one more host boots from
    the image with its launch file, proves itself (its link pair-tested against the proved nodes before its Ray
    starts) and takes a task, while nothing changes on the hosts already there."""
    sb, head_ip, addresses = cluster
    network = json.dumps({"ray_membership": "network", "ray_cluster_networks": [str(sb.subnet())]})
    proc = playbook(sb, "site.yml", "-e", network)
    assert proc.returncode == 0, proc.stdout[-6000:]
    old = ["head", "worker1", "worker2"]
    before = {h: host_state(sb, h) for h in old}
    ids = wait_alive(sb, head_ip, 3, timeout=120)
    try:
        hosts = sb.up(3, image=IMAGE, launch=True)
        new = next(h for h in hosts if h["host"].endswith("-worker3"))
        nodes = wait_alive(sb, head_ip, 4, timeout=180, admitted=True)
        record = json.loads(exec_on(sb, "worker3", f"cat {ADMISSION_RECORD}"))
        link = next(c for c in record["checks"] if c["name"] == "link")
        figures = record["link"]
        assert record["ok"] is True and link["state"] == "ok", record
        assert figures["peer"] in addresses and figures["reference_pair"], figures
        assert set(figures["reference_pair"]) <= set(addresses) and figures["busbw_gbps"] >= figures["floor_gbps"] > 0
        assert task_on(sb, nodes[new["address"]]) == new["container"]  # the hostname the task ran on
        assert {h: host_state(sb, h) for h in old} == before, "a host that was there changed"
        assert {ip: nodes.get(ip) for ip in ids} == ids, "a Ray node that was there restarted"
    finally:
        sb.remove("worker3")


# A Ray Train run that checkpoints every PAUSE_S seconds into the shared store, each checkpoint naming the host it was
# written on by its machine id (a host booted from the image makes its own at first boot); its one training worker
# needs the 'trainer' resource, which only the reclaimed worker and its replacement carry (their launch files'), and
# the run retries without limit: it waits for the replacement to join, however long its boot and admission take
TRAIN = r'''
import json, os, sys, tempfile, time
import ray, ray.train
from ray.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

def loop(config):
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                start = json.load(f)["epoch"] + 1
    machine = open("/etc/machine-id").read().strip()
    for epoch in range(start, config["epochs"]):
        time.sleep(config["pause"])
        with tempfile.TemporaryDirectory() as d:
            state = {"epoch": epoch, "machine": machine, "resumed_from": start}
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(state, f)
            ray.train.report(state, checkpoint=Checkpoint.from_directory(d))

ray.init(address="auto", logging_level="ERROR")
trainer = TorchTrainer(
    loop, train_loop_config={"pause": float(sys.argv[3]), "epochs": int(sys.argv[4])},
    scaling_config=ScalingConfig(num_workers=1, use_gpu=False, resources_per_worker={"CPU": 1, "trainer": 1}),
    run_config=RunConfig(storage_path=sys.argv[1], name=sys.argv[2], failure_config=FailureConfig(max_failures=-1)))
print("RESULT " + json.dumps(trainer.fit().metrics), flush=True)
'''
STATES = ("for f in $(find {root} -name state.json 2>/dev/null); do cat $f 2>/dev/null; echo; done")
PAUSE_S, EPOCHS = 2, 12
WORKER_GROUP_WAIT_S = 300


def _replacement_state(sb):
    """What the cluster and the replacement say of it, for a run that did not resume there."""
    as_ray_user = f"sudo -u rayfleet env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_PATH}"
    ray = f"{as_ray_user} {VENV}/bin/ray"
    status = exec_on(sb, "head", f"cd /tmp && {ray} status -v; {ray} list placement-groups --detail", check=False)
    # the GCS's own view of each node's free resources, which its placement group scheduler reads ('ray status'
    # shows what the nodes report)
    view = exec_on(sb, "head", f"cd /tmp && {as_ray_user} {VENV}/bin/python -c 'import ray; "
                               "from ray._private import state; ray.init(address=\"auto\", logging_level=\"ERROR\"); "
                               "print(state.available_resources_per_node())'", check=False)
    # the GCS's placement group scheduler: why the run's worker group found no node
    gcs = exec_on(sb, "head", "grep -ihE 'placement|failed to lease|health check failed' "
                              "/tmp/ray/session_latest/logs/gcs_server.out | tail -40", check=False)
    own = exec_on(sb, "worker3", f"cat {ADMISSION_RECORD}; journalctl -u rayfleet-launch -u ray-worker --no-pager "
                                 "-n 40", check=False)
    return (f"\n--- ray status and placement groups on the head:\n{status[-5000:]}\n--- the GCS's free resources by "
            f"node:\n{view[-2000:]}\n--- the GCS on placement groups:\n"
            f"{gcs[-4000:]}\n--- the replacement:\n{own[-3000:]}")


def _states(sb, root):
    """The states of a run's checkpoints in the store, by epoch (one being written is left out)."""
    found = {}
    for line in exec_on(sb, "head", STATES.format(root=root), check=False).splitlines():
        try:
            state = json.loads(line)
        except ValueError:
            continue
        found[state["epoch"]] = state
    return [found[epoch] for epoch in sorted(found)]


# Not in make test, to keep it short (make test-full runs it: make bake-full): a Ray Train run across a spot reclaim
# and the replacement's boot and admission (about 3 min)
@pytest.mark.extended
def test_a_worker_reclaimed_like_a_spot_instance_is_replaced_by_a_booted_host_and_ray_train_resumes_there(cluster):
    """The spot path: the worker under a Ray Train run is killed at once (no drain, no shutdown: the instance is
    gone), a host of the same node type boots from the image in its place, proves itself and joins, and the run
    resumes on it from the last checkpoint the reclaimed worker wrote to the shared store, not from the start."""
    sb, head_ip, _addresses = cluster
    wait_alive(sb, head_ip, 3, timeout=120)
    trainer = {"worker3": {"resources": {"trainer": 1}}}
    run = f"spot-{int(time.time())}"
    root = f"/mnt/checkpoints/{run}"
    try:
        sb.up(3, image=IMAGE, launch=True, launch_extra=trainer)
        wait_alive(sb, head_ip, 4, timeout=180, admitted=True)
        reclaimed = exec_on(sb, "worker3", "cat /etc/machine-id").strip()
        reclaimed_address = sb.address(sb.container("worker3"))
        # the driver on the head, as the Ray user, left running in the background. Its worker group waits for a
        # node as long as a replacement takes to boot and prove itself (Ray Train's default, 60 s, is shorter: the
        # run would give up a worker group placed on the replacement while its worker still starts)
        driver = (f"sudo -u rayfleet env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_PATH} "
                  f"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S={WORKER_GROUP_WAIT_S} {VENV}/bin/python "
                  f"/tmp/rayfleet-train.py /mnt/checkpoints {run} {PAUSE_S} {EPOCHS}")
        exec_on(sb, "head", f"cat > /tmp/rayfleet-train.py <<'EOF'\n{TRAIN}\nEOF\n"
                            f"cd /tmp && setsid nohup {driver} > /tmp/{run}.log 2>&1 &")
        deadline = time.monotonic() + 300
        while len(_states(sb, root)) < 3:
            assert time.monotonic() < deadline, exec_on(sb, "head", f"tail -40 /tmp/{run}.log", check=False)
            time.sleep(1)
        assert {s["machine"] for s in _states(sb, root)} == {reclaimed}
        podman("kill", sb.container("worker3"))
        sb.remove("worker3")
        # the replacement comes once the cluster has lost the node (a cloud's replacement takes longer than Ray's
        # health check): Ray has declared it dead and the run has given up its worker group there. It is a new
        # instance at an address of its own, as a cloud's replacement is (docs/golden-images.md: a node back at the
        # reclaimed one's address within the head's reconnect backoff)
        deadline = time.monotonic() + 120
        while len(alive_nodes(sb, head_ip)) > 3:
            assert time.monotonic() < deadline, "the reclaimed node is still alive in Ray after 120 s"
            time.sleep(1)
        time.sleep(10)
        sb.up(3, image=IMAGE, launch=True, launch_extra=trainer, new_address=("worker3",))
        replacement = exec_on(sb, "worker3", "cat /etc/machine-id").strip()
        assert replacement != reclaimed and sb.address(sb.container("worker3")) != reclaimed_address
        deadline = time.monotonic() + 420
        log = ""
        while "RESULT " not in log:
            assert time.monotonic() < deadline, log[-3000:] + _replacement_state(sb)
            time.sleep(3)
            log = exec_on(sb, "head", f"cat /tmp/{run}.log", check=False)
        result = json.loads(log.split("RESULT ", 1)[1].splitlines()[0])
        before = [s for s in _states(sb, root) if s["machine"] == reclaimed]
        assert result["epoch"] == EPOCHS - 1 and result["machine"] == replacement, result
        # resumed from a checkpoint the reclaimed worker wrote, read back from the store: at least the second of
        # the three it had written when it was killed (the last one may have been in the store, not yet registered
        # by Ray Train: the run cannot resume from that one)
        assert 2 <= result["resumed_from"] <= before[-1]["epoch"] + 1, (before, result)
        assert all(s["machine"] == reclaimed for s in _states(sb, root) if s["epoch"] < result["resumed_from"])
    finally:
        sb.remove("worker3")
