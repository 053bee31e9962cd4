# SPDX-License-Identifier: GPL-3.0-or-later
"""`ansible-galaxy collection build` works from this checkout and ships what users need, nothing local."""

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_collection_builds_with_modules_roles_and_library(tmp_path):
    galaxy = str(Path(sys.executable).parent / "ansible-galaxy")
    subprocess.run([galaxy, "collection", "build", "--output-path", str(tmp_path), str(ROOT)],
                   capture_output=True, text=True, check=True)
    (tarball,) = tmp_path.glob("rayfleet-cluster-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    for wanted in ("plugins/modules/ray_node.py", "plugins/modules/ray_cluster_info.py", "roles/ray/tasks/main.yml",
                   "library_py/rayfleet/raynode.py", "site.yml", "MANIFEST.json"):
        assert wanted in names
    assert not {n for n in names if n.split("/")[0] in (
        ".venv", ".sandbox", ".cache", ".ansible", ".pytest_cache", ".ruff_cache", "artifacts", "collections")}
