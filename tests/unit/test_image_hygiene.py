# SPDX-License-Identifier: GPL-3.0-or-later
"""The image-hygiene checks against fake filesystem trees: a clean one passes, each kind of dirt is named."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles/image_cleanup/files/image_hygiene.py"
spec = importlib.util.spec_from_file_location("image_hygiene", SCRIPT)
hygiene = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hygiene)

HELD = ("Package: nvidia-driver\nStatus: hold ok installed\nVersion: 535\n\n"
        "Package: bash\nStatus: install ok installed\n")


def clean_tree(root: Path) -> Path:
    for d in ["etc/ssh", "var/lib/rayfleet", "var/log/apt", "tmp/.X11-unix", "var/tmp", "home/debian/.ssh", "root",
              "var/lib/dpkg", "etc/systemd/system/timers.target.wants", "var/cache/apt/archives"]:
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "etc/machine-id").write_text("")
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                     "rayfleet:x:999:999::/var/lib/rayfleet:/bin/bash\n"
                                     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (root / "etc/ssh/sshd_config").write_text("")
    (root / "var/log/apt/history.log").write_text("")
    (root / "var/lib/dpkg/status").write_text(HELD)
    return root


def check(root, *extra):
    args = hygiene.argparse.Namespace(hold=["nvidia-*"], max_log_bytes=1024, ray_temp_dir=[],
                                      allow_authorized_keys=False)
    for key, value in extra:
        setattr(args, key, value)
    return {c["name"]: c["problems"] for c in hygiene.run(root, args)["checks"]}


def test_clean_tree_passes(tmp_path, capsys):
    root = clean_tree(tmp_path)
    assert all(not p for p in check(root).values())
    assert hygiene.main(["--root", str(root), "--hold", "nvidia-*"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


@pytest.mark.parametrize(("dirt", "name", "expect"), [
    ("etc/ssh/ssh_host_ed25519_key", "ssh_host_keys_removed", "/etc/ssh/ssh_host_ed25519_key"),
    ("etc/rayfleet/auth-token", "no_secrets", "/etc/rayfleet/auth-token"),
    # a named cluster's (ray_cluster_name), where the builder was once its node
    ("etc/rayfleet/auth-token-alice", "no_secrets", "/etc/rayfleet/auth-token-alice"),
    ("etc/rayfleet/ray-alice-worker.json", "no_secrets", "/etc/rayfleet/ray-alice-worker.json"),
    ("etc/rayfleet/ray-worker.container.json", "no_secrets", "/etc/rayfleet/ray-worker.container.json"),
    ("etc/rayfleet/preflight-alice.json", "no_secrets", "/etc/rayfleet/preflight-alice.json"),
    ("etc/rayfleet/checkpoint.env", "no_secrets", "/etc/rayfleet/checkpoint.env"),
    ("etc/rayfleet/firewall.d/rayfleet_alice.nft", "no_secrets", "/etc/rayfleet/firewall.d/rayfleet_alice.nft"),
    ("etc/rayfleet/monitoring-alice.json", "no_secrets", "/etc/rayfleet/monitoring-alice.json"),
    ("etc/nftables.rayfleet.nft", "no_secrets", "/etc/nftables.rayfleet.nft"),
    ("etc/grafana/rayfleet-admin.env", "no_secrets", "/etc/grafana/rayfleet-admin.env"),
    # the Ray user's home (/etc/passwd: /var/lib/rayfleet) holds the cluster's SSH key
    ("var/lib/rayfleet/.ssh/id_ed25519", "no_secrets", "/var/lib/rayfleet/.ssh/id_ed25519"),
    ("var/lib/rayfleet/.bash_history", "no_shell_history", "/var/lib/rayfleet/.bash_history"),
    ("home/debian/.ssh/id_ed25519", "no_secrets", "/home/debian/.ssh/id_ed25519"),
    ("home/debian/.ssh/authorized_keys", "no_secrets", "/home/debian/.ssh/authorized_keys"),
    ("root/.bash_history", "no_shell_history", "/root/.bash_history"),
    ("var/lib/cloud/instance", "cloud_init_clean", "/var/lib/cloud/instance"),
    ("tmp/ray", "temp_dirs_empty", "/tmp/ray"),
    ("var/cache/apt/archives/x.deb", "package_caches_empty", "/var/cache/apt/archives/x.deb"),
    ("etc/systemd/system/timers.target.wants/apt-daily.timer", "no_self_upgrades", "apt-daily.timer is enabled"),
    ("etc/systemd/system/multi-user.target.wants/ray-worker.service", "no_cluster_units_enabled",
     "/etc/systemd/system/multi-user.target.wants/ray-worker.service is enabled"),
    ("etc/systemd/system/multi-user.target.wants/ray-alice-head.service", "no_cluster_units_enabled",
     "ray-alice-head.service is enabled"),
    ("etc/systemd/system/multi-user.target.wants/rayfleet-firewall-alice.service", "no_cluster_units_enabled",
     "rayfleet-firewall-alice.service is enabled"),
    ("etc/systemd/system/multi-user.target.wants/rayfleet-preemption.service", "no_cluster_units_enabled",
     "rayfleet-preemption.service is enabled"),
    ("etc/systemd/system/timers.target.wants/rayfleet-health-alice.timer", "no_cluster_units_enabled",
     "rayfleet-health-alice.timer is enabled"),
    ("etc/rayfleet/health.json", "no_secrets", "/etc/rayfleet/health.json"),
])
def test_each_leftover_is_named(tmp_path, dirt, name, expect):
    root = clean_tree(tmp_path)
    (root / dirt).parent.mkdir(parents=True, exist_ok=True)
    (root / dirt).write_text("x")
    problems = check(root)
    assert any(expect in p for p in problems[name]), problems
    assert sum(bool(p) for p in problems.values()) == 1, problems


def test_machine_id_logs_and_holds(tmp_path):
    root = clean_tree(tmp_path)
    (root / "etc/machine-id").write_text("0123456789abcdef\n")
    (root / "var/log/syslog").write_text("x" * 2048)
    (root / "var/lib/dpkg/status").write_text(HELD.replace("hold ok", "install ok"))
    problems = check(root)
    assert problems["machine_id_empty"] and "not empty" in problems["machine_id_empty"][0]
    assert "/var/log/syslog (2048)" in problems["logs_small"][0]
    assert problems["gpu_packages_held"] == ["nvidia-driver is installed but not held (apt upgrade would move it)"]
    assert check(root, ("allow_authorized_keys", True))["no_secrets"] == []


def test_what_a_baked_image_keeps_passes(tmp_path):
    """The image's own rayfleet files: the launch defaults and the enabled launch unit, not a node's identity."""
    root = clean_tree(tmp_path)
    (root / "etc/rayfleet").mkdir()
    for name in ["launch-defaults.json", "nccl.json", "cuda.json", "shared-storage.json"]:
        (root / "etc/rayfleet" / name).write_text("{}")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True)
    for unit in ["rayfleet-launch.service", "rayfleet-ssh-hostkeys.service", "ray-dashboard-tunnel.service"]:
        (wants / unit).symlink_to(f"/etc/systemd/system/{unit}")
    (root / "etc/systemd/system/ray-head.service").write_text("[Unit]\n")  # installed, not enabled
    assert all(not p for p in check(root).values()), check(root)
