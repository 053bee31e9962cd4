# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/bench_localize.py: the simulated localization benchmark repeats with its seed and records its setting."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_localize


def _run(tmp_path, name, *extra):
    out = tmp_path / name
    assert bench_localize.main(["--sizes", "8,64", "--bad", "0,2", "--trials", "30", "--out", str(out),
                                *extra]) == 0
    return json.loads(out.read_text())


def test_a_seeded_run_repeats_and_records_what_it_ran_on(tmp_path, capsys):
    first = _run(tmp_path, "a.json", "--seed", "7")
    again = _run(tmp_path, "b.json", "--seed", "7")
    assert first["results"] == again["results"] and first["ring_of_every_node"] == again["ring_of_every_node"]
    assert first["machine"]["cpus"] and first["machine"]["python"] and first["machine"]["os"] and first["date"]
    assert "--sizes 8,64 --bad 0,2 --trials 30" in first["command"]  # by hand, or make bench-localize LOCALIZE_ARGS=
    rows = {(r["nodes"], r["bad"]): r for r in first["results"]}
    assert rows[(8, 0)]["first_pass"] == "ring of 8 nodes" and rows[(64, 2)]["first_pass"] == "ring of 32 blocks"
    assert all(r["false_positives"] == 0 and r["false_negatives"] == 0 for r in first["results"])
    assert rows[(64, 0)]["rounds_max"] == 2 and rows[(64, 2)]["rounds_max"] <= rows[(64, 2)]["rounds_bound"]
    assert [r["nodes"] for r in first["ring_of_every_node"]] == [64]
    assert first["goal"] is None  # 256 nodes were not run
    assert "# The preflight's pair tests (pair_ring_max 32), 30 trials per row" in capsys.readouterr().out


def test_json_output_is_the_written_result(tmp_path, capsys):
    data = _run(tmp_path, "c.json", "--json", "--sizes", "8", "--bad", "1")
    printed = json.loads(capsys.readouterr().out)
    assert printed == data and [(r["nodes"], r["bad"]) for r in data["results"]] == [(8, 1)]  # the last flags win
