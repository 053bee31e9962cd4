#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible inventory script for the local sandbox: the running containers of one sandbox.

The sandbox is chosen by RAYFLEET_SANDBOX (default: demo); `make demo` and the Molecule scenario
start their containers with tools/sandbox.py, which labels them with their group (ray_head/ray_worker).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from sandbox import Sandbox, SandboxError


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        print("{}")
        return 0
    try:
        print(json.dumps(Sandbox(os.environ.get("RAYFLEET_SANDBOX", "demo")).inventory()))
    except SandboxError as exc:
        print(f"sandbox inventory: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
