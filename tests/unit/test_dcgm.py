# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.dcgm: `dcgmi diag -j` as data, on outputs recorded by others on real GPUs (fixtures/dcgm/README.md)."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
from rayfleet.dcgm import DiagResult, diag_findings, parse_diag, run_diag

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm"
UUIDS = {0: "GPU-5f2c0a1e-0000-4000-8000-000000000000", 7: "GPU-81aa0a1e-0000-4000-8000-000000000007"}
PERSISTENCE = "Persistence Mode: Persistence mode for GPU 0 is disabled."


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_dcgm4_failure_is_tied_to_its_gpu_with_dcgms_words():
    report = parse_diag(fixture("4.5.2-r2-gb10-persistence-off.json"))
    assert (report.version, report.driver, report.runtime_error) == ("4.5.2", "580.82.09", "")
    assert [(r.category, r.test, r.gpu, r.status) for r in report.results] == [
        ("Deployment", "software", 0, "Fail"), ("Hardware", "memory", 0, "Pass")]
    [failed] = report.failed
    assert failed.messages[0].startswith(PERSISTENCE) and failed.messages[0].endswith("(DCGM error 29)")
    bad, warn = diag_findings(report, UUIDS, 2)
    assert bad == [f"GPU 0 ({UUIDS[0]}): DCGM diag -r 2 test 'software' (Deployment) failed: {failed.messages[0]}"]
    assert warn == []


def test_dcgm3_all_pass_reads_gpu_ids_and_node_level_checks():
    report = parse_diag(fixture("3.x-r2-pass.json"))
    assert report.failed == [] and report.skipped == []
    assert {(r.test, r.gpu) for r in report.results} == {
        ("Denylist", None), ("Inforom", None), ("PCIe", 0), ("GPU Memory", 0)}
    assert diag_findings(report, UUIDS, 2) == ([], [])


def test_dcgm4_stress_results_per_gpu():
    report = parse_diag(fixture("4.x-r3-diagnostic-pass-excerpt.json"))
    assert [(r.test, r.gpu, r.status) for r in report.results] == [("diagnostic", 0, "Pass"), ("diagnostic", 7, "Pass")]
    assert report.failed == []


def _edited(edit) -> str:
    doc = json.loads(fixture("4.5.2-r2-gb10-persistence-off.json"))
    doc = copy.deepcopy(doc)
    edit(doc["DCGM Diagnostic"]["test_categories"])
    return json.dumps(doc)


def test_an_error_only_the_summary_carries_fails_the_node():
    """The 4.5.2 output with its GPU result turned to Pass: the summary's failure is not tied to a GPU (DCGM 4.2
    reports global errors so)."""
    def edit(cats):
        cats[0]["tests"][0]["results"][0]["status"] = "Pass"
        del cats[0]["tests"][0]["results"][0]["warnings"]
    report = parse_diag(_edited(edit))
    assert [(r.test, r.gpu, r.status) for r in report.failed] == [("software", None, "Fail")]
    bad, _warn = diag_findings(report, UUIDS, 1)
    assert bad[0].startswith("this node: DCGM diag -r 1 test 'software' (Deployment) failed: Persistence Mode:")


def test_skipped_tests_are_warnings_not_problems():
    def edit(cats):
        cats[1]["tests"][0]["results"][0]["status"] = "Skip"
    report = parse_diag(_edited(edit))
    bad, warn = diag_findings(report, UUIDS, 2)
    assert len(bad) == 1 and warn == ["DCGM diag -r 2 skipped test(s): memory"]


def test_a_diagnostic_that_could_not_run_is_a_problem():
    # dcgmi's shape for a runtime error (dcgmi/Diag.cpp): the root holds runtime_error and version only
    text = json.dumps({"DCGM Diagnostic": {"runtime_error": "Unable to find GPU 3", "version": "4.2.3"}})
    report = parse_diag(text)
    assert report.runtime_error == "Unable to find GPU 3" and report.results == []
    assert diag_findings(report, UUIDS, 1) == (["DCGM diag -r 1 could not run: Unable to find GPU 3"], [])


def test_a_diagnostic_with_no_results_is_a_problem_not_a_pass():
    """dcgmi answered in its shape but ran nothing (no test category, or categories without tests)."""
    for root in ({"test_categories": []}, {"test_categories": [{"category": "Deployment", "tests": []}]}):
        report = parse_diag(json.dumps({"DCGM Diagnostic": root, "metadata": {"version": "4.2.3"}}))
        assert report.results == [] and report.failed == [] and report.runtime_error == ""
        assert diag_findings(report, UUIDS, 1) == (
            ["DCGM diag -r 1 returned no test results (DCGM 4.2.3): nothing was checked; run `dcgmi diag -r 1` on "
             "this node to see why"], [])


def test_a_diagnostic_that_skipped_every_test_is_a_problem():
    def edit(cats):
        for cat in cats:
            for test in cat["tests"]:
                for res in test["results"]:
                    res["status"] = "Skip"
                test.pop("test_summary", None)
    report = parse_diag(_edited(edit))
    assert report.results and report.failed == []
    assert diag_findings(report, UUIDS, 2) == (
        ["DCGM diag -r 2 skipped every test (memory, software): nothing was checked"], [])


@pytest.mark.parametrize("text", ["Error: unable to establish a connection to the specified host: localhost", "[]",
                                  '{"something": {}}'])
def test_other_output_is_refused(text):
    with pytest.raises(ValueError):
        parse_diag(text)


def test_run_diag_says_why_it_could_not_run():
    assert run_diag(1, 60, which=lambda _name: None)[1].startswith("dcgmi not found")

    def unreachable(argv, **_kw):
        assert argv == ["/usr/bin/dcgmi", "diag", "-r", "1", "-j"]
        return subprocess.CompletedProcess(argv, 255, "Error: unable to establish a connection to the specified "
                                           "host: localhost\n", "")

    report, why = run_diag(1, 60, run=unreachable, which=lambda _name: "/usr/bin/dcgmi")
    assert report is None and why == ("dcgmi diag -r 1 exited 255: Error: unable to establish a connection to the "
                                      "specified host: localhost")

    def slow(argv, **kw):
        raise subprocess.TimeoutExpired(argv, kw["timeout"])

    assert run_diag(2, 5, run=slow, which=lambda _name: "/usr/bin/dcgmi") == (
        None, "dcgmi diag -r 2 did not finish in 5 s")


def test_run_diag_reads_a_failing_run():
    def failing(argv, **_kw):
        return subprocess.CompletedProcess(argv, 226, fixture("4.5.2-r2-gb10-persistence-off.json"), "")

    report, why = run_diag(2, 600, run=failing, which=lambda _name: "/usr/bin/dcgmi")
    assert why == "" and report is not None
    assert report.failed == [DiagResult("Deployment", "software", 0, "Fail", report.failed[0].messages)]
