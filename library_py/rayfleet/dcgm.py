# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA DCGM's active diagnostic (`dcgmi diag -r LEVEL -j`) read as data: which test failed on which GPU, and why.

DCGM prints its diagnostic as JSON (jsoncpp). Two shapes exist and both are read:
- DCGM 4: {"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [{"entity_group":
  "GPU", "entity_id": N, "status", "warnings": [{"warning", "error_id", ...}], "info": [...]}], "test_summary":
  {"status", "warnings"}}]}]}, "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}}
- DCGM 3: {"DCGM GPU Diagnostic": {"test_categories": [... "results": [{"gpu_id" | "gpu_ids": "0", "status",
  "warnings": [...], "info": "..."}]]}, "version": ..., "Driver Version Detected": ...}
A status is "Pass", "Skip" or "Fail" (DCGM 4 writes a warning-level result as "Fail"). A diagnostic that could not
run answers {"<root>": {"runtime_error": "...", "version": "..."}}.

Level 1 takes seconds (deployment checks), 2 about two minutes, 3 about fifteen, 4 longer: NVIDIA's dcgmi reference.
It needs DCGM's host engine (nvidia-dcgm.service, which the monitoring role's DCGM packages bring).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
# Seconds each level may take by default: several times NVIDIA's typical run time
TIMEOUTS = {1: 120, 2: 600, 3: 1800, 4: 7200}


@dataclass(frozen=True)
class DiagResult:
    """One test's result on one GPU (gpu None: not tied to a GPU, e.g. a deployment check or a test summary)."""

    category: str
    test: str
    gpu: int | None
    status: str
    messages: tuple[str, ...] = ()


@dataclass
class DiagReport:
    version: str = ""
    driver: str = ""
    runtime_error: str = ""
    results: list[DiagResult] = field(default_factory=list)

    @property
    def failed(self) -> list[DiagResult]:
        return [r for r in self.results if r.status.lower() not in ("pass", "skip")]

    @property
    def skipped(self) -> list[DiagResult]:
        return [r for r in self.results if r.status.lower() == "skip"]


def _gpu(result: dict[str, Any]) -> int | None:
    if "entity_id" in result:
        if str(result.get("entity_group", "GPU")).upper() != "GPU":
            return None
        return int(result["entity_id"])
    for key in ("gpu_id", "gpu_ids"):
        value = str(result.get(key, "")).strip()
        if value.isdigit():
            return int(value)
    return None


def _messages(node: dict[str, Any]) -> tuple[str, ...]:
    out = []
    for w in node.get("warnings") or []:
        if isinstance(w, dict):
            text = w.get("warning") or w.get("warnings") or ""
            code = w.get("error_id")
            out.append(f"{text} (DCGM error {code})" if code is not None and text else str(text))
        elif w:
            out.append(str(w))
    return tuple(m for m in out if m)


def parse_diag(text: str) -> DiagReport:
    """`dcgmi diag -j` output as a DiagReport; ValueError when it is not DCGM's diagnostic JSON."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at {exc.pos}): {text.strip()[:200]!r}") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"not DCGM's diagnostic JSON: {text.strip()[:200]!r}")
    root_key = next((k for k in ROOTS if k in doc), None)
    if root_key is None:
        raise ValueError(f"no {' or '.join(repr(k) for k in ROOTS)} in dcgmi's output: {sorted(doc)[:8]}")
    root = doc[root_key]
    meta = doc.get("metadata") or {}
    report = DiagReport(
        version=str(meta.get("version") or root.get("version") or doc.get("version") or ""),
        driver=str(meta.get("Driver Version Detected") or doc.get("Driver Version Detected") or ""),
        runtime_error=str(root.get("runtime_error") or ""),
    )
    for cat in root.get("test_categories") or []:
        category = str(cat.get("category", ""))
        for test in cat.get("tests") or []:
            name = str(test.get("name", "?"))
            found = [DiagResult(category, name, _gpu(res), str(res.get("status", "")), _messages(res))
                     for res in test.get("results") or []]
            summary = test.get("test_summary") or {}
            summary_status = str(summary.get("status", ""))
            if summary_status.lower() == "fail" and not any(r.status.lower() == "fail" for r in found):
                # An error not tied to a GPU: only the summary carries it
                found.append(DiagResult(category, name, None, "Fail", _messages(summary)))
            elif not found and summary_status:
                found.append(DiagResult(category, name, None, summary_status, _messages(summary)))
            report.results += found
    return report


def installed(which: Any = shutil.which) -> bool:
    """Whether DCGM's command-line tool is on this host (the diagnostic needs it and DCGM's host engine)."""
    return which("dcgmi") is not None


def run_diag(level: int, timeout: float, run: Any = subprocess.run,
             which: Any = shutil.which) -> tuple[DiagReport | None, str]:
    """Run `dcgmi diag -r LEVEL -j` here: (report, "") or (None, why it could not run)."""
    dcgmi = which("dcgmi")
    if dcgmi is None:
        return None, "dcgmi not found (DCGM is not installed: the monitoring role installs it on GPU nodes)"
    try:
        proc = run([dcgmi, "diag", "-r", str(level), "-j"], capture_output=True, text=True, timeout=timeout,
                   check=False)
    except subprocess.TimeoutExpired:
        return None, f"dcgmi diag -r {level} did not finish in {timeout:g} s"
    try:
        report = parse_diag(proc.stdout)
    except ValueError as exc:
        # Not JSON: dcgmi could not reach the host engine, or refused the level (exit code and its words)
        words = (proc.stderr.strip() or proc.stdout.strip())[-300:]
        return None, f"dcgmi diag -r {level} exited {proc.returncode}: {words or exc}"
    return report, ""


def diag_findings(report: DiagReport, uuids: dict[int, str], level: int) -> tuple[list[str], list[str]]:
    """Problems (failed tests, named by GPU index and UUID) and warnings (skipped tests) of a diagnostic.

    A diagnostic that checked nothing - no test result at all, or every test skipped - is a problem, not a pass.
    """
    tag = f"DCGM diag -r {level}"
    if report.runtime_error:
        return [f"{tag} could not run: {report.runtime_error}"], []
    if not report.results:
        dcgm = f" (DCGM {report.version})" if report.version else ""
        return [f"{tag} returned no test results{dcgm}: nothing was checked; run `dcgmi diag -r {level}` on this "
                "node to see why"], []
    bad = []
    for r in report.failed:
        who = (f"GPU {r.gpu} ({uuids.get(r.gpu, 'UUID unknown to NVML')})" if r.gpu is not None else "this node")
        why = "; ".join(r.messages) or "no message"
        verdict = "failed" if r.status.lower() == "fail" else f"reported {r.status!r}"
        bad.append(f"{who}: {tag} test {r.test!r} ({r.category}) {verdict}: {why}")
    skipped = sorted({r.test for r in report.skipped})
    if len(report.skipped) == len(report.results):
        return [f"{tag} skipped every test ({', '.join(skipped)}): nothing was checked"], []
    warn = [f"{tag} skipped test(s): {', '.join(skipped)}"] if skipped else []
    return bad, warn
