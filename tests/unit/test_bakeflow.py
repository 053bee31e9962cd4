# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/bakeflow.py: what a host has installed, read from INSTALLED's output, and what changed between two readings.

The readings below are test data, shaped as dpkg-query and the venv's dist-info names give them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bakeflow


def test_installed_packages_and_venv_distributions_are_read_by_kind_and_name(tmp_path):
    venv = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for dist in ("ray-2.60.0", "nvidia_ml_py-13.580.82", "torch-2.13.0+cpu"):
        (venv / f"{dist}.dist-info").mkdir(parents=True)
    (venv / "ray").mkdir()  # a package directory, no distribution
    command = bakeflow.INSTALLED.replace(bakeflow.VENV, str(tmp_path / "venv"))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    got = bakeflow.parse_installed(out)
    assert {k: v for k, v in got.items() if k.startswith("pip ")} == {
        "pip ray": "2.60.0", "pip nvidia_ml_py": "13.580.82", "pip torch": "2.13.0+cpu"}
    assert got.get("deb dpkg"), "dpkg itself is an installed Debian package"


def test_lines_of_packages_not_installed_or_of_other_shapes_are_left_out():
    got = bakeflow.parse_installed("deb bash 5.2\nrc old 1.0\ndeb half\npip ray 2.60.0\n")
    assert got == {"deb bash": "5.2", "pip ray": "2.60.0"}


def test_changes_name_what_was_added_removed_and_moved():
    before = {"deb nftables": "1.0.6", "deb rpcbind": "1.2.6", "pip ray": "2.60.0"}
    after = {"deb nftables": "1.0.6", "deb nfs-ganesha": "4.3-2", "pip ray": "2.61.0"}
    assert bakeflow.package_changes(before, after) == [
        "+deb nfs-ganesha 4.3-2", "-deb rpcbind 1.2.6", "pip ray 2.60.0 -> 2.61.0"]
    assert bakeflow.package_changes(before, dict(before)) == []
