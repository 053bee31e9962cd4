# SPDX-License-Identifier: GPL-3.0-or-later
"""The checkpoint store (role checkpoint_store), with each backend: shared, a directory on the volume every sandbox
host mounts at /mnt/checkpoints (tools/sandbox.py: it stands in for an NFS mount), and s3, against an S3-compatible
server that runs here: moto's S3 server, bound to the sandbox network's gateway (this machine's address on the sandbox
bridge; nothing leaves the machine).

With shared, the directory is the Ray user's on every node, the store's settings name only its path, a re-run changes
nothing, and a directory local to each host is refused, naming the nodes that do not see the head's marker. With s3,
the bucket is made versioned and every node gets the store's settings root-only with the keys kept out of Ansible's
output. With each, a Ray Train run whose worker's node is stopped after a few checkpoints resumes, on another node,
from the last checkpoint it reads back from the store. Each backend's class turns the store off again afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from conftest import (
    DASHBOARD,
    RAY,
    RAY_DEFAULTS,
    ROOT,
    SANDBOX,
    ansible_env,
    container,
    converge_again,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    wait_for_cluster,
)
from motoserver import moto_server

# Not in make test, to keep it short (make test-full runs it):
# the checkpoint store, shared and against moto, and a Ray Train resume with each (about 8 min).
pytestmark = pytest.mark.extended

HEAD = f"{SANDBOX}-head"
BUCKET = "rayfleet-checkpoints"
SECRET = "s3cr3t-rayfleet-ckpt-0123456789"
# On the volume every sandbox host mounts (tools/sandbox.py SHARED_MOUNT)
SHARED_PATH = "/mnt/checkpoints/rayfleet"
# A directory of each host's own: not shared
LOCAL_PATH = "/var/tmp/rayfleet-local-ckpt"
MARKER = ".rayfleet-shared-check"
ENV_FILE = "/etc/rayfleet/checkpoint.env"
# The workers get a 'trainer' resource: the training worker never runs on the head (the test stops its node)
TRAINER_RESOURCE = {"ray_resources": "{{ {} if inventory_hostname in groups['ray_head'] else {'trainer': 1} }}"}
PAUSE_S = 3
# A stopped worker drains for ray_stop_drain_s: Ray lets its training go on that long, then ends it. The run is
# long enough after the stop (taken at the third checkpoint) to outlast the drain by 30 s, so it must move.
EPOCHS = 3 + -(-(int(RAY_DEFAULTS["ray_stop_drain_s"]) + 30) // PAUSE_S)
TRAIN = r'''
import json, os, tempfile, time
import ray, ray.train
from ray.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

EPOCHS = EPOCHS_HERE

def loop(config):
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                start = json.load(f)["epoch"] + 1
    node = ray.util.get_node_ip_address()
    for epoch in range(start, EPOCHS):
        time.sleep(config["pause"])
        with tempfile.TemporaryDirectory() as d:
            state = {"epoch": epoch, "node": node, "resumed_from": start}
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(state, f)
            ray.train.report(state, checkpoint=Checkpoint.from_directory(d))

trainer = TorchTrainer(
    loop, train_loop_config={"pause": PAUSE_HERE},
    # the custom resource keeps the training worker off the head (the test stops the worker's node)
    scaling_config=ScalingConfig(num_workers=1, use_gpu=False, resources_per_worker={"CPU": 1, "trainer": 1}),
    run_config=RunConfig(storage_path=os.environ["RAYFLEET_CHECKPOINT_URI"], name="RUN_NAME",
                         failure_config=FailureConfig(max_failures=3)))
result = trainer.fit()
print("RESULT " + json.dumps(result.metrics))
'''
# The states of a run's checkpoints in a directory tree (on a host: the shared volume); one being written is left out
READ_STATES = r'''
import glob, json, sys
found = []
for path in glob.glob(sys.argv[1] + "/**/state.json", recursive=True):
    try:
        with open(path) as f:
            found.append(json.load(f))
    except (OSError, ValueError):
        pass
print(json.dumps(found))
'''


@pytest.fixture(scope="module", autouse=True)
def converged_afterwards():
    """The store's stages run below with --tags and other settings: where they changed a stage, it has no record
    until a whole run applies it; a plain site.yml at the end does."""
    yield
    converge_again()


def converge(settings: dict, tmp_path_factory, *tags: str) -> subprocess.CompletedProcess:
    """site.yml's checkpoint store (storage and ml stages) and ray stage with these settings (none: the inventory's,
    the store off), or the stages of tags."""
    args = ["ansible-playbook", "site.yml", "-i", "inventories/sandbox", "--tags",
            ",".join(tags or ("checkpoint_store", "ray"))]
    if settings:
        extra = tmp_path_factory.mktemp("vars") / "checkpoint.json"
        extra.write_text(json.dumps(settings))
        extra.chmod(0o600)
        args += ["-e", f"@{extra}"]
    return subprocess.run(args, cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=900)


def store_off(tmp_path_factory) -> None:
    """The store off again and the workers without their 'trainer' resource: later modules get the inventory's
    cluster."""
    off = converge({}, tmp_path_factory)
    assert off.returncode == 0, off.stdout[-4000:]


def sh(name: str, script: str) -> str:
    return podman("exec", container(name), "sh", "-c", script)


def env_file(name: str) -> str | None:
    """The store's settings on a host (None: no file)."""
    found, _newline, content = sh(name, f"if [ -e {ENV_FILE} ]; then echo present; cat {ENV_FILE}; "
                                        "else echo absent; fi").partition("\n")
    return content if found == "present" else None


def resumes_on_another_node(request, states: Callable[[str], list[dict]]) -> None:
    """A Ray Train run whose training worker's node is stopped after its third checkpoint finishes on another node,
    resumed from a checkpoint the stopped node wrote. states(run): the states of the run's checkpoints, read from the
    store."""
    head = head_host(request)
    ips = inventory_ips(request)
    by_ip = {ip: name for name, ip in ips.items()}
    head_ip = node_ip(head)
    run = f"resume-{int(time.time())}"
    train = TRAIN.replace("RUN_NAME", run).replace("EPOCHS_HERE", str(EPOCHS)).replace("PAUSE_HERE", str(PAUSE_S))
    podman("exec", container(HEAD), "sh", "-c",
           f"mkdir -p /tmp/ckptjob && cat > /tmp/ckptjob/train.py <<'EOF'\n{train}\nEOF")
    submit = head.run(f"cd /tmp && {RAY} job submit --address {DASHBOARD} --submission-id {run} "
                      "--working-dir /tmp/ckptjob --no-wait -- python train.py")
    assert submit.rc == 0, submit.stdout + submit.stderr

    def ordered():
        return sorted(states(run), key=lambda s: s["epoch"])

    deadline = time.monotonic() + 300
    while not [s for s in ordered() if s["epoch"] >= 2]:
        if time.monotonic() > deadline:
            logs = head.run(f"cd /tmp && {RAY} job logs --address {DASHBOARD} {run}").stdout
            pytest.fail(f"no third checkpoint in the store after 300 s; job log:\n{logs[-3000:]}")
        time.sleep(1)
    first = ordered()[-1]
    victim = by_ip[first["node"]]
    assert victim != HEAD, "the training worker ran on the head despite the trainer resource"
    podman("exec", container(victim), "systemctl", "stop", "ray-worker.service")
    try:
        deadline = time.monotonic() + 420 + EPOCHS * PAUSE_S
        status = ""
        while time.monotonic() < deadline:
            status = head.run(f"cd /tmp && {RAY} job status --address {DASHBOARD} {run}").stdout
            status = status.lower()
            if "succeeded" in status or "failed" in status or "stopped" in status:
                break
            time.sleep(3)
        logs = head.run(f"cd /tmp && {RAY} job logs --address {DASHBOARD} {run}").stdout
        assert f"job '{run}' succeeded" in status, f"{status}\n{logs[-4000:]}"
        result = json.loads(logs.split("RESULT ", 1)[1].splitlines()[0])
        assert result["epoch"] == EPOCHS - 1
        assert result["node"] != first["node"] and by_ip[result["node"]] != victim, result
        # resumed from a checkpoint the stopped node wrote (before or while it drained), read back from the store, not
        # from the start (the newest one it wrote may not have been registered by Ray Train before it ended)
        on_victim = [s["epoch"] for s in ordered() if s["node"] == first["node"]]
        assert first["epoch"] <= result["resumed_from"] <= max(on_victim) + 1, (first, on_victim, result)
        assert {s["node"] for s in ordered() if s["epoch"] < result["resumed_from"]} == {first["node"]}
    finally:
        podman("exec", container(victim), "systemctl", "start", "ray-worker.service")
        wait_for_cluster(head, head_ip, list(ips.values()), timeout=120)


# ---- shared: a directory on the filesystem every node mounts ----


def test_a_directory_local_to_each_host_is_refused_naming_the_nodes_that_do_not_see_the_heads_marker(request):
    names = list(inventory_ips(request))
    before = {name: env_file(name) for name in names}
    proc = subprocess.run(["ansible-playbook", "site.yml", "-i", "inventories/sandbox", "--tags", "checkpoint_store",
                           "-e", "checkpoint_store_backend=shared", "-e", f"checkpoint_store_path={LOCAL_PATH}"],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)
    try:
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, f"a directory local to each host was taken:\n{out[-3000:]}"
        others = ", ".join(name for name in names if name != HEAD)
        assert (f"checkpoint_store: checkpoint_store_path {LOCAL_PATH} is not on a filesystem shared by the Ray nodes: "
                f"{others} do not see the marker {LOCAL_PATH}/{MARKER} that the head {HEAD} wrote there") in out, (
            out[-3000:])
        assert "in a directory local to each node, Ray Train loses the checkpoints of a node that dies" in out
        # the head did write it (in its own directory): the others were asked to read what exists
        assert sh(HEAD, f"test -s {LOCAL_PATH}/{MARKER} && echo written || echo missing").strip() == "written"
        for name in names:
            now = env_file(name)
            assert now == before[name], (name, before[name], now)
            assert LOCAL_PATH not in (now or ""), name
    finally:
        for name in names:
            podman("exec", container(name), "rm", "-rf", LOCAL_PATH)


class TestSharedFilesystem:
    @pytest.fixture(scope="class")
    def store(self, request, tmp_path_factory):
        settings = {"checkpoint_store_backend": "shared", "checkpoint_store_path": SHARED_PATH, **TRAINER_RESOURCE}
        proc = converge(settings, tmp_path_factory)
        yield proc, settings
        store_off(tmp_path_factory)
        for name in inventory_ips(request):
            podman("exec", container(name), "rm", "-rf", SHARED_PATH)

    def test_every_node_has_the_ray_users_directory_and_the_settings_name_only_its_path(self, request, store):
        proc, _settings = store
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        for name in inventory_ips(request):
            assert sh(name, f"stat -c '%U %G %a' {SHARED_PATH}").split() == ["rayfleet", "rayfleet", "750"], name
            assert sh(name, f"stat -c '%U %G %a' {ENV_FILE}").split() == ["root", "root", "600"], name
            lines = [line for line in (env_file(name) or "").splitlines() if line and not line.startswith("#")]
            assert lines == [f"RAYFLEET_CHECKPOINT_URI={SHARED_PATH}"], (name, lines)
            settings = sh(name, "cat /etc/rayfleet/ray-*.json")
            assert "RAYFLEET_CHECKPOINT_ENV_SHA256" in settings, name
        marker = sh(HEAD, f"cat {SHARED_PATH}/{MARKER}")
        assert f"written by the head {HEAD}" in marker, marker

    def test_a_rerun_changes_nothing(self, request, store, tmp_path_factory):
        proc, settings = store
        assert proc.returncode == 0, "the store was not configured (see the test above)"
        again = converge(settings, tmp_path_factory, "checkpoint_store")
        assert again.returncode == 0, again.stdout[-4000:]
        # the role ran (its inputs differ from the stage's last record), and changed nothing
        assert "Read the head's marker back on every other node" in again.stdout, again.stdout[-3000:]
        assert again.stdout.count("changed=0 ") == len(inventory_ips(request)), again.stdout[-3000:]

    def test_a_run_resumes_on_another_node_from_the_shared_directory(self, request, store):
        proc, _settings = store
        assert proc.returncode == 0, "the store was not configured (see the test above)"

        def states(run: str) -> list[dict]:
            return json.loads(podman("exec", container(HEAD), "python3", "-c", READ_STATES, f"{SHARED_PATH}/{run}"))

        resumes_on_another_node(request, states)


# ---- s3: AWS S3 or an S3-compatible endpoint (moto's server) ----


def gateway() -> str:
    data = json.loads(podman("network", "inspect", f"rayfleet-{SANDBOX}"))
    return data[0]["subnets"][0]["gateway"]


@pytest.fixture(scope="module")
def s3_url(tmp_path_factory):
    try:
        with moto_server(tmp_path_factory.mktemp("moto") / "moto.log", host=gateway()) as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))


def s3(url):
    import boto3

    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="rayfleet",
                        aws_secret_access_key=SECRET)


class TestS3:
    @pytest.fixture(scope="class")
    def store(self, s3_url, tmp_path_factory):
        proc = converge({
            "checkpoint_store_backend": "s3", "checkpoint_store_bucket": BUCKET,
            "checkpoint_store_endpoint_url": s3_url, "checkpoint_store_access_key_id": "rayfleet",
            "checkpoint_store_secret_access_key": SECRET, **TRAINER_RESOURCE,
        }, tmp_path_factory)
        yield proc
        store_off(tmp_path_factory)

    def test_the_store_is_configured_without_leaking_the_key(self, request, store, s3_url):
        assert store.returncode == 0, store.stdout[-4000:] + store.stderr[-2000:]
        assert SECRET not in store.stdout and SECRET not in store.stderr
        assert f"checkpoint store: s3://{BUCKET}/rayfleet (created) at {s3_url}" in store.stdout
        assert s3(s3_url).get_bucket_versioning(Bucket=BUCKET)["Status"] == "Enabled"
        for name in inventory_ips(request):
            stat = podman("exec", container(name), "stat", "-c", "%U %G %a", ENV_FILE).split()
            assert stat == ["root", "root", "600"], (name, stat)
            settings = podman("exec", container(name), "sh", "-c", "cat /etc/rayfleet/ray-*.json")
            assert SECRET not in settings and "RAYFLEET_CHECKPOINT_ENV_SHA256" in settings

    def test_a_run_resumes_on_another_node_from_the_stores_checkpoint(self, request, store, s3_url):
        assert store.returncode == 0, "the store was not configured (see the test above)"
        client = s3(s3_url)

        def states(run: str) -> list[dict]:
            found = []
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"rayfleet/{run}/"):
                for obj in page.get("Contents", []):
                    if obj["Key"].endswith("/state.json"):
                        found.append(json.loads(client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()))
            return found

        resumes_on_another_node(request, states)


def test_a_bucket_name_s3_would_reject_is_refused_before_anything_changes(request):
    proc = subprocess.run(["ansible-playbook", "site.yml", "-i", "inventories/sandbox", "--tags", "storage",
                           "-e", "checkpoint_store_backend=s3", "-e", "checkpoint_store_bucket=Ray_Checkpoints"],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode != 0
    assert ('checkpoint_store_bucket is \\"Ray_Checkpoints\\" (other characters than lowercase letters, digits, '
            "dots and hyphens, or not a letter or digit at an end); expected a bucket name S3 accepts: 3-63 "
            "characters of lowercase letters") in proc.stdout, proc.stdout[-3000:]
    assert proc.stdout.count("changed=0 ") == len(inventory_ips(request))
