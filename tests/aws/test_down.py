# SPDX-License-Identifier: GPL-3.0-or-later
"""down.yml on the AWS inventory (moto): what still costs money is listed; instances end only when asked."""

from __future__ import annotations

import subprocess

from conftest import BIN, ROOT, launch


def down(env, *extra):
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", "inventories/aws", "playbooks/down.yml",
                           "--tags", "cloud", *extra], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def states(ec2, ids):
    found = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in found for i in r["Instances"]}


def test_down_lists_costs_and_terminates_only_when_asked(ec2, aws_env):
    head = launch(ec2, role="head")
    workers = [launch(ec2, role="worker", instance_type="p4d.24xlarge"), launch(ec2, role="worker")]
    parked = launch(ec2, role="worker")
    ec2.stop_instances(InstanceIds=[parked])
    other = launch(ec2, role="head", cluster="someone-else")
    # Left-over volumes, made from a snapshot as an instance's are (moto's volumes without one lack the SnapshotId
    # field that AWS always returns, which amazon.aws.ec2_vol_info needs)
    base = ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)["VolumeId"]
    snapshot = ec2.create_snapshot(VolumeId=base)["SnapshotId"]
    ec2.delete_volume(VolumeId=base)
    volume = ec2.create_volume(AvailabilityZone="us-east-1a", Size=100, SnapshotId=snapshot, TagSpecifications=[
        {"ResourceType": "volume", "Tags": [{"Key": "rayfleet:cluster", "Value": "rayfleet"}]}])["VolumeId"]
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=8, SnapshotId=snapshot)

    proc = down(aws_env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "instances kept (-e down_terminate=true terminates them)" in proc.stdout
    assert f"stopped instances of the cluster (EBS still billed): {parked}" in proc.stdout
    assert f"unattached volumes of the cluster (billed): {volume} (100 GiB)" in proc.stdout
    assert "other unattached volumes in the region (not the cluster's; untouched): 1" in proc.stdout
    assert set(states(ec2, [head, *workers, other]).values()) == {"running"}

    proc = down(aws_env, "-e", "down_terminate=true")
    assert proc.returncode == 0, proc.stdout[-3000:]
    after = states(ec2, [head, *workers, parked, other])
    assert all(after[i] == "terminated" for i in (head, *workers, parked)), after
    assert after[other] == "running", "another cluster's instance is never touched"
    assert "stopped instances of the cluster (EBS still billed): none" in proc.stdout
