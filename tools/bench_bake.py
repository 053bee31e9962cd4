#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: hosts booted from a baked image vs bare hosts converged by site.yml (1 head + N workers each).

  bare      wall time of the full site.yml on fresh hosts of the bare Debian image
  bake      wall time of playbooks/bake.yml on one bare builder (podman backend, commit included)
  alive     from `podman create` of the hosts of the baked image (launch file written before boot) until Ray's
            node table on the head lists every node ALIVE with its admission label (its checks passed before its
            Ray started): no Ansible involved (median of --boots fresh clusters)
  verified  from the same start until site.yml on those hosts has finished (every node checked alive, the cluster
            check passed): what an operator waits for (median of --boots)
  join      the booted cluster switched to network membership (site.yml), then one more host booted from the image
            into it, as the autoscaler or a spot replacement would: seconds from its `podman create` until it is
            alive with its admission label (its link pair-tested against the proved nodes before its Ray started),
            and until a Ray task placed on it has run; on the other hosts every file under /etc/rayfleet, /etc/ssh
            and /etc/nftables*, the nftables ruleset and every Ray node id must be unchanged (median of --boots)

Prints a table and writes artifacts/bench-bake.json (tools/bench_report.py puts it in docs/benchmarks.md).
Not a test: figures vary with the machine.

Example: tools/bench_bake.py --workers 2 --boots 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bakeflow import (
    alive_nodes,
    bake,
    exec_on,
    host_state,
    installed_in_image,
    installed_on,
    package_changes,
    remove_image,
    task_on,
    wait_alive,
)
from bench_converge import BenchError, publish, run_site
from benchinfo import stamp

from sandbox import ROOT, Sandbox, build_image, podman

IMAGE_NAME, TAG = "rayfleet-node-bench", "bench"
GOAL_VERIFIED_S = 19.0
GOAL_RATIO = 0.2
GOAL_JOIN_S = 15.0


def summarize(bare_s: float, bake_s: float, boots: Sequence[tuple[float, float, float]],
              per_role: Sequence[Mapping[str, float]] = ()) -> dict:
    """The figures of one run: seconds of the bare site.yml and of bake.yml, and per boot of the baked image
    (to Ray alive, to site.yml verified, site.yml alone), with their medians and verified / bare; per_role: each
    boot's site.yml seconds per role (ansible.posix.profile_roles), whose medians are kept."""
    alive, verified, site = ([b[i] for b in boots] for i in range(3))
    roles = sorted({name for boot in per_role for name in boot})
    return {
        "bare_site_s": round(bare_s, 1),
        "bake_s": round(bake_s, 1),
        "boot_to_alive_s": [round(x, 1) for x in alive],
        "boot_to_verified_s": [round(x, 1) for x in verified],
        "site_on_baked_s": [round(x, 1) for x in site],
        "median_boot_to_alive_s": round(statistics.median(alive), 1),
        "median_boot_to_verified_s": round(statistics.median(verified), 1),
        "median_site_on_baked_s": round(statistics.median(site), 1),
        "verified_over_bare": round(statistics.median(verified) / bare_s, 3),
        "site_on_baked_per_role_median_s": {
            name: round(statistics.median(boot.get(name, 0.0) for boot in per_role), 2) for name in roles},
    }


def image_bytes(image: str) -> int | None:
    """The image's size as podman reports it, None when it cannot say."""
    proc = podman("image", "inspect", "--format", "{{.Size}}", image, check=False)
    return int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else None


def join(sb: Sandbox, workers: int, image: str, network: list[str]) -> dict:
    """One host booted from the image into the running cluster (network membership): seconds to admitted and
    alive, and to a task run on it; what its admission record says of its link; whether anything changed on the
    other hosts."""
    hosts = sb.hosts()
    names = [h["host"].removeprefix(f"{sb.name}-") for h in hosts]
    head_ip = hosts[0]["address"]
    before = {n: host_state(sb, n) for n in names}
    ids = alive_nodes(sb, head_ip)
    start = time.monotonic()
    joined = sb.up(workers + 1, image=image, launch=True)
    new = next(h for h in joined if h["host"].removeprefix(f"{sb.name}-") not in names)
    new_name = new["host"].removeprefix(f"{sb.name}-")
    nodes = wait_alive(sb, head_ip, len(hosts) + 1, timeout=180, admitted=True)
    alive = time.monotonic() - start
    ran = task_on(sb, nodes[new["address"]])
    task = time.monotonic() - start
    if ran != new["container"]:  # the host's hostname
        raise BenchError(f"the task placed on {new['container']} ran on {ran!r}")
    record = json.loads(exec_on(sb, new_name, "cat /tmp/ray/rayfleet-admission.json"))
    link = next((c for c in record["checks"] if c["name"] == "link"), {})
    after = {n: host_state(sb, n) for n in names}
    kept = {ip: nodes.get(ip) for ip in ids}
    return {"alive_s": alive, "task_s": task, "link_state": link.get("state"), "link_reason": link.get("reason"),
            "link": record.get("link") or {}, "others_changed": sorted(n for n in names if before[n] != after[n]),
            "node_ids_kept": kept == ids, "network": network}


def boot(name: str, workers: int, image: str, in_image: dict[str, str]
         ) -> tuple[float, float, float, list[str], dict[str, float], dict]:
    """One fresh cluster from the image: seconds to Ray alive, to site.yml done, site.yml alone; the packages
    site.yml installed, removed or moved ("<host>: <change>", against in_image); site.yml's seconds per role."""
    sb = Sandbox(name)
    sb.down()
    try:
        start = time.monotonic()
        hosts = sb.up(workers, image=image, launch=True)
        wait_alive(sb, hosts[0]["address"], len(hosts), timeout=180, admitted=True)
        alive = time.monotonic() - start
        site, _changed, roles, _out, _cpu = run_site(sb)
        done = time.monotonic() - start
        names = [h["host"].removeprefix(f"{sb.name}-") for h in hosts]  # head, worker1, ...
        changes = [f"{host}: {change}" for host in names
                   for change in package_changes(in_image, installed_on(sb, host))]
        network = ["-e", json.dumps({"ray_membership": "network", "ray_cluster_networks": [str(sb.subnet())]})]
        run_site(sb, *network)
        return alive, done, site, changes, roles, join(sb, workers, image, network)
    finally:
        sb.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--boots", type=int, default=3, help="fresh clusters booted from the image")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "bench-bake.json"))
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    image = f"localhost/{IMAGE_NAME}:{TAG}"
    build_image()

    bare_sb = Sandbox("bench-bare")
    bare_sb.down()
    try:
        bare_sb.up(args.workers)
        print(f"bare: site.yml on {args.workers + 1} fresh hosts ...", flush=True)
        bare, _changed, _roles, _out, _cpu = run_site(bare_sb)
    finally:
        bare_sb.down()

    builder = Sandbox("bench-builder")
    builder.down()
    remove_image(image)
    try:
        builder.up(0)
        print("bake: playbooks/bake.yml on one bare builder ...", flush=True)
        start = time.monotonic()
        proc = bake(builder, IMAGE_NAME, TAG)
        baked = time.monotonic() - start
        if proc.returncode != 0:
            raise BenchError(f"bake failed:\n{proc.stdout[-4000:]}")
        size = image_bytes(image)
    finally:
        builder.down()

    runs = []
    try:
        in_image = installed_in_image(image)
        for i in range(args.boots):
            print(f"boot {i + 1}/{args.boots}: {args.workers + 1} hosts from {image} ...", flush=True)
            runs.append(boot("bench-baked", args.workers, image, in_image))
    finally:
        remove_image(image)

    packages = sorted({change for r in runs for change in r[3]})
    joins = [r[5] for r in runs]
    figures = summarize(bare, baked, [r[:3] for r in runs], [r[4] for r in runs])
    result = {
        "benchmark": "bake",
        **stamp("tools/bench_bake.py", argv, f"make bench-bake WORKERS={args.workers}",
                ["--workers", str(args.workers)]),
        "hosts": args.workers + 1,
        "workers": args.workers,
        "boots": args.boots,
        # the alive figure counts a node once it carries its admission label (its checks passed before Ray started)
        "alive_admitted": True,
        "image_bytes": size,
        **figures,
        "goal_verified_s": GOAL_VERIFIED_S,
        "goal_ratio": GOAL_RATIO,
        "package_changes_on_baked": packages,
        "join_alive_s": [round(j["alive_s"], 1) for j in joins],
        "join_task_s": [round(j["task_s"], 1) for j in joins],
        "median_join_alive_s": round(statistics.median(j["alive_s"] for j in joins), 1),
        "median_join_task_s": round(statistics.median(j["task_s"] for j in joins), 1),
        "join_link_states": [j["link_state"] for j in joins],
        "join_link": [j["link"] for j in joins],
        "join_others_changed": sorted({n for j in joins for n in j["others_changed"]}),
        "join_node_ids_kept": all(j["node_ids_kept"] for j in joins),
        "goal_join_s": GOAL_JOIN_S,
    }
    rows = [
        ("measure", "seconds", "note"),
        ("bare site.yml", f"{bare:.1f}", f"{args.workers + 1} fresh bare hosts"),
        ("bake.yml", f"{baked:.1f}", "one builder, commit included"),
        ("boot -> admitted, alive", f"{figures['median_boot_to_alive_s']:.1f}",
         "median of " + " / ".join(f"{r[0]:.1f}" for r in runs)),
        ("boot -> site.yml verified", f"{figures['median_boot_to_verified_s']:.1f}",
         "median of " + " / ".join(f"{r[1]:.1f}" for r in runs)),
        ("  of which site.yml", f"{figures['median_site_on_baked_s']:.1f}",
         "median of " + " / ".join(f"{r[2]:.1f}" for r in runs)),
        ("  per role (median)", "", ", ".join(f"{k} {v:.1f}" for k, v in sorted(
            figures["site_on_baked_per_role_median_s"].items(), key=lambda kv: -kv[1]) if v >= 0.5)),
        ("verified / bare", f"{figures['verified_over_bare']:.3f}", f"goal <= {GOAL_RATIO:g}"),
        ("packages site.yml changed", str(len(packages)), ", ".join(packages) or "none (against the image)"),
        ("join: boot -> admitted, alive", f"{result['median_join_alive_s']:.1f}",
         "median of " + " / ".join(f"{j['alive_s']:.1f}" for j in joins) + "; link: "
         + ", ".join(str(j["link_state"]) for j in joins)),
        ("join: boot -> a task ran on it", f"{result['median_join_task_s']:.1f}",
         "median of " + " / ".join(f"{j['task_s']:.1f}" for j in joins) + f"; goal <= {GOAL_JOIN_S:g}"),
        ("join: other hosts changed", str(len(result["join_others_changed"])),
         ", ".join(result["join_others_changed"]) or "none; Ray node ids kept: "
         + str(result["join_node_ids_kept"]).lower()),
    ]
    publish(result, rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
