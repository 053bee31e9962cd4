# SPDX-License-Identifier: GPL-3.0-or-later
"""inventories/aws lists the cluster's tagged instances into rayfleet's groups (moto on loopback)."""

from __future__ import annotations

import json
import subprocess

from conftest import BIN, ROOT, launch


def inventory(env, *args):
    return subprocess.run([str(BIN / "ansible-inventory"), "-i", "inventories/aws", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)


def unwrap(obj: dict):
    """ansible-inventory marks plugin data as unsafe ({"__ansible_unsafe": value}); the value is what counts."""
    return obj["__ansible_unsafe"] if set(obj) == {"__ansible_unsafe"} else obj


def test_tagged_instances_land_in_the_contract_groups(ec2, aws_env):
    head = launch(ec2, role="head", tags={"rayfleet:nfs_server": "true"})
    submitter = launch(ec2, role="submit")
    gpu_workers = [launch(ec2, role="worker", instance_type="p4d.24xlarge"),
                   launch(ec2, role="worker", instance_type="p4d.24xlarge")]
    spot_worker = launch(ec2, role="worker", instance_type="g5.xlarge", spot=True)
    other_cluster = launch(ec2, role="worker", instance_type="p5.48xlarge", cluster="someone-else")
    stopped = launch(ec2, role="worker")
    ec2.stop_instances(InstanceIds=[stopped])

    inv = json.loads(inventory(aws_env, "--list").stdout, object_hook=unwrap)
    hostvars = inv["_meta"]["hostvars"]
    by_id = {hv["rayfleet_instance_id"]: name for name, hv in hostvars.items()}
    assert set(by_id) == {head, submitter, *gpu_workers, spot_worker}, "only this cluster's running instances"
    assert other_cluster not in by_id and stopped not in by_id
    assert inv["ray_head"]["hosts"] == [by_id[head]]
    assert sorted(inv["ray_worker"]["hosts"]) == sorted(by_id[i] for i in [*gpu_workers, spot_worker])
    assert sorted(inv["gpu"]["hosts"]) == sorted(by_id[i] for i in [*gpu_workers, spot_worker])
    # the optional groups, from their tags (groups.yml defines them, empty, for a cluster without them)
    assert inv["nfs_server"]["hosts"] == [by_id[head]] and inv["ray_submit"]["hosts"] == [by_id[submitter]]
    for name, hv in hostvars.items():
        # Named and reached by the private address Ray registers with.
        assert hv["ansible_host"] == name == hv["private_ip_address"]
        assert "StrictHostKeyChecking=yes" in hv["ansible_ssh_common_args"]
    assert hostvars[by_id[spot_worker]]["rayfleet_spot"] is True
    assert hostvars[by_id[head]]["rayfleet_spot"] is False
    assert hostvars[by_id[gpu_workers[0]]]["rayfleet_instance_type"] == "p4d.24xlarge"

    graph = inventory(aws_env, "--graph").stdout
    assert "@ray_head:" in graph and "@ray_worker:" in graph


def test_site_validation_rejects_two_heads(ec2, aws_env):
    """The inventory contract check of site.yml runs against the AWS inventory before touching any host."""
    launch(ec2, role="head")
    launch(ec2, role="head")
    launch(ec2, role="worker")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "inventories/aws", "playbooks/validate.yml"],
                          cwd=ROOT, env=aws_env, capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "ray_head" in proc.stdout and "exactly one" in proc.stdout, proc.stdout[-3000:]
