# SPDX-License-Identifier: GPL-3.0-or-later
"""The preflight's report says when the verdict measured no bandwidth, and that the submission gate refuses it."""

import importlib.util
from pathlib import Path

from rayfleet.gate import build_verdict

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("preflight_report", ROOT / "roles/preflight/files/preflight_report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)

NOW = 1_800_000_000.0
SKIPPED = {"changed": False, "skipped": True}
MEASURED = {"ok": True, "problems": [], "backend": "gloo", "world_size": 3, "peak_busbw_gbps": 0.49,
            "min_busbw_gbps": None, "large_bytes": 1 << 20,
            "rows": [{"size": 1 << 20, "count": 1 << 18, "time_us": 10.0, "algbw_gbps": 0.3, "busbw_gbps": 0.49,
                      "wrong": 0}]}


def _result(collective, verdict):
    return {"ok": verdict["ok"], "time": verdict["time"], "head": "demo-head", "instance_type": "", "floor_source": "",
            "verdict": verdict, "cluster": {"ray_version": "2.60.0", "alive_nodes": 3, "cpus": 6.0, "gpus": 0.0},
            "gpus": {}, "storage": {}, "ssh": {}, "collective": collective}


def test_unmeasured_bandwidth_is_said_in_the_summary_and_the_html():
    verdict = build_verdict([], ["n1"], SKIPPED, NOW, not_run="preflight_collective is false")
    data = _result({}, verdict)
    md = report.markdown(data, "no plot")
    assert md.startswith("# Cluster health: PASS")
    assert "- all-reduce: not measured (preflight_collective is false)" in md
    assert ("- submission gate: bandwidth not measured (preflight_collective is false): playbooks/submit.yml refuses "
            "this verdict unless submit_preflight=skip") in md
    assert "submit_preflight=skip" in report.html_report(data, "no plot")


def test_measured_bandwidth_adds_no_gate_line():
    verdict = build_verdict([], ["n1", "n2", "n3"], MEASURED, NOW)
    md = report.markdown(_result(MEASURED, verdict), "no plot")
    assert "peak bus bandwidth **0.490 GB/s**" in md and "submission gate" not in md
    html = report.html_report(_result(MEASURED, verdict), "no plot")
    assert html.count("<li>") == 6, "the summary lists the six lines of the Markdown summary, no problem twice"
    assert "missing" not in md


def test_nodes_the_preflight_went_on_without_are_named_in_the_summary():
    verdict = build_verdict([], ["n1", "n2"], MEASURED, NOW, missing=["demo-worker2"])
    data = _result(MEASURED, verdict)
    md = report.markdown(data, "no plot")
    assert md.startswith("# Cluster health: PASS")
    assert ("- **missing**, not checked (preflight_allow_missing): demo-worker2; playbooks/submit.yml refuses this "
            "verdict unless submit_allow_missing allows as many") in md
    assert "missing, not checked (preflight_allow_missing): demo-worker2" in report.html_report(data, "no plot")
