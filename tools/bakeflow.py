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
from sandbox import ROOT, Sandbox, SandboxError, podman, podman_env

VENV = "/opt/rayfleet/venv"
TOKEN_PATH = "/etc/rayfleet/auth-token"
GCS_PORT = 6379
# What a host has installed, read the same way in the image and on a booted host: Debian's installed packages and the
# Ray venv's distributions, one "<kind> <name> <version>" line each
INSTALLED = (
    "dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\\n' | awk '$1 == \"ii\" {print \"deb\", $2, $3}'; "
    f"for d in {VENV}/lib/python3*/site-packages/*.dist-info; do "
    '[ -d "$d" ] && basename "$d" .dist-info | sed "s/^\\(.*\\)-\\([^-]*\\)$/pip \\1 \\2/"; done'
)
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


def parse_installed(text: str) -> dict[str, str]:
    """INSTALLED's output -> {"deb <name>" | "pip <name>": version}."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("deb", "pip"):
            out[f"{parts[0]} {parts[1]}"] = parts[2]
    return out


def installed_in_image(image: str) -> dict[str, str]:
    """What the image holds (INSTALLED, run in a throwaway container of it, no network)."""
    proc = podman("run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", INSTALLED)
    return parse_installed(proc.stdout)


def installed_on(sandbox: Sandbox, host: str) -> dict[str, str]:
    return parse_installed(exec_on(sandbox, host, INSTALLED))


def package_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What was installed (+), removed (-) or moved to another version between two INSTALLED readings."""
    changes = [f"+{name} {after[name]}" for name in sorted(after.keys() - before.keys())]
    changes += [f"-{name} {before[name]}" for name in sorted(before.keys() - after.keys())]
    changes += [f"{name} {before[name]} -> {after[name]}" for name in sorted(before.keys() & after.keys())
                if before[name] != after[name]]
    return changes


def exec_on(sandbox: Sandbox, host: str, command: str, check: bool = True) -> str:
    proc = podman("exec", sandbox.container(host), "sh", "-c", command, check=check)
    return proc.stdout


ADMITTED = ("rayfleet.io/admission", "passed")


def alive_nodes(sandbox: Sandbox, head_ip: str, token_path: str = TOKEN_PATH, *, admitted: bool = False
                ) -> dict[str, str]:
    """The GCS node table, asked on the head as the Ray user: node IP -> node id of the ALIVE nodes ({} if none);
    admitted: only those that passed their admission checks before their Ray started (the node label)."""
    out = exec_on(sandbox, "head", f"sudo -u rayfleet {VENV}/bin/python -m rayfleet.cluster --json "
                                   f"--auth-token-path {token_path} --address {head_ip}:{GCS_PORT} "
                                   "2>/dev/null", check=False)
    try:
        return {n["node_ip"]: n["node_id"] for n in json.loads(out)["nodes"] if n["state"] == "ALIVE"
                and (not admitted or (n.get("labels") or {}).get(ADMITTED[0]) == ADMITTED[1])}
    except (ValueError, KeyError):
        return {}


def wait_alive(sandbox: Sandbox, head_ip: str, count: int, timeout: float = 120,
               token_path: str = TOKEN_PATH, *, admitted: bool = False) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = alive_nodes(sandbox, head_ip, token_path, admitted=admitted)
        if len(nodes) >= count:
            return nodes
        if time.monotonic() > deadline:
            raise SandboxError(f"{sandbox.name}: {len(nodes)} of {count} Ray nodes alive after {timeout:.0f} s")
        time.sleep(0.5)


def remove_image(image: str) -> None:
    podman("rmi", "--force", "--ignore", image, check=False)


# What a join must leave as it is on the hosts already there: their rayfleet, SSH and firewall files and the ruleset
_STATE = ("{ find /etc/rayfleet /etc/ssh /etc/nftables* -type f 2>/dev/null | sort | xargs -r sha256sum; "
          "nft list ruleset 2>/dev/null | sha256sum; } | sha256sum")
_TASK = ("import ray, socket, sys\n"
         "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On\n"
         "ray.init(address='auto', logging_level='ERROR', log_to_driver=False)\n"
         "f = ray.remote(num_cpus=0)(lambda: socket.gethostname())\n"
         "print(ray.get(f.options(scheduling_strategy=On(sys.argv[1], soft=False)).remote(), timeout=60))\n")


def host_state(sandbox: Sandbox, host: str) -> str:
    """One digest of a host's rayfleet, SSH and firewall files and its nftables ruleset."""
    return exec_on(sandbox, host, _STATE).strip()


def task_on(sandbox: Sandbox, node_id: str, token_path: str = TOKEN_PATH) -> str:
    """Run a Ray task on the node with this id (a driver on the head, as the Ray user); the hostname it ran on."""
    proc = subprocess.run(
        ["podman", "exec", "-i", sandbox.container("head"), "sh", "-c",
         "cat > /tmp/rayfleet-task.py && cd /tmp && sudo -u rayfleet env RAY_AUTH_MODE=token "
         f"RAY_AUTH_TOKEN_PATH={token_path} {VENV}/bin/python /tmp/rayfleet-task.py {node_id}"],
        input=_TASK, capture_output=True, text=True, check=False, timeout=180, env=podman_env())
    return proc.stdout.strip() or proc.stderr.strip()[-2000:]
