#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the offline inventory check (playbooks/check.yml) on inventories of 10, 100 and 1000 hosts.

Each inventory is one head and workers, every one of them in group gpu, at addresses of a private range, no host
existing: the check contacts none. For each size, --runs runs of `ansible-playbook playbooks/check.yml`: the check
task's own time (the json callback's task duration) and the whole command's wall time, and the wall time of an
ansible-playbook run of one debug task on the same inventory (the floor: Ansible's start and the inventory's
parsing). Medians of one run of this script.

Prints a table and writes artifacts/bench-check.json (tools/bench_report.py puts it in docs/benchmarks.md).

Example: tools/bench_check.py
         tools/bench_check.py --sizes 100 --runs 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from benchinfo import commit, machine, utc_now  # noqa: E402

FLOOR_PLAYBOOK = """---
- name: Floor
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Nothing
      ansible.builtin.debug:
        msg: floor
"""


def inventory(n: int) -> dict:
    workers = {f"w{i:04d}": {"ansible_host": f"10.{100 + i // 60000}.{i // 250 % 240}.{i % 250 + 2}"}
               for i in range(n - 1)}
    return {"all": {"children": {"ray_head": {"hosts": {"h0": {"ansible_host": "10.99.0.1"}}},
                                 "ray_worker": {"hosts": workers},
                                 "gpu": {"hosts": {"h0": {}, **{name: {} for name in workers}}}}}}


def duration_s(task: dict) -> float:
    """A task's duration from the json callback's ISO times."""
    start, end = (dt.datetime.fromisoformat(task["duration"][key].replace("Z", "+00:00")) for key in ("start", "end"))
    return (end - start).total_seconds()


def run(playbook: Path, hosts: Path, env: dict) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", str(hosts)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{playbook} failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr}")
    return wall, json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "bench-check.json"))
    args = parser.parse_args(argv)
    import yaml  # the venv's (Ansible's own dependency)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                   ANSIBLE_CALLBACKS_ENABLED="rayfleet.cluster.stage_items", ANSIBLE_INVENTORY_ENABLED="yaml",
                   ANSIBLE_CACHE_PLUGIN_CONNECTION=str(Path(tmp) / "facts"))
        floor = Path(tmp) / "floor.yml"
        floor.write_text(FLOOR_PLAYBOOK)
        for n in (int(size) for size in args.sizes.split(",")):
            hosts = Path(tmp) / f"hosts-{n}.yml"
            hosts.write_text(yaml.safe_dump(inventory(n)))
            check_s, wall_s, floor_s = [], [], []
            for _run in range(args.runs):
                wall, out = run(ROOT / "playbooks" / "check.yml", hosts, env)
                task = out["plays"][0]["tasks"][0]
                assert task["hosts"]["localhost"]["hosts"] == n, task["hosts"]["localhost"]
                check_s.append(duration_s(task["task"]))
                wall_s.append(wall)
                floor_s.append(run(floor, hosts, env)[0])
            row = {"hosts": n, "check_s": check_s, "wall_s": wall_s, "floor_s": floor_s,
                   "check_median_s": statistics.median(check_s), "wall_median_s": statistics.median(wall_s),
                   "floor_median_s": statistics.median(floor_s)}
            results.append(row)
            print(f"{n:5d} hosts: check {row['check_median_s']:.2f} s, ansible-playbook {row['wall_median_s']:.2f} s, "
                  f"floor {row['floor_median_s']:.2f} s (medians of {args.runs})")
    record = {"date": utc_now(), "machine": machine(), "commit": commit(),
              "command": "make bench-check", "runs": args.runs, "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
