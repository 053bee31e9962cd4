# SPDX-License-Identifier: GPL-3.0-or-later
"""Node health, checked again and again after the cluster started: a failing node is drained in Ray.

Runs on every Ray host from ``rayfleet-health.timer`` (the ray role), as root, once per interval. For each of the
host's Ray nodes (its node instances too, each by its settings file and unit) it checks:

  gpu        the preflight's NVML readings (rayfleet.gpu): the GPU count against what Ray reports for the node, the
             node's own GPUs for a container node, uncorrected ECC errors, pending or failed row remapping, a PCIe
             link narrower than the slot, an NVLink link down, and new hardware Xid events in the kernel log. Not
             applicable on a host without NVIDIA GPUs or NVML when Ray was given no GPUs there.
  storage    the shared storage the shared_storage role mounts here (rayfleet.storage), never hanging on a dead
             server; not applicable where none is configured.
  raylet     the node is alive in the cluster's GCS node table (Ray's own API, the GCS port only).
  script:<name>  every executable in the health directory (/etc/rayfleet/health.d), the site's own checks, run with
             a time limit as root: exit 0 passes, anything else fails with the script's last lines of output as the
             reason (node-problem-detector's custom plugins, simplified).

When a check fails on a node that Ray lists alive, the node is drained through Ray's GCS (``GcsClient.drain_node``,
what ``ray drain-node`` calls, with the preemption reason and the failed checks as its message): Ray places no new
work there, running work ends, and the idle node leaves the cluster. It is drained once; the following runs see it
draining. The head is never drained (its restart would restart the cluster): its failures are reported only.

When every check passes again on a node this checker drained (its state file says which node id it drained), the
node instance's unit is restarted (``systemctl restart``), so it rejoins the cluster with a new node id - Ray has no
un-drain. A node still running work it had when drained is restarted once that work is done. A node drained by
anything else (the preemption watcher, an autoscaler, an operator) and a unit stopped on purpose are left as they
are.

Every run writes its findings to the state file (``/etc/rayfleet/health.json``: time, verdict, each node's checks,
node ids, what was drained or restarted) and, atomically, to node exporter's textfile collector:
``rayfleet_health_ok{check, node, rayfleet_cluster}`` (1 passed or not applicable, 0 failed),
``rayfleet_health_drained{node, rayfleet_cluster}`` and ``rayfleet_health_last_run_timestamp_seconds``, with each
node's last admission record (rayfleet.admission, checked before its Ray started) as
``rayfleet_admission_ok{check, node, rayfleet_cluster}`` and ``rayfleet_admission_timestamp_seconds``. A node unit
refused at admission starts this check when it fails, so the metric says so at once.

Exit status: 0 every check passed, 1 a check failed (the unit takes both as success), 2 the checker itself could not
run (bad settings files, the state file not writable).

Examples (on a node, as root):
  python -m rayfleet.health --node /etc/rayfleet/ray-worker.json ray-worker.service --no-drain --json
  python -m rayfleet.health --node /etc/rayfleet/ray-worker-gpu0.json ray-worker-gpu0.service \\
      --node /etc/rayfleet/ray-worker-gpu1.json ray-worker-gpu1.service --dir /etc/rayfleet/health.d
  python -m rayfleet.health --accept-xids      # after servicing a GPU without a reboot: its Xids so far are known
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rayfleet.errors import RayfleetError
from rayfleet.gpu import HARDWARE_XIDS, Gpu, NvmlReport, XidEvent, bus_key, problems, read_gpus, read_kernel_xids
from rayfleet.raynode import RayNodeSettings, auth_env, load_settings

STATE_FILE = "/etc/rayfleet/health.json"
HEALTH_DIR = "/etc/rayfleet/health.d"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
DRAIN_REASON = "DRAIN_NODE_REASON_PREEMPTION"  # Ray's reason a raylet never refuses (IDLE_TERMINATION may be)
MESSAGE_PREFIX = "rayfleet health"
OK, FAILED, NOT_APPLICABLE = "ok", "failed", "n/a"
SCRIPT_OUTPUT_LINES = 5
SCRIPT_WORKERS = 8
RAY_TIMEOUT_S = 10


@dataclass(frozen=True)
class CheckResult:
    name: str
    state: str  # ok, failed, n/a
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.state == FAILED

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": not self.failed, "state": self.state, "reason": self.reason}


@dataclass(frozen=True)
class Node:
    """One Ray node instance of this host: its settings file, its settings and its systemd unit."""

    config_path: str
    unit: str
    settings: RayNodeSettings

    @property
    def name(self) -> str:
        """Ray's node name: the IP for a host's one node, <ip>/<instance> for each of several."""
        return self.settings.node_name or self.settings.node_ip

    @property
    def container_record(self) -> Path:
        """Where the ray role records what a container node runs (its GPUs among it); absent for a host node."""
        path = Path(self.config_path)
        return path.with_name(path.stem + ".container.json")


@dataclass(frozen=True)
class RayNode:
    """One entry of the cluster's GCS node table (rayfleet.cluster.gcs_node)."""

    node_id: str
    name: str
    alive: bool
    draining: bool = False
    is_head: bool = False
    gpus: float = 0.0
    start_time_ms: int = 0
    death: str = ""

    @classmethod
    def from_gcs(cls, data: Mapping[str, Any]) -> RayNode:
        reason = str(data.get("death_reason") or "")
        message = str(data.get("death_reason_message") or "")
        return cls(node_id=str(data["node_id"]), name=str(data.get("node_name") or data.get("node_ip") or ""),
                   alive=data.get("state") == "ALIVE", draining=bool(data.get("draining")),
                   is_head=bool(data.get("is_head_node")),
                   gpus=float((data.get("resources_total") or {}).get("GPU", 0.0)),
                   start_time_ms=int(data.get("start_time_ms") or 0),
                   death=": ".join(part for part in (reason, message) if part))


@dataclass(frozen=True)
class Options:
    health_dir: Path = Path(HEALTH_DIR)
    script_timeout: float = 60.0
    drain: bool = True
    cluster: str = ""  # ray_cluster_name ('' the host's unnamed cluster)


# ---- what the host and Ray say -------------------------------------------------------------------------------

def gcs_nodes(settings: RayNodeSettings) -> list[Mapping[str, Any]]:
    """The cluster's node table, read from its GCS with the cluster's token (rayfleet.cluster.gcs_fetcher)."""
    from rayfleet.cluster import gcs_fetcher

    return list(gcs_fetcher(settings.gcs_address, timeout=RAY_TIMEOUT_S, auth_token_path=settings.auth_token_path)())


def drain_node(settings: RayNodeSettings, node_id: str, message: str) -> tuple[bool, str]:
    """Ask the cluster's GCS to drain node_id, as ``ray drain-node`` does (Ray 2.60: GcsClient.drain_node(node_id
    hex, DrainNodeReason, reason_message, deadline_timestamp_ms) -> (is_accepted, rejection_reason_message)). No
    deadline: the node's running work may finish. (accepted, why not)."""
    os.environ.update(auth_env(settings.auth_token_path))
    try:
        from ray._raylet import GcsClient
        from ray.core.generated import autoscaler_pb2
    except ImportError as exc:  # pragma: no cover - depends on the node's venv
        raise RayfleetError(f"cannot import Ray's GCS client ({exc}); is ray installed in this venv?") from exc
    reason = autoscaler_pb2.DrainNodeReason.Value(DRAIN_REASON)
    client = GcsClient(address=settings.gcs_address)
    accepted, why = client.drain_node(node_id, reason, message, 0, timeout=RAY_TIMEOUT_S)
    return bool(accepted), str(why or "")


def _systemctl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "LC_ALL": "C"})


def unit_is_active(unit: str) -> bool:
    """Whether systemd runs the unit now (active, or restarting on its own): a unit stopped on purpose is not."""
    proc = _systemctl("show", "--property=ActiveState", "--value", unit, timeout=30)
    return proc.stdout.strip() in ("active", "activating", "reloading")


def restart_unit(unit: str) -> tuple[bool, str]:
    try:
        proc = _systemctl("restart", unit)
    except subprocess.TimeoutExpired:
        return False, f"systemctl restart {unit} did not return in 120 s"
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-300:]


def read_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def read_admission(settings: RayNodeSettings) -> dict[str, Any] | None:
    """The node's last admission record (rayfleet.admission), in short: when, the verdict and each check."""
    from rayfleet.admission import read_record

    record = read_record(settings)
    if record is None:
        return None
    return {"time": record.get("time"), "timestamp": record.get("timestamp"), "ok": bool(record.get("ok")),
            "checks": [{"name": c.get("name"), "ok": bool(c.get("ok")), "reason": c.get("reason", "")}
                       for c in record.get("checks") or [] if isinstance(c, Mapping)]}


def storage_check() -> CheckResult:
    from rayfleet import storage

    try:
        config = storage.load_config()
    except RayfleetError as exc:  # a record this check cannot read is no fault of the node's storage
        return CheckResult("storage", NOT_APPLICABLE, f"not probed: {exc}")
    if config is None or not config.mounts:
        return CheckResult("storage", NOT_APPLICABLE, "no shared storage is configured on this host")
    try:
        results = storage.check(config)
    except OSError as exc:
        return CheckResult("storage", FAILED, f"cannot probe the shared storage: {exc}")
    bad = [f"{r.path}: {r.reason}" for r in results if not r.ok]
    if bad:
        return CheckResult("storage", FAILED, "; ".join(bad))
    return CheckResult("storage", OK, "; ".join(f"{r.path}: {r.reason or 'ok'}" for r in results))


# ---- the site's scripts --------------------------------------------------------------------------------------

def run_script(path: Path, timeout: float) -> tuple[int | None, str]:
    """Run one health script (no arguments, stdin closed, cwd /, its own process group) for at most timeout
    seconds; (exit status or None when it ran out of time and was killed, its combined output)."""
    proc = subprocess.Popen([str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, errors="replace", cwd="/", start_new_session=True)
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out = proc.communicate(timeout=5)[0]
        except subprocess.TimeoutExpired:  # a child holds the pipe in an uninterruptible sleep
            out = ""
        return None, out or ""
    return proc.returncode, out or ""


def scripts_in(directory: Path) -> list[Path]:
    """The executables in the health directory, by name (hidden files, editor and package-manager leftovers and
    anything not a regular executable file are not run)."""
    try:
        entries = sorted(directory.iterdir())
    except FileNotFoundError:
        return []
    skip = (".dpkg-old", ".dpkg-new", ".dpkg-dist", ".rpmnew", ".rpmsave", "~", ".disabled")
    return [p for p in entries if not p.name.startswith(".") and not p.name.endswith(skip)
            and p.is_file() and os.access(p, os.X_OK)]


def _unsafe(path: Path) -> str:
    """Why a script must not run (as root): owned by another user than root, or writable by others; '' when it may."""
    st = path.stat()
    if st.st_uid not in (0, os.geteuid()):
        return f"owned by uid {st.st_uid}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by its group or by others"
    return ""


def check_scripts(directory: Path, timeout: float, run: Callable[[Path, float], tuple[int | None, str]]
                  ) -> list[CheckResult]:
    """One result per script, run side by side (so that a run takes about one script timeout, however many)."""
    found = scripts_in(directory)

    def one(path: Path) -> CheckResult:
        name = f"script:{path.name}"
        why_not = _unsafe(path)
        if why_not:
            return CheckResult(name, FAILED, f"{path} not run: {why_not}")
        try:
            code, out = run(path, timeout)
        except OSError as exc:
            return CheckResult(name, FAILED, f"{path} could not start: {exc.strerror or exc}")
        last = " | ".join(line.strip() for line in out.strip().splitlines()[-SCRIPT_OUTPUT_LINES:] if line.strip())
        if code is None:
            return CheckResult(name, FAILED, f"no result in {timeout:g} s (killed)" + (f": {last}" if last else ""))
        if code != 0:
            return CheckResult(name, FAILED, f"exit {code}" + (f": {last}" if last else ""))
        return CheckResult(name, OK, last[-300:])

    if not found:
        return []
    with ThreadPoolExecutor(max_workers=min(SCRIPT_WORKERS, len(found))) as pool:
        return list(pool.map(one, found))


# ---- the GPU check -------------------------------------------------------------------------------------------

def _xid_key(event: XidEvent) -> str:
    return f"{event.bus_id}|{event.xid}"


def new_xids(events: Sequence[XidEvent], known: Mapping[str, int]) -> list[XidEvent]:
    """The hardware Xid events beyond those already known (counted per GPU bus and Xid)."""
    by_key: dict[str, list[XidEvent]] = {}
    for event in events:
        if event.xid in HARDWARE_XIDS:
            by_key.setdefault(_xid_key(event), []).append(event)
    out: list[XidEvent] = []
    for key, found in sorted(by_key.items()):
        out.extend(found[int(known.get(key, 0)):])
    return out


def xid_counts(events: Sequence[XidEvent]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        if event.xid in HARDWARE_XIDS:
            counts[_xid_key(event)] = counts.get(_xid_key(event), 0) + 1
    return dict(sorted(counts.items()))


def _same_bus(a: str, b: str) -> bool:
    try:
        return bus_key(a) == bus_key(b)
    except (ValueError, IndexError):
        return False


def gpu_check(node: Node, vendor: str, report: NvmlReport, ray_node: RayNode | None, *, assigned: list[str] | None,
              fresh_xids: Sequence[XidEvent], xid_note: str = "") -> CheckResult:
    """The preflight's GPU findings for one node: its GPUs (assigned: the UUIDs a container node was given; None: all
    of the host's), Ray's GPU count for it when Ray lists it alive, and the hardware Xids not seen before."""
    ray_gpus = ray_node.gpus if ray_node is not None and ray_node.alive else None
    given = node.settings.num_gpus or 0
    if not report.available:
        if given or ray_gpus:
            return CheckResult("gpu", FAILED, f"Ray was given {max(given, int(ray_gpus or 0))} GPU(s) on this node, "
                               f"but {report.reason}")
        return CheckResult("gpu", NOT_APPLICABLE, report.reason)
    gpus: list[Gpu] = report.gpus
    bad: list[str] = []
    if assigned is not None:
        gpus = [g for g in report.gpus if g.uuid in assigned]
        missing = [u for u in assigned if u not in {g.uuid for g in report.gpus}]
        if missing:
            bad.append(f"GPU(s) {', '.join(missing)} given to this node are not listed by NVML (fallen off the bus, "
                       "or the host was changed)")
    if not gpus and not given and not ray_gpus and not bad:
        return CheckResult("gpu", NOT_APPLICABLE, "no GPU on this node")
    mine = replace(report, gpus=gpus)
    found, _warnings = problems(mine, ray_gpus=ray_gpus,
                                ray_gpus_expected=len(assigned) if assigned is not None else None)
    bad += found
    for event in fresh_xids:
        gpu = next((g for g in gpus if g.pci_bus_id and _same_bus(g.pci_bus_id, event.bus_id)), None)
        if gpu is None and assigned is not None:
            continue  # another node's GPU (a host node takes the Xids of GPUs NVML no longer lists too)
        who = f"GPU {gpu.index} ({gpu.uuid}, {gpu.pci_bus_id})" if gpu else f"the GPU at {event.bus_id}"
        bad.append(f"{who}: new Xid {event.xid} ({HARDWARE_XIDS[event.xid]}): {event.detail[:160] or 'no detail'}; "
                   "service the GPU (reset or reboot), then run python -m rayfleet.health --accept-xids")
    if bad:
        return CheckResult("gpu", FAILED, "; ".join(dict.fromkeys(bad)))
    note = f"{vendor} {len(gpus)} GPU(s)" + (f", Ray {ray_gpus:g}" if ray_gpus is not None else "")
    return CheckResult("gpu", OK, note + (f"; {xid_note}" if xid_note else ""))


def assigned_gpus(node: Node) -> list[str] | None:
    """The UUIDs a container node was given (the ray role's record beside its settings), None for a host node."""
    try:
        data = json.loads(node.container_record.read_text())
    except (OSError, ValueError):
        return None
    gpus = data.get("gpus") if isinstance(data, dict) else None
    return [str(u) for u in gpus] if isinstance(gpus, list) else None


@dataclass
class Environment:
    """What a run reads and does on the host and in Ray; replaced by fakes in tests."""

    read_gpus: Callable[[], tuple[str, NvmlReport]] = field(default=lambda: read_gpus("auto"))
    read_xids: Callable[[], tuple[list[XidEvent] | None, str]] = read_kernel_xids
    ray_nodes: Callable[[RayNodeSettings], list[Mapping[str, Any]]] = field(default=gcs_nodes)
    drain: Callable[[RayNodeSettings, str, str], tuple[bool, str]] = field(default=drain_node)
    restart: Callable[[str], tuple[bool, str]] = field(default=restart_unit)
    unit_active: Callable[[str], bool] = field(default=unit_is_active)
    storage: Callable[[], CheckResult] = field(default=storage_check)
    run_script: Callable[[Path, float], tuple[int | None, str]] = field(default=run_script)
    boot_id: Callable[[], str] = field(default=read_boot_id)
    admission: Callable[[RayNodeSettings], Mapping[str, Any] | None] = field(default=read_admission)
    now: Callable[[], float] = time.time


# ---- one run -------------------------------------------------------------------------------------------------

def _now_text(now: float) -> str:
    return dt.datetime.fromtimestamp(now, dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _pick(entries: Sequence[RayNode], name: str) -> RayNode | None:
    """The node of this name Ray lists: the newest alive one, else the newest (a dead one)."""
    mine = sorted((e for e in entries if e.name == name), key=lambda e: e.start_time_ms)
    alive = [e for e in mine if e.alive]
    return (alive or mine or [None])[-1]


def drain_message(failed: Sequence[CheckResult]) -> str:
    return (f"{MESSAGE_PREFIX}: " + "; ".join(f"{c.name}: {c.reason}" for c in failed))[:500]


def run(nodes: Sequence[Node], options: Options, env: Environment, previous: Mapping[str, Any] | None, *,
        accept_xids: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Check every node once, drain or bring back what needs it, and return the new state (health.json)."""
    previous = dict(previous or {})
    before = {n.get("name"): n for n in previous.get("nodes") or [] if isinstance(n, Mapping)}
    now = env.now()

    vendor, report = env.read_gpus()
    boot = env.boot_id()
    xid_state = previous.get("xids") if isinstance(previous.get("xids"), Mapping) else {}
    known = dict(xid_state.get("known") or {}) if xid_state.get("boot_id") == boot else {}
    fresh: list[XidEvent] = []
    xid_note = ""
    if vendor == "nvidia" and report.available and report.gpus:
        events, why_not = env.read_xids()
        if events is None:
            xid_note = f"Xid events not read: {why_not}"
        else:
            if accept_xids:
                known = xid_counts(events)
            fresh = new_xids(events, known)
            xid_note = f"Xid events {why_not}" if why_not else ""

    storage = env.storage()
    scripts = check_scripts(options.health_dir, options.script_timeout, env.run_script)

    tables: dict[str, list[RayNode] | str] = {}
    out_nodes = []
    for node in nodes:
        address = node.settings.gcs_address
        if address not in tables:
            try:
                tables[address] = [RayNode.from_gcs(e) for e in env.ray_nodes(node.settings)]
            except Exception as exc:  # the GCS is down or refuses us: the raylet check says so
                tables[address] = f"cannot read the cluster's node table at {address}: {exc}"
        table = tables[address]
        current = _pick(table, node.name) if isinstance(table, list) else None
        prev = before.get(node.name) or {}
        ours = prev.get("drained") if isinstance(prev.get("drained"), Mapping) else None
        active = env.unit_active(node.unit)

        if not active:
            raylet = CheckResult("raylet", NOT_APPLICABLE, f"{node.unit} is not running (stopped on purpose: "
                                 "nothing is drained or restarted)")
        elif isinstance(table, str):
            raylet = CheckResult("raylet", FAILED, table)
        elif current is not None and current.alive:
            how = ""
            if current.draining:
                how = (", draining (drained by this check)" if ours and ours.get("node_id") == current.node_id
                       else ", draining (not by this check)")
            raylet = CheckResult("raylet", OK, f"node {current.node_id[:12]} alive{how}")
        elif current is not None and ours and ours.get("node_id") == current.node_id:
            raylet = CheckResult("raylet", NOT_APPLICABLE,
                                 f"node {current.node_id[:12]} left the cluster after this check drained it")
        else:
            last = f"; its last node, {current.node_id[:12]}, is dead" + (
                f" ({current.death})" if current.death else "") if current is not None else ""
            raylet = CheckResult("raylet", FAILED, f"Ray lists no alive node named {node.name} in the cluster at "
                                 f"{address}{last}")

        gpu = gpu_check(node, vendor, report, current, assigned=assigned_gpus(node), fresh_xids=fresh,
                        xid_note=xid_note)
        checks = [gpu, storage, raylet, *scripts]
        failed = [c for c in checks if c.failed]
        action = ""
        restarted = prev.get("restarted") if isinstance(prev.get("restarted"), Mapping) else None

        if failed and active and current is not None and current.alive:
            if current.is_head or node.settings.role == "head":
                action = "not drained: the head is never drained (its restart would restart the cluster)"
            elif ours and ours.get("node_id") == current.node_id:
                action = "drained before; still failing"
            elif current.draining:
                action = "already draining (not by this check): left as it is"
            elif not options.drain:
                action = "not drained (draining is off: ray_health_drain)"
            else:
                message = drain_message(failed)
                try:
                    accepted, why = env.drain(node.settings, current.node_id, message)
                except Exception as exc:  # the GCS refused or is gone: the next run tries again
                    accepted, why = False, str(exc)
                if accepted:
                    ours = {"node_id": current.node_id, "reason": message, "time": _now_text(now)}
                    action = f"drained node {current.node_id} ({message})"
                else:
                    action = f"drain of node {current.node_id} failed: {why}"
        elif failed and ours and current is not None and current.node_id == ours.get("node_id"):
            action = "drained before (the node has left the cluster); still failing"
        elif not failed and ours:
            if not active:
                action = f"healthy again; {node.unit} is stopped, so it is not restarted"
            elif (current is not None and current.alive and current.node_id != ours.get("node_id")
                  and not current.draining):
                action = f"healthy again; back in the cluster as node {current.node_id} (restarted by something else)"
                ours = None
            elif current is not None and current.alive and current.node_id == ours.get("node_id"):
                action = ("healthy again; the drained node still runs the work it had: restarted once it has left "
                          "the cluster")
            else:
                ok, why = env.restart(node.unit)
                if ok:
                    restarted = {"unit": node.unit, "time": _now_text(now), "drained_node_id": ours.get("node_id")}
                    action = f"healthy again; restarted {node.unit} to rejoin the cluster with a new node id"
                    ours = None
                else:
                    action = f"healthy again, but systemctl restart {node.unit} failed: {why}"

        if action:
            log(f"{node.name}: {action}")
        for check in failed:
            log(f"{node.name}: {check.name} failed: {check.reason}")
        out_nodes.append({
            "name": node.name, "unit": node.unit, "config": node.config_path,
            "node_id": current.node_id if current is not None and current.alive else None,
            "ok": not failed, "checks": [c.to_dict() for c in checks],
            "drained": dict(ours) if ours else None, "restarted": dict(restarted) if restarted else None,
            "action": action, "admission": env.admission(node.settings),
        })

    return {
        "time": _now_text(now), "timestamp": round(now, 3), "cluster": options.cluster or "default",
        "ok": all(n["ok"] for n in out_nodes), "nodes": out_nodes,
        "xids": {"boot_id": boot, "known": known},
    }


# ---- what a run leaves behind --------------------------------------------------------------------------------

def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def textfile(state: Mapping[str, Any]) -> str:
    """The state in Prometheus' text format, for node exporter's textfile collector."""
    cluster = _label(str(state.get("cluster") or "default"))
    lines = [
        "# HELP rayfleet_health_ok Whether a rayfleet health check passes on a Ray node (1: passed or not applicable "
        "here, 0: failed).",
        "# TYPE rayfleet_health_ok gauge",
    ]
    for node in state["nodes"]:
        for check in node["checks"]:
            lines.append(f'rayfleet_health_ok{{check="{_label(check["name"])}",node="{_label(node["name"])}",'
                         f'rayfleet_cluster="{cluster}"}} {1 if check["ok"] else 0}')
    lines += [
        "# HELP rayfleet_health_drained Whether the rayfleet health check has drained this Ray node (1) or not (0).",
        "# TYPE rayfleet_health_drained gauge",
    ]
    for node in state["nodes"]:
        lines.append(f'rayfleet_health_drained{{node="{_label(node["name"])}",rayfleet_cluster="{cluster}"}} '
                     f'{1 if node.get("drained") else 0}')
    admitted = [node for node in state["nodes"] if node.get("admission")]
    lines += [
        "# HELP rayfleet_admission_ok Whether a Ray node's admission check passed at its last start (1: passed or "
        "not applicable, 0: failed: the node was refused and did not start).",
        "# TYPE rayfleet_admission_ok gauge",
    ] if admitted else []
    for node in admitted:
        for check in node["admission"].get("checks") or []:
            lines.append(f'rayfleet_admission_ok{{check="{_label(check["name"])}",node="{_label(node["name"])}",'
                         f'rayfleet_cluster="{cluster}"}} {1 if check["ok"] else 0}')
    lines += [
        "# HELP rayfleet_admission_timestamp_seconds When a Ray node's admission check last ran (Unix time).",
        "# TYPE rayfleet_admission_timestamp_seconds gauge",
    ] if admitted else []
    for node in admitted:
        stamp = node["admission"].get("timestamp")
        if stamp is not None:
            lines.append(f'rayfleet_admission_timestamp_seconds{{node="{_label(node["name"])}",'
                         f'rayfleet_cluster="{cluster}"}} {stamp}')
    lines += [
        "# HELP rayfleet_health_last_run_timestamp_seconds When the rayfleet health check last ran (Unix time).",
        "# TYPE rayfleet_health_last_run_timestamp_seconds gauge",
        f'rayfleet_health_last_run_timestamp_seconds{{rayfleet_cluster="{cluster}"}} {state["timestamp"]}',
    ]
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write text to path through a temporary file in the same directory and a rename: readers (node exporter)
    never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def summary(state: Mapping[str, Any]) -> str:
    lines = []
    for node in state["nodes"]:
        verdict = "ok" if node["ok"] else "FAILED"
        lines.append(f"{node['name']} ({node['unit']}, node {(node['node_id'] or '-')[:12]}): {verdict}")
        for check in node["checks"]:
            lines.append(f"  {check['name']}: {check['state']}" + (f" - {check['reason']}" if check["reason"] else ""))
        if node.get("drained"):
            lines.append(f"  drained: node {node['drained']['node_id'][:12]} at {node['drained']['time']}")
        if node.get("action"):
            lines.append(f"  action: {node['action']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.health", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node", nargs=2, action="append", metavar=("CONFIG", "UNIT"), default=[],
                        help="one of this host's Ray nodes: its settings file and its systemd unit (once per node "
                        "instance)")
    parser.add_argument("--dir", default=HEALTH_DIR, help=f"the site's health scripts (default {HEALTH_DIR})")
    parser.add_argument("--script-timeout", type=float, default=60.0, help="seconds each script may run")
    parser.add_argument("--no-drain", dest="drain", action="store_false",
                        help="report only: drain no node (nodes drained before are still brought back)")
    parser.add_argument("--state", default=STATE_FILE, help=f"the state file (default {STATE_FILE})")
    parser.add_argument("--textfile-dir", default=TEXTFILE_DIR,
                        help=f"node exporter's textfile collector directory (default {TEXTFILE_DIR}); '' writes none")
    parser.add_argument("--cluster", default="", help="the cluster's name (ray_cluster_name; empty for the host's one)")
    parser.add_argument("--accept-xids", action="store_true",
                        help="take the hardware Xids of this boot so far as known (after servicing a GPU)")
    parser.add_argument("--json", action="store_true", help="print the state as JSON")
    args = parser.parse_args(argv)
    if args.script_timeout <= 0:
        parser.error("--script-timeout must be above 0")

    def log(msg: str) -> None:
        print(f"rayfleet.health: {msg}", flush=True)

    state_path = Path(args.state)
    previous = read_state(state_path)
    if not args.node and not args.accept_xids:
        parser.error("give at least one --node CONFIG UNIT")
    if not args.node:  # --accept-xids alone: the nodes of the last run
        args.node = [[n["config"], n["unit"]] for n in previous.get("nodes") or [] if n.get("config")]
    try:
        nodes = [Node(config, unit, load_settings(config)) for config, unit in args.node]
    except RayfleetError as exc:
        log(str(exc))
        return 2
    options = Options(health_dir=Path(args.dir), script_timeout=args.script_timeout, drain=args.drain,
                      cluster=args.cluster)
    state = run(nodes, options, Environment(), previous, accept_xids=args.accept_xids, log=log)
    try:
        write_atomic(state_path, json.dumps(state, indent=2, sort_keys=True) + "\n")
        if args.textfile_dir and Path(args.textfile_dir).is_dir():
            name = f"rayfleet-health{'-' + args.cluster if args.cluster else ''}.prom"
            write_atomic(Path(args.textfile_dir) / name, textfile(state))
        elif args.textfile_dir:
            log(f"no metrics written: {args.textfile_dir} (node exporter's textfile collector) does not exist")
    except OSError as exc:
        log(f"cannot write the results: {exc}")
        return 2
    print(json.dumps(state, indent=2, sort_keys=True) if args.json else summary(state), flush=True)
    return 0 if state["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
