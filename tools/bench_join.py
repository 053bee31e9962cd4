#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: site.yml joining one bare host to a converged cluster with network membership, and removing it again.

On one sandbox (1 head + N workers, fresh containers, ``ray_membership: network`` with the sandbox's subnet as the
cluster's network):
  first   wall time of the first site.yml (N + 1 hosts), for scale
  rerun   wall time of idempotent re-runs (median of --reruns): the floor the join and the leave are compared with
  join    a fresh bare host is added to the inventory (worker N+1) and site.yml runs over every host (median of
          --joins): the stages that ran and the changes on each old host (goal: none), the new host's stages, and
          whether every old Ray node kept its node id; the new node must be alive and admitted
  next    the plain site.yml right after a join (median): what the next scheduled run costs
  leave   the host's container is removed and site.yml runs over the rest (median): stages and changes on the
          remaining hosts (goal: none), Ray node ids unchanged

Prints a table and writes artifacts/bench-join-<hosts>hosts.json (tools/bench_report.py puts it in
docs/benchmarks.md). Not a test: figures vary with the machine.

Example: tools/bench_join.py --workers 2 --joins 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_converge import BenchError, alive_nodes, publish, remote, run_site, stages_run
from benchinfo import stamp

from sandbox import ROOT, Sandbox

ADMISSION_RECORD = "/tmp/ray/rayfleet-admission.json"


def old_host_effects(changed: dict[str, int], ran: dict[str, set[str]], old: list[str]) -> dict[str, dict]:
    """Per old host: the stages that ran there and its changed count."""
    return {h: {"stages": sorted(s for s, hosts in ran.items() if h in hosts), "changed": changed.get(h, 0)}
            for h in old}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--joins", type=int, default=2)
    parser.add_argument("--name", default="benchjoin")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running afterwards")
    parser.add_argument("--out", help="the JSON result (default: artifacts/bench-join-<hosts>hosts.json)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)

    sb = Sandbox(args.name)
    sb.down()
    joins, nexts, leaves, reruns = [], [], [], []
    join_effects, leave_effects, new_stages, admissions = [], [], [], []
    try:
        hosts = sb.up(args.workers)
        names = {h["address"]: h["host"] for h in hosts}
        head = next(h["address"] for h in hosts if h["group"] == "ray_head")
        network = ["-e", json.dumps({"ray_membership": "network", "ray_cluster_networks": [str(sb.subnet())]})]
        print(f"sandbox {sb.name}: {len(hosts)} fresh hosts, network membership ({sb.subnet()}); first site.yml ...",
              flush=True)
        first, _changed, _roles, _out, _cpu = run_site(sb, *network)
        ids = alive_nodes(sb, head)
        if len(ids) != len(hosts):
            raise BenchError(f"after the first run Ray lists {len(ids)} alive nodes, expected {len(hosts)}")
        for i in range(args.reruns):
            print(f"idempotent re-run {i + 1}/{args.reruns} ...", flush=True)
            took, changed, _roles, out, _cpu = run_site(sb, *network)
            if any(changed.values()) or alive_nodes(sb, head) != ids:
                raise BenchError(f"re-run {i + 1} changed something or restarted Ray: {changed}\n{out[-3000:]}")
            reruns.append(took)
        old = sorted(names.values())
        for i in range(args.joins):
            print(f"join one bare host {i + 1}/{args.joins} ...", flush=True)
            joined = sb.up(args.workers + 1)
            new = next(h for h in joined if h["address"] not in names)
            took, changed, _roles, out, _cpu = run_site(sb, *network)
            ran = stages_run(out)
            after = alive_nodes(sb, head)
            kept = {ip: after.get(ip) for ip in ids}
            if kept != ids or new["address"] not in after:
                raise BenchError(f"join {i + 1}: old node ids {ids} became {kept}; new node alive: "
                                 f"{new['address'] in after}")
            record = json.loads(remote(sb, new["address"], f"sudo cat {ADMISSION_RECORD}"))
            if not record.get("ok"):
                raise BenchError(f"join {i + 1}: the new node's admission record is not a pass: {record}")
            admissions.append({c["name"]: c["state"] for c in record["checks"]})
            joins.append(took)
            join_effects.append(old_host_effects(changed, ran, old))
            new_stages.append(sorted(s for s, hs in ran.items() if new["host"] in hs))
            print(f"  the next plain site.yml {i + 1}/{args.joins} ...", flush=True)
            took, changed, _roles, out, _cpu = run_site(sb, *network)
            if any(changed.values()):
                raise BenchError(f"the run after join {i + 1} changed something: {changed}\n{out[-3000:]}")
            nexts.append(took)
            print(f"  remove it again {i + 1}/{args.joins} ...", flush=True)
            sb.remove(new["host"].removeprefix(f"{sb.name}-"))  # the sandbox's name for it: worker<N>
            if any(h["address"] == new["address"] for h in sb.hosts()):
                raise BenchError(f"leave {i + 1}: {new['host']} is still running")
            took, changed, _roles, out, _cpu = run_site(sb, *network)
            # the removed node stays ALIVE in the GCS until its heartbeats time out: the old nodes are compared
            after = alive_nodes(sb, head)
            if {ip: after.get(ip) for ip in ids} != ids:
                raise BenchError(f"leave {i + 1}: the remaining nodes' ids changed: {ids} -> {after}")
            leaves.append(took)
            leave_effects.append(old_host_effects(changed, stages_run(out), old))
    except BenchError as exc:
        print(f"bench-join: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            sb.down()

    def touched(effects: list[dict[str, dict]]) -> dict[str, dict]:
        """Per old host, over every run: the stages that ran there at least once, and the most changes."""
        out: dict[str, dict] = {}
        for run in effects:
            for host, e in run.items():
                seen = out.setdefault(host, {"stages": set(), "changed": 0})
                seen["stages"] |= set(e["stages"])
                seen["changed"] = max(seen["changed"], e["changed"])
        return {h: {"stages": sorted(e["stages"]), "changed": e["changed"]} for h, e in sorted(out.items())}

    rerun = statistics.median(reruns)
    join_old, leave_old = touched(join_effects), touched(leave_effects)
    result = {
        "benchmark": "join",
        **stamp("tools/bench_join.py", argv, f"make bench-join WORKERS={args.workers}",
                ["--workers", str(args.workers)]),
        "hosts": len(hosts),
        "membership": "network",
        "first_run_s": round(first, 1),
        "rerun_s": [round(t, 2) for t in reruns],
        "rerun_median_s": round(rerun, 2),
        "join_s": [round(t, 1) for t in joins],
        "join_median_s": round(statistics.median(joins), 1),
        "join_old_hosts": join_old,
        "join_new_host_stages": sorted(set().union(*map(set, new_stages))),
        "join_new_host_admission": admissions,
        "next_run_s": [round(t, 2) for t in nexts],
        "next_run_median_s": round(statistics.median(nexts), 2),
        "leave_s": [round(t, 2) for t in leaves],
        "leave_median_s": round(statistics.median(leaves), 2),
        "leave_old_hosts": leave_old,
        "ray_node_ids_unchanged": True,
    }

    def effect_note(effects: dict[str, dict]) -> str:
        ran = sorted({s for e in effects.values() for s in e["stages"]})
        changed = max((e["changed"] for e in effects.values()), default=0)
        return f"other hosts: stages {', '.join(ran) or 'none'}, changed <= {changed}; Ray node ids unchanged"

    rows = [("measure", "seconds", "note"),
            ("first site.yml (fresh hosts)", f"{first:.1f}", f"{len(hosts)} hosts, network membership"),
            ("idempotent re-run (median)", f"{rerun:.1f}", f"n={len(reruns)}, changed=0"),
            (f"site.yml joining one bare host ({len(hosts)} -> {len(hosts) + 1}, median)",
             f"{result['join_median_s']:.1f}", f"n={len(joins)}; {effect_note(join_old)}"),
            ("  the next plain site.yml (median)", f"{result['next_run_median_s']:.1f}",
             f"n={len(nexts)}, changed=0; + {result['next_run_median_s'] - rerun:.1f} s over the re-run"),
            (f"site.yml after removing it ({len(hosts) + 1} -> {len(hosts)}, median)",
             f"{result['leave_median_s']:.1f}",
             f"n={len(leaves)}; + {result['leave_median_s'] - rerun:.1f} s over the re-run; {effect_note(leave_old)}")]
    publish(result, rows, args.out or str(ROOT / "artifacts" / f"bench-join-{len(hosts)}hosts.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
