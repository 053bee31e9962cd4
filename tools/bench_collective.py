#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the collective check against the raw link, and the whole preflight's wall time, on the sandbox.

On one sandbox (1 head + N workers) converged with site.yml:
  link      iperf3 (Debian's package) between worker2 and worker1, TCP, --seconds each, median of --runs:
            one direction (worker2 -> worker1), and both directions at once (--bidir, the mean of the two),
            which is what a 2-rank all-reduce does: each rank sends its half while it receives the other's
  allreduce python -m rayfleet.collective on the head (gloo, sizes up to --max-bytes), median of --runs:
            the peak busbw across all nodes, and the busbw of the worker1-worker2 pair at the largest size
  ratio     pair busbw / iperf3 throughput for the same two hosts (goal >= 0.7), against each baseline
  preflight wall time of ansible-playbook playbooks/preflight.yml, median of --runs (goal < 60 s)

Prints a table and writes artifacts/bench-collective.json (tools/bench_report.py puts it in docs/benchmarks.md).
Not a test: figures vary with the machine.

Example: tools/bench_collective.py --runs 3 --max-bytes 64M
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_converge import TOKEN_PATH, VENV, BenchError, publish, remote, run_site
from benchinfo import stamp

from sandbox import ROOT, Sandbox

COLLECTIVE = (f"cd /tmp && sudo -u rayfleet env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_PATH} "
              f"{VENV}/bin/python -m rayfleet.collective --json --backend gloo")
GOAL_PAIR_OVER_LINK = 0.7
GOAL_PREFLIGHT_S = 60.0


def summarize(links: Sequence[float], bidirs: Sequence[float], pairs: Sequence[float], peaks: Sequence[float],
              walls: Sequence[float]) -> dict:
    """The figures of one run from its samples, one per run: iperf3 one way and both ways at once (GB/s per
    direction), the pair's and all nodes' busbw (GB/s), preflight.yml's wall time (s); their medians, and the
    busbw / iperf3 ratios of the medians."""
    link, bidir, pair, peak, wall = (statistics.median(v) for v in (links, bidirs, pairs, peaks, walls))
    return {
        "iperf3_gbytes_per_s": [round(x, 3) for x in links],
        "iperf3_median_gbytes_per_s": round(link, 3),
        "iperf3_bidir_gbytes_per_s_per_direction": [round(x, 3) for x in bidirs],
        "iperf3_bidir_median_gbytes_per_s_per_direction": round(bidir, 3),
        "pair_busbw_gbps": [round(x, 3) for x in pairs],
        "pair_busbw_median_gbps": round(pair, 3),
        "all_nodes_peak_busbw_gbps": [round(x, 3) for x in peaks],
        "all_nodes_peak_busbw_median_gbps": round(peak, 3),
        "pair_over_link": round(pair / link, 3),
        "pair_over_bidir_link": round(pair / bidir, 3),
        "all_nodes_over_link": round(peak / link, 3),
        "preflight_wall_s": [round(x, 1) for x in walls],
        "preflight_wall_median_s": round(wall, 1),
    }


def iperf(sb: Sandbox, server: str, client: str, seconds: int, bidir: bool = False) -> float:
    """TCP throughput client -> server in GB/s (10^9 bytes/s, like busbw); bidir: both directions at once, the
    mean of the two directions' received throughput."""
    remote(sb, server, "sudo pkill -x iperf3; sudo iperf3 -s -D -1 && sleep 0.5", check=False)
    out = remote(sb, client, f"iperf3 -c {server} -t {seconds} -J{' --bidir' if bidir else ''}")
    end = json.loads(out)["end"]
    directions = [end["sum_received"]] + ([end["sum_received_bidir_reverse"]] if bidir else [])
    return statistics.mean(d["bits_per_second"] for d in directions) / 8 / 1e9


def collective(sb: Sandbox, head: str, max_bytes: str, names: dict[str, str]) -> dict:
    hosts = " ".join(f"--host {ip}={name}" for ip, name in names.items())
    out = remote(sb, head, f"{COLLECTIVE} --address {head}:6379 --max-bytes {max_bytes} --warmup-iters 2 "
                           f"--iters 5 --pair-iters 5 --pair-ratio 0.05 {hosts}")
    data = json.loads(out)
    if not data["ok"]:
        raise BenchError(f"the collective check failed: {data['problems']}")
    return data


def preflight(sb: Sandbox) -> float:
    env = dict(os.environ, RAYFLEET_SANDBOX=sb.name, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default")
    start = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "playbooks/preflight.yml", "-i", "inventories/sandbox",
                           "-e", f"preflight_report_dir={ROOT / 'artifacts' / 'bench-preflight'}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise BenchError(f"preflight.yml failed:\n{proc.stdout[-3000:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5, help="iperf3 duration per run")
    parser.add_argument("--max-bytes", default="64M", help="largest all-reduce message")
    parser.add_argument("--name", default="benchcoll")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running afterwards")
    parser.add_argument("--existing", action="store_true",
                        help="measure the running sandbox --name as it is (converged already, e.g. by make demo: "
                             "--name demo); it is neither converged nor removed")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "bench-collective.json"))
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.workers < 2:
        parser.error("--workers must be at least 2 (the link is measured between two workers)")

    sb = Sandbox(args.name)
    if not args.existing:
        sb.down()
    try:
        hosts = sb.hosts() if args.existing else sb.up(args.workers)
        if len([h for h in hosts if h["group"] == "ray_worker"]) < 2:
            raise BenchError(f"sandbox {sb.name}: {len(hosts)} hosts running; a head and 2 workers needed")
        head = next(h["address"] for h in hosts if h["group"] == "ray_head")
        worker_addresses = [h["address"] for h in hosts if h["group"] == "ray_worker"]
        w1, w2 = worker_addresses[:2]
        names = {h["address"]: h["host"] for h in hosts}
        if not args.existing:
            print(f"sandbox {sb.name}: {len(hosts)} fresh hosts; site.yml ...", flush=True)
            run_site(sb)
        for address in (w1, w2):
            remote(sb, address, "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null")
        links, bidirs, peaks, pairs, tables, ranks = [], [], [], [], [], 0
        for i in range(args.runs):
            print(f"run {i + 1}/{args.runs}: iperf3, all-reduce ...", flush=True)
            links.append(iperf(sb, w1, w2, args.seconds))
            bidirs.append(iperf(sb, w1, w2, args.seconds, bidir=True))
            data = collective(sb, head, args.max_bytes, names)
            peaks.append(data["peak_busbw_gbps"])
            pair = next(p for p in data["pairs"] if set(p["nodes"]) == {names[w1], names[w2]})
            pairs.append(pair["busbw_gbps"])
            tables.append(data["rows"])
            ranks = data.get("world_size", ranks)
        walls = []
        for i in range(args.runs):
            print(f"preflight.yml {i + 1}/{args.runs} ...", flush=True)
            walls.append(preflight(sb))
    except BenchError as exc:
        print(f"bench-collective: {exc}", file=sys.stderr)
        return 1
    finally:
        if not (args.keep or args.existing):
            sb.down()

    short = {address: name.removeprefix(f"{sb.name}-") for address, name in names.items()}
    figures = summarize(links, bidirs, pairs, peaks, walls)
    result = {
        "benchmark": "collective",
        **stamp("tools/bench_collective.py", argv, f"make bench-collective WORKERS={args.workers}",
                ["--workers", str(args.workers)]),
        "sandbox": sb.name,
        "existing": args.existing,
        "hosts": 1 + len(worker_addresses),
        "workers": len(worker_addresses),
        "ranks": ranks,
        "runs": args.runs,
        "backend": "gloo",
        "max_bytes": args.max_bytes,
        "iperf3_seconds": args.seconds,
        "iperf3_client": short[w2],
        "iperf3_server": short[w1],
        "pair": [short[w1], short[w2]],
        **figures,
        "goal_pair_over_link": GOAL_PAIR_OVER_LINK,
        "goal_preflight_s": GOAL_PREFLIGHT_S,
        "last_sweep": tables[-1],
    }
    link, bidir = figures["iperf3_median_gbytes_per_s"], figures["iperf3_bidir_median_gbytes_per_s_per_direction"]
    pair, peak = figures["pair_busbw_median_gbps"], figures["all_nodes_peak_busbw_median_gbps"]
    wall = figures["preflight_wall_median_s"]
    rows = [("measure", "value", "note"),
            (f"iperf3 {short[w2]} -> {short[w1]} (median)", f"{link:.3f} GB/s",
             f"n={len(links)}, {args.seconds} s each"),
            (f"pair {short[w1]}-{short[w2]} busbw (median)", f"{pair:.3f} GB/s", f"gloo, {args.max_bytes} all-reduce"),
            ("all-nodes peak busbw (median)", f"{peak:.3f} GB/s", f"{ranks} ranks"),
            ("iperf3 both ways at once (median)", f"{bidir:.3f} GB/s", "per direction, --bidir"),
            ("pair busbw / iperf3", f"{result['pair_over_link']:.2f}",
             f"goal >= {GOAL_PAIR_OVER_LINK:g} (one-way baseline)"),
            ("pair busbw / iperf3 --bidir", f"{result['pair_over_bidir_link']:.2f}",
             f"goal >= {GOAL_PAIR_OVER_LINK:g} (the all-reduce's own traffic pattern)"),
            ("all-nodes busbw / iperf3", f"{result['all_nodes_over_link']:.2f}", ""),
            ("preflight.yml wall time (median)", f"{wall:.1f} s", f"n={len(walls)}, goal < {GOAL_PREFLIGHT_S:g} s")]
    publish(result, rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
