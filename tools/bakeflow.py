# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox bake flow, shared by tests/bake and tools/bench_bake.py.

bare builder (tools/sandbox.py) -> playbooks/bake.yml (podman backend) -> hosts booted from the image with their
launch file (Sandbox.up(launch=True)) -> Ray's own view of the cluster -> site.yml on those hosts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox import ROOT, Sandbox, SandboxError, podman

VENV = "/opt/rayfleet/venv"
TOKEN_PATH = "/etc/rayfleet/auth-token"
GCS_PORT = 6379
# site.yml's package installs: none may change on a host booted from a baked image
PACKAGE_TASKS = ("Install base packages", "Install Ray into its venv", "Install PyTorch", "Install nftables",
                 "Install the monitoring packages", "Install the NFS client tools")
TASK = re.compile(r"^TASK \[(.+?)\] \*+$")
CHANGED = re.compile(r"^changed: \[([^\]]+)\]")


def ansible_env(sandbox: Sandbox, **extra: str) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, RAYFLEET_SANDBOX=sandbox.name, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
                PATH=f"{bin_dir}:{os.environ.get('PATH', '')}", **extra)


def playbook(sandbox: Sandbox, path: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    """ansible-playbook against one sandbox; only changed and failed results are printed (ANSIBLE_DISPLAY_*)."""
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventories/sandbox", path, *args]
    env = ansible_env(sandbox, ANSIBLE_DISPLAY_OK_HOSTS="false", ANSIBLE_DISPLAY_SKIPPED_HOSTS="false", **env)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def bake(builder: Sandbox, image_name: str, tag: str, *extra: str) -> subprocess.CompletedProcess:
    return playbook(builder, "playbooks/bake.yml", "-e", "bake_backend=podman", "-e", "bake_hosts=ray_head",
                    "-e", f"bake_image_name={image_name}", "-e", f"bake_image_tag={tag}", *extra)


def changed_tasks(output: str) -> dict[str, list[str]]:
    """Task name -> hosts it changed, from ansible-playbook's default output."""
    changed: dict[str, list[str]] = {}
    task = ""
    for line in output.splitlines():
        if m := TASK.match(line):
            task = m.group(1)
        elif m := CHANGED.match(line):
            changed.setdefault(task, []).append(m.group(1))
    return changed


def package_changes(changed: dict[str, list[str]]) -> list[str]:
    """The package-install tasks among changed_tasks()."""
    return sorted(t for t in changed if any(p in t for p in PACKAGE_TASKS))


def exec_on(sandbox: Sandbox, host: str, command: str, check: bool = True) -> str:
    proc = podman("exec", sandbox.container(host), "sh", "-c", command, check=check)
    return proc.stdout


def alive_nodes(sandbox: Sandbox, head_ip: str, token_path: str = TOKEN_PATH) -> dict[str, str]:
    """The GCS node table, asked on the head as the Ray user: node IP -> node id of the ALIVE nodes ({} if none)."""
    out = exec_on(sandbox, "head", f"sudo -u rayfleet {VENV}/bin/python -m rayfleet.cluster --json "
                                   f"--auth-token-path {token_path} --address {head_ip}:{GCS_PORT} "
                                   "2>/dev/null", check=False)
    try:
        return {n["node_ip"]: n["node_id"] for n in json.loads(out)["nodes"] if n["state"] == "ALIVE"}
    except (ValueError, KeyError):
        return {}


def wait_alive(sandbox: Sandbox, head_ip: str, count: int, timeout: float = 120,
               token_path: str = TOKEN_PATH) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = alive_nodes(sandbox, head_ip, token_path)
        if len(nodes) >= count:
            return nodes
        if time.monotonic() > deadline:
            raise SandboxError(f"{sandbox.name}: {len(nodes)} of {count} Ray nodes alive after {timeout:.0f} s")
        time.sleep(0.5)


def remove_image(image: str) -> None:
    podman("rmi", "--force", "--ignore", image, check=False)
