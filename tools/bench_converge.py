#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: site.yml on fresh sandbox hosts, its idempotent re-run, and the plain `ray start` floor.

Measures, on one sandbox (1 head + N workers, fresh containers):
  first   wall time of the first site.yml, and per role (ansible.posix.profile_roles); how busy the machine's
          CPUs were during it, and the controller's share (ansible-playbook, its forks and their ssh clients)
  rerun   wall time of idempotent re-runs (median of --reruns); each must report changed=0 and
          leave every Ray node id unchanged (Ray untouched); the controller's CPU seconds during each
  drift   wall time of re-runs after one config file was edited on one worker (median of --reruns); each must
          report changed on that worker only, restore the file and leave every Ray node id unchanged
  release wall time of re-runs with a release of the collection that changed one role (the firewall role, a comment
          added; then this checkout's collection again: 2 x --reruns runs, median); each must run the firewall
          stage alone, change nothing and leave every Ray node id unchanged
  full    wall time of one run of every stage on every host (-e rayfleet_full=true), changing nothing: what a
          release that changed every stage's code costs
  floor   Ray's own floor in the same containers: the rayfleet units stopped, then `ray start`
          by hand (head, then all workers at once, with the same settings) until Ray lists every
          node alive; the units are started again afterwards
  hand    the first converge's floor, last, on hosts made fresh again: by hand and on every host at once, the apt
          packages the first site.yml installed there (as its stage records list them, at their versions) and the
          Ray venv's requirements from the same wheelhouse (pip, --no-index), then `ray start` (head, then workers)
          until Ray lists every node alive; the first site.yml is reported as a ratio to it, and beside it how busy
          the machine's CPUs were during each and how many tasks the first site.yml ran on each host

Prints a table and writes artifacts/bench-converge-<hosts>hosts.json (tools/bench_report.py puts it in
docs/benchmarks.md). Not a test: figures vary with the machine.

Example: tools/bench_converge.py --workers 2 --reruns 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import stamp

from sandbox import ROOT, Sandbox

VENV = "/opt/rayfleet/venv"
GCS_PORT = 6379
TOKEN_PATH = "/etc/rayfleet/auth-token"
AUTH_ENV = f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_PATH}"
RAY_STOP = f"sudo -u rayfleet env {AUTH_ENV} {VENV}/bin/ray stop --force >/dev/null 2>&1; true"
CLUSTER_CLI = f"sudo -u rayfleet {VENV}/bin/python -m rayfleet.cluster --auth-token-path {TOKEN_PATH}"
RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=\d+\s+failed=\d+")
ROLE_LINE = re.compile(r"^(\S.*?) -{2,}\s*(\d+\.\d+)s$")


class BenchError(RuntimeError):
    pass


def publish(result: dict, rows: list[tuple[str, str, str]], out_path: str) -> None:
    """Write the JSON result and print the table (first row: the headings)."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print()
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"\nwritten: {out}")


def remote(sb: Sandbox, address: str, command: str, check: bool = True) -> str:
    proc = subprocess.run([*sb.ssh_command(address), command], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise BenchError(f"{address}: {command!r} failed (rc={proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def cpu_since(busy0: float, all0: float) -> dict:
    """How busy this machine's CPUs were since machine_cpu_s() gave (busy0, all0)."""
    busy1, all1 = machine_cpu_s()
    return {"busy_fraction": round((busy1 - busy0) / max(all1 - all0, 1e-9), 3), "cpus": os.cpu_count(),
            "machine_busy_s": round(busy1 - busy0, 1)}


def machine_cpu_s() -> tuple[float, float]:
    """This machine's CPU seconds so far, busy and in all (every CPU, from /proc/stat; idle and iowait are not busy).
    The sandbox's hosts are containers on it: their module runs count here, with the controller's."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - ticks[3] - ticks[4]) / hz, sum(ticks) / hz


def controller_cpu_s() -> float:
    """CPU seconds of this process's waited-for children: ansible-playbook, its forks and their ssh clients. The
    persistent ssh connections (ControlPersist) outlive the run and are not counted."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_site(sb: Sandbox, *args: str, collections: str | None = None,
             ) -> tuple[float, dict[str, int], dict[str, float], str, dict[str, float]]:
    """site.yml on the sandbox; with collections, the rayfleet.cluster collection found there, and its own site.yml (a
    playbook's directory's collections/, this checkout's, comes before the configured path)."""
    env = dict(os.environ, RAYFLEET_SANDBOX=sb.name, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_roles,rayfleet.cluster.stage_items")
    playbook = "site.yml"
    if collections:
        env["ANSIBLE_COLLECTIONS_PATH"] = f"{collections}:{ROOT / 'collections'}"
        playbook = str(Path(collections) / "ansible_collections" / "rayfleet" / "cluster" / "site.yml")
    busy0, all0 = machine_cpu_s()
    controller0 = controller_cpu_s()
    start = time.monotonic()
    proc = subprocess.run(["ansible-playbook", playbook, "-i", "inventories/sandbox", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    cpu = dict(cpu_since(busy0, all0), controller_s=round(controller_cpu_s() - controller0, 1))
    if proc.returncode != 0:
        raise BenchError(f"site.yml failed (rc={proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    changed: dict[str, int] = {}
    roles: dict[str, float] = {}
    in_roles = False
    for line in proc.stdout.splitlines():
        if m := RECAP.match(line):
            changed[m["host"]] = int(m["changed"])
        if "ROLES RECAP" in line:
            in_roles = True
        elif in_roles and (m := ROLE_LINE.match(line.strip())) and m.group(1) != "total":
            roles[m.group(1)] = float(m.group(2))
    return took, changed, roles, proc.stdout, cpu


def tasks_per_host(out: str) -> dict[str, int]:
    """host -> the tasks a run ran there (its recap's ok count, the changed ones included)."""
    return {m["host"]: int(m["ok"]) for line in out.splitlines() if (m := RECAP.match(line))}


RECORDED = re.compile(r"^TASK \[Record what the stage applied, for the next drift check: (\w+)\]")


def stages_run(out: str) -> dict[str, set[str]]:
    """stage -> the hosts that reached its record task (where it ran)."""
    runs: dict[str, set[str]] = {}
    stage = ""
    for line in out.splitlines():
        if line.startswith("TASK ["):
            found = RECORDED.match(line)
            stage = found.group(1) if found else ""
        elif stage and (ok := re.match(r"ok: \[([^\]]+)\]", line)):
            runs.setdefault(stage, set()).add(ok.group(1))
    return runs


def release_with_one_role_changed(target: Path) -> str:
    """A copy of this checkout's collection (a release) whose firewall role has a comment added; returns the
    collections path that holds it."""
    copy = target / "ansible_collections" / "rayfleet" / "cluster"
    for name in ("galaxy.yml", "meta", "site.yml", "roles", "plugins", "playbooks", "library_py"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, copy / name)
    with open(copy / "roles" / "firewall" / "tasks" / "main.yml", "a") as handle:
        handle.write("# a comment a new release added\n")
    return str(target)


def alive_nodes(sb: Sandbox, head: str) -> dict[str, str]:
    """node_ip -> node_id of alive nodes, from the GCS node table (read on the head)."""
    out = remote(sb, head, f"{CLUSTER_CLI} --json --address {head}:{GCS_PORT}")
    return {n["node_ip"]: n["node_id"] for n in json.loads(out)["nodes"] if n["state"] == "ALIVE"}


def floor(sb: Sandbox, head: str, workers: list[str]) -> float:
    """Plain `ray start` by hand in the same containers, with the same settings, until all are alive."""
    everyone = [head, *workers]
    with ThreadPoolExecutor(len(everyone)) as pool:
        list(pool.map(lambda a: remote(sb, a, f"sudo systemctl stop ray-head ray-worker 2>/dev/null; {RAY_STOP}"),
                      everyone))

    def start(address: str, role: str) -> None:
        remote(sb, address, f"cd /tmp && sudo -u rayfleet env RAY_USAGE_STATS_ENABLED=0 {AUTH_ENV} "
                            f"$({VENV}/bin/python -m rayfleet.raynode args --config /etc/rayfleet/ray-{role}.json "
                            "| sed 's/ --block$//')"
                            " >/dev/null")

    begin = time.monotonic()
    start(head, "head")
    with ThreadPoolExecutor(max(1, len(workers))) as pool:
        list(pool.map(lambda a: start(a, "worker"), workers))
    remote(sb, head, f"{CLUSTER_CLI} --address {head}:{GCS_PORT} "
                     f"--min-nodes {len(everyone)} --timeout 120 >/dev/null")
    took = time.monotonic() - begin
    # Back to the managed units (the next site.yml must find the cluster as it left it).
    with ThreadPoolExecutor(len(everyone)) as pool:
        list(pool.map(lambda a: remote(sb, a, RAY_STOP), everyone))
    remote(sb, head, "sudo systemctl start ray-head")
    with ThreadPoolExecutor(max(1, len(workers))) as pool:
        list(pool.map(lambda a: remote(sb, a, "sudo systemctl start ray-worker"), workers))
    return took


# What each host's stage records hold, and the Ray venv's requirements as the ray role wrote them
RECORDS_SCRIPT = ("import glob, json; print(json.dumps([json.load(open(p)) "
                  "for p in sorted(glob.glob('/var/lib/rayfleet/stages/*/*.json'))]))")
REQUIREMENTS_FILE = f"{VENV}/.rayfleet-requirements"
WHEELHOUSE = "/opt/rayfleet-wheels"
HAND_VENV = "/opt/hand-floor"
# Run on the head with the hand-made venv's Python: wait until Ray's node table lists that many nodes alive
ALL_ALIVE = """import time
import ray
ray.init(address="auto", logging_level="ERROR")
while sum(node["Alive"] for node in ray.nodes()) < %d:
    time.sleep(0.2)
"""


# What rayfleet installs with, not what the cluster runs: the hand floor installs with pip, as a person does
INSTALLERS = ("uv",)


def install_list(records: list[dict], ray_requirements: str) -> tuple[list[str], list[str]]:
    """(apt packages as name=version, pip requirements) a first site.yml installed on a host: the packages and Ray
    venv packages its stage records hold at the versions recorded (not its installer, uv), Ray itself as the ray role
    asked for it (with its extras)."""
    apt, pip = {}, {}
    for record in records:
        state = record.get("state") or {}
        for item in record.get("items") or []:
            found = state.get(f"{item['kind']}:{item['venv']}:{item['name']}" if item["kind"] == "pip"
                              else f"{item['kind']}:{item.get('name')}")
            if item["kind"] == "package" and isinstance(found, dict) and found.get("version"):
                apt[item["name"]] = f"{item['name']}={found['version']}"
            elif (item["kind"] == "pip" and item["venv"] == VENV and isinstance(found, str) and found
                  and item["name"] not in INSTALLERS):
                pip[item["name"]] = f"{item['name']}=={found}"
    for text in ray_requirements.splitlines():
        line = text.strip()
        if line and not line.startswith("args:"):
            name = re.split(r"[\[=<>!~ ]", line, maxsplit=1)[0].lower()
            pip[name] = line
    return sorted(apt.values()), sorted(pip.values())


def hand_floor(sb: Sandbox, workers: int, lists: dict[str, tuple[list[str], list[str]]]
               ) -> tuple[float, dict, dict]:
    """Fresh hosts, then by hand on all of them at once what the first site.yml installed (lists: by role), then Ray
    started until every node is alive. Returns the seconds, what was installed and how busy the CPUs were."""
    sb.down()
    hosts = sb.up(workers)
    head = next(h["address"] for h in hosts if h["group"] == "ray_head")
    roles = {h["address"]: "head" if h["group"] == "ray_head" else "worker" for h in hosts}

    def install(address: str) -> None:
        apt, pip = lists[roles[address]]
        remote(sb, address, "sudo apt-get update -q >/dev/null && sudo DEBIAN_FRONTEND=noninteractive apt-get install "
                            f"-y -q --no-install-recommends {' '.join(apt)} >/dev/null")
        remote(sb, address, f"sudo python3 -m venv {HAND_VENV} && sudo {HAND_VENV}/bin/pip install -q --no-index "
                            f"--find-links {WHEELHOUSE} {' '.join(repr(r) for r in pip)}")

    ray = f"{HAND_VENV}/bin/ray"
    busy0, all0 = machine_cpu_s()
    begin = time.monotonic()
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(install, roles))
    remote(sb, head, f"sudo env RAY_USAGE_STATS_ENABLED=0 {ray} start --head --port={GCS_PORT} >/dev/null")
    with ThreadPoolExecutor(max(1, workers)) as pool:
        list(pool.map(lambda a: remote(sb, a, f"sudo env RAY_USAGE_STATS_ENABLED=0 {ray} start "
                                              f"--address={head}:{GCS_PORT} >/dev/null"),
                      [a for a, role in roles.items() if role == "worker"]))
    remote(sb, head, f"sudo timeout 120 {HAND_VENV}/bin/python - <<'EOF'\n{ALL_ALIVE % len(hosts)}EOF")
    took = time.monotonic() - begin
    return took, {role: {"apt": apt, "pip": pip} for role, (apt, pip) in lists.items()}, cpu_since(busy0, all0)


def host_install_lists(sb: Sandbox, hosts: list[dict]) -> dict[str, tuple[list[str], list[str]]]:
    """What the first site.yml installed on the head and on a worker, from their stage records."""
    lists = {}
    for host in hosts:
        role = "head" if host["group"] == "ray_head" else "worker"
        if role not in lists:
            records = json.loads(remote(sb, host["address"], f"sudo python3 -c \"{RECORDS_SCRIPT}\""))
            lists[role] = install_list(records, remote(sb, host["address"], f"sudo cat {REQUIREMENTS_FILE}"))
    return lists


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--floor-runs", type=int, default=3)
    parser.add_argument("--name", default="bench")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running afterwards")
    parser.add_argument("--out", help="the JSON result (default: artifacts/bench-converge-<hosts>hosts.json)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)

    sb = Sandbox(args.name)
    sb.down()
    try:
        hosts = sb.up(args.workers)
        head = next(h["address"] for h in hosts if h["group"] == "ray_head")
        workers = [h["address"] for h in hosts if h["group"] != "ray_head"]
        print(f"sandbox {sb.name}: {len(hosts)} fresh hosts; first site.yml ...", flush=True)
        first, changed, roles, first_out, first_cpu = run_site(sb)
        first_tasks = tasks_per_host(first_out)
        ids = alive_nodes(sb, head)
        if len(ids) != len(hosts):
            raise BenchError(f"after the first run Ray lists {len(ids)} alive nodes, expected {len(hosts)}")
        reruns = []
        rerun_roles: list[dict[str, float]] = []
        rerun_cpu: list[float] = []
        for i in range(args.reruns):
            print(f"idempotent re-run {i + 1}/{args.reruns} ...", flush=True)
            took, changed, run_roles, out, cpu = run_site(sb)
            rerun_roles.append(run_roles)
            rerun_cpu.append(cpu["controller_s"])
            if any(changed.values()):
                raise BenchError(f"re-run {i + 1} changed something: {changed}\n{out[-3000:]}")
            after = alive_nodes(sb, head)
            if after != ids:
                raise BenchError(f"re-run {i + 1} restarted Ray: node ids before {ids}, after {after}")
            reruns.append(took)
        drifts = []
        drifted_file = "/etc/sysctl.d/60-rayfleet.conf"
        for i in range(args.reruns):
            print(f"re-run after one drifted file on one worker {i + 1}/{args.reruns} ...", flush=True)
            remote(sb, workers[0], f"echo '# edited by hand' | sudo tee -a {drifted_file} >/dev/null")
            took, changed, _roles, out, _cpu = run_site(sb)
            hosts_changed = sorted(h for h, n in changed.items() if n)
            if len(hosts_changed) != 1 or "edited by hand" in remote(sb, workers[0], f"cat {drifted_file}"):
                raise BenchError(f"drift re-run {i + 1}: expected one worker repaired, changed: {changed}\n"
                                 f"{out[-3000:]}")
            if alive_nodes(sb, head) != ids:
                raise BenchError(f"drift re-run {i + 1} restarted Ray")
            drifts.append(took)
        releases = []
        with tempfile.TemporaryDirectory(prefix="rayfleet-release-") as tmp:
            release = release_with_one_role_changed(Path(tmp))
            for i in range(2 * args.reruns):
                print(f"re-run with a release that changed one role {i + 1}/{2 * args.reruns} ...", flush=True)
                took, changed, _roles, out, _cpu = run_site(sb, collections=release if i % 2 == 0 else None)
                ran = stages_run(out)
                if set(ran) != {"firewall"} or any(changed.values()) or alive_nodes(sb, head) != ids:
                    raise BenchError(f"release re-run {i + 1}: expected the firewall stage alone, nothing changed "
                                     f"and Ray untouched; stages run: {ran}, changed: {changed}\n{out[-3000:]}")
                releases.append(took)
        settings, setting_stages = [], set()
        for i in range(2 * args.reruns):
            # a Ray setting the other stages do not read of the cluster plan: the health timer's interval, then the
            # inventory's again
            print(f"re-run with a Ray setting changed {i + 1}/{2 * args.reruns} ...", flush=True)
            took, changed, _roles, out, _cpu = run_site(sb, *(("-e", "ray_health_interval_s=240") if i % 2 == 0
                                                              else ()))
            ran = stages_run(out)
            if set(ran) != {"ray"} or alive_nodes(sb, head) != ids:
                raise BenchError(f"Ray setting re-run {i + 1}: expected the ray stage alone and Ray untouched; "
                                 f"stages run: {ran}, changed: {changed}\n{out[-3000:]}")
            settings.append(took)
            setting_stages |= set(ran)
        print("every stage on every host (rayfleet_full) ...", flush=True)
        full, changed, full_roles, out, _cpu = run_site(sb, "-e", "rayfleet_full=true")
        if any(changed.values()) or alive_nodes(sb, head) != ids:
            raise BenchError(f"the rayfleet_full run changed something: {changed}\n{out[-3000:]}")
        floors = []
        for i in range(args.floor_runs):
            print(f"floor: plain ray start by hand {i + 1}/{args.floor_runs} ...", flush=True)
            floors.append(floor(sb, head, workers))
        # The units were restarted by hand: one more site.yml must find nothing to do.
        _took, changed, _roles, _out, _cpu = run_site(sb)
        if any(changed.values()):
            raise BenchError(f"site.yml after the floor runs changed something: {changed}")
        print("hand floor: fresh hosts, the same packages and wheels by hand, then ray start ...", flush=True)
        hand, hand_installed, hand_cpu = hand_floor(sb, args.workers, host_install_lists(sb, hosts))
    except BenchError as exc:
        print(f"bench-converge: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            sb.down()

    result = {
        "benchmark": "converge",
        **stamp("tools/bench_converge.py", argv, f"make bench-converge WORKERS={args.workers}",
                ["--workers", str(args.workers)]),
        "hosts": len(hosts),
        "workers": len(workers),
        "first_run_s": round(first, 1),
        "first_run_per_role_s": roles,
        "first_run_cpu": first_cpu,
        "first_run_tasks_per_host": first_tasks,
        "rerun_s": [round(t, 2) for t in reruns],
        "rerun_median_s": round(statistics.median(reruns), 2),
        "rerun_per_role_median_s": {name: round(statistics.median(r.get(name, 0.0) for r in rerun_roles), 2)
                                    for name in rerun_roles[0]},
        "rerun_controller_cpu_s": rerun_cpu,
        "rerun_controller_cpu_median_s": round(statistics.median(rerun_cpu), 2),
        "rerun_changed": 0,
        "rerun_ray_node_ids_unchanged": True,
        "drift_rerun_s": [round(t, 2) for t in drifts],
        "drift_rerun_median_s": round(statistics.median(drifts), 2),
        "release_rerun_s": [round(t, 2) for t in releases],
        "release_rerun_median_s": round(statistics.median(releases), 2),
        "ray_setting_rerun_s": [round(t, 2) for t in settings],
        "ray_setting_rerun_median_s": round(statistics.median(settings), 2),
        "ray_setting_rerun_stages": sorted(setting_stages),
        "full_run_s": round(full, 1),
        "full_run_per_role_s": full_roles,
        "floor_plain_ray_start_s": [round(t, 2) for t in floors],
        "floor_median_s": round(statistics.median(floors), 2),
        "rerun_over_floor": round(statistics.median(reruns) / statistics.median(floors), 2),
        "hand_floor_s": round(hand, 1),
        "hand_floor_installed": hand_installed,
        "hand_floor_cpu": hand_cpu,
        "first_over_hand_floor": round(first / hand, 2),
    }

    rows = [("measure", "seconds", "note"),
            ("first site.yml (fresh hosts)", f"{first:.1f}", f"{len(hosts)} hosts, packages + venv + Ray"),
            *[(f"  {name}", f"{secs:.1f}", "profile_roles") for name, secs in roles.items() if secs >= 0.5],
            ("  CPU busy during it", f"{first_cpu['machine_busy_s']:.0f}",
             f"CPU-s: {first_cpu['busy_fraction']:.0%} of {first_cpu['cpus']} CPUs; the controller "
             f"{first_cpu['controller_s']:.0f} CPU-s"),
            ("  tasks run per host", " / ".join(str(n) for n in first_tasks.values()),
             ", ".join(first_tasks)),
            ("idempotent re-run (median)", f"{result['rerun_median_s']:.1f}",
             f"n={len(reruns)}, changed=0, Ray node ids unchanged"),
            *[(f"  {name}", f"{secs:.1f}", "profile_roles, median")
              for name, secs in result["rerun_per_role_median_s"].items() if secs >= 0.5],
            ("  the controller's CPU during it (median)", f"{result['rerun_controller_cpu_median_s']:.1f}",
             "CPU-s of ansible-playbook, its forks and ssh clients"),
            ("re-run, one file drifted on one worker (median)", f"{result['drift_rerun_median_s']:.1f}",
             f"n={len(drifts)}, repaired, Ray node ids unchanged"),
            ("re-run, a release that changed one role (median)", f"{result['release_rerun_median_s']:.1f}",
             f"n={len(releases)}, the firewall stage alone, changed=0"),
            ("re-run, a Ray setting changed (median)", f"{result['ray_setting_rerun_median_s']:.1f}",
             f"n={len(settings)}, ray_health_interval_s and back: the ray stage alone, Ray node ids unchanged"),
            ("every stage on every host (rayfleet_full)", f"{full:.1f}", "changed=0"),
            ("floor: plain ray start (median)", f"{result['floor_median_s']:.1f}",
             f"n={len(floors)}, head + {len(workers)} workers to all alive"),
            ("re-run / floor", f"{result['rerun_over_floor']:.2f}", ""),
            ("hand floor: the same packages and wheels by hand, then ray start", f"{hand:.1f}",
             f"fresh hosts, all at once; head: {len(hand_installed['head']['apt'])} apt packages, "
             f"{len(hand_installed['head']['pip'])} requirements"),
            ("  CPU busy during it", f"{hand_cpu['machine_busy_s']:.0f}",
             f"CPU-s: {hand_cpu['busy_fraction']:.0%} of {hand_cpu['cpus']} CPUs"),
            ("first site.yml / hand floor", f"{result['first_over_hand_floor']:.2f}", "goal <= 1.3")]
    publish(result, rows, args.out or str(ROOT / "artifacts" / f"bench-converge-{len(hosts)}hosts.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
