# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/bench_report.py: docs/benchmarks.md's sections are written from the JSON results, and only theirs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_report


def result(hosts: int, rerun: float) -> dict:
    return {"benchmark": "converge", "command": f"make bench-converge WORKERS={hosts - 1}", "hosts": hosts,
            "machine": {"cpus": 2, "memory_gib": 23.4, "os": "Linux-6.1", "python": "3.11.7"},
            "first_run_s": 150.2, "first_run_per_role_s": {"ray": 60.0, "common": 20.5, "tiny": 0.1},
            "rerun_s": [rerun, rerun + 1, rerun - 1], "rerun_median_s": rerun,
            "rerun_per_role_median_s": {"ray": 0.4}, "drift_rerun_s": [20.0, 21.0, 19.0],
            "drift_rerun_median_s": 20.0, "floor_plain_ray_start_s": [9.0, 9.5, 8.5], "floor_median_s": 9.0,
            "rerun_over_floor": round(rerun / 9.0, 2), "date": "2026-11-27T01:30:00Z"}


def test_the_converge_section_comes_from_the_results_and_other_sections_stay(tmp_path):
    art = tmp_path / "artifacts"
    art.mkdir()
    (art / "bench-converge-3hosts.json").write_text(json.dumps(result(3, 10.0)))
    (art / "bench-converge-6hosts.json").write_text(json.dumps(result(6, 13.0)))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- begin: bake -->\nkept as it is\n<!-- end: bake -->\n")
    assert bench_report.main(["--artifacts", str(art), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "kept as it is" in text
    assert "### 3 hosts — 2026-11-27" in text and "`make bench-converge WORKERS=2`" in text
    assert "| idempotent re-run | 10.0 | 10.0 / 11.0 / 9.0;" in text
    assert "ray 60.0, common 20.5 |" in text and "tiny" not in text
    assert "| 6 | 13.0 | +1.00 | 2026-11-27 |" in text
    # written again: the section is replaced, not added twice
    bench_report.main(["--artifacts", str(art), "--doc", str(doc)])
    assert doc.read_text().count("<!-- begin: converge -->") == 1


def test_without_results_nothing_is_rewritten(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- begin: converge -->\nold\n<!-- end: converge -->\n")
    bench_report.main(["--artifacts", str(tmp_path / "none"), "--doc", str(doc)])
    assert "old" in doc.read_text()


def test_the_localize_section_comes_from_the_bench_result(tmp_path):
    art = tmp_path / "artifacts"
    art.mkdir()
    row = {"nodes": 256, "bad": 1, "trials": 1000, "ring_max": 32, "first_pass": "ring of 32 blocks",
           "rounds_max": 5, "rounds_mean": 5.0, "rounds_bound": 18.0, "pair_tests_mean": 38.0, "pair_tests_max": 38,
           "wall_s_mean": 16.7, "wall_s_max": 24.7, "one_at_a_time_s_mean": 65.2, "false_positives": 0,
           "false_negatives": 0, "trials_with_a_false_positive": 0}
    ring = dict(row, first_pass="ring of 256 nodes", rounds_max=3, pair_tests_mean=257.0, wall_s_mean=7.4)
    (art / "bench-localize.json").write_text(json.dumps({
        "benchmark": "localize", "command": "make bench-localize", "commit": "abc1234", "date": "2026-11-27T05:00:00Z",
        "machine": {"cpus": 2, "python": "3.11.7", "os": "Linux-6.1"},
        "model": {"healthy": 1.0, "bad": [0.1, 0.3], "noise": 0.1, "ratio": 0.75, "ring_max": 32, "seed": 1,
                  "setup_s": 1.0, "pair_bytes": 1 << 30, "iters": 10, "warmup": 2, "link_gbps": 50.0},
        "results": [row], "ring_of_every_node": [ring],
        "goal": {"nodes": 256, "bad": 1, "rounds_max": 5, "rounds_bound": 18.0, "false_positives": 0, "met": True}}))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- begin: converge -->\nkept\n<!-- end: converge -->\n")
    assert bench_report.main(["--artifacts", str(art), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "kept" in text and text.count("<!-- begin: localize -->") == 1
    assert "with `make bench-localize` at commit `abc1234`" in text and "u uniform in +-10%" in text
    assert "| 256 | 1 | ring of 32 blocks | 5 (5) | 18 | 38 (38) | 16.7 (24.7) | 65.2 | 1000 | 0 | 0 |" in text
    assert "| 256 | 3 | 257 | 7.4 | 65.2 | 0 | 0 |" in text
    assert "5 rounds at most, 0 false positive(s): **met**." in text
