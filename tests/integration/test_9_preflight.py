# SPDX-License-Identifier: GPL-3.0-or-later
"""The preflight gate on the sandbox: PyTorch on every node, a gloo all-reduce across the 3 nodes (by hand
and through playbooks/preflight.yml with its report), and a node whose link is throttled (tc tbf on its
interface) named as the slow node, failing the gate. The sandbox has no GPU: NCCL paths run on GPU hosts only."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import yaml
from conftest import (
    PYTHON_AS_RAY,
    ROOT,
    SANDBOX,
    VENV,
    ansible_env,
    container,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    ray_nodes,
    run_site,
    wait_for_cluster,
)

TORCH = yaml.safe_load((ROOT / "roles/pytorch/defaults/main.yml").read_text())["pytorch_version"]


def preflight(report_dir, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "playbooks/preflight.yml", "-i", "inventories/sandbox",
         "-e", f"preflight_report_dir={report_dir}", *extra],
        cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)


JOB = "python -c 'import ray; ray.init(); print(\"cluster CPUs\", ray.cluster_resources()[\"CPU\"])'"


def submit(*extra: str, entrypoint: str = JOB) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "playbooks/submit.yml", "-i", "inventories/sandbox",
         "-e", json.dumps({"submit_entrypoint": entrypoint}), *extra],
        cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)


def test_torch_with_gloo_in_the_ray_venv(host):
    out = host.check_output(f"{VENV}/bin/python -c 'import torch, torch.distributed as d; "
                            f"print(torch.__version__, d.is_gloo_available())'")
    version, gloo = out.split()
    assert version.split("+")[0] == TORCH and gloo == "True"


def test_allreduce_by_hand_across_every_node(request):
    head = head_host(request)
    ips = inventory_ips(request)
    cmd = head.run(f"{PYTHON_AS_RAY} -m rayfleet.collective --address {node_ip(head)}:6379 --backend gloo "
                   f"--max-bytes 1M --warmup-iters 1 --iters 3 --pair-ratio 0.2 --json "
                   + " ".join(f"--host {ip}={name}" for name, ip in ips.items()))
    assert cmd.rc == 0, f"rc={cmd.rc}\n{cmd.stdout[-3000:]}\n{cmd.stderr[-3000:]}"
    data = json.loads(cmd.stdout)
    assert data["ok"] and data["backend"] == "gloo" and data["world_size"] == len(ips)
    # one rank on each inventory node, placed by the STRICT_SPREAD placement group
    assert sorted(n["name"] for n in data["nodes"]) == sorted(ips)
    assert sorted(n["ip"] for n in data["nodes"]) == sorted(ips.values())
    assert [r["size"] for r in data["rows"]] == [8 << i for i in range(18)]  # 8 B .. 1 MiB
    assert all(r["wrong"] == 0 for r in data["rows"]), "all-reduce returned wrong sums"
    assert all(r["busbw_gbps"] > 0 for r in data["rows"][-4:])
    assert len(data["pairs"]) == 3 and all(p["busbw_gbps"] > 0 for p in data["pairs"])


def test_preflight_passes_and_writes_the_report(request, tmp_path):
    """submit.yml runs the preflight first (its report, its verdict on the head), then the job: its working directory
    is uploaded and its logs saved."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    (workdir / "job.py").write_text("import ray\nray.init()\nprint('cluster CPUs', ray.cluster_resources()['CPU'])\n")
    job = submit("-e", f"preflight_report_dir={tmp_path}", "-e", f"submit_working_dir={workdir}",
                 "-e", f"submit_log_dir={tmp_path / 'jobs'}", "-e", "submit_id=demo-job-1", entrypoint="python job.py")
    assert job.returncode == 0, job.stdout[-4000:] + job.stderr[-2000:]
    assert "Preflight passed: 3 node(s), peak bus bandwidth" in job.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["ok"] and result["collective"]["ok"] and result["cluster"]["alive_nodes"] == 3
    assert (tmp_path / "report.md").read_text().startswith("# Cluster health: PASS")
    assert "PASS" in (tmp_path / "report.html").read_text()
    assert (tmp_path / "busbw.png").read_bytes()[:4] == b"\x89PNG"
    assert result["ssh"] == dict.fromkeys(inventory_ips(request), "ok")
    # every node's shared storage probed: the sandbox's one NFS mount answers on each
    assert {n: [(m["path"], m["state"]) for m in mounts] for n, mounts in result["storage"].items()} == {
        n: [("/mnt/shared", "ok")] for n in inventory_ips(request)}, result["storage"]
    # every node's GPUs were read through NVML: none here, said so with the reason, Ray agreeing (0 GPUs)
    assert sorted(result["gpus"]) == sorted(inventory_ips(request))
    for name, found in result["gpus"].items():
        assert found["available"] is False and found["count"] == 0 and found["ray_gpus"] == 0.0, name
        assert found["reason"] == "no NVIDIA driver on this host (libnvidia-ml.so.1 not found)", name
    state = json.loads(head_host(request).file("/etc/rayfleet/preflight.json").content_string)
    assert state["ok"] is True and len(state["node_ids"]) == 3 and state["backend"] == "gloo"
    # every node was proved at admission before its Ray started; none joined from outside the inventory
    assert state["admitted_nodes"] == sorted(inventory_ips(request).values()), state
    assert (state["unadmitted_nodes"], state["joined_nodes"]) == ([], []), state
    assert "Proved at admission: 3 of 3." in job.stdout
    # the job ran after the preflight passed
    assert job.stdout.index("Preflight passed") < job.stdout.index("demo-job-1: SUCCEEDED")
    assert "cluster CPUs 6.0" in (tmp_path / "jobs" / "demo-job-1.log").read_text()
    # the same submission id again: not submitted twice
    again = submit("-e", "submit_preflight=recent", "-e", f"submit_working_dir={workdir}", "-e",
                   f"submit_log_dir={tmp_path / 'jobs'}", "-e", "submit_id=demo-job-1", entrypoint="python job.py")
    assert again.returncode == 0 and re.search(r"-head\s+:\s+ok=\d+\s+changed=0 ", again.stdout), again.stdout[-2000:]


def test_failed_job_fails_with_its_own_error(tmp_path):
    job = submit("-e", "submit_preflight=recent", "-e", f"submit_log_dir={tmp_path}",
                 entrypoint="python -c 'import sys; print(\"bad input: epoch -1\"); sys.exit(3)'")
    assert job.returncode != 0
    assert "FAILED" in job.stdout and "exit code 3" in job.stdout and "bad input: epoch -1" in job.stdout


def test_bad_input_fails_before_anything_runs(tmp_path):
    no_job = submit(entrypoint="")
    assert no_job.returncode != 0 and 'submit_entrypoint is ""' in no_job.stdout
    assert "PLAY [Preflight from the head]" not in no_job.stdout, "the preflight ran for a job that cannot be submitted"
    cases = ((["-e", "preflight_min_busbw_gbps=-5"],
              ['preflight_min_busbw_gbps is "-5"; expected null (the floor of preflight_instance_type from the data '
               "file) or GB/s >= 0"]),
             (["-e", "preflight_min_bytes=1M", "-e", "preflight_max_bytes=1K"],
              ["preflight_min_bytes 1M (1048576 bytes) is larger than preflight_max_bytes 1K (1024 bytes): "
               "the size range is empty"]),
             (["-e", "preflight_nodes=5"], ["preflight_nodes is 5, but the inventory has 3 node(s)"]),
             # a typo must not switch the bandwidth floor off
             (["-e", "preflight_instance_type=p5.48xlarg"],
              ['preflight_instance_type is \\"p5.48xlarg\\", which the preflight\'s data file (busbw_thresholds.yml) '
               "has no bandwidth floor for", "p5.48xlarge"]))
    for extra, texts in cases:
        proc = preflight(tmp_path, *extra)
        assert proc.returncode != 0, extra
        for text in texts:
            assert text in proc.stdout, f"{extra}: {text!r} not in\n{proc.stdout[-2500:]}"
        # refused by the settings check, before any node was read or probed
        assert "PLAY [Facts of every node" not in proc.stdout, f"{extra}: the preflight went on to the nodes"


def test_gate_shuts_when_a_node_changed_since_the_preflight(request, tmp_path):
    head = head_host(request)
    ips = inventory_ips(request)
    alive = {n["node_id"] for n in ray_nodes(head, node_ip(head)) if n["state"] == "ALIVE"}
    verdict = json.loads(head.run("sudo cat /etc/rayfleet/preflight.json").stdout or "{}")
    if not (verdict.get("ok") and set(verdict.get("node_ids", [])) == alive):  # else the last one still holds
        passed = preflight(tmp_path)
        assert passed.returncode == 0, passed.stdout[-3000:]
    worker = f"{SANDBOX}-worker1"
    old_id = {n["node_id"] for n in ray_nodes(head, node_ip(head))
              if n["state"] == "ALIVE" and n["node_ip"] == ips[worker]}
    podman("exec", container(worker), "systemctl", "restart", "ray-worker.service")
    wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=120, exclude_ids=old_id)
    job = submit("-e", "submit_preflight=recent")
    assert job.returncode != 0 and "Not submitting: the Ray nodes changed since the preflight" in job.stdout, (
        job.stdout[-3000:])


def test_a_gpu_the_host_does_not_have_is_refused_at_admission_by_site_yml(request):
    """Ray told a worker has a GPU (ray_num_gpus=1) that NVML does not see: the node's admission refuses it before
    its Ray starts, and site.yml fails at once naming the node and the check."""
    victim = f"{SANDBOX}-worker2"
    ips = inventory_ips(request)
    # only the victim's Ray stage re-runs (--limit), as an operator changing one node would do it
    fake = run_site("--tags", "ray", "--limit", victim, "-e", json.dumps({"ray_num_gpus": 1}))
    # a plain run: the --tags run changed the victim's ray stage, so the stage has no record there until a run
    # applies it whole
    restored = run_site("--limit", victim)
    assert restored.returncode == 0, restored.stdout[-3000:]
    assert fake.returncode != 0
    assert (f"Ray worker on {ips[victim]} was refused at admission and did not start: gpu: the node is given 1 GPU(s) "
            "(num_gpus), but no NVIDIA driver on this host" in fake.stdout), fake.stdout[-3000:]
    head = head_host(request)
    wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=120)


# A worker's Ray started by hand without its admission checks (rayfleet.raynode exec --no-admission), from a settings
# file that gives it a GPU: what the preflight must catch when a node never went through admission
BY_HAND = ("systemd-run --unit=rayfleet-by-hand --collect --uid=rayfleet --gid=rayfleet --property=KillMode=mixed "
           f"--setenv=PATH={VENV}/bin:/usr/bin:/bin {VENV}/bin/python "
           "-m rayfleet.raynode exec --config /etc/rayfleet/ray-worker.json --no-admission")


def test_gpus_ray_claims_but_nvml_cannot_see_fail_the_gate(request, tmp_path):
    """A worker started by hand, without admission, and told it has a GPU (num_gpus=1) that NVML does not see: the
    preflight names that node, and its verdict lists it as started without admission."""
    victim = f"{SANDBOX}-worker2"
    head = head_host(request)
    ips = inventory_ips(request)
    settings = "/etc/rayfleet/ray-worker.json"
    edit = (f"import json; p = {settings!r}; d = json.load(open(p)); d['num_gpus'] = 1; "
            "open(p, 'w').write(json.dumps(d, indent=2, sort_keys=True) + '\\n')")
    old = {n["node_id"] for n in ray_nodes(head, node_ip(head)) if n["node_ip"] == ips[victim]}
    podman("exec", container(victim), "cp", "-p", settings, f"{settings}.preflight-test")
    try:
        podman("exec", container(victim), "sh", "-c", f"python3 -c {shlex.quote(edit)} && "
               f"systemctl stop ray-worker.service && {BY_HAND}")
        wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=120, exclude_ids=old)
        proc = preflight(tmp_path)
    finally:
        podman("exec", container(victim), "sh", "-c", "systemctl stop rayfleet-by-hand; "
               f"systemctl reset-failed rayfleet-by-hand; mv {settings}.preflight-test {settings} && "
               "systemctl start ray-worker.service")
        wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=120)
    assert proc.returncode != 0
    assert (f"{victim}: Ray reports 1 GPU(s) on this node, but no NVIDIA driver on this host"
            in proc.stdout), proc.stdout[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert not result["ok"] and result["gpus"][victim]["ray_gpus"] == 1.0
    assert result["verdict"]["unadmitted_nodes"] == [ips[victim]], result["verdict"]
    assert "not measured" in (tmp_path / "report.md").read_text()


def test_expected_gpus_missing_fail_every_node(tmp_path):
    proc = preflight(tmp_path, "-e", "preflight_expect_gpus=8")
    assert proc.returncode != 0
    for name in ("head", "worker1", "worker2"):
        assert f"{SANDBOX}-{name}: expected 8 GPU(s), but no NVIDIA driver on this host" in proc.stdout


def test_broken_ssh_trust_is_named(tmp_path):
    victim = f"{SANDBOX}-worker1"
    keys = "/var/lib/rayfleet/.ssh/authorized_keys"
    podman("exec", container(victim), "mv", keys, keys + ".moved")
    try:
        proc = preflight(tmp_path)
    finally:
        podman("exec", container(victim), "mv", keys + ".moved", keys)
    assert proc.returncode != 0
    assert f"{victim}: SSH from the head as rayfleet failed:" in proc.stdout and "Permission denied" in proc.stdout
    assert json.loads((tmp_path / "result.json").read_text())["ssh"][victim] == "failed"


def test_throttled_node_is_named_and_fails_the_gate(request, tmp_path):
    victim = f"{SANDBOX}-worker2"
    # 100 Mbit/s out of the victim's interface: a bad cable or a NIC negotiated down, as seen from the cluster
    podman("exec", container(victim), "tc", "qdisc", "add", "dev", "eth0", "root", "tbf",
           "rate", "100mbit", "burst", "64kb", "latency", "50ms")
    try:
        proc = preflight(tmp_path)
    finally:
        podman("exec", container(victim), "tc", "qdisc", "del", "dev", "eth0", "root")
    assert proc.returncode != 0, "the preflight passed with a throttled node"
    assert f"slow node(s): {victim}" in proc.stdout, proc.stdout[-4000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert not result["ok"] and result["collective"]["pair_findings"]["suspects"] == [victim]
    slow = {tuple(p["nodes"]) for p in result["collective"]["pair_findings"]["slow_pairs"]}
    assert all(victim in pair for pair in slow) and len(slow) == 2
    assert (tmp_path / "report.md").read_text().startswith("# Cluster health: FAIL")
    state = json.loads(head_host(request).file("/etc/rayfleet/preflight.json").content_string)
    assert state["ok"] is False and any(victim in p for p in state["problems"])
    # the gate stays shut until a preflight passes again
    job = submit("-e", "submit_preflight=recent")
    assert job.returncode != 0 and f"Not submitting: the last preflight FAILED: slow node(s): {victim}" in job.stdout
