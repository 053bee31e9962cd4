# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/bench_converge.py's hand floor installs what the first site.yml installed on a host: the packages and Ray
venv packages its stage records hold, at the versions recorded, and Ray as the ray role asked for it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_converge

VENV = "/opt/rayfleet/venv"


def test_the_hand_floor_installs_the_recorded_packages_and_the_ray_roles_requirements():
    records = [
        {"stage": "common", "items": [{"kind": "package", "name": "chrony"}, {"kind": "package", "name": "gone"},
                                      {"kind": "file", "path": "/etc/x"}],
         "state": {"package:chrony": {"version": "4.3-2+deb12u1", "status": "installed"}, "package:gone": None,
                   "file:/etc/x": {"sha1": "0"}}},
        {"stage": "ray", "items": [{"kind": "pip", "venv": VENV, "name": "ray"},
                                   {"kind": "pip", "venv": VENV, "name": "uv"},
                                   {"kind": "package", "name": "python3-venv"}],
         "state": {f"pip:{VENV}:ray": "2.60.0", f"pip:{VENV}:uv": "0.13.10",
                   "package:python3-venv": {"version": "3.11.2-1+b1"}}},
        {"stage": "ml", "items": [{"kind": "pip", "venv": VENV, "name": "torch"},
                                  {"kind": "pip", "venv": "/opt/other", "name": "numpy"}],
         "state": {f"pip:{VENV}:torch": "2.13.0+cpu", "pip:/opt/other:numpy": "2.0.0"}},
    ]
    apt, pip = bench_converge.install_list(records, "ray[default]==2.60.0\nnvidia-ml-py==13.0\nargs: \n")
    assert apt == ["chrony=4.3-2+deb12u1", "python3-venv=3.11.2-1+b1"]
    # Ray with the extras the role asked for, not its bare recorded name; another venv's packages are not Ray's, and
    # uv, what the roles install with, is no package of the hand install
    assert pip == ["nvidia-ml-py==13.0", "ray[default]==2.60.0", "torch==2.13.0+cpu"]


def test_the_first_runs_tasks_per_host_are_read_from_its_recap():
    out = """PLAY RECAP *********************************************************************
rayfleet-bench-head        : ok=312  changed=120  unreachable=0    failed=0    skipped=40   rescued=0    ignored=0
rayfleet-bench-worker1     : ok=250  changed=99   unreachable=0    failed=0    skipped=38   rescued=0    ignored=0

Tuesday 08 December 2026  02:11:01 +0000 (0:00:00.025)       0:03:13.449 ******
"""
    assert bench_converge.tasks_per_host(out) == {"rayfleet-bench-head": 312, "rayfleet-bench-worker1": 250}
    assert bench_converge.tasks_per_host("no recap") == {}
