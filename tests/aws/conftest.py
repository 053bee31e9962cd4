# SPDX-License-Identifier: GPL-3.0-or-later
"""AWS paths against a local moto server on loopback: no traffic leaves this machine.

The server is moto's own (``moto_server``, from requirements-dev.txt) on 127.0.0.1 and a free port; boto3,
botocore and the amazon.aws plugins reach it through AWS_URL / AWS_ENDPOINT_URL with throwaway credentials.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from motoserver import moto_server  # noqa: E402

BIN = Path(sys.executable).parent
REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_url(tmp_path_factory):
    try:
        with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture()
def aws_env(moto_url, monkeypatch):
    """Environment for boto3 and Ansible pointed at the moto server, reset between tests."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"))
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",  # moto's throwaway credentials
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_URL": moto_url,  # amazon.aws plugins and modules
        "AWS_ENDPOINT_URL": moto_url,  # boto3 itself
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")


@pytest.fixture()
def ec2(aws_env):
    import boto3

    return boto3.client("ec2", region_name=REGION)


def launch(ec2, *, role: str, instance_type: str = "m5.xlarge", cluster: str = "rayfleet", spot: bool = False,
           image_id: str | None = None, tags: dict[str, str] | None = None) -> str:
    """One tagged instance in moto (``tags``: more tags than the cluster's and the role's); returns its id."""
    image_id = image_id or ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    extra = {"InstanceMarketOptions": {"MarketType": "spot"}} if spot else {}
    resp = ec2.run_instances(
        ImageId=image_id, MinCount=1, MaxCount=1, InstanceType=instance_type,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "rayfleet:cluster", "Value": cluster}, {"Key": "rayfleet:role", "Value": role},
            *({"Key": k, "Value": v} for k, v in (tags or {}).items())]}],
        **extra,
    )
    return resp["Instances"][0]["InstanceId"]
