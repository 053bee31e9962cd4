#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: how the preflight's pair tests find slow nodes, on a simulated cluster (no Ray, no network).

rayfleet.localize.locate runs against the bandwidth model instead of Ray: each node has a link capacity, 1.0 when
healthy and a uniform draw in [0.1, 0.3] when bad; a test's bandwidth is the smallest capacity among its nodes
x (1 + u), u uniform in [-noise, +noise], drawn for each test. For n = 8, 64, 256 and 1024 nodes with 0, 1 and 2 bad
nodes (placed at random), over --trials trials each, it counts rounds, pair tests, the simulated wall time, and the
nodes named wrongly (false positives) or missed (false negatives).

Wall time model: a round's tests run at once, so a round lasts as long as its slowest test: --setup-s (forming the
test's group) + (2 warm-up + --iters) all-reduces of --pair-bytes, one rank per node, at the test's bandwidth x
--link-gbps, bus bandwidth being algbw x 2(k-1)/k for k nodes. For comparison, the ring of every node with its
re-tests, and that ring run one pair at a time.

Prints a table and writes artifacts/bench-localize.json (tools/bench_report.py puts it in docs/benchmarks.md).

Example: tools/bench_localize.py --trials 1000 --seed 1
         tools/bench_localize.py --sizes 8,64 --bad 1 --trials 100 --json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "library_py"))
from benchinfo import commit, machine, utc_now  # noqa: E402
from rayfleet import localize as lz  # noqa: E402
from rayfleet.collective import parse_size  # noqa: E402

WARMUP = 2  # the pair test's warm-up all-reduces (rayfleet.collective)


def bound(n: int) -> float:
    """The goal for one bad node among n: 2 log2(n) + 2 rounds."""
    return 2 * math.log2(n) + 2


def test_seconds(pair: lz.Pair, bandwidth: float, args: argparse.Namespace) -> float:
    """One test on the model: forming its group, then the all-reduces at its bus bandwidth."""
    k = sum(len(side) for side in pair)
    bus_factor = 2 * (k - 1) / k
    return args.setup_s + (WARMUP + args.iters) * args.pair_bytes * bus_factor / (bandwidth * args.link_gbps * 1e9)


class Timed:
    """The model's measure(), timing each round by its slowest test (at once) and the sum (one at a time)."""

    def __init__(self, capacity: Sequence[float], rng: random.Random, args: argparse.Namespace):
        self.inner = lz.simulated_measure(capacity, rng, args.noise)
        self.args = args
        self.at_once = 0.0
        self.one_at_a_time = 0.0

    def __call__(self, pairs: Sequence[lz.Pair]) -> list[float]:
        found = self.inner(pairs)
        seconds = [test_seconds(p, bw, self.args) for p, bw in zip(pairs, found)]
        self.at_once += max(seconds)
        self.one_at_a_time += sum(seconds)
        return found


def trial(n: int, bad: int, rng: random.Random, args: argparse.Namespace, ring_max: int) -> dict:
    victims = set(rng.sample(range(n), bad))
    timed = Timed(lz.capacities(n, sorted(victims), rng), rng, args)
    found = lz.locate([f"10.{i // 65536}.{i // 256 % 256}.{i % 256}" for i in range(n)], timed, ratio=args.ratio,
                      ring_max=ring_max)
    named = set(found.confirmed)
    return {"rounds": found.rounds, "tests": len(found.tests), "at_once_s": timed.at_once,
            "one_at_a_time_s": timed.one_at_a_time, "fp": len(named - victims), "fn": len(victims - named),
            "members": found.members, "blocks": found.in_blocks}


def run_config(n: int, bad: int, args: argparse.Namespace, ring_max: int) -> dict:
    rng = random.Random(args.seed * 1_000_003 + n * 10 + bad + (0 if ring_max == args.ring_max else 7))
    runs = [trial(n, bad, rng, args, ring_max) for _trial in range(args.trials)]
    first = runs[0]
    return {
        "nodes": n, "bad": bad, "trials": args.trials, "ring_max": ring_max,
        "first_pass": f"ring of {first['members']} {'blocks' if first['blocks'] else 'nodes'}",
        "rounds_max": max(r["rounds"] for r in runs),
        "rounds_mean": round(statistics.fmean(r["rounds"] for r in runs), 2),
        "rounds_bound": round(bound(n), 1),
        "pair_tests_mean": round(statistics.fmean(r["tests"] for r in runs), 1),
        "pair_tests_max": max(r["tests"] for r in runs),
        "wall_s_mean": round(statistics.fmean(r["at_once_s"] for r in runs), 2),
        "wall_s_max": round(max(r["at_once_s"] for r in runs), 2),
        "one_at_a_time_s_mean": round(statistics.fmean(r["one_at_a_time_s"] for r in runs), 1),
        "false_positives": sum(r["fp"] for r in runs),
        "false_negatives": sum(r["fn"] for r in runs),
        "trials_with_a_false_positive": sum(1 for r in runs if r["fp"]),
    }


def table(rows: list[dict], title: str) -> str:
    head = ("nodes", "bad", "first pass", "rounds max (mean)", "bound", "pair tests mean (max)", "wall s mean (max)",
            "one at a time s", "FP", "FN")
    body = [(str(r["nodes"]), str(r["bad"]), r["first_pass"], f"{r['rounds_max']} ({r['rounds_mean']:g})",
             f"{r['rounds_bound']:g}", f"{r['pair_tests_mean']:g} ({r['pair_tests_max']})",
             f"{r['wall_s_mean']:.1f} ({r['wall_s_max']:.1f})", f"{r['one_at_a_time_s_mean']:.1f}",
             str(r["false_positives"]), str(r["false_negatives"])) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(lines)


def command(argv: Sequence[str]) -> str:
    """How this run was started: by make bench-localize (LOCALIZE_ARGS passes arguments) or by hand."""
    if os.environ.get("MAKELEVEL"):
        return "make bench-localize" + (f" LOCALIZE_ARGS={shlex.quote(shlex.join(argv))}" if argv else "")
    return "tools/bench_localize.py" + (" " + shlex.join(argv) if argv else "")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="8,64,256,1024", help="node counts, comma-separated (default 8,64,256,1024)")
    p.add_argument("--bad", default="0,1,2", help="bad node counts, comma-separated (default 0,1,2)")
    p.add_argument("--trials", type=int, default=1000, help="random trials per row (default 1000)")
    p.add_argument("--noise", type=float, default=0.1, help="measurement noise, +- this share (default 0.1)")
    p.add_argument("--ratio", type=float, default=0.75, help="a pair below this share of the best is slow")
    p.add_argument("--ring-max", type=int, default=32, help="the preflight's pair_ring_max (default 32)")
    p.add_argument("--seed", type=int, default=1, help="random seed, so runs repeat (default 1)")
    p.add_argument("--setup-s", type=float, default=1.0, help="seconds to form a test's group (default 1.0)")
    p.add_argument("--pair-bytes", default="1G", help="the pair test's message size (default 1G)")
    p.add_argument("--iters", type=int, default=10, help="timed all-reduces per test (default 10)")
    p.add_argument("--link-gbps", type=float, default=50.0,
                   help="a healthy node's bus bandwidth in GB/s (default 50, a 400 Gb/s NIC)")
    p.add_argument("--json", action="store_true", help="print the JSON result instead of the tables")
    p.add_argument("--out", default=str(ROOT / "artifacts" / "bench-localize.json"), help="where to write the JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    args.pair_bytes = parse_size(args.pair_bytes, "--pair-bytes")
    sizes = [int(x) for x in args.sizes.split(",")]
    bads = [int(x) for x in args.bad.split(",")]
    started = time.monotonic()
    rows = [run_config(n, b, args, args.ring_max) for n in sizes for b in bads]
    ring = [run_config(n, 1, args, max(n, 3)) for n in sizes if n > args.ring_max]
    goal = next((r for r in rows if r["nodes"] == 256 and r["bad"] == 1), None)
    result = {
        "benchmark": "localize",
        "command": command(argv),
        "commit": commit(),
        "date": utc_now(),
        "machine": machine(),
        "model": {"healthy": 1.0, "bad": [0.1, 0.3], "noise": args.noise, "ratio": args.ratio,
                  "ring_max": args.ring_max, "seed": args.seed, "setup_s": args.setup_s,
                  "pair_bytes": args.pair_bytes, "iters": args.iters, "warmup": WARMUP, "link_gbps": args.link_gbps},
        "results": rows,
        "ring_of_every_node": ring,
        "goal": None if goal is None else {
            "nodes": 256, "bad": 1, "rounds_max": goal["rounds_max"], "rounds_bound": goal["rounds_bound"],
            "false_positives": sum(r["false_positives"] for r in rows),
            "met": goal["rounds_max"] <= bound(256) and goal["false_negatives"] == 0
            and all(r["false_positives"] == 0 for r in rows)},
        "run_s": round(time.monotonic() - started, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(table(rows, f"# The preflight's pair tests (pair_ring_max {args.ring_max}), {args.trials} trials per row, "
                      f"noise +-{args.noise:.0%}, seed {args.seed}"))
    if ring:
        print()
        print(table(ring, "# For comparison: a ring of every node, then re-tests (1 bad node)"))
    if result["goal"]:
        g = result["goal"]
        print(f"\n# Goal: 1 bad node among 256 in <= {g['rounds_bound']:g} rounds: {g['rounds_max']} at most; false "
              f"positives over every row: {g['false_positives']} -> {'met' if g['met'] else 'NOT met'}")
    print(f"# {out} ({result['run_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
