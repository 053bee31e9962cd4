#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run make targets in order, stop at the first failure, and print each stage's duration.

Example: tools/stages.py lint sanity unit molecule
"""

import subprocess
import sys
import time


def main(stages: list[str]) -> int:
    results = []
    rc = 0
    for stage in stages:
        print(f"\n===== make {stage} =====", flush=True)
        start = time.monotonic()
        rc = subprocess.call(["make", "--no-print-directory", stage])
        results.append((stage, time.monotonic() - start, "ok" if rc == 0 else f"FAILED (rc={rc})"))
        if rc != 0:
            break
    print("\n===== stage durations =====")
    for stage, took, status in results:
        print(f"{stage:<10} {took:8.1f} s  {status}")
    print(f"{'total':<10} {sum(r[1] for r in results):8.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
