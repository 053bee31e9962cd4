#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the benchmark figures in docs/benchmarks.md from the benchmarks' JSON results in artifacts/.

Each benchmark owns one section of docs/benchmarks.md, between `<!-- begin: NAME -->` and `<!-- end: NAME -->`;
a section is rewritten when its results are in artifacts/ and left as it is otherwise, so a machine that ran one
benchmark updates that one only. The figures are never typed by hand.

Examples: tools/bench_report.py            (after make bench-converge WORKERS=2, 5 and 8)
          tools/bench_report.py            (after make bench-localize)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Figures measured by the `make bench-*` targets and written here by `tools/bench_report.py` from their results in
`artifacts/`. Each section says when, on what and with which command it was measured. They vary with the machine:
compare figures of one run, not across machines.
"""


def machine(result: dict) -> str:
    m = result.get("machine") or {}
    parts = [f"{m['cpus']} CPUs" if m.get("cpus") else "", f"{m['memory_gib']} GiB" if m.get("memory_gib") else "",
             m.get("os") or (f"Linux {m['kernel']}" if m.get("kernel") else ""),
             f"Python {m['python']}" if m.get("python") else ""]
    return ", ".join(p for p in parts if p)


def _roles(per_role: dict, least: float = 0.5) -> str:
    top = sorted(((v, k) for k, v in (per_role or {}).items() if v >= least), reverse=True)
    return ", ".join(f"{k} {v:.1f}" for v, k in top) or "-"


def converge_section(results: list[dict]) -> str:
    results = sorted(results, key=lambda r: r["hosts"])
    lines = [
        "## Converge: `site.yml` on fresh and converged sandbox hosts",
        "",
        "`make bench-converge WORKERS=N` on 1 head + N workers (fresh podman hosts): the first `site.yml`, idempotent",
        "re-runs (each must report changed=0 and keep every Ray node id), re-runs after one config file was edited on",
        "one worker (each must repair it there only and keep every Ray node id), and the floor: the same hosts with",
        "the units stopped and `ray start` run by hand with the same settings until Ray lists every node alive.",
        "Seconds; medians of the runs listed.",
        "",
    ]
    for r in results:
        lines += [
            f"### {r['hosts']} hosts — {r['date'][:10]}",
            "",
            f"Measured {r['date']} on {machine(r)} with `{r.get('command', 'tools/bench_converge.py')}`"
            + (f" at commit `{r['commit']}`." if r.get("commit") else "."),
            "",
            "| measure | seconds | runs and notes |",
            "|---|---|---|",
            f"| first `site.yml` on fresh hosts | {r['first_run_s']:.1f} | per role: "
            f"{_roles(r.get('first_run_per_role_s'))} |",
            f"| idempotent re-run | {r['rerun_median_s']:.1f} | "
            f"{' / '.join(f'{t:.1f}' for t in r['rerun_s'])}; changed=0, Ray node ids unchanged; per role: "
            f"{_roles(r.get('rerun_per_role_median_s'), 0.3)} |",
        ]
        if "drift_rerun_median_s" in r:
            lines.append(f"| re-run, one file edited on one worker | {r['drift_rerun_median_s']:.1f} | "
                         f"{' / '.join(f'{t:.1f}' for t in r['drift_rerun_s'])}; repaired on that worker only, "
                         "Ray node ids unchanged |")
        lines += [
            f"| floor: plain `ray start` by hand | {r['floor_median_s']:.1f} | "
            f"{' / '.join(f'{t:.1f}' for t in r['floor_plain_ray_start_s'])}; head, then the workers at once |",
            f"| idempotent re-run / floor | {r['rerun_over_floor']:.2f} | |",
            "",
        ]
    if len(results) > 1:
        base = results[0]
        lines += [
            "### Idempotent re-run by cluster size",
            "",
            "| hosts | re-run (median) | per added host since the smallest | date |",
            "|---|---|---|---|",
        ]
        for r in results:
            added = r["hosts"] - base["hosts"]
            slope = f"{(r['rerun_median_s'] - base['rerun_median_s']) / added:+.2f}" if added else "-"
            lines.append(f"| {r['hosts']} | {r['rerun_median_s']:.1f} | {slope} | {r['date'][:10]} |")
        lines.append("")
    return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{n >> 20} MiB"


def localize_section(results: list[dict]) -> str:
    r = max(results, key=lambda x: x["date"])
    m = r["model"]
    lines = [
        "## Localizing slow nodes",
        "",
        "`make bench-localize` (writes `artifacts/bench-localize.json`): the preflight's pair tests",
        "(`rayfleet.localize`, see [Preflight](preflight.md#what-the-preflight-checks)) run against a bandwidth model",
        f"instead of Ray. A healthy node's link capacity is {m['healthy']:g}, a bad node's a uniform draw in "
        f"{m['bad'][0]:g}-{m['bad'][1]:g}; a",
        f"test's bandwidth is the smallest capacity among its nodes x (1 + u), u uniform in +-{m['noise']:.0%}, drawn "
        "for each",
        f"test; a pair below {m['ratio']:g} x the best ring pair is slow; `pair_ring_max` {m['ring_max']}. Bad nodes "
        "are placed at random",
        "in each trial. Wall time: a round's tests run at once, and a round lasts as long as its slowest test",
        f"({m['setup_s']:g} s to form the group, then {m['warmup'] + m['iters']} all-reduces of "
        f"{_size(m['pair_bytes'])}, one rank per node, at the test's bandwidth x {m['link_gbps']:g} GB/s);",
        "*one at a time* adds up every test instead. False positives are healthy nodes named, false negatives bad",
        "nodes missed, over all the trials of a row.",
        "",
        f"Measured {r['date']} on {machine(r)} with `{r['command']}`"
        + (f" at commit `{r['commit']}`." if r.get("commit") else "."),
        "",
        "| nodes | bad | first pass | rounds, max (mean) | goal 2 log2(n) + 2 | pair tests, mean (max) | wall s, mean "
        "(max) | one at a time, s | trials | false positives | false negatives |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r["results"]:
        lines.append(f"| {x['nodes']} | {x['bad']} | {x['first_pass']} | {x['rounds_max']} ({x['rounds_mean']:g}) | "
                     f"{x['rounds_bound']:g} | {x['pair_tests_mean']:g} ({x['pair_tests_max']}) | "
                     f"{x['wall_s_mean']:.1f} ({x['wall_s_max']:.1f}) | {x['one_at_a_time_s_mean']:.1f} | "
                     f"{x['trials']} | {x['false_positives']} | {x['false_negatives']} |")
    if r.get("ring_of_every_node"):
        lines += [
            "",
            "For comparison, a ring of every node with its re-tests (`pair_ring_max` at least the node count), one bad",
            "node: the fewest rounds where the network carries n/2 tests at once without slowing them, but n pair",
            "tests.",
            "",
            "| nodes | rounds, max | pair tests, mean | wall s, mean | one at a time, s | false positives | "
            "false negatives |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [f"| {x['nodes']} | {x['rounds_max']} | {x['pair_tests_mean']:g} | {x['wall_s_mean']:.1f} | "
                  f"{x['one_at_a_time_s_mean']:.1f} | {x['false_positives']} | {x['false_negatives']} |"
                  for x in r["ring_of_every_node"]]
    g = r.get("goal")
    if g:
        lines += ["", f"Goal: one bad node among {g['nodes']} found in at most {g['rounds_bound']:g} rounds, and no "
                      f"false positive in any row: {g['rounds_max']} rounds at most, {g['false_positives']} false "
                      f"positive(s): **{'met' if g['met'] else 'not met'}**."]
    return "\n".join([*lines, ""])


SECTIONS = {
    "converge": ("bench-converge-*hosts.json", converge_section),
    "localize": ("bench-localize.json", localize_section),
}


def render(doc: str, name: str, body: str) -> str:
    block = f"<!-- begin: {name} -->\n{body.rstrip()}\n<!-- end: {name} -->"
    pattern = re.compile(rf"<!-- begin: {re.escape(name)} -->.*?<!-- end: {re.escape(name)} -->", re.S)
    if pattern.search(doc):
        return pattern.sub(lambda _m: block, doc)
    return doc.rstrip() + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", default=str(ROOT / "artifacts"))
    parser.add_argument("--doc", default=str(DOC))
    args = parser.parse_args(argv)
    doc_path = Path(args.doc)
    doc = doc_path.read_text() if doc_path.exists() else HEADER
    written = []
    for name, (pattern, section) in SECTIONS.items():
        results = [json.loads(p.read_text()) for p in sorted(Path(args.artifacts).glob(pattern))]
        if results:
            doc = render(doc, name, section(results))
            written.append(f"{name} ({len(results)} result(s))")
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.write_text(doc)
    print(f"{doc_path}: " + (", ".join(written) if written else "no results in artifacts/, nothing rewritten"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
