# SPDX-License-Identifier: GPL-3.0-or-later
"""The checkpoint store (role checkpoint_store) against an S3-compatible server that runs here: moto's S3 server,
bound to the sandbox network's gateway (this machine's address on the sandbox bridge; nothing leaves the machine).
The bucket is made versioned, every node gets the store's settings root-only with the keys kept out of Ansible's
output, and a Ray Train run whose worker's node is stopped after a few checkpoints resumes, on another node, from
the last checkpoint it reads back from the store. Runs last but one: the cluster keeps the store afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import time
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
    head_host,
    inventory_ips,
    node_ip,
    podman,
    wait_for_cluster,
)
from motoserver import moto_server

# Not in make test, to keep it short (make test-full runs it):
# the checkpoint store against moto and a Ray Train resume (about 4 min).
pytestmark = pytest.mark.extended

BUCKET = "rayfleet-checkpoints"
SECRET = "s3cr3t-rayfleet-ckpt-0123456789"
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


@pytest.fixture(scope="module")
def store(s3_url, tmp_path_factory):
    """site.yml's checkpoint store (storage and ml stages) and ray stage with the store on (workers get a 'trainer'
    resource)."""
    extra = tmp_path_factory.mktemp("vars") / "checkpoint.json"
    extra.write_text(json.dumps({
        "checkpoint_store_backend": "s3", "checkpoint_store_bucket": BUCKET,
        "checkpoint_store_endpoint_url": s3_url, "checkpoint_store_access_key_id": "rayfleet",
        "checkpoint_store_secret_access_key": SECRET,
        "ray_resources": "{{ {} if inventory_hostname in groups['ray_head'] else {'trainer': 1} }}",
    }))
    extra.chmod(0o600)
    proc = subprocess.run(["ansible-playbook", "site.yml", "-i", "inventories/sandbox",
                           "--tags", "checkpoint_store,ray", "-e", f"@{extra}"],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=900)
    yield proc
    # the store off again and the workers without their 'trainer' resource: later modules get the inventory's cluster
    off = subprocess.run(["ansible-playbook", "site.yml", "-i", "inventories/sandbox",
                          "--tags", "checkpoint_store,ray"],
                         cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=900)
    assert off.returncode == 0, off.stdout[-4000:]


def test_the_store_is_configured_without_leaking_the_key(request, store, s3_url):
    assert store.returncode == 0, store.stdout[-4000:] + store.stderr[-2000:]
    assert SECRET not in store.stdout and SECRET not in store.stderr
    assert f"checkpoint store: s3://{BUCKET}/rayfleet (created) at {s3_url}" in store.stdout
    assert s3(s3_url).get_bucket_versioning(Bucket=BUCKET)["Status"] == "Enabled"
    for name in inventory_ips(request):
        stat = podman("exec", container(name), "stat", "-c", "%U %G %a", "/etc/rayfleet/checkpoint.env").split()
        assert stat == ["root", "root", "600"], (name, stat)
        settings = podman("exec", container(name), "sh", "-c", "cat /etc/rayfleet/ray-*.json")
        assert SECRET not in settings and "RAYFLEET_CHECKPOINT_ENV_SHA256" in settings


def test_a_run_resumes_on_another_node_from_the_stores_checkpoint(request, store, s3_url):
    assert store.returncode == 0, "the store was not configured (see the test above)"
    head = head_host(request)
    ips = inventory_ips(request)
    by_ip = {ip: name for name, ip in ips.items()}
    head_ip = node_ip(head)
    run = f"resume-{int(time.time())}"
    train = TRAIN.replace("RUN_NAME", run).replace("EPOCHS_HERE", str(EPOCHS)).replace("PAUSE_HERE", str(PAUSE_S))
    podman("exec", container(f"{SANDBOX}-head"), "sh", "-c",
           f"mkdir -p /tmp/ckptjob && cat > /tmp/ckptjob/train.py <<'EOF'\n{train}\nEOF")
    submit = head.run(f"cd /tmp && {RAY} job submit --address {DASHBOARD} --submission-id {run} "
                      "--working-dir /tmp/ckptjob --no-wait -- python train.py")
    assert submit.rc == 0, submit.stdout + submit.stderr
    client = s3(s3_url)

    def states():
        found = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"rayfleet/{run}/"):
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/state.json"):
                    found.append(json.loads(client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()))
        return sorted(found, key=lambda s: s["epoch"])

    deadline = time.monotonic() + 300
    while not [s for s in states() if s["epoch"] >= 2]:
        if time.monotonic() > deadline:
            logs = head.run(f"cd /tmp && {RAY} job logs --address {DASHBOARD} {run}").stdout
            pytest.fail(f"no third checkpoint in the store after 300 s; job log:\n{logs[-3000:]}")
        time.sleep(1)
    first = states()[-1]
    victim = by_ip[first["node"]]
    assert victim != f"{SANDBOX}-head", "the training worker ran on the head despite the trainer resource"
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
        # from the start (the newest one it uploaded may not have been registered by Ray Train before it ended)
        on_victim = [s["epoch"] for s in states() if s["node"] == first["node"]]
        assert first["epoch"] <= result["resumed_from"] <= max(on_victim) + 1, (first, on_victim, result)
        assert {s["node"] for s in states() if s["epoch"] < result["resumed_from"]} == {first["node"]}
    finally:
        podman("exec", container(victim), "systemctl", "start", "ray-worker.service")
        wait_for_cluster(head, head_ip, list(ips.values()), timeout=120)


def test_a_bucket_name_s3_would_reject_is_refused_before_anything_changes(request):
    proc = subprocess.run(["ansible-playbook", "site.yml", "-i", "inventories/sandbox", "--tags", "storage",
                           "-e", "checkpoint_store_backend=s3", "-e", "checkpoint_store_bucket=Ray_Checkpoints"],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode != 0
    assert ('checkpoint_store_bucket "Ray_Checkpoints" is not a bucket name S3 accepts: 3-63 characters of '
            "lowercase letters") in proc.stdout, proc.stdout[-3000:]
    assert proc.stdout.count("changed=0 ") == len(inventory_ips(request))
