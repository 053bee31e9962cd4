# SPDX-License-Identifier: GPL-3.0-or-later
"""The molecule scenarios reach the sandbox hosts the way users reach theirs: with host keys verified."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(ROOT.glob("molecule/*/molecule.yml"))


def verifies_host_keys(config: dict) -> list[str]:
    """What in a molecule.yml would let Ansible or ssh skip host key checking (empty when nothing does)."""
    problems = []
    driver = config.get("driver") or {}
    options = driver.get("ssh_connection_options")
    if not options:
        problems.append("driver.ssh_connection_options is unset: molecule's defaults turn host key checking off")
    else:
        text = " ".join(options)
        if "StrictHostKeyChecking=yes" not in text or "StrictHostKeyChecking=no" in text:
            problems.append(f"driver.ssh_connection_options must say StrictHostKeyChecking=yes only: {options}")
        if "UserKnownHostsFile=/dev/null" in text:
            problems.append("driver.ssh_connection_options must keep a known_hosts file")
    defaults = ((config.get("provisioner") or {}).get("config_options") or {}).get("defaults") or {}
    if defaults.get("host_key_checking") is not True:
        problems.append("provisioner.config_options.defaults.host_key_checking must be true (molecule sets False)")
    return problems


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.parent.name for p in SCENARIOS])
def test_each_scenario_verifies_the_sandbox_host_keys(path):
    assert verifies_host_keys(yaml.safe_load(path.read_text())) == []


def test_molecules_defaults_are_caught():
    config = {"driver": {"name": "default"}, "provisioner": {"config_options": {"defaults": {}}}}
    assert len(verifies_host_keys(config)) == 2
    config["driver"]["ssh_connection_options"] = ["-o UserKnownHostsFile=/dev/null", "-o StrictHostKeyChecking=no"]
    assert len(verifies_host_keys(config)) == 3
