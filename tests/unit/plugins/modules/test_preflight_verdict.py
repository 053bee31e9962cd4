# SPDX-License-Identifier: GPL-3.0-or-later
"""preflight_verdict: the verdict built from the checks' results, stamped with this host's clock, written once."""

import json
import os
import stat

from ansible_collections.rayfleet.cluster.plugins.modules import preflight_verdict
from conftest import run_module as run
from rayfleet.gate import decide

NOW = 1_800_000_000.0
MEASURED = {"ok": True, "problems": [], "backend": "gloo", "world_size": 3, "peak_busbw_gbps": 0.49,
            "min_busbw_gbps": None, "changed": False, "failed": False, "rows": [], "table": "# all_reduce"}
SKIPPED = {"changed": False, "skipped": True, "false_condition": "preflight_collective | bool"}


def _clock(monkeypatch, now=NOW):
    monkeypatch.setattr(preflight_verdict.time, "time", lambda: now)


def test_writes_the_verdict_with_this_hosts_clock(monkeypatch, tmp_path):
    _clock(monkeypatch)
    path = tmp_path / "rayfleet" / "preflight.json"
    out = run(preflight_verdict, {"path": str(path), "node_ids": ["n2", "n1"], "collective": MEASURED})
    assert not out.failed and out.result["changed"]
    written = json.loads(path.read_text())
    assert written == out.result["verdict"]
    assert written["epoch"] == 1_800_000_000 and written["time"] == "2027-01-15T08:00:00Z"
    assert written["ok"] is True and written["bandwidth_measured"] is True and written["ranks"] == 3
    assert written["node_ids"] == ["n1", "n2"] and written["backend"] == "gloo"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["preflight.json"], "a temporary file was left behind"
    # the gate on the same host, 30 s later, opens on it
    assert decide(written, ["n1", "n2"], NOW + 30, 3600, "head")[0]


def test_skipped_bandwidth_check_is_recorded_as_not_measured(monkeypatch, tmp_path):
    _clock(monkeypatch)
    path = tmp_path / "preflight.json"
    out = run(preflight_verdict, {"path": str(path), "node_ids": ["n1"], "collective": SKIPPED,
                                  "not_run_reason": "preflight_collective is false"})
    verdict = json.loads(path.read_text())
    assert not out.failed and verdict["ok"] is True and verdict["bandwidth_measured"] is False
    assert verdict["peak_busbw_gbps"] is None and verdict["bandwidth_note"] == "preflight_collective is false"


def test_problems_fail_the_verdict_not_the_task(monkeypatch, tmp_path):
    _clock(monkeypatch)
    out = run(preflight_verdict, {"path": str(tmp_path / "p.json"), "problems": ["w1: no GPU check result"],
                                  "collective": SKIPPED, "not_run_reason": "the GPU or SSH checks failed first"})
    assert not out.failed
    assert out.result["verdict"]["ok"] is False and out.result["verdict"]["problems"] == ["w1: no GPU check result"]


def test_check_mode_writes_nothing_and_diff_shows_the_verdict(monkeypatch, tmp_path):
    _clock(monkeypatch)
    path = tmp_path / "preflight.json"
    path.write_text('{"ok": false}\n')
    out = run(preflight_verdict, {"path": str(path), "collective": MEASURED}, check_mode=True, diff=True)
    assert not out.failed and out.result["changed"]
    assert path.read_text() == '{"ok": false}\n'
    assert out.result["diff"]["before"] == '{"ok": false}\n'
    assert json.loads(out.result["diff"]["after"]) == out.result["verdict"]


def test_the_same_verdict_in_the_same_second_changes_nothing(monkeypatch, tmp_path):
    _clock(monkeypatch)
    args = {"path": str(tmp_path / "preflight.json"), "collective": MEASURED, "node_ids": ["n1"]}
    assert run(preflight_verdict, args).result["changed"]
    assert not run(preflight_verdict, args).result["changed"]
    _clock(monkeypatch, NOW + 1)
    assert run(preflight_verdict, args).result["changed"]


def test_unwritable_path_fails_naming_it(monkeypatch, tmp_path):
    _clock(monkeypatch)
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = run(preflight_verdict, {"path": str(blocker / "preflight.json")})
    assert out.failed and out.result["msg"].startswith(
        f"cannot write the preflight verdict to {blocker / 'preflight.json'} on this host: ")


def test_an_older_rayfleet_library_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(preflight_verdict, "build_verdict", None)
    out = run(preflight_verdict, {"path": str(tmp_path / "preflight.json")})
    assert out.failed and "has no rayfleet.gate.build_verdict: it is older than this collection" in out.result["msg"]
    assert not (tmp_path / "preflight.json").exists()
