# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.launch: a baked image's launch file + baked defaults -> the same settings the ray_node module writes."""

import json
import re

import pytest
from rayfleet.errors import SettingsError
from rayfleet.launch import main, plan
from rayfleet.raynode import RayNodeSettings

DEFAULTS = {
    "ray_bin": "/opt/rayfleet/venv/bin/ray", "ports": {"gcs": "6379", "dashboard": 8265}, "num_cpus": None,
    "num_gpus": None, "resources": {}, "object_store_memory": None, "temp_dir": "/tmp/ray", "dashboard_host": None,
    "env": {}, "auth_token_path": None, "service_user": "rayfleet",
    "units": {"head": "ray-head.service", "worker": "ray-worker.service"},
    "config_paths": {"head": "/etc/rayfleet/ray-head.json", "worker": "/etc/rayfleet/ray-worker.json"},
}


def test_worker_settings_equal_what_the_module_would_write():
    settings, unit, path = plan({"role": "worker", "head_address": "10.0.0.10"}, DEFAULTS, node_ip="10.0.0.11")
    assert unit == "ray-worker.service" and str(path) == "/etc/rayfleet/ray-worker.json"
    module_side = RayNodeSettings.from_mapping(dict(
        role="worker", node_ip="10.0.0.11", ray_bin="/opt/rayfleet/venv/bin/ray", head_address="10.0.0.10:6379",
        ports={"gcs": 6379, "dashboard": 8265}, resources={}, temp_dir="/tmp/ray", env={}))
    assert settings.to_json() == module_side.to_json()
    assert "autoscaling_config" not in settings.to_dict()


def test_head_with_autoscaler_config():
    settings, unit, _path = plan({"role": "head", "autoscaling_config": "/etc/rayfleet/autoscaler/c.yaml"}, DEFAULTS,
                                 node_ip="10.0.0.10")
    assert unit == "ray-head.service"
    assert "--autoscaling-config=/etc/rayfleet/autoscaler/c.yaml" in settings.start_args()


def test_a_named_clusters_image_starts_its_own_unit_with_its_own_token():
    """An image baked with ray_cluster_name: ci names its units, settings and token after the cluster."""
    named = {**DEFAULTS, "cluster_name": "ci", "auth_token_path": "/etc/rayfleet/auth-token-ci",
             "temp_dir": "/tmp/ray-ci", "units": {"head": "ray-ci-head.service", "worker": "ray-ci-worker.service"},
             "config_paths": {"head": "/etc/rayfleet/ray-ci-head.json", "worker": "/etc/rayfleet/ray-ci-worker.json"}}
    settings, unit, path = plan({"role": "worker", "head_address": "10.0.0.10"}, named, node_ip="10.0.0.11")
    assert unit == "ray-ci-worker.service" and str(path) == "/etc/rayfleet/ray-ci-worker.json"
    assert settings.auth_env()["RAY_AUTH_TOKEN_PATH"] == "/etc/rayfleet/auth-token-ci"
    assert "cluster_name" not in settings.to_dict() and "--temp-dir=/tmp/ray-ci" in settings.start_args()


def test_a_node_types_custom_resources_come_from_the_launch_file():
    """A spot replacement or an autoscaled node of a type that carries a custom resource (a ray up node type's)."""
    settings, _unit, _path = plan({"role": "worker", "head_address": "10.0.0.10", "resources": {"trainer": 1}},
                                  DEFAULTS, node_ip="10.0.0.11")
    assert '--resources={"trainer":1}' in settings.start_args()
    with pytest.raises(SettingsError, match=re.escape("resources.GPU: set num_cpus/num_gpus")):
        plan({"role": "worker", "head_address": "10.0.0.10", "resources": {"GPU": 1}}, DEFAULTS, node_ip="10.0.0.11")


@pytest.mark.parametrize(("launch", "message"), [
    ({"role": "manager"}, "role: expected one of ['head', 'worker']"),
    ({"role": "worker"}, "head_address: a worker needs"),
    ({"role": "head", "headaddress": "x"}, "unknown keys ['headaddress']"),
    ({"role": "worker", "head_address": "h:1", "autoscaling_config": "/x"}, "only the head runs the autoscaler"),
])
def test_bad_launch_files_are_named(launch, message):
    with pytest.raises(SettingsError, match=re.escape(message)):
        plan(launch, DEFAULTS, node_ip="10.0.0.11")


def test_cli_dry_run_and_missing_token(tmp_path, capsys):
    launch, defaults = tmp_path / "launch.json", tmp_path / "defaults.json"
    launch.write_text(json.dumps({"role": "head", "node_ip": "10.0.0.10"}))
    defaults.write_text(json.dumps(DEFAULTS))
    assert main(["--launch-file", str(launch), "--defaults-file", str(defaults), "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["role"] == "head"
    defaults.write_text(json.dumps({**DEFAULTS, "auth_token_path": str(tmp_path / "auth-token")}))
    assert main(["--launch-file", str(launch), "--defaults-file", str(defaults)]) == 2
    assert "auth-token is missing" in capsys.readouterr().err
    assert main(["--launch-file", str(tmp_path / "none.json"), "--defaults-file", str(defaults)]) == 2
    assert "launch file" in capsys.readouterr().err


def test_a_ray_up_start_command_writes_the_node_types_resources_into_the_launch_file(tmp_path, capsys):
    """What Ray's cluster launcher exports to a node type's start commands (RAY_OVERRIDE_RESOURCES: the type's
    resources, filled in from the instance type) reaches the node: CPU and GPU as its counts, custom resources as
    its resources, memory and the accelerator type left to Ray on the host."""
    path = tmp_path / "launch.json"
    override = json.dumps({"CPU": 96, "GPU": 8, "memory": 1 << 40, "accelerator_type:A100": 1, "trainer": 1})
    assert main(["--launch-file", str(path), "--write", "worker", "--head-address", "10.0.0.10:6379",
                 "--override-resources", override]) == 0
    written = json.loads(path.read_text())
    assert written == {"role": "worker", "head_address": "10.0.0.10:6379", "num_cpus": 96, "num_gpus": 8,
                       "resources": {"trainer": 1}}
    settings, _unit, _path = plan(written, DEFAULTS, node_ip="10.0.0.11")
    assert {"--num-cpus=96", "--num-gpus=8", '--resources={"trainer":1}'} <= set(settings.start_args())
    # a head node type with no CPU for tasks (resources: {CPU: 0}), as ray up configs often keep the head
    assert main(["--launch-file", str(path), "--write", "head", "--autoscaling-config", "/etc/a.yaml",
                 "--override-resources", '{"CPU": 0}']) == 0
    assert json.loads(path.read_text()) == {"role": "head", "autoscaling_config": "/etc/a.yaml", "num_cpus": 0}
    # outside the cluster launcher the variables are empty: the baked values stand
    assert main(["--launch-file", str(path), "--write", "worker", "--head-address", "h:1",
                 "--override-resources", "", "--override-labels", ""]) == 0
    assert json.loads(path.read_text()) == {"role": "worker", "head_address": "h:1"}
    capsys.readouterr()


def test_a_node_types_labels_reach_its_ray_start_beside_the_admission_label(tmp_path, capsys):
    """A node type's labels (RAY_OVERRIDE_LABELS, JSON) go into the launch file, and from there into ray start's
    --labels, merged with the admission label a node that passed its checks carries."""
    path = tmp_path / "launch.json"
    assert main(["--launch-file", str(path), "--write", "worker", "--head-address", "10.0.0.10:6379",
                 "--override-labels", '{"market": "spot", "example.com/pool": "a100"}']) == 0
    written = json.loads(path.read_text())
    assert written == {"role": "worker", "head_address": "10.0.0.10:6379",
                       "labels": {"example.com/pool": "a100", "market": "spot"}}
    settings, _unit, _path = plan(written, DEFAULTS, node_ip="10.0.0.11")
    assert "--labels=example.com/pool=a100,market=spot" in settings.start_args()
    merged = settings.start_args(labels={"rayfleet.io/admission": "passed"})
    assert [a for a in merged if a.startswith("--labels")] == [
        "--labels=example.com/pool=a100,market=spot,rayfleet.io/admission=passed"]
    # the settings file holds them; a node with none writes no labels key (files from before stay byte-identical)
    assert json.loads(settings.to_json())["labels"] == {"example.com/pool": "a100", "market": "spot"}
    bare, _unit, _path = plan({"role": "worker", "head_address": "h:1"}, DEFAULTS, node_ip="10.0.0.11")
    assert "labels" not in json.loads(bare.to_json())
    assert not [a for a in bare.start_args() if a.startswith("--labels")]
    capsys.readouterr()


@pytest.mark.parametrize(("args", "message"), [
    (["--write", "worker"], "head_address: a worker needs"),
    (["--write", "worker", "--head-address", "h:1", "--override-resources", "{CPU"], "not valid JSON"),
    (["--write", "worker", "--head-address", "h:1", "--override-resources", '{"CPU": 1.5}'],
     "RAY_OVERRIDE_RESOURCES.CPU: expected a whole number"),
    (["--write", "worker", "--head-address", "h:1", "--override-resources", '{"x": "1"}'],
     "RAY_OVERRIDE_RESOURCES.x: expected a number"),
    (["--write", "worker", "--head-address", "h:1", "--override-labels", '["spot"]'],
     "RAY_OVERRIDE_LABELS (the node type's labels) must be a JSON object"),
    (["--write", "worker", "--head-address", "h:1", "--override-labels", '{"rayfleet.io/admission": "passed"}'],
     "RAY_OVERRIDE_LABELS.rayfleet.io/admission: the prefixes ray.io/, rayfleet.io/ are reserved"),
    (["--write", "worker", "--head-address", "h:1", "--override-labels", '{"market": "spot!"}'],
     "RAY_OVERRIDE_LABELS.market: expected a value of at most 63 characters"),
])
def test_a_bad_start_command_writes_nothing_and_says_why(tmp_path, capsys, args, message):
    path = tmp_path / "launch.json"
    assert main(["--launch-file", str(path), *args]) == 2
    assert message in capsys.readouterr().err and not path.exists()
