# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.gate: the verdict a job submission waits on, for each way the gate shuts."""

import json

import pytest
from rayfleet.gate import SHUT, decide, main

NOW = 1_800_000_000.0
PASSED = {"ok": True, "time": "2026-11-25T08:00:00Z", "epoch": NOW - 120, "problems": [], "node_ids": ["b", "a"]}


def test_open_when_recent_passed_and_same_nodes():
    ok, msg = decide(PASSED, ["a", "b"], NOW, 3600, "head")
    assert ok and msg == "Preflight of 2026-11-25T08:00:00Z passed (120 s ago) on these 2 nodes."


@pytest.mark.parametrize(("state", "alive", "max_age", "words"), [
    (None, ["a", "b"], 3600, "no preflight verdict on head; run playbooks/preflight.yml first"),
    (dict(PASSED, ok=False, problems=["worker1: 0.4 GB/s < 1 GB/s", "worker2: ssh"]), ["a", "b"], 3600,
     "the last preflight FAILED: worker1: 0.4 GB/s < 1 GB/s; worker2: ssh"),
    (PASSED, ["a", "b"], 60, "the preflight is 120 s old (submit_preflight_max_age_s 60)"),
    (PASSED, ["a", "c"], 3600, "the Ray nodes changed since the preflight (node ids b gone, c new)"),
    (PASSED, ["a"], 3600, "(node ids b gone, none new)"),
])
def test_shut(state, alive, max_age, words):
    ok, msg = decide(state, alive, NOW, max_age, "head")
    assert not ok and msg.startswith("Not submitting: ") and words in msg


def test_cli_reads_the_verdict_file(tmp_path, capsys):
    state = tmp_path / "preflight.json"
    state.write_text(json.dumps(dict(PASSED, epoch=0)))
    assert main(["--state", str(state), "--max-age", "60", "--alive-json", '["a", "b"]', "--host", "h1"]) == SHUT
    assert "old" in json.loads(capsys.readouterr().out.splitlines()[-1])["message"]
    assert main(["--state", str(tmp_path / "none.json"), "--max-age", "60", "--alive-json", "[]",
                 "--host", "h1"]) == SHUT
    assert f"no preflight verdict on h1 ({tmp_path / 'none.json'})" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "alive", "words"), [
    ("{not json", "[]", "not valid JSON"),
    ("[1]", "[]", "expected a JSON object"),
    ("{}", '{"a": 1}', "--alive-json: expected a JSON list"),
])
def test_cli_bad_input_is_a_usage_error(tmp_path, capsys, content, alive, words):
    state = tmp_path / "preflight.json"
    state.write_text(content)
    assert main(["--state", str(state), "--max-age", "60", "--alive-json", alive]) == 2
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["ok"] is False and words in result["message"]
