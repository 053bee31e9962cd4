# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.gate: the verdict the preflight leaves on the head, and the gate a job submission waits on, for each
way the gate shuts."""

import json
import time

import pytest
from rayfleet.gate import SHUT, bandwidth, build_verdict, decide, main

NOW = 1_800_000_000.0
PASSED = {"ok": True, "time": "2026-11-25T08:00:00Z", "epoch": NOW - 120, "problems": [], "node_ids": ["b", "a"],
          "bandwidth_measured": True, "backend": "nccl", "ranks": 16, "peak_busbw_gbps": 412.5,
          "min_busbw_gbps": 380.0, "bandwidth_note": ""}
# collective_check's registered results: a pass across 3 gloo ranks, a slow node, one that could not run, a skip
MEASURED = {"ok": True, "problems": [], "backend": "gloo", "world_size": 3, "peak_busbw_gbps": 0.49,
            "min_busbw_gbps": None, "changed": False}
SLOW = {"ok": False, "failed": True, "problems": ["slow node(s): w2"], "backend": "gloo", "world_size": 3,
        "peak_busbw_gbps": 0.2, "msg": "collective check failed: slow node(s): w2"}
BROKEN = {"failed": True, "msg": "the collective check could not run: no torch in the Ray venv", "rc": 1}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def test_open_when_recent_measured_passed_and_same_nodes():
    ok, msg = decide(PASSED, ["a", "b"], NOW, 3600, "head")
    assert ok and msg == ("Preflight of 2026-11-25T08:00:00Z passed (120 s ago) on these 2 nodes: peak bus bandwidth "
                          "412.500 GB/s (nccl, 16 ranks).")


@pytest.mark.parametrize(("state", "alive", "max_age", "words"), [
    (None, ["a", "b"], 3600, "no preflight verdict on head; run playbooks/preflight.yml first"),
    (dict(PASSED, ok=False, problems=["worker1: 0.4 GB/s < 1 GB/s", "worker2: ssh"]), ["a", "b"], 3600,
     "the last preflight FAILED: worker1: 0.4 GB/s < 1 GB/s; worker2: ssh"),
    (PASSED, ["a", "b"], 60, "the preflight is 120 s old (submit_preflight_max_age_s 60)"),
    (PASSED, ["a", "c"], 3600, "the Ray nodes changed since the preflight (node ids b gone, c new)"),
    (PASSED, ["a"], 3600, "(node ids b gone, none new); run playbooks/preflight.yml again, or submit with "
     "-e submit_allow_missing=1 to go on without them"),
    (dict(PASSED, epoch=NOW + 3600, time="2026-11-25T10:02:00Z"), ["a", "b"], 86400,
     "the preflight on head is dated 2026-11-25T10:02:00Z, 3600 s ahead of the head's clock"),
])
def test_shut(state, alive, max_age, words):
    ok, msg = decide(state, alive, NOW, max_age, "head")
    assert not ok and msg.startswith("Not submitting: ") and words in msg


@pytest.mark.parametrize(("state", "why"), [
    (dict(PASSED, bandwidth_measured=False, peak_busbw_gbps=None, bandwidth_note="preflight_collective is false"),
     "preflight_collective is false"),
    (dict(PASSED, bandwidth_measured=False, peak_busbw_gbps=None, ranks=1,
          bandwidth_note="one rank: an all-reduce on one rank moves no data, so it measures no bandwidth"),
     "one rank: an all-reduce on one rank moves no data"),
    # written before verdicts said what they measured: ok true, peak null
    ({k: v for k, v in PASSED.items() if k not in ("bandwidth_measured", "bandwidth_note", "ranks")}
     | {"peak_busbw_gbps": None}, "the verdict does not say: it was written by an older rayfleet"),
    # says measured but carries no figure (edited by hand)
    (dict(PASSED, peak_busbw_gbps=None), "not measured"),
])
def test_a_passed_verdict_that_measured_no_bandwidth_shuts_the_gate(state, why):
    ok, msg = decide(state, ["a", "b"], NOW, 3600, "h1 (/etc/rayfleet/preflight.json)")
    assert not ok
    assert msg.startswith("Not submitting: the last preflight on h1 (/etc/rayfleet/preflight.json) passed without "
                          f"measuring the all-reduce bandwidth ({why}")
    assert msg.endswith("); run playbooks/preflight.yml with preflight_collective=true, or submit with "
                        "-e submit_preflight=skip to go without the gate")


# A preflight that went on without worker2 (preflight_allow_missing): the verdict names it
WITHOUT_W2 = dict(PASSED, missing_nodes=["worker2"])


@pytest.mark.parametrize(("state", "alive", "allow", "words"), [
    (WITHOUT_W2, ["a", "b"], 0, "the preflight went on without 1 node(s): worker2 - more than submit_allow_missing=0 "
     "allows. Bring them back and run playbooks/preflight.yml again, or submit with -e submit_allow_missing=1"),
    # one left out by the preflight, one gone since: two missing
    (WITHOUT_W2, ["a"], 1, "the preflight went on without 1 node(s): worker2; node ids b gone since - more than "
     "submit_allow_missing=1 allows"),
    (PASSED, [], 1, "node ids a, b gone, none new"),
    # a node the preflight did not check shuts the gate whatever is allowed
    (WITHOUT_W2, ["a", "b", "c"], 5, "the Ray nodes changed since the preflight (node ids none gone, c new); run "
     "playbooks/preflight.yml again"),
])
def test_missing_nodes_shut_the_gate_beyond_submit_allow_missing(state, alive, allow, words):
    ok, msg = decide(state, alive, NOW, 3600, "head", allow_missing=allow)
    assert not ok and msg.startswith("Not submitting: ") and words in msg, msg


@pytest.mark.parametrize(("state", "alive", "allow", "words"), [
    (WITHOUT_W2, ["a", "b"], 1, "Missing, within submit_allow_missing=1: the preflight went on without 1 node(s): "
     "worker2."),
    (PASSED, ["a"], 1, "Missing, within submit_allow_missing=1: node ids b gone since."),
    (WITHOUT_W2, ["b"], 2, "worker2; node ids a gone since."),
])
def test_missing_nodes_within_submit_allow_missing_open_the_gate_and_are_named(state, alive, allow, words):
    ok, msg = decide(state, alive, NOW, 3600, "head", allow_missing=allow)
    assert ok and msg.startswith("Preflight of 2026-11-25T08:00:00Z passed") and msg.endswith(words), msg


def test_the_verdict_names_the_nodes_the_preflight_went_on_without():
    verdict = build_verdict([], ["n1"], MEASURED, NOW, missing=["w2", "w2/b", "w2"])
    assert verdict["ok"] and verdict["missing_nodes"] == ["w2", "w2/b"]


def test_cli_allow_missing(tmp_path, capsys):
    state = tmp_path / "preflight.json"
    state.write_text(json.dumps(build_verdict([], ["a"], MEASURED, time.time(), missing=["worker2"])))
    argv = ["--state", str(state), "--max-age", "60", "--alive-json", '["a"]', "--host", "h1"]
    assert main(argv) == SHUT
    assert "more than submit_allow_missing=0 allows" in capsys.readouterr().out
    assert main([*argv, "--allow-missing", "1"]) == 0
    assert "within submit_allow_missing=1" in capsys.readouterr().out
    assert main([*argv, "--allow-missing", "-1"]) == 2
    assert "--allow-missing: expected a count >= 0, got -1" in capsys.readouterr().out


def test_verdict_of_a_measured_pass():
    verdict = build_verdict([], ["n2", "n1", "n2"], MEASURED, NOW)
    assert verdict == {"ok": True, "time": "2027-01-15T08:00:00Z", "epoch": 1_800_000_000, "problems": [],
                       "node_ids": ["n1", "n2"], "missing_nodes": [], "admitted_nodes": [], "unadmitted_nodes": [],
                       "joined_nodes": [], "bandwidth_measured": True, "backend": "gloo",
                       "ranks": 3,
                       "peak_busbw_gbps": 0.49, "min_busbw_gbps": None, "bandwidth_note": ""}
    assert decide(verdict, ["n1", "n2"], NOW + 5, 3600, "head")[0]


def test_verdict_without_the_bandwidth_check_passes_but_says_it_measured_nothing():
    verdict = build_verdict([], ["n1"], SKIPPED, NOW, not_run="preflight_collective is false")
    assert verdict["ok"] is True and verdict["problems"] == []
    assert {k: verdict[k] for k in ("bandwidth_measured", "backend", "ranks", "peak_busbw_gbps", "bandwidth_note")} == {
        "bandwidth_measured": False, "backend": None, "ranks": None, "peak_busbw_gbps": None,
        "bandwidth_note": "preflight_collective is false"}
    ok, msg = decide(verdict, ["n1"], NOW, 3600, "head")
    assert not ok and "(preflight_collective is false)" in msg and "submit_preflight=skip" in msg


def test_verdict_of_one_rank_is_not_a_measurement():
    one = dict(MEASURED, backend="nccl", world_size=1, peak_busbw_gbps=0.0)
    verdict = build_verdict([], ["n1"], one, NOW)
    assert verdict["ok"] is True and verdict["bandwidth_measured"] is False and verdict["ranks"] == 1
    assert verdict["peak_busbw_gbps"] is None and verdict["bandwidth_note"].startswith("one rank")


@pytest.mark.parametrize(("problems", "collective", "expected"), [
    (["w1: SSH from the head as rayfleet failed: Permission denied"], SKIPPED,
     ["w1: SSH from the head as rayfleet failed: Permission denied"]),
    ([], SLOW, ["slow node(s): w2"]),
    (["head: shared storage degraded: /mnt/shared"], SLOW, ["head: shared storage degraded: /mnt/shared",
                                                            "slow node(s): w2"]),
    ([], BROKEN, ["the collective check could not run: no torch in the Ray venv"]),
    ([], {"ok": False, "msg": "collective check failed: "}, ["collective check failed: "]),
])
def test_verdict_fails_with_every_problem(problems, collective, expected):
    verdict = build_verdict(problems, ["n1"], collective, NOW, not_run="the GPU or SSH checks failed first")
    assert verdict["ok"] is False and verdict["problems"] == expected
    assert decide(verdict, ["n1"], NOW, 3600, "head")[1].startswith("Not submitting: the last preflight FAILED: ")


def test_bandwidth_of_a_failed_measurement_is_still_recorded():
    assert bandwidth(SLOW) == {"bandwidth_measured": True, "backend": "gloo", "ranks": 3, "peak_busbw_gbps": 0.2,
                               "min_busbw_gbps": None, "bandwidth_note": ""}
    assert bandwidth(BROKEN)["bandwidth_note"] == "the collective check could not run: no torch in the Ray venv"
    assert bandwidth(None) == {"bandwidth_measured": False, "backend": None, "ranks": None, "peak_busbw_gbps": None,
                               "min_busbw_gbps": None, "bandwidth_note": "the bandwidth check did not run"}


def test_cli_reads_the_verdict_file(tmp_path, capsys):
    state = tmp_path / "preflight.json"
    state.write_text(json.dumps(dict(PASSED, epoch=0)))
    assert main(["--state", str(state), "--max-age", "60", "--alive-json", '["a", "b"]', "--host", "h1"]) == SHUT
    assert "old" in json.loads(capsys.readouterr().out.splitlines()[-1])["message"]
    assert main(["--state", str(tmp_path / "none.json"), "--max-age", "60", "--alive-json", "[]",
                 "--host", "h1"]) == SHUT
    assert f"no preflight verdict on h1 ({tmp_path / 'none.json'})" in capsys.readouterr().out


def test_cli_opens_on_a_fresh_verdict_of_this_host(tmp_path, capsys):
    """The age is this host's clock against the epoch this host stamped: the verdict is built with time.time()."""
    state = tmp_path / "preflight.json"
    state.write_text(json.dumps(build_verdict([], ["a", "b"], MEASURED, time.time())))
    assert main(["--state", str(state), "--max-age", "60", "--alive-json", '["a", "b"]', "--host", "h1"]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert out["ok"] is True and "peak bus bandwidth 0.490 GB/s (gloo, 3 ranks)" in out["message"]


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


def test_the_verdict_names_the_nodes_proved_at_admission_and_those_that_joined():
    verdict = build_verdict([], ["n1", "n2", "n3"], MEASURED, NOW, admitted=["10.0.0.2", "10.0.0.1", "10.0.0.9"],
                            unadmitted=["10.0.0.3"], joined=["10.0.0.9"])
    assert verdict["ok"] is True
    assert verdict["admitted_nodes"] == ["10.0.0.1", "10.0.0.2", "10.0.0.9"]
    assert (verdict["unadmitted_nodes"], verdict["joined_nodes"]) == (["10.0.0.3"], ["10.0.0.9"])
