# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection as a Galaxy user gets it: the tarball `ansible-galaxy collection build` makes, installed into a
fresh collections path with its dependencies from the ansible package (no network), and its site playbook run by
FQCN from a directory outside the checkout, with the settings docs/inventories.md gives such a run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ansible
import pytest
from conftest import ROOT, SANDBOX, container, podman
from test_0_drift import changed, gates

HEAD, WORKER1 = f"{SANDBOX}-head", f"{SANDBOX}-worker1"
BIN = Path(sys.executable).parent
# the collections the ansible package ships (rayfleet.cluster's dependencies among them)
SITE_PACKAGES = Path(ansible.__file__).resolve().parents[1]
DRIFTED = "/etc/sysctl.d/60-rayfleet.conf"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A user's directory: the collection installed under collections/, an ansible.cfg as the docs give it."""
    home = tmp_path_factory.mktemp("galaxy-user")
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(home), str(ROOT)],
                   capture_output=True, text=True, check=True)
    (tarball,) = home.glob("rayfleet-cluster-*.tar.gz")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=f"{home / 'collections'}:{SITE_PACKAGES}")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-p",
                           str(home / "collections"), str(tarball)], cwd=home, env=env, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (home / "ansible.cfg").write_text(
        "[defaults]\n"
        f"collections_path = {home / 'collections'}:{SITE_PACKAGES}\n"
        "callbacks_enabled = rayfleet.cluster.stage_items\n"
        "timeout = 30\n"
        "[ssh_connection]\n"
        "pipelining = True\n"
    )
    return home


def run_installed(home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(RAYFLEET_SANDBOX=SANDBOX, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default",
               PATH=f"{BIN}:{env.get('PATH', '')}")
    return subprocess.run([str(BIN / "ansible-playbook"), "rayfleet.cluster.site", "-i",
                           str(ROOT / "inventories/sandbox")], cwd=home, env=env, capture_output=True, text=True,
                          check=False, timeout=600)


def test_its_site_playbook_by_fqcn_repairs_a_drift_and_changes_nothing_else(installed):
    podman("exec", container(WORKER1), "sh", "-c", f"echo '# edited by hand' >> {DRIFTED}")
    proc = run_installed(installed)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # the same code as the checkout that converged the sandbox: only the drifted stage runs, only where it drifted
    assert gates(proc) == {"common": {WORKER1}}, gates(proc)
    counts = changed(proc)
    assert counts[WORKER1] > 0 and counts[HEAD] == 0, counts
    assert "edited by hand" not in podman("exec", container(WORKER1), "cat", DRIFTED)

    again = run_installed(installed)
    assert again.returncode == 0, again.stdout[-4000:]
    assert set(changed(again).values()) == {0}, again.stdout[-3000:]
    assert gates(again) == {}, f"stages ran again with nothing drifted: {gates(again)}"


def test_a_run_without_the_callback_says_so_in_its_first_seconds(installed, tmp_path):
    """The same installed collection with an ansible.cfg that lacks the callback: the drift check warns that no stage
    is recorded and every stage runs every time, naming the setting, before any stage runs."""
    (tmp_path / "ansible.cfg").write_text((installed / "ansible.cfg").read_text().replace(
        "callbacks_enabled = rayfleet.cluster.stage_items\n", ""))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(RAYFLEET_SANDBOX=SANDBOX, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default",
               PATH=f"{BIN}:{env.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "rayfleet.cluster.drift", "-i",
                           str(ROOT / "inventories/sandbox")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "rayfleet.cluster.stage_items is not enabled: this run records no stage" in said, said[-3000:]
    assert "callbacks_enabled = rayfleet.cluster.stage_items" in said
    assert set(changed(proc).values()) == {0}, proc.stdout[-3000:]
