# SPDX-License-Identifier: GPL-3.0-or-later
"""Role READMEs and argument specs agree with the roles' defaults, so the docs cannot drift."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.parent.parent for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))


def test_readme_variable_tables_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "role_docs.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_default_is_specified_and_prefixed(role):
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = specs["main"]["options"]
    assert sorted(set(defaults) - set(options)) == [], "defaults without an argument spec"
    assert sorted(set(options) - set(defaults)) == [], "argument spec options without a default"
    assert all(name.startswith(f"{role.name}_") for name in defaults)
    for name, opt in options.items():
        if "default" in opt and "{{" not in str(defaults[name]):
            assert opt["default"] == defaults[name], f"{name}: spec default differs from defaults/main.yml"
