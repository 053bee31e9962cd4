# SPDX-License-Identifier: GPL-3.0-or-later
"""What every benchmark result records besides its figures: when, on what, with which command, at which commit.

Shared by tools/bench_*.py; tools/bench_report.py writes these fields above each table in docs/benchmarks.md.
Python's standard library only.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict:
    """The hardware and software the benchmark ran on (the controller; the sandbox hosts share its kernel)."""
    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, OSError, ValueError):
        memory_gib = None
    return {"cpus": os.cpu_count(), "memory_gib": memory_gib, "os": platform.platform(terse=True),
            "kernel": platform.release(), "python": platform.python_version()}


# What the benchmarks write themselves: a change there is no change to what was measured
OUTPUTS = ("artifacts", "docs/benchmarks.md")


def commit() -> str:
    """The checkout's commit (`git describe --always`), with -dirty when a tracked file other than the benchmarks'
    own outputs differs from it; empty outside a git checkout."""
    described = subprocess.run(["git", "describe", "--always"], cwd=ROOT, capture_output=True, text=True,
                               check=False).stdout.strip()
    if not described:
        return ""
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", ".", *(f":!{p}" for p in OUTPUTS)], cwd=ROOT,
                             capture_output=True, check=False).returncode
    return described + ("-dirty" if changed else "")


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def command(script: str, argv: Sequence[str], make: str = "", recipe: Sequence[str] = ()) -> str:
    """The command line that ran the benchmark: ``make`` (e.g. "make bench-bake WORKERS=2") when make ran the
    script with its recipe's arguments ``recipe``, otherwise the script with the arguments it was given."""
    if make and os.environ.get("MAKELEVEL") and list(argv) == list(recipe):
        return make
    return shlex.join([script, *argv])


def stamp(script: str, argv: Sequence[str], make: str = "", recipe: Sequence[str] = ()) -> dict:
    """The fields every result carries: command, commit, date (UTC, ISO 8601) and machine."""
    return {"command": command(script, argv, make, recipe), "commit": commit(), "date": utc_now(),
            "machine": machine()}
