#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the benchmark figures in docs/benchmarks.md from the benchmarks' JSON results in artifacts/.

Each benchmark owns one section of docs/benchmarks.md, between `<!-- begin: NAME -->` and `<!-- end: NAME -->`
(a section of the same heading without these marks, written by hand before, is replaced by it). The converge and
localize sections are rewritten when their results are in artifacts/ and left as they are otherwise. The bake and
collective sections always come from artifacts/bench-bake.json and artifacts/bench-collective.json: without the
file, the section says which command measures it. The figures are never typed by hand.

Examples: tools/bench_report.py            (after make bench-converge WORKERS=2, 5 and 8)
          tools/bench_report.py            (after make bench-localize, bench-bake or bench-collective)
          tools/bench_report.py --doc /tmp/benchmarks.md   (a copy: see what would be written)
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


def measured(r: dict) -> str:
    """The line above a result's table: when, on what, with which command, at which commit."""
    return (f"Measured {r['date']} on {machine(r)} with `{r['command']}`"
            + (f" at commit `{r['commit']}`" if r.get("commit") else ""))


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
        "one worker (each must repair it there only and keep every Ray node id), re-runs with a release of the",
        "collection that changed one role (each must run that role's stage alone), re-runs with a Ray setting",
        "changed (each must leave the stages that do not read it alone), one run of every stage on every",
        "host (`-e rayfleet_full=true`), and the floor: the same hosts with",
        "the units stopped and `ray start` run by hand with the same settings until Ray lists every node alive.",
        "Seconds; medians of the runs listed. The hosts install packages from Debian's mirror, and Ray (with no",
        "index) and torch from the sandbox's wheelhouse (`make wheels`), as an offline site would.",
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
            *([f"| CPU busy during the first run | {r['first_run_cpu']['machine_busy_s']:.0f} CPU-s | "
               f"{r['first_run_cpu']['busy_fraction']:.0%} of the machine's {r['first_run_cpu']['cpus']} CPUs "
               f"(hosts and controller together); the controller (`ansible-playbook`, its forks and ssh clients, "
               f"not the persistent ssh connections): "
               f"{r['first_run_cpu']['controller_s']:.0f} CPU-s |"] if r.get("first_run_cpu") else []),
            *([f"| tasks the first run ran per host | {' / '.join(map(str, r['first_run_tasks_per_host'].values()))} "
               f"| {', '.join(r['first_run_tasks_per_host'])} (the play recap's ok count) |"]
              if r.get("first_run_tasks_per_host") else []),
            f"| idempotent re-run | {r['rerun_median_s']:.1f} | "
            f"{' / '.join(f'{t:.1f}' for t in r['rerun_s'])}; changed=0, Ray node ids unchanged; per role: "
            f"{_roles(r.get('rerun_per_role_median_s'), 0.3)} |",
        ]
        if "drift_rerun_median_s" in r:
            lines.append(f"| re-run, one file edited on one worker | {r['drift_rerun_median_s']:.1f} | "
                         f"{' / '.join(f'{t:.1f}' for t in r['drift_rerun_s'])}; repaired on that worker only, "
                         "Ray node ids unchanged |")
        if "release_rerun_median_s" in r:
            lines.append(f"| re-run, a release that changed one role | {r['release_rerun_median_s']:.1f} | "
                         f"{' / '.join(f'{t:.1f}' for t in r['release_rerun_s'])}; the collection with a comment "
                         "added to the firewall role, then as it was: the firewall stage alone, changed=0 |")
        if "ray_setting_rerun_median_s" in r:
            lines.append(f"| re-run, a Ray setting changed | {r['ray_setting_rerun_median_s']:.1f} | "
                         f"{' / '.join(f'{t:.1f}' for t in r['ray_setting_rerun_s'])}; "
                         "`-e ray_health_interval_s=240`, then as it was: stages run "
                         f"{', '.join(r.get('ray_setting_rerun_stages') or ['ray', 'ml'])} (the ray stage: the health "
                         "timer), no other, Ray node ids unchanged |")
        if "full_run_s" in r:
            lines.append(f"| every stage on every host (`-e rayfleet_full=true`) | {r['full_run_s']:.1f} | "
                         "changed=0: what a release that changed every stage's code costs; per role: "
                         f"{_roles(r.get('full_run_per_role_s'))} |")
        lines += [
            f"| floor: plain `ray start` by hand | {r['floor_median_s']:.1f} | "
            f"{' / '.join(f'{t:.1f}' for t in r['floor_plain_ray_start_s'])}; head, then the workers at once |",
            f"| idempotent re-run / floor | {r['rerun_over_floor']:.2f} | |",
        ]
        if "hand_floor_s" in r:
            head = r["hand_floor_installed"]["head"]
            lines += [
                f"| hand floor: fresh hosts, the same packages and wheels by hand, then `ray start` | "
                f"{r['hand_floor_s']:.1f} | every host at once: the apt packages the first run's records list, at "
                f"their versions (the head: {len(head['apt'])}), and the Ray venv's {len(head['pip'])} requirements "
                "from the same wheelhouse with pip, then `ray start` until every node is alive |",
                *([f"| CPU busy during the hand floor | {r['hand_floor_cpu']['machine_busy_s']:.0f} CPU-s | "
                   f"{r['hand_floor_cpu']['busy_fraction']:.0%} of the machine's {r['hand_floor_cpu']['cpus']} CPUs |"]
                  if r.get("hand_floor_cpu") else []),
                f"| first `site.yml` / hand floor | {r['first_over_hand_floor']:.2f} | goal: at most 1.3 |",
            ]
        lines.append("")
    if len(results) > 1:
        lines += [
            "### Idempotent re-run by cluster size",
            "",
            "Per added host: against the smallest cluster measured at the same commit on the same machine (figures",
            "measured apart are not compared).",
            "",
            "The controller's CPU seconds during the re-run (`ansible-playbook`, its forks and ssh clients) split",
            "the same way: what it costs at the smallest size, and per added host.",
            "",
            "| hosts | re-run (median) | per added host since the smallest | controller CPU-s (median) | CPU-s per "
            "added host | date | commit |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in results:
            same = [b for b in results if b["commit"] == r["commit"] and b["machine"] == r["machine"]]
            base = min(same, key=lambda b: b["hosts"])
            added = r["hosts"] - base["hosts"]
            slope = f"{(r['rerun_median_s'] - base['rerun_median_s']) / added:+.2f}" if added else "-"
            cpu, cpu_slope = "-", "-"
            if "rerun_controller_cpu_median_s" in r:
                cpu = f"{r['rerun_controller_cpu_median_s']:.1f}"
                if added and "rerun_controller_cpu_median_s" in base:
                    per_host = (r["rerun_controller_cpu_median_s"] - base["rerun_controller_cpu_median_s"]) / added
                    cpu_slope = f"{per_host:+.2f}"
            lines.append(f"| {r['hosts']} | {r['rerun_median_s']:.1f} | {slope} | {cpu} | {cpu_slope} | "
                         f"{r['date'][:10]} | `{r['commit']}` |")
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


def _runs(values: list, fmt: str = ".1f") -> str:
    return " / ".join(f"{v:{fmt}}" for v in values)


def _bytes(size: str | int) -> str:
    """'64M' (binary units, as rayfleet.collective's --max-bytes) -> '64 MiB'."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", str(size), re.IGNORECASE)
    if not m:
        return str(size)
    return f"{m.group(1)} {m.group(2).upper()}iB" if m.group(2) else f"{m.group(1)} bytes"


def _not_measured(target: str, artifact: str) -> list[str]:
    return [f"Not measured yet: run `make {target}` (on the podman sandbox). It writes `artifacts/{artifact}`,",
            "and `tools/bench_report.py` writes this section from it.", ""]


BAKE_ABOUT = [
    "## Baked image vs bare hosts",
    "",
    "`make bench-bake WORKERS=N` (writes `artifacts/bench-bake.json`): the full `site.yml` on 1 head + N workers,",
    "fresh bare sandbox hosts; `bake.yml` on one bare builder; then, for each boot, 1 + N fresh hosts booted from",
    "the baked image with their launch file: seconds from `podman create` until Ray's state API lists every node",
    "alive (no Ansible involved), and until `site.yml` on them has finished (every node verified alive by the",
    "cluster check). Then the cluster is switched to network membership and one more host is booted from the image",
    "into it: seconds until it is admitted (its link pair-tested) and alive, and until a Ray task placed on it ran;",
    "the other hosts' rayfleet, SSH and firewall files and nftables ruleset are compared before and after. Seconds;",
    "medians of the boots listed.",
    "",
]


def _join_rows(r: dict) -> list[str]:
    """The rows of a host booted into the running cluster (network membership), when the result has them."""
    if r.get("median_join_alive_s") is None:
        return []
    goal = f"; goal ≤ {r['goal_join_s']:g} s" if r.get("goal_join_s") is not None else ""
    others = ", ".join(r["join_others_changed"]) or "none"
    return [
        f"| a host booted into the running cluster → admitted and alive | {r['median_join_alive_s']:.1f} | "
        f"{_runs(r['join_alive_s'])}; its link check: {', '.join(str(x) for x in r['join_link_states'])} |",
        f"| … → a Ray task ran on it | {r['median_join_task_s']:.1f} | {_runs(r['join_task_s'])}{goal} |",
        f"| other hosts whose files or ruleset changed | {len(r['join_others_changed'])} | {others}; Ray node ids "
        f"{'kept' if r.get('join_node_ids_kept') else 'CHANGED'} |",
    ]


def bake_section(results: list[dict]) -> str:
    if not results:
        return "\n".join([*BAKE_ABOUT, *_not_measured("bench-bake", "bench-bake.json")])
    r = max(results, key=lambda x: x["date"])
    n = r["hosts"]
    image = f"podman commit of the {r['image_bytes'] / 1e9:.1f} GB image included" if r.get("image_bytes") \
        else "podman commit included"
    goal_s = f"; goal ≤ {r['goal_verified_s']:g} s" if r.get("goal_verified_s") is not None else ""
    goal_ratio = f"goal ≤ {r['goal_ratio']:g}" if r.get("goal_ratio") is not None else ""
    packages = r.get("package_changes_on_baked")
    if packages is None:
        changes = []
    else:
        shown = ", ".join(f"`{change}`" for change in packages[:12]) + (" ..." if len(packages) > 12 else "")
        found = f"{len(packages)}: {shown}" if packages else "none"
        changes = ["Packages `site.yml` installed, removed or upgraded on the baked hosts (Debian's and the Ray "
                   f"venv's, against the image's): {found}."]
    lines = [
        *BAKE_ABOUT,
        f"### {n} hosts — {r['date'][:10]}",
        "",
        f"{measured(r)}; {len(r['boot_to_alive_s'])} boots of the image.",
        "",
        "| measure | seconds | runs and notes |",
        "|---|---|---|",
        f"| `site.yml` on {n} bare hosts | {r['bare_site_s']:.1f} | |",
        f"| `bake.yml` on one builder | {r['bake_s']:.1f} | {image} |",
        (f"| boot → {n} nodes admitted and alive in Ray | {r['median_boot_to_alive_s']:.1f} | "
         f"{_runs(r['boot_to_alive_s'])}; each passed its node checks (rayfleet.admission) before "
         "`rayfleet-launch.service` started its Ray at boot |" if r.get("alive_admitted") else
         f"| boot → {n} nodes alive in Ray | {r['median_boot_to_alive_s']:.1f} | {_runs(r['boot_to_alive_s'])}; "
         "`rayfleet-launch.service` starts Ray at boot |"),
        f"| boot → `site.yml` verified | {r['median_boot_to_verified_s']:.1f} | "
        f"{_runs(r['boot_to_verified_s'])}{goal_s} |",
        f"| of which `site.yml` itself | {r['median_site_on_baked_s']:.1f} | {_runs(r['site_on_baked_s'])}"
        + (f"; per role: {_roles(r['site_on_baked_per_role_median_s'])} |" if r.get("site_on_baked_per_role_median_s")
           else " |"),
        f"| verified / bare | {r['verified_over_bare']:.3f} | {goal_ratio} |",
        *_join_rows(r),
        "",
        *changes,
        "Ray is up from boot without Ansible. The verifying `site.yml` on top skips the base stage, whose record the",
        "image carries; it runs every other stage on every host: they read the node's address or the cluster's",
        "members (firewall rules, SSH trust, mounts, Ray's settings, the Prometheus targets), act otherwise",
        "while baking (the GPU stack, NCCL's checks), or are not applied while baking (the checkpoint store, whose",
        "keys no image may hold, and with it the ML stage).",
        "",
    ]
    return "\n".join(lines)


COLLECTIVE_ABOUT = [
    "## Collective check vs the raw link",
    "",
    "`make bench-collective WORKERS=N` (writes `artifacts/bench-collective.json`): on a fresh sandbox of 1 head +",
    "N workers converged with `site.yml` (or, with `tools/bench_collective.py --name <sandbox> --existing`, a running",
    "sandbox as it is), iperf3 (Debian's package) between two workers one way and both ways at once (`--bidir`, per",
    "direction), the gloo all-reduce of `rayfleet.collective` (all nodes, and the same two workers as a pair, at the",
    "largest size), and the whole `preflight.yml`. Medians of the runs listed.",
    "",
]


def collective_section(results: list[dict]) -> str:
    if not results:
        return "\n".join([*COLLECTIVE_ABOUT, *_not_measured("bench-collective", "bench-collective.json")])
    r = max(results, key=lambda x: x["date"])
    one, two = r["pair"]
    goal = r.get("goal_pair_over_link")
    goal_link = f"goal ≥ {goal:g}" if goal is not None else ""
    goal_wall = f"; goal < {r['goal_preflight_s']:g} s" if r.get("goal_preflight_s") is not None else ""
    where = f" on the running sandbox `{r['sandbox']}`, as it was" if r.get("existing") else ""
    lines = [
        *COLLECTIVE_ABOUT,
        f"### {r['hosts']} hosts — {r['date'][:10]}",
        "",
        f"{measured(r)}{where}; {len(r['iperf3_gbytes_per_s'])} runs.",
        "",
        "| measure | value | runs and notes |",
        "|---|---|---|",
        f"| iperf3 {r['iperf3_client']} → {r['iperf3_server']} | {r['iperf3_median_gbytes_per_s']:.3f} GB/s | "
        f"{_runs(r['iperf3_gbytes_per_s'], '.3f')}; {r['iperf3_seconds']} s each |",
        f"| iperf3 both ways at once, per direction | "
        f"{r['iperf3_bidir_median_gbytes_per_s_per_direction']:.3f} GB/s | "
        f"{_runs(r['iperf3_bidir_gbytes_per_s_per_direction'], '.3f')} |",
        f"| pair {one}-{two} busbw at {_bytes(r['max_bytes'])} | {r['pair_busbw_median_gbps']:.3f} GB/s | "
        f"{_runs(r['pair_busbw_gbps'], '.3f')}; {r['backend']} |",
        f"| all-nodes peak busbw ({r['ranks']} ranks) | {r['all_nodes_peak_busbw_median_gbps']:.3f} GB/s | "
        f"{_runs(r['all_nodes_peak_busbw_gbps'], '.3f')} |",
        f"| pair busbw / iperf3 one way | {r['pair_over_link']:.2f} | {goal_link} |",
        f"| pair busbw / iperf3 both ways | {r['pair_over_bidir_link']:.2f} | "
        + (f"{goal_link}: the all-reduce's own traffic pattern |" if goal_link else "the all-reduce's own traffic "
           "pattern |"),
        f"| all-nodes busbw / iperf3 one way | {r['all_nodes_over_link']:.2f} | |",
        f"| `preflight.yml` wall time | {r['preflight_wall_median_s']:.1f} s | {_runs(r['preflight_wall_s'])}"
        f"{goal_wall} |",
        "",
        "The ratio against one-way iperf3 is a property of the sandbox: iperf3 one way measures one TCP stream in one",
        "direction, while a 2-rank ring all-reduce sends and receives at once (the `--bidir` baseline is that traffic",
        "pattern) and gloo sums the halves on the CPU, which the sandbox's containers and every Ray process on them",
        "share. On GPU hosts the comparison that matters is NCCL busbw against the floors in",
        "[`roles/preflight/files/busbw_thresholds.yml`](../roles/preflight/files/busbw_thresholds.yml).",
        "",
    ]
    return "\n".join(lines)


JOIN_ABOUT = [
    "## Joining and removing a host with network membership",
    "",
    "`make bench-join WORKERS=N` (writes `artifacts/bench-join-<hosts>hosts.json`): 1 head + N workers, fresh bare",
    "sandbox hosts converged with `ray_membership: network` (the sandbox's subnet as the cluster's network). Then,",
    "for each join, a fresh bare host is added to the inventory and `site.yml` runs over every host; then the plain",
    "`site.yml` once more; then the host is removed and `site.yml` runs over the rest. The stages that ran and the",
    "changes on the hosts that were there before are counted; every old Ray node must keep its node id. Seconds;",
    "medians of the runs listed.",
    "",
]


def _effects(effects: dict) -> str:
    ran = sorted({s for e in effects.values() for s in e["stages"]})
    changed = max((e["changed"] for e in effects.values()), default=0)
    return (f"stages run there: {', '.join(ran) or 'none'}; most changes on one of them: {changed}")


def join_section(results: list[dict]) -> str:
    lines = list(JOIN_ABOUT)
    for r in sorted(results, key=lambda x: x["hosts"]):
        n = r["hosts"]
        admission = r.get("join_new_host_admission") or []
        link = sorted({a.get("link", "-") for a in admission})
        lines += [
            f"### {n} hosts → {n + 1} → {n} — {r['date'][:10]}",
            "",
            f"{measured(r)}.",
            "",
            "| measure | seconds | runs and notes |",
            "|---|---|---|",
            f"| first `site.yml` ({n} bare hosts) | {r['first_run_s']:.1f} | |",
            f"| idempotent re-run | {r['rerun_median_s']:.1f} | {_runs(r['rerun_s'])}; changed=0 |",
            f"| `site.yml` joining one bare host ({n} → {n + 1}) | {r['join_median_s']:.1f} | {_runs(r['join_s'])}; "
            f"the other hosts: {_effects(r['join_old_hosts'])} |",
            f"| the next plain `site.yml` | {r['next_run_median_s']:.1f} | {_runs(r['next_run_s'])}; changed=0 |",
            f"| `site.yml` after removing it ({n + 1} → {n}) | {r['leave_median_s']:.1f} | {_runs(r['leave_s'])}; "
            f"the other hosts: {_effects(r['leave_old_hosts'])} |",
            "",
            f"On the joining host `site.yml` ran: {', '.join(r['join_new_host_stages'])}. Its node was admitted "
            f"(link check: {', '.join(link)}: its first start comes before the pytorch role installs torch). Every "
            "old Ray node kept its node id.",
            "",
        ]
    return "\n".join(lines)


def check_section(results: list[dict]) -> str:
    r = max(results, key=lambda x: x["date"])
    lines = [
        "## Offline inventory check",
        "",
        "`make bench-check` (writes `artifacts/bench-check.json`): `ansible-playbook playbooks/check.yml` on",
        "inventories of one head and workers, every host in `gpu`, none of them existing (the check contacts no",
        "host). *check*: the check task's own time; *ansible-playbook*: the whole command; *floor*:",
        "`ansible-playbook` of one `debug` task on the same inventory (Ansible's start and the inventory's parsing).",
        f"Medians of {r['runs']} runs.",
        "",
        measured(r) + ".",
        "",
        "| hosts | check, s | ansible-playbook, s | floor, s |",
        "|---|---|---|---|",
    ]
    for x in r["results"]:
        lines.append(f"| {x['hosts']} | {x['check_median_s']:.2f} | {x['wall_median_s']:.2f} | "
                     f"{x['floor_median_s']:.2f} |")
    return "\n".join(lines) + "\n"


# name: (the results in artifacts/, the section, whether the section is written without results)
SECTIONS = {
    "converge": ("bench-converge-*hosts.json", converge_section, False),
    "bake": ("bench-bake.json", bake_section, True),
    "collective": ("bench-collective.json", collective_section, True),
    "localize": ("bench-localize.json", localize_section, False),
    "join": ("bench-join-*hosts.json", join_section, False),
    "check": ("bench-check.json", check_section, False),
}


def render(doc: str, name: str, body: str) -> str:
    """The section between its marks; in place of a hand-written section of the same heading when there are no
    marks yet (up to the next `## ` heading or marked section); at the end otherwise."""
    block = f"<!-- begin: {name} -->\n{body.rstrip()}\n<!-- end: {name} -->"
    pattern = re.compile(rf"<!-- begin: {re.escape(name)} -->.*?<!-- end: {re.escape(name)} -->", re.S)
    if pattern.search(doc):
        return pattern.sub(lambda _m: block, doc)
    heading = body.lstrip().splitlines()[0] if body.lstrip().startswith("## ") else None
    if heading:
        found = re.search(rf"^{re.escape(heading)}[ \t]*\n.*?(?=^## |^<!-- begin: |\Z)", doc, re.S | re.M)
        if found:
            rest = doc[found.end():]
            return doc[:found.start()] + block + ("\n\n" + rest if rest.strip() else "\n")
    return doc.rstrip() + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", default=str(ROOT / "artifacts"))
    parser.add_argument("--doc", default=str(DOC))
    args = parser.parse_args(argv)
    doc_path = Path(args.doc)
    doc = doc_path.read_text() if doc_path.exists() else HEADER
    written = []
    for name, (pattern, section, always) in SECTIONS.items():
        results = [json.loads(p.read_text()) for p in sorted(Path(args.artifacts).glob(pattern))]
        if results:
            doc = render(doc, name, section(results))
            written.append(f"{name} ({len(results)} result(s))")
        elif always:
            doc = render(doc, name, section(results))
            written.append(f"{name} (no {pattern}: not measured yet)")
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.write_text(doc)
    print(f"{doc_path}: " + (", ".join(written) if written else "no results in artifacts/, nothing rewritten"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
