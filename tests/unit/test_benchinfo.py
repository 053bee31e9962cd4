# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/benchinfo.py: every benchmark result says when, on what and with which command it was measured."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import benchinfo


def test_make_is_recorded_only_when_make_ran_the_recipe_as_written(monkeypatch):
    make, recipe = "make bench-bake WORKERS=2", ["--workers", "2"]
    monkeypatch.setenv("MAKELEVEL", "1")
    assert benchinfo.command("tools/bench_bake.py", ["--workers", "2"], make, recipe) == make
    # other arguments than the recipe's: the script's own command line, quoted to be pasted back
    assert (benchinfo.command("tools/bench_bake.py", ["--workers", "2", "--boots", "5"], make, recipe)
            == "tools/bench_bake.py --workers 2 --boots 5")
    monkeypatch.delenv("MAKELEVEL")
    assert (benchinfo.command("tools/bench_bake.py", ["--workers", "2"], make, recipe)
            == "tools/bench_bake.py --workers 2")
    assert (benchinfo.command("tools/bench_collective.py", ["--name", "my demo", "--existing"])
            == "tools/bench_collective.py --name 'my demo' --existing")


def test_the_stamp_has_a_utc_date_the_machine_and_the_command(monkeypatch):
    monkeypatch.delenv("MAKELEVEL", raising=False)
    stamp = benchinfo.stamp("tools/bench_collective.py", ["--runs", "3"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp["date"])
    assert stamp["command"] == "tools/bench_collective.py --runs 3"
    assert isinstance(stamp["commit"], str)
    m = stamp["machine"]
    assert m["cpus"] >= 1 and m["python"] and m["os"] and m["kernel"]
    assert m["memory_gib"] is None or m["memory_gib"] > 0
