#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Print a sandbox cluster's state as Ray reports it, and how to reach it.

Runs ``python -m rayfleet.cluster`` (Ray's state API) on the head over SSH with the sandbox's
verified host keys, so what it prints is what Ray itself says, not what Ansible assumed.

Example: RAYFLEET_SANDBOX=demo tools/summary.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox import Sandbox

VENV_PYTHON = "/opt/rayfleet/venv/bin/python"
GCS_PORT = 6379
DASHBOARD = "http://127.0.0.1:8265"  # on the head's loopback (the ray role's default)
TOKEN_PATH = "/etc/rayfleet/auth-token"


def main() -> int:
    sb = Sandbox(os.environ.get("RAYFLEET_SANDBOX", "demo"))
    hosts = sb.hosts()
    head = next((h for h in hosts if h["group"] == "ray_head"), None)
    if head is None:
        print(f"sandbox {sb.name}: no head container running; run 'make demo'", file=sys.stderr)
        return 1
    ssh = sb.ssh_command(head["address"])
    cli = ["sudo", "-u", "rayfleet", VENV_PYTHON, "-m", "rayfleet.cluster", "--auth-token-path", TOKEN_PATH]
    proc = subprocess.run([*ssh, *cli, "--address", f"{head['address']}:{GCS_PORT}"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"sandbox {sb.name}: could not read the cluster from {head['host']}:\n{proc.stderr}", file=sys.stderr)
        return 1
    nodes = [h for h in hosts if h["group"] in ("ray_head", "ray_worker")]
    submit = next((h for h in hosts if h["group"] == "ray_submit"), None)
    print(f"\nRay cluster '{sb.name}' ({len(nodes)} hosts), as Ray's GCS reports it:\n")
    print(proc.stdout.rstrip())
    print(f"\n  dashboard:  make dashboard SANDBOX={sb.name}   (an SSH tunnel to the head's loopback)")
    print(f"  shell:      {' '.join(ssh)}")
    print(f"  a job:      {' '.join(ssh)} sudo -u rayfleet env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_PATH} "
          f"/opt/rayfleet/venv/bin/ray job submit --address {DASHBOARD} "
          "-- python -c \"'import ray; ray.init(); print(ray.cluster_resources())'\"")
    if submit:
        print(f"  submit host: podman exec -it --user debian -w /home/debian {submit['container']} "
              "/home/debian/.local/bin/ray-rayfleet job submit -- python -c \"import ray; ray.init(); "
              "print(ray.cluster_resources())\"   (through its SSH tunnel)")
    print(f"  the token:  {sb.dir / 'ray_auth_token'} (Ray token authentication is on)")
    print(f"  remove it:  make demo-down SANDBOX={sb.name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
