# SPDX-License-Identifier: GPL-3.0-or-later
"""A run that would restart Ray never ends running work by surprise: with a job running (its driver on the head, an
actor it placed on a worker), a worker's own setting, a new Ray and a plain site.yml with a changed Ray setting are
refused before anything changes, naming the work, and the job runs on. With ray_restart_running_jobs=true the run
restarts Ray, warns with what it ended, and the job is gone."""

from __future__ import annotations

import json
import time

import pytest
from conftest import (
    DASHBOARD,
    RAY,
    SANDBOX,
    container,
    converge_again,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    ray_nodes,
    run_site,
)

testinfra_hosts = [f"ansible://{SANDBOX}-head"]
HEAD, WORKER1 = f"{SANDBOX}-head", f"{SANDBOX}-worker1"
PIP = "/opt/rayfleet/venv/bin/python -m pip list --format freeze --disable-pip-version-check"

JOB = """
import time, ray
ray.init()
@ray.remote(num_cpus=0, resources={"node:WORKER_IP": 0.01})
class Holder:
    def ready(self):
        return True
holder = Holder.options(name="guard-holder").remote()
ray.get(holder.ready.remote())
print("HOLDING", flush=True)
time.sleep(1800)
"""


def _status(head, sid: str) -> str:
    return head.run(f"cd /tmp && timeout 60 {RAY} job status --address {DASHBOARD} {sid}").stdout


def _node_ids(head) -> dict[str, str]:
    return {n["node_ip"]: n["node_id"] for n in ray_nodes(head, node_ip(head)) if n["state"] == "ALIVE"}


@pytest.fixture
def running_job(request):
    """A job whose driver runs on the head and whose actor lives on worker1; stopped (and the sandbox converged with
    its own settings) after the test."""
    head = head_host(request)
    ips = inventory_ips(request)
    sid = f"guard-{int(time.time())}"
    podman("exec", container(HEAD), "sh", "-c",
           f"mkdir -p /tmp/guardjob && cat > /tmp/guardjob/job.py <<'EOF'\n"
           f"{JOB.replace('WORKER_IP', ips[WORKER1])}\nEOF")
    submit = head.run(f"cd /tmp && timeout 120 {RAY} job submit --address {DASHBOARD} --submission-id {sid} "
                      "--working-dir /tmp/guardjob --no-wait -- python job.py")
    assert submit.rc == 0, submit.stdout + submit.stderr
    deadline = time.monotonic() + 180
    while "HOLDING" not in head.run(f"cd /tmp && timeout 60 {RAY} job logs --address {DASHBOARD} {sid}").stdout:
        assert time.monotonic() < deadline, f"the job never placed its actor:\n{_status(head, sid)}"
        time.sleep(2)
    yield head, sid, ips
    head.run(f"cd /tmp && timeout 60 {RAY} job stop --address {DASHBOARD} {sid}")
    converge_again()


def test_a_restart_that_would_end_running_work_is_refused_and_the_flag_ends_it(running_job):
    head, sid, ips = running_job
    ids = _node_ids(head)
    pip_before = head.check_output(PIP)

    # a worker's own setting: that worker would restart, and it holds the job's actor
    proc = run_site("--tags", "ray", "--limit", WORKER1, "-e", json.dumps({"ray_resources": {"guard": 1}}))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    assert ("not restarting Ray (resources.guard changed): it would end running work on this node: actor Holder "
            "'guard-holder' of job") in out, out[-3000:]
    assert "The Ray logs and the journal" not in out, "a refusal is not a failed start: no logs to bring"
    assert _node_ids(head)[ips[WORKER1]] == ids[ips[WORKER1]]

    # new packages in the Ray venv (as a new ray_version, whose wheels the sandbox lacks): every node would restart,
    # and the head's job with it; refused before pip touches a venv
    proc = run_site("--tags", "ray", "-e", json.dumps({"ray_extra_pip_packages": ["pyyaml"]}))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    assert (f"not going on with changing the packages of the Ray venv on {HEAD}, which restarts its node: it would "
            f"end running work on the cluster: job {sid} ('python job.py'") in out, out[-3000:]
    assert "ray_restart_running_jobs=true" in out and "ray_restart_wait_s" in out
    assert head.check_output(PIP) == pip_before

    # a plain site.yml with a changed Ray setting: the head refuses, the workers wait for it, nothing restarts
    change = json.dumps({"ray_env": {"RAYFLEET_GUARD": "1"}})
    proc = run_site("-e", change)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    assert (f"not restarting Ray (env.RAYFLEET_GUARD changed): it would end running work on the cluster (a head "
            f"restart ends every job): job {sid}") in out, out[-3000:]
    assert f"the head {HEAD} failed or refused its own restart in this run" in out, out[-3000:]
    assert "RUNNING" in _status(head, sid)
    assert _node_ids(head) == ids, "a node restarted although the run was refused"
    assert "RAYFLEET_GUARD" not in head.check_output("sudo cat /etc/rayfleet/ray-head.json")

    # allowed: Ray restarts everywhere, the run says what ended, and the job is gone
    proc = run_site("-e", change, "-e", "ray_restart_running_jobs=true")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, out[-3000:]
    assert f"ended running work: job {sid}" in out, out[-3000:]
    assert set(_node_ids(head).values()).isdisjoint(ids.values()), "not every node restarted"
    assert "RUNNING" not in _status(head, sid)
