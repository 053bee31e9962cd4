# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection as a Galaxy user gets it: the tarball `ansible-galaxy collection build` makes, installed into a
fresh collections path with its dependencies from the ansible package (no network), and its site playbook run by
FQCN from a directory outside the checkout, with no ansible.cfg."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ansible
import pytest
from conftest import ROOT, SANDBOX, container, drifted_stages, podman
from test_0_drift import changed, gates

HEAD, WORKER1 = f"{SANDBOX}-head", f"{SANDBOX}-worker1"
BIN = Path(sys.executable).parent
# the collections the ansible package ships (rayfleet.cluster's dependencies among them)
SITE_PACKAGES = Path(ansible.__file__).resolve().parents[1]
DRIFTED = "/etc/sysctl.d/60-rayfleet.conf"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A user's directory: the collection installed under collections/, no ansible.cfg (the run finds the
    collections through ANSIBLE_COLLECTIONS_PATH)."""
    home = tmp_path_factory.mktemp("galaxy-user")
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(home), str(ROOT)],
                   capture_output=True, text=True, check=True)
    (tarball,) = home.glob("rayfleet-cluster-*.tar.gz")
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-p",
                           str(home / "collections"), str(tarball)], cwd=home, env=user_env(home),
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(home.glob("ansible.cfg"))
    return home


def user_env(home: Path) -> dict[str, str]:
    """The environment of a user with no Ansible settings but the collections path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=f"{home / 'collections'}:{SITE_PACKAGES}", RAYFLEET_SANDBOX=SANDBOX,
               ANSIBLE_NOCOLOR="1", PATH=f"{BIN}:{env.get('PATH', '')}")
    return env


def run_installed(home: Path, playbook: str = "rayfleet.cluster.site") -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ansible-playbook"), playbook, "-i", str(ROOT / "inventories/sandbox")],
                          cwd=home, env=user_env(home), capture_output=True, text=True, check=False, timeout=600)


def test_its_site_playbook_by_fqcn_with_no_ansible_cfg_repairs_a_drift_and_changes_nothing_else(installed):
    """No callbacks_enabled anywhere: the stage records and the drift check work as in the checkout (the collection's
    playbooks load the stage_items callback from their own directory)."""
    podman("exec", container(WORKER1), "sh", "-c", f"echo '# edited by hand' >> {DRIFTED}")
    proc = run_installed(installed)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "rayfleet.cluster.stage_items is not enabled" not in said, said[-3000:]
    # the same code as the checkout that converged the sandbox: only the drifted stage runs, only where it drifted
    assert gates(proc) == {"common": {WORKER1}}, gates(proc)
    counts = changed(proc)
    assert counts[WORKER1] > 0 and counts[HEAD] == 0, counts
    assert "edited by hand" not in podman("exec", container(WORKER1), "cat", DRIFTED)

    again = run_installed(installed)
    assert again.returncode == 0, again.stdout[-4000:]
    assert set(changed(again).values()) == {0}, again.stdout[-3000:]
    assert gates(again) == {}, f"stages ran again with nothing drifted: {gates(again)}"


def test_a_configured_callback_and_the_playbooks_own_watch_the_run_once(installed, tmp_path):
    """An ansible.cfg that enables rayfleet.cluster.stage_items (as earlier releases asked): the copy beside the
    playbooks stands aside, the drift check finds nothing to do and warns of nothing."""
    (tmp_path / "ansible.cfg").write_text("[defaults]\ncallbacks_enabled = rayfleet.cluster.stage_items\n")
    env = dict(user_env(installed), ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "rayfleet.cluster.drift", "-i",
                           str(ROOT / "inventories/sandbox")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "rayfleet.cluster.stage_items is not enabled" not in said, said[-3000:]
    assert set(changed(proc).values()) == {0}, proc.stdout[-3000:]
    assert drifted_stages(proc.stdout) == {}, proc.stdout[-3000:]
