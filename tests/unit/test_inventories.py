# SPDX-License-Identifier: GPL-3.0-or-later
"""Shipped inventories keep the group contract site.yml checks (one ray_head, ray_worker, no overlap)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_example_inventory_keeps_the_group_contract():
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    inventory_cmd = str(Path(sys.executable).parent / "ansible-inventory")
    proc = subprocess.run([inventory_cmd, "-i", "inventories/example", "--list"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    inv = json.loads(proc.stdout)
    head, workers = inv["ray_head"]["hosts"], inv["ray_worker"]["hosts"]
    assert len(head) == 1 and workers and not set(head) & set(workers)
    assert "StrictHostKeyChecking=yes" in inv["_meta"]["hostvars"][head[0]]["ansible_ssh_common_args"]
