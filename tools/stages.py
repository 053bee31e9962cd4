#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run make targets in order, stop at the first failure, and print each stage's duration.

A stage written as lanes joined by '+', each lane a comma-separated list of targets, runs its lanes at the same
time (each lane in order), e.g. the static checks beside a sandbox stage that mostly waits on one core for dpkg.
The first lane's output is shown as it comes; the other lanes' output is kept in artifacts/stages/<lane>.log and
shown when the stage is over. The stage fails when any lane fails; a lane stops at its first failure.

Examples:
  tools/stages.py lint sanity unit molecule
  tools/stages.py lint,sanity,unit,aws+gpu-stack molecule bake
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

LOGS = Path(__file__).resolve().parents[1] / "artifacts" / "stages"
# Written by the verify tests (tests/integration/conftest.py): what failed, shown again at the end of a failed run.
FAILURES = LOGS.parent / "verify-failures.txt"


def run_lane(targets: list[str], results: list, log: Path | None) -> None:
    """Each target of the lane in order, until one fails; (target, seconds, status) appended to results."""
    out = log.open("w") if log else None
    try:
        for target in targets:
            if out is None:
                print(f"\n===== make {target} =====", flush=True)
            else:
                out.write(f"\n===== make {target} =====\n")
                out.flush()
            start = time.monotonic()
            rc = subprocess.call(["make", "--no-print-directory", target], stdout=out, stderr=out)
            results.append((target, time.monotonic() - start, "ok" if rc == 0 else f"FAILED (rc={rc})"))
            if rc != 0:
                return
    finally:
        if out:
            out.close()


def run_stage(stage: str) -> tuple[list, float]:
    """One stage (lanes joined by '+'): its per-target results and its wall time."""
    lanes = [[t for t in lane.split(",") if t] for lane in stage.split("+")]
    if any(not lane for lane in lanes):
        raise SystemExit(f"stages.py: empty lane in {stage!r}")
    results: list = []
    start = time.monotonic()
    if len(lanes) == 1:
        run_lane(lanes[0], results, None)
        return results, time.monotonic() - start
    LOGS.mkdir(parents=True, exist_ok=True)
    logs = [LOGS / f"{'-'.join(lane)}.log" for lane in lanes[1:]]
    print(f"\n===== at once: {' | '.join(', '.join(lane) for lane in lanes)} =====", flush=True)
    for lane, log in zip(lanes[1:], logs):
        print(f"({', '.join(lane)}: output in {log}, shown when done)", flush=True)
    threads = [threading.Thread(target=run_lane, args=(lane, results, log)) for lane, log in zip(lanes[1:], logs)]
    for t in threads:
        t.start()
    run_lane(lanes[0], results, None)
    for t in threads:
        t.join()
    for log in logs:
        print(log.read_text(), end="", flush=True)
    return results, time.monotonic() - start


def main(stages: list[str]) -> int:
    FAILURES.unlink(missing_ok=True)
    results, wall = [], 0.0
    for stage in stages:
        stage_results, took = run_stage(stage)
        results.extend(stage_results)
        wall += took
        if any(result[2] != "ok" for result in stage_results):
            break
    print("\n===== stage durations =====")
    for target, took, status in results:
        print(f"{target:<10} {took:8.1f} s  {status}")
    print(f"{'total':<10} {wall:8.1f} s  (wall; stages joined by '+' ran at the same time)"
          if any("+" in s for s in stages) else f"{'total':<10} {wall:8.1f} s")
    passed = bool(results) and all(result[2] == "ok" for result in results)
    if not passed and FAILURES.exists():
        print(f"\n===== what failed ({FAILURES.relative_to(LOGS.parents[1])}) =====")
        print(FAILURES.read_text(), end="", flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
