#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_check's reading (NVML in-process, rayfleet.gpu.read_nvml) vs an nvidia-smi subprocess for the same facts.

Prints a table and writes artifacts/bench-gpu.json. On a host without an NVIDIA GPU it says so and exits 0
(nothing to measure). Needs only python3 with nvidia-ml-py (make test-gpu runs it on the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "library_py"))

from rayfleet.gpu import read_nvml  # noqa: E402

QUERY = ("index,uuid,name,pci.bus_id,memory.total,driver_version,persistence_mode,ecc.mode.current,"
         "ecc.errors.uncorrected.volatile.total,pcie.link.width.current,pcie.link.width.max,pcie.link.gen.current,"
         "mig.mode.current")


def timed(fn, runs: int) -> list[float]:
    out = []
    for _run in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "bench-gpu.json")
    args = parser.parse_args()
    first = read_nvml()
    smi = shutil.which("nvidia-smi")
    if not first.available or not first.gpus or smi is None:
        print(f"bench-gpu: nothing to measure on this host ({first.reason or 'no GPU or no nvidia-smi'})")
        return 0
    nvml_s = timed(read_nvml, args.runs)
    smi_s = timed(lambda: subprocess.run([smi, f"--query-gpu={QUERY}", "--format=csv,noheader"],
                                         capture_output=True, check=True), args.runs)
    result = {"gpus": len(first.gpus), "model": first.gpus[0].name, "driver": first.driver_version,
              "runs": args.runs, "nvml_median_ms": round(statistics.median(nvml_s) * 1e3, 2),
              "nvidia_smi_median_ms": round(statistics.median(smi_s) * 1e3, 2)}
    result["ratio_smi_over_nvml"] = round(result["nvidia_smi_median_ms"] / result["nvml_median_ms"], 2)
    print(f"{'reader':<28}{'median ms':>12}   ({args.runs} runs, {result['gpus']} x {result['model']}, "
          f"driver {result['driver']})")
    print(f"{'NVML in-process (gpu_check)':<28}{result['nvml_median_ms']:>12.2f}")
    print(f"{'nvidia-smi subprocess':<28}{result['nvidia_smi_median_ms']:>12.2f}")
    print(f"nvidia-smi / NVML: {result['ratio_smi_over_nvml']:.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
