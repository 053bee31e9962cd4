# SPDX-License-Identifier: GPL-3.0-or-later
"""Ray's own view of the cluster, read on the head: every inventory node alive, nothing else."""

from __future__ import annotations

import base64
import json

from conftest import DASHBOARD, RAY, RAY_DEFAULTS, alive_ips, inventory_ips, node_ip, ray_nodes

testinfra_hosts = ["ansible://ray_head"]


def test_ray_list_nodes_shows_every_inventory_node_alive(host, request):
    nodes = ray_nodes(host, node_ip(host))
    assert alive_ips(nodes) == sorted(inventory_ips(request).values())
    heads = [n for n in nodes if n["state"] == "ALIVE" and n["is_head_node"]]
    assert [n["node_ip"] for n in heads] == [node_ip(host)]


def test_ray_status_counts_every_node_active(host, request):
    status = host.run(f"cd /tmp && {RAY} status --address {node_ip(host)}:{RAY_DEFAULTS['ray_gcs_port']}")
    assert status.rc == 0, status.stderr
    active = status.stdout.split("Active:")[1].split("Pending:")[0]
    assert active.count("node_") == len(inventory_ips(request)), status.stdout


def test_each_node_offers_the_configured_cpus(host, request):
    want = host.ansible.get_variables().get("ray_num_cpus")
    nodes = [n for n in ray_nodes(host, node_ip(host)) if n["state"] == "ALIVE"]
    assert want is not None, "the sandbox inventory pins ray_num_cpus"
    assert {n["resources_total"]["CPU"] for n in nodes} == {float(want)}


JOB = """
import json
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init()

@ray.remote(num_cpus=1)
def where():
    import sys
    return ray.util.get_node_ip_address(), sys.executable

nodes = [n for n in ray.nodes() if n["Alive"]]
refs = [where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in nodes]
print("RESULT " + json.dumps(sorted(ray.get(refs))))
"""


def test_a_submitted_job_runs_a_task_on_every_node(host, request):
    """Ray's Jobs API on the head: `python` is the venv's, and tasks run on every node."""
    encoded = base64.b64encode(JOB.encode()).decode()
    host.run(f"echo {encoded} | base64 -d > /tmp/rayfleet_job_check.py && chmod 0644 /tmp/rayfleet_job_check.py")
    cmd = host.run(f"cd /tmp && timeout 180 {RAY} job submit --address {DASHBOARD} "
                   "-- python /tmp/rayfleet_job_check.py")
    assert cmd.rc == 0, f"job failed:\n{cmd.stdout[-3000:]}\n{cmd.stderr[-2000:]}"
    line = next((ln for ln in cmd.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, cmd.stdout[-3000:]
    result = json.loads(line.removeprefix("RESULT "))
    assert sorted(ip for ip, _exe in result) == sorted(inventory_ips(request).values())
    venv_python = f"{RAY_DEFAULTS['ray_venv_dir']}/bin/python"
    assert all(exe.startswith(venv_python) for _ip, exe in result), result
