# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/support.md is what tools/support_matrix.py writes from the collection's own facts, and every test it names
as the evidence for a cell exists."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import support_matrix

ROOT = support_matrix.ROOT


def test_the_support_matrix_is_current():
    assert (ROOT / "docs" / "support.md").read_text() == support_matrix.render(), \
        "docs/support.md is not current: run tools/support_matrix.py"


def test_every_test_it_names_exists_and_every_declared_platform_has_a_row():
    for _component, _source, _kind, test, _note in support_matrix.GPU_STACK:
        assert test is None or (ROOT / test).is_file(), test
    text = support_matrix.render()
    for name, version in support_matrix.declared_platforms():
        assert f"| {support_matrix.RELEASES.get((name, version), f'{name} {version}')} |" in text
    # the floor the matrix states is the one the playbooks enforce
    check = (ROOT / "playbooks" / "boilerplate.yml").read_text()
    assert re.search(rf"version\('{re.escape(support_matrix.ansible_floor())}', '>='\)", check)
    # the tested rows are the sandbox's images, and Debian 12's is what CI runs
    assert "| Debian 12 | tested: the whole verify suite on 3 sandbox hosts, `make test` (CI) |" in text
