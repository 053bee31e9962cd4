# SPDX-License-Identifier: GPL-3.0-or-later
"""The tarball `ansible-galaxy collection build` makes holds what users run, and none of the development tree."""

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEVELOPMENT = ("tests/unit/", "tests/integration/", "tests/bake/", "tests/aws/", "tests/gpu/", "molecule/",
               "sandbox/", "tools/", "inventories/sandbox/", "changelogs/fragments/", ".venv/", ".sandbox/",
               "artifacts/", ".cache/", "collections/")


def test_the_tarball_holds_the_collection_and_not_the_development_tree(tmp_path):
    galaxy = str(Path(sys.executable).parent / "ansible-galaxy")
    subprocess.run([galaxy, "collection", "build", "--output-path", str(tmp_path), str(ROOT)], cwd=ROOT,
                   capture_output=True, text=True, check=True)
    (tarball,) = tmp_path.glob("rayfleet-cluster-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = [m.name + ("/" if m.isdir() else "") for m in tar.getmembers()]
    development = [n for n in names if n.startswith(DEVELOPMENT)]
    assert not development and not {"Makefile", "requirements-dev.txt", "ansible.cfg"} & set(names), development
    for wanted in ("site.yml", "requirements.yml", "README.md", "CHANGELOG.md", "meta/runtime.yml",
                   "roles/ray/tasks/main.yml", "plugins/modules/ray_node.py", "library_py/rayfleet/admission.py",
                   "playbooks/preflight.yml", "inventories/example/hosts.yml", "docs/admission.md",
                   "changelogs/changelog.yaml"):
        assert wanted in names, wanted
