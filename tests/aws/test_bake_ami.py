# SPDX-License-Identifier: GPL-3.0-or-later
"""The aws backend of playbooks/bake.yml (roles/bake) against moto: AMI, tags, ray up YAML, and bad input."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from conftest import BIN, ROOT, launch


def bake(tmp_path, env, instance_id, **extra):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"builder": {
        "ansible_connection": "local", "ansible_python_interpreter": str(BIN / "python"),
        "rayfleet_instance_id": instance_id}}}}))
    variables = {
        "bake_backend": "aws", "bake_image_name": "rayfleet-node", "bake_cluster_name": "team-a",
        "bake_subnet_id": "subnet-0abc", "bake_security_group_id": "sg-0abc", "bake_key_name": "team-a",
        "bake_ssh_private_key": "~/.ssh/team-a.pem", "bake_placement_group": "team-a-pg", "bake_efs_id": "fs-0abc",
        "bake_cluster_yaml_path": str(tmp_path / "cluster.yaml"), "bake_tags": {"team": "a"},
        "bake_auth_token_path": str(tmp_path / "token"), "bake_artifacts_dir": str(tmp_path / "artifacts"),
        **extra,
    }
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), "tests/aws/bake_snapshot.yml",
                           "-e", json.dumps(variables)], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    return proc


def state(ec2, instance_id):
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]


def test_bake_creates_a_tagged_ami_and_a_ray_up_yaml(ec2, aws_env, tmp_path):
    builder = launch(ec2, role="builder", instance_type="p4d.24xlarge")
    proc = bake(tmp_path, aws_env, builder)
    assert proc.returncode == 0, proc.stdout[-4000:]

    images = ec2.describe_images(Owners=["self"])["Images"]
    assert [i["Name"] for i in images] == ["rayfleet-node-test-1"]
    ami = images[0]
    assert ami["State"] == "available"
    tags = {t["Key"]: t["Value"] for t in ami.get("Tags", [])}
    assert tags["rayfleet:ray"] == "2.60.0" and tags["rayfleet:torch"] == "2.13.0"
    assert tags["rayfleet:nvidia-driver"] == "535.247.01-1~deb12u1" and tags["rayfleet:commit"] == "abc123def456"
    assert tags["rayfleet:version"] == "0.1.0" and tags["team"] == "a" and tags["Name"] == "rayfleet-node-test-1"
    assert "rayfleet:cuda" not in tags, "empty versions are not tagged"
    assert state(ec2, builder) == "stopped", "stopped for a consistent snapshot, kept (not asked to terminate)"

    cluster = yaml.safe_load((tmp_path / "cluster.yaml").read_text())
    head, worker = (cluster["available_node_types"][t] for t in ("ray.head.default", "ray.worker.default"))
    assert cluster["provider"] == {"type": "aws", "region": "us-east-1", "use_internal_ips": True,
                                   "cache_stopped_nodes": False}
    assert head["node_config"]["ImageId"] == worker["node_config"]["ImageId"] == ami["ImageId"]
    assert worker["node_config"]["InstanceType"] == "p4d.24xlarge"
    assert worker["node_config"]["Placement"] == {"GroupName": "team-a-pg"}
    assert head["node_config"]["SubnetIds"] == ["subnet-0abc"] and head["node_config"]["KeyName"] == "team-a"
    assert any("fs-0abc:/ /mnt/efs" in c for c in cluster["setup_commands"])
    # the worker's start command as the cluster launcher runs it: the head's IP and the node type's resources and
    # labels in the environment (the node library's rayfleet.launch, here with this Python, writes the launch file)
    launch_cmd = next(c for c in cluster["worker_start_ray_commands"] if "rayfleet.launch --write" in c)
    venv_python = "sudo /opt/rayfleet/venv/bin/python"
    assert launch_cmd.startswith(venv_python + " -m rayfleet.launch --write worker ")
    written = tmp_path / "launch.json"
    subprocess.run(["sh", "-c", launch_cmd.replace(venv_python, str(BIN / "python")) + f" --launch-file {written}"],
                   env={"RAY_HEAD_IP": "10.0.0.10", "RAY_OVERRIDE_RESOURCES": '{"CPU":96,"GPU":8,"trainer":1}',
                        "RAY_OVERRIDE_LABELS": '{"market":"spot"}',
                        "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "library_py")},
                   capture_output=True, text=True, check=True)
    assert json.loads(written.read_text()) == {"role": "worker", "head_address": "10.0.0.10:6379", "num_cpus": 96,
                                               "num_gpus": 8, "resources": {"trainer": 1},
                                               "labels": {"market": "spot"}}
    assert any("--write head --autoscaling-config" in c for c in cluster["head_start_ray_commands"])
    assert cluster["file_mounts"] == {"/tmp/rayfleet-auth-token": str(tmp_path / "token")}
    assert token_commands(cluster) == ["sudo install -m 0600 /tmp/rayfleet-auth-token /etc/rayfleet/auth-token"
                                       " && rm -f /tmp/rayfleet-auth-token"] * 2

    manifest = json.loads((tmp_path / "artifacts/rayfleet-node-test-1/manifest.json").read_text())
    assert manifest["image_id"] == ami["ImageId"] and manifest["builder"] == builder


def token_commands(cluster: dict) -> list[str]:
    return [c for key in ("head_start_ray_commands", "worker_start_ray_commands") for c in cluster[key]
            if "rayfleet-auth-token" in c]


def test_a_named_cluster_gets_its_token_where_its_units_read_it(ec2, aws_env, tmp_path):
    """ray_cluster_name names the units and the token file on the nodes (ray role): the YAML hands the token there."""
    builder = launch(ec2, role="builder")
    proc = bake(tmp_path, aws_env, builder, ray_cluster_name="team-a")
    assert proc.returncode == 0, proc.stdout[-4000:]
    cluster = yaml.safe_load((tmp_path / "cluster.yaml").read_text())
    assert [c.split()[5] for c in token_commands(cluster)] == ["/etc/rayfleet/auth-token-team-a"] * 2


def test_terminate_builder_when_asked(ec2, aws_env, tmp_path):
    builder = launch(ec2, role="builder")
    proc = bake(tmp_path, aws_env, builder, bake_aws_terminate_builder=True, bake_cluster_yaml=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert state(ec2, builder) == "terminated"
    assert len(ec2.describe_images(Owners=["self"])["Images"]) == 1


@pytest.mark.parametrize(("case", "expect"), [
    ("no credentials", "AWS credentials for the bake of builder do not work"),
    ("no region", 'bake_aws_region is ""; expected the builder\'s AWS region'),
    ("unknown instance", "is not a running or stopped instance"),
    ("empty template variable", 'bake_subnet_id is ""; the cluster YAML needs it'),
])
def test_bad_input_changes_nothing(ec2, aws_env, tmp_path, monkeypatch, case, expect):
    builder = launch(ec2, role="builder")
    env, extra, target = dict(aws_env), {}, builder
    if case == "no credentials":
        env.pop("AWS_ACCESS_KEY_ID")
        env.pop("AWS_SECRET_ACCESS_KEY")
    elif case == "no region":
        env.pop("AWS_REGION")
        env.pop("AWS_DEFAULT_REGION")
    elif case == "unknown instance":
        target = "i-0123456789abcdef0"
    else:
        extra["bake_subnet_id"] = ""
    proc = bake(tmp_path, env, target, **extra)
    assert proc.returncode != 0
    assert expect in proc.stdout, proc.stdout[-3000:]
    assert state(ec2, builder) == "running", "nothing was stopped"
    assert ec2.describe_images(Owners=["self"])["Images"] == [], "nothing was snapshotted"
