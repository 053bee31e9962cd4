# SPDX-License-Identifier: GPL-3.0-or-later
"""All-reduce bandwidth across a Ray cluster, measured the way nccl-tests' ``all_reduce_perf`` does.

One Ray actor per GPU (one per node on CPU-only clusters) is placed with a placement group --
``STRICT_SPREAD`` across nodes, or ``PACK`` onto one node with ``--intra-node`` -- and the actors form
a ``torch.distributed`` group: NCCL on GPUs, gloo on CPUs (so the same path runs in CI). For each
message size (doubling) it runs warm-up then timed in-place all-reduces and reports, per size, the
time, the algorithm bandwidth (size / time) and the bus bandwidth (algbw * 2(n-1)/n), with a
correctness check (#wrong), in nccl-tests' table shape so the figures compare with published ones.

Then, unless ``--no-pairwise``, pair tests name a slow link or NIC (``rayfleet.localize``): a ring of node
pairs (n0-n1, n1-n2, ..., n(k-1)-n0; beyond ``--pair-ring-max`` nodes, a ring of blocks of nodes) runs the same
all-reduce two nodes at a time, never two Ray nodes of one host together; a suspect block is bisected, and a
suspect node is re-tested with a node that passed: only a node slow again is named. Nodes are known by their Ray
node names (``<ip>``, or ``<ip>/<instance>`` for each of a host's several nodes). With NCCL it also records which
network NCCL chose (``NCCL_DEBUG=INFO``) and fails when it is not one the hardware promises (e.g. sockets where EFA
or InfiniBand was expected).

Examples (on the head, as the Ray user, in the Ray venv):
  python -m rayfleet.collective --address 10.0.0.10:6379
  python -m rayfleet.collective --address auto --max-bytes 1G --min-busbw 350 --expect-network Libfabric
  python -m rayfleet.collective --address auto --backend gloo --max-bytes 16M --json-out /tmp/allreduce.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rayfleet.errors import RayfleetError, SettingsError
from rayfleet.localize import CONFIRM, RING, Localization, Measure, Pair, PairTest, locate
from rayfleet.nccl import probe_failure
from rayfleet.nccl import verdict as nccl_verdict
from rayfleet.raynode import auth_env

DTYPE_BYTES = 4  # float32, nccl-tests' default type
BACKENDS = ("auto", "nccl", "gloo")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class CollectiveError(RayfleetError):
    """The collective check could not run (placement, rendezvous, timeout); the message says where."""


def parse_size(text: str | int, name: str = "size") -> int:
    """'8', '64K', '16M', '1G' (binary units, like nccl-tests' -b/-e) -> bytes."""
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
        if not m:
            raise SettingsError(f"{name}: {text!r} is not a size; expected bytes like 8, 64K, 16M or 1G")
        value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value < DTYPE_BYTES:
        raise SettingsError(f"{name}: {text!r} is below {DTYPE_BYTES} bytes (one float32 element)")
    return value


def sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """Message sizes from min to max, multiplied by ``factor`` each step, rounded to whole elements."""
    if min_bytes > max_bytes:
        raise SettingsError(f"min_bytes ({min_bytes}) is larger than max_bytes ({max_bytes})")
    if factor < 2:
        raise SettingsError(f"step factor must be >= 2, got {factor}")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size - size % DTYPE_BYTES)
        size *= factor
    return sizes


def bus_factor(world_size: int) -> float:
    """All-reduce moves 2(n-1)/n of the buffer per rank (nccl-tests' PERFORMANCE.md)."""
    return 2.0 * (world_size - 1) / world_size if world_size > 0 else 0.0


@dataclass(frozen=True)
class Row:
    """One message size: nccl-tests' out-of-place columns (this engine runs in place)."""

    size: int
    time_us: float
    world_size: int
    wrong: int = 0

    @property
    def count(self) -> int:
        return self.size // DTYPE_BYTES

    @property
    def algbw_gbps(self) -> float:
        return self.size / (self.time_us * 1e-6) / 1e9 if self.time_us > 0 else 0.0

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * bus_factor(self.world_size)

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "count": self.count, "type": "float", "redop": "sum",
                "time_us": round(self.time_us, 2), "algbw_gbps": round(self.algbw_gbps, 3),
                "busbw_gbps": round(self.busbw_gbps, 3), "wrong": self.wrong}


def peak_busbw(rows: Sequence[Row], large_bytes: int) -> float:
    """The best bus bandwidth among the large messages (sizes >= large_bytes, else the largest size).

    Health checks compare this figure: small messages measure latency, not the link.
    """
    if not rows:
        return 0.0
    large = [r for r in rows if r.size >= large_bytes] or [max(rows, key=lambda r: r.size)]
    return max(r.busbw_gbps for r in large)


def avg_busbw(rows: Sequence[Row]) -> float:
    return statistics.fmean(r.busbw_gbps for r in rows) if rows else 0.0


def format_table(rows: Sequence[Row], title: str = "") -> str:
    """The table nccl-tests prints (in-place columns), so figures line up with published runs."""
    lines = [f"# {title}"] if title else []
    lines += [
        "#",
        "#                                                  in-place",
        "#       size         count      type   redop     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)",
    ]
    for r in rows:
        lines.append(f"{r.size:12d}  {r.count:12d}  {'float':>8}  {'sum':>6}  {r.time_us:7.1f}  "
                     f"{r.algbw_gbps:6.2f}  {r.busbw_gbps:6.2f}  {r.wrong:6d}")
    wrong = sum(r.wrong for r in rows)
    lines.append(f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}")
    lines.append(f"# Avg bus bandwidth    : {avg_busbw(rows):.4g}")
    return "\n".join(lines)


# --- NCCL transport: which network did NCCL pick? -------------------------------------------------
_USING_NETWORK = re.compile(r"NCCL INFO Using network (?P<net>.+?)\s*$")
# NCCL 2.28 also names the net plugin each communicator got (seen on an H200: "Assigned NET plugin Socket to comm")
_ASSIGNED_NETWORK = re.compile(r"NCCL INFO Assigned NET plugin (?P<net>.+?) to comm")
_NET_LINE = re.compile(r"NCCL INFO (?P<line>(NET/\S+|Channel \d+/\d+ : .* via \S+|.*[Pp]lugin.*|.*OFI.*))\s*$")


def parse_transport(lines: Iterable[str]) -> dict[str, Any]:
    """Read NCCL_DEBUG=INFO output: the network NCCL selected, GPUDirect RDMA use and plugin errors.

    ``network`` is NCCL's own name: ``Socket`` (TCP), ``IB`` (InfiniBand/RoCE verbs) or the net plugin's
    name (aws-ofi-nccl reports ``AWS Libfabric`` or ``Libfabric``).
    """
    networks: list[str] = []
    evidence: list[str] = []
    gdr = False
    plugin_errors: list[str] = []
    for raw in lines:
        line = raw.rstrip("\n")
        m = _USING_NETWORK.search(line) or _ASSIGNED_NETWORK.search(line)
        if m and m.group("net") not in networks:
            networks.append(m.group("net"))
        n = _NET_LINE.search(line)
        if n and len(evidence) < 20:
            evidence.append(n.group("line"))
        if "GDRDMA" in line:
            gdr = True
        low = line.lower()
        if ("plugin" in low or "net/ofi" in low) and any(w in low for w in ("fail", "could not", "error", "unable")):
            plugin_errors.append(line.split("NCCL ", 1)[-1])
    return {"network": networks[0] if networks else "", "networks": networks, "gpudirect_rdma": gdr,
            "plugin_errors": plugin_errors[:10], "evidence": evidence}


def network_matches(network: str, expected: Sequence[str]) -> bool:
    """Whether NCCL's network name is one of the expected ones (case-insensitive substring match)."""
    return any(e.lower() in network.lower() for e in expected if e)


# --- Pairs: name the slow node ------------------------------------------------------------------------
# rayfleet.localize plans the pair tests (a ring, then bisection and re-tests against nodes that passed); the Ray side
# below runs each round it asks for, and these functions turn its findings into the report's lines.
@dataclass(frozen=True)
class PairResult:
    nodes: tuple[str, str]  # node names (inventory names when given, else Ray node names)
    busbw_gbps: float
    size: int
    phase: str = RING  # ring: the first pass; confirm: a first-pass suspect re-tested with a node that passed
    round: int = 0
    slow: bool = False


def node_label(node_name: str, ip: str, hosts: Mapping[str, str]) -> str:
    """The name a node goes by in messages: ``hosts`` by its Ray node name (``<ip>`` for a host's one node,
    ``<ip>/<instance>`` for each of several), else by its IP with ``/<instance>`` added, else the Ray node name."""
    name = node_name or ip
    if name in hosts:
        return hosts[name]
    instance = name[len(ip) + 1:] if name.startswith(f"{ip}/") else ""
    if ip in hosts and (instance or name == ip):
        return f"{hosts[ip]}/{instance}" if instance else hosts[ip]
    return name


def side_label(side: Sequence[int], names: Sequence[str]) -> str:
    """One node's name, or a block's: its first node and how many more."""
    return names[side[0]] if len(side) == 1 else f"{names[side[0]]} and {len(side) - 1} more"


def _test_dict(test: PairTest, names: Sequence[str], size: int) -> dict[str, Any]:
    return {"nodes": [side_label(side, names) for side in test.pair], "busbw_gbps": round(test.busbw_gbps, 3),
            "size": size, "round": test.round, "phase": test.phase, "slow": test.slow,
            "sides": [[names[i] for i in side] for side in test.pair]}


def host_lines(loc: Localization, nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per host with several Ray nodes: its address, name and each of its nodes' verdict."""
    verdicts = loc.verdicts()
    by_host: dict[str, list[int]] = {}
    for index, host in enumerate(loc.hosts):
        by_host.setdefault(host, []).append(index)
    out = []
    for host, indices in by_host.items():
        if len(indices) > 1:
            prefixes = {str(nodes[i]["name"]).rsplit("/", 1)[0] for i in indices}
            out.append({"host": host, "name": prefixes.pop() if len(prefixes) == 1 else host,
                        "nodes": {nodes[i]["name"]: verdicts[i] for i in indices}})
    return out


def pair_findings(loc: Localization, nodes: Sequence[Mapping[str, Any]], size: int) -> dict[str, Any]:
    """The report's view of the pair tests. ``suspects`` holds the confirmed slow nodes only."""
    names = [str(n["name"]) for n in nodes]
    tests = [_test_dict(t, names, size) for t in loc.tests]
    ring = [d for d in tests if d["phase"] == RING]
    members = (f"ring of {loc.members} blocks of about {len(names) // max(loc.members, 1)} nodes"
               if loc.in_blocks else f"ring of {loc.members} nodes")
    return {
        "slow_pairs": [d for d in ring if d["slow"]],
        "suspects": sorted(names[i] for i in loc.confirmed),
        "best_gbps": round(loc.best_gbps, 3),
        "slowest": min(ring, key=lambda d: d["busbw_gbps"]) if ring else None,
        "threshold_gbps": round(loc.threshold_gbps, 3),
        "first_pass": members if loc.members else "",
        "rounds": loc.rounds,
        "pair_tests": len(loc.tests),
        "first_pass_suspects": [names[i] for i in loc.first_pass_suspects],
        "cleared": [names[i] for i in loc.cleared],
        "unresolved": [names[i] for i in loc.unresolved],
        "tests": tests,
        "skipped_same_host": [[side_label(side, names) for side in p] for p in loc.skipped],
        "single_host": loc.hosts[0] if loc.single_host else None,
        "hosts": host_lines(loc, nodes),
    }


def check_pairs(nodes: Sequence[Mapping[str, Any]], measure: Measure, opts: Options, size: int
                ) -> tuple[list[PairResult], dict[str, Any]]:
    """Locate the slow nodes among ``nodes`` (each with its ``name`` and its host's ``ip``) with ``measure``:
    (the node pairs tested, the findings)."""
    loc = locate([str(n["ip"]) for n in nodes], measure, ratio=opts.pair_ratio, min_busbw=opts.min_busbw_gbps,
                 ring_max=opts.pair_ring_max)
    names = [str(n["name"]) for n in nodes]
    pairs = [PairResult((names[t.pair[0][0]], names[t.pair[1][0]]), round(t.busbw_gbps, 3), size, t.phase,
                        t.round, t.slow)
             for t in loc.tests if len(t.pair[0]) == 1 and len(t.pair[1]) == 1]
    return pairs, pair_findings(loc, nodes, size)


def pair_problems(findings: Mapping[str, Any]) -> list[str]:
    """The slow nodes, named only when a re-test with a node that passed was slow as well; or the slow pairs no
    re-test could pin on a node."""
    slow = ", ".join(f"{' - '.join(p['nodes'])} {p['busbw_gbps']:.2f} GB/s" for p in findings.get("slow_pairs") or [])
    best = f"best pair {findings.get('best_gbps', 0.0):.2f} GB/s"
    if findings.get("suspects"):
        again = [f"{' - '.join(t['nodes'])} {t['busbw_gbps']:.2f} GB/s" for t in findings.get("tests") or []
                 if t.get("phase") == CONFIRM and t.get("slow")]
        confirmed = f"; slow again with a node that passed: {', '.join(again)}" if again else ""
        return [f"slow node(s): {', '.join(findings['suspects'])} (slow pairs: {slow or 'none'}{confirmed}; {best})"]
    if findings.get("unresolved"):
        return [f"slow pair(s) not pinned on a node: {slow}; {', '.join(findings['unresolved'])} could not be "
                f"re-tested, as no node on another host passed to pair them with ({best}): the network itself, or "
                "every node, is slow"]
    return []


# --- Options and result ---------------------------------------------------------------------------
@dataclass
class Options:
    address: str = "auto"
    backend: str = "auto"
    min_bytes: int = 8
    max_bytes: int | None = None  # default: 1 GiB with NCCL, 16 MiB with gloo
    step_factor: int = 2
    warmup_iters: int = 5
    iters: int = 20
    large_bytes: int | None = None  # sizes counted for the peak; default: max_bytes / 8
    pairwise: bool = True
    pair_bytes: int | None = None  # message size of the pair test; default: the largest swept size
    pair_iters: int = 10
    pair_ratio: float = 0.75
    pair_ring_max: int = 32  # more nodes than this: the ring pairs this many blocks of nodes, then bisects
    pair_concurrent: bool = True  # the pair tests of a round (no host in two) run at once
    min_busbw_gbps: float | None = None
    expect_network: list[str] = field(default_factory=list)
    intra_node: bool = False
    nodes: int = 0  # 0: every alive node with the needed resources
    gpus_per_node: int = 0  # 0: the smallest GPU count among the chosen nodes
    env: dict[str, str] = field(default_factory=dict)
    hosts: dict[str, str] = field(default_factory=dict)  # Ray node name (or IP) -> name used in messages
    timeout_s: int = 600
    auth_token_path: str | None = None

    def validate(self) -> Options:
        if self.backend not in BACKENDS:
            raise SettingsError(f"backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")
        for name in ("warmup_iters", "iters", "pair_iters", "timeout_s", "step_factor"):
            if getattr(self, name) < (0 if name == "warmup_iters" else 1):
                raise SettingsError(f"{name}: must be a positive number, got {getattr(self, name)}")
        if not 0 < self.pair_ratio <= 1:
            raise SettingsError(f"pair_ratio: must be in (0, 1], got {self.pair_ratio}")
        if self.pair_ring_max < 3:
            raise SettingsError(f"pair_ring_max: must be 3 or more (a ring puts each member in two pairs), "
                                f"got {self.pair_ring_max}")
        if self.min_busbw_gbps is not None and self.min_busbw_gbps < 0:
            raise SettingsError(f"min_busbw_gbps: must be >= 0, got {self.min_busbw_gbps}")
        if self.max_bytes is not None and self.min_bytes > self.max_bytes:
            raise SettingsError(f"min_bytes ({self.min_bytes}) is larger than max_bytes ({self.max_bytes}): "
                                "the size range is empty")
        if self.nodes < 0 or self.gpus_per_node < 0:
            raise SettingsError("nodes and gpus_per_node must be >= 0")
        bad_env = [k for k in self.env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)]
        if bad_env:
            raise SettingsError(f"env: {bad_env} are not environment variable names")
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Options:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SettingsError(f"unknown option(s) {unknown}; expected some of {sorted(names)}")
        return cls(**dict(data)).validate()


@dataclass
class Report:
    backend: str
    world_size: int
    nodes: list[dict[str, Any]]
    rows: list[Row]
    large_bytes: int
    pairs: list[PairResult] = field(default_factory=list)
    pair_findings: dict[str, Any] = field(default_factory=dict)
    transport: dict[str, Any] = field(default_factory=dict)
    min_busbw_gbps: float | None = None
    expect_network: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def peak_busbw_gbps(self) -> float:
        return peak_busbw(self.rows, self.large_bytes)

    def problems(self) -> list[str]:
        """What makes this cluster unfit for a job, each naming the node, pair or setting at fault."""
        out = []
        wrong = [r for r in self.rows if r.wrong]
        if wrong:
            out.append(f"all-reduce returned wrong values at {len(wrong)} size(s) (first at {wrong[0].size} B): "
                       "a rank computes or transfers incorrectly")
        if self.min_busbw_gbps is not None and self.world_size < 2:
            out.append(f"min_busbw_gbps {self.min_busbw_gbps:g} cannot be checked with one rank: a one-rank "
                       "all-reduce moves no data (bus bandwidth is 0 by definition). Run it across 2+ GPUs or "
                       "2+ nodes, or leave min_busbw_gbps unset on a single-GPU cluster")
        elif self.min_busbw_gbps is not None and self.peak_busbw_gbps < self.min_busbw_gbps:
            slowest = self.pair_findings.get("slowest")
            where = (f"; slowest pair {' - '.join(slowest['nodes'])} at {slowest['busbw_gbps']:.2f} GB/s"
                     if slowest else "")
            out.append(f"bus bandwidth {self.peak_busbw_gbps:.2f} GB/s across {len(self.nodes)} node(s) is below "
                       f"min_busbw_gbps {self.min_busbw_gbps:g} GB/s{where}")
        out += pair_problems(self.pair_findings)
        for node in self.nodes:  # NCCL must bootstrap where Ray runs: a wrong NCCL_SOCKET_IFNAME hangs a job
            probe = node.get("nccl") or {}
            if probe.get("available"):
                found = nccl_verdict(probe, node["ip"])
                if not found["ok"]:
                    out.append(f"node {node['name']}: {found['reason']}")
        if self.expect_network and self.backend == "nccl":
            net = self.transport.get("network", "")
            if not network_matches(net, self.expect_network):
                out.append(f"NCCL used network {net or 'unknown'!r}, expected one of {self.expect_network} "
                           "(a missing EFA/IB provider or net plugin falls back to sockets); "
                           f"plugin errors: {self.transport.get('plugin_errors') or 'none logged'}")
        return out

    def to_dict(self) -> dict[str, Any]:
        problems = self.problems()
        return {
            "ok": not problems,
            "problems": problems,
            "backend": self.backend,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "rows": [r.to_dict() for r in self.rows],
            "large_bytes": self.large_bytes,
            "peak_busbw_gbps": round(self.peak_busbw_gbps, 3),
            "avg_busbw_gbps": round(avg_busbw(self.rows), 3),
            "min_busbw_gbps": self.min_busbw_gbps,
            "pairs": [dataclasses.asdict(p) for p in self.pairs],
            "pair_findings": self.pair_findings,
            "transport": self.transport,
            "expect_network": self.expect_network,
            "duration_s": round(self.duration_s, 2),
            "versions": self.versions,
        }

    def format(self) -> str:
        network = f", network {self.transport['network']}" if self.transport.get("network") else ""
        title = (f"all_reduce across {len(self.nodes)} node(s), {self.world_size} rank(s), "
                 f"backend {self.backend}{network}")
        parts = [format_table(self.rows, title)]
        if self.world_size < 2:
            parts.append("# One rank: the backend ran and every sum was checked, but a one-rank all-reduce moves "
                         "no data - algbw here is size over launch time, not a bandwidth")
        parts.append(f"# Peak bus bandwidth (sizes >= {self.large_bytes} B): {self.peak_busbw_gbps:.4g} GB/s"
                     + (f" (minimum {self.min_busbw_gbps:g})" if self.min_busbw_gbps is not None else ""))
        if self.pairs:
            parts.append("# Node pairs:")
            parts += [f"#   {p.nodes[0]:>20} - {p.nodes[1]:<20} {p.busbw_gbps:8.3f} GB/s at {p.size} B"
                      + (" slow" if p.slow else "") + (" (re-test)" if p.phase != RING else "")
                      for p in self.pairs]
        parts += format_findings(self.pair_findings)
        problems = self.problems()
        parts.append("# Result: " + ("OK" if not problems else "FAILED\n#   " + "\n#   ".join(problems)))
        return "\n".join(parts)


def format_findings(findings: Mapping[str, Any]) -> list[str]:
    """The localization's lines in the table's footer: how it ran, what passed on re-test, each host's nodes."""
    lines = []
    if findings.get("single_host"):
        lines.append(f"# Pair tests skipped: every node is on host {findings['single_host']}; a pair there would "
                     "measure the host's loopback, not a network link")
    if findings.get("rounds"):
        lines.append(f"# Localization: {findings['first_pass']}, then halves and re-tests with nodes that passed: "
                     f"{findings['rounds']} round(s), {findings['pair_tests']} pair test(s); slow below "
                     f"{findings['threshold_gbps']:.3f} GB/s")
    if findings.get("skipped_same_host"):
        lines.append("# Not tested (two nodes of one host: no network link between them): "
                     + ", ".join(" - ".join(p) for p in findings["skipped_same_host"]))
    if findings.get("cleared"):
        lines.append("# Passed on re-test (a slow first-pass measurement, not a slow node): "
                     + ", ".join(findings["cleared"]))
    for host in findings.get("hosts") or []:
        lines.append(f"# Host {host['name']} ({host['host']}), {len(host['nodes'])} Ray nodes: "
                     + ", ".join(f"{name} {verdict}" for name, verdict in host["nodes"].items()))
    return lines


# --- The Ray side ---------------------------------------------------------------------------------
class _Rank:
    """One process of the torch.distributed group, as a Ray actor (see ``_remote_rank``)."""

    def __init__(self, rank: int, world_size: int, backend: str, debug_file: str):
        self.rank, self.world_size, self.backend = rank, world_size, backend
        self.debug_file = debug_file
        if backend == "nccl":
            os.environ.setdefault("NCCL_DEBUG", "INFO")
            os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
            os.environ["NCCL_DEBUG_FILE"] = debug_file
        self.groups: dict[tuple[int, ...], Any] = {}
        self.device = None

    def where(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        return {"rank": self.rank, "ip": ray.util.get_node_ip_address(), "node_id": ctx.get_node_id(),
                "hostname": socket.gethostname(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "nccl": self.nccl_probe()}

    @staticmethod
    def nccl_probe() -> dict[str, Any]:
        """NCCL's version and bootstrap address under this Ray worker's environment, read in a child process (so
        this rank's own CUDA and NCCL start untouched, after CUDA_VISIBLE_DEVICES is set)."""
        proc = subprocess.run([sys.executable, "-m", "rayfleet.nccl", "--json"], capture_output=True, text=True,
                              timeout=60, check=False)
        try:
            return json.loads(proc.stdout)
        except json.JSONDecodeError:
            return {"available": False, "reason": probe_failure(proc)}

    def free_port(self) -> int:
        with socket.socket() as s:
            s.bind(("", 0))
            return s.getsockname()[1]

    def setup(self, master: str, port: int, timeout_s: int, node_gpus: Sequence[str]) -> dict[str, str]:
        import datetime

        if self.backend == "nccl":
            # Every rank of a node sees all of that node's GPUs in the group (as Ray Train does), so NCCL can
            # use NVLink/P2P between them; each rank drives the GPU Ray assigned to it.
            import ray

            own = str(ray.get_gpu_ids()[0])
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(node_gpus)
            import torch

            torch.cuda.set_device(list(node_gpus).index(own))
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            import torch

            self.device = torch.device("cpu")
        import torch.distributed as dist

        dist.init_process_group(self.backend, init_method=f"tcp://{master}:{port}", rank=self.rank,
                                world_size=self.world_size, timeout=datetime.timedelta(seconds=timeout_s))
        return {"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))
                if self.backend == "nccl" else ""}

    def new_group(self, ranks: Sequence[int]) -> None:
        import torch.distributed as dist

        self.groups[tuple(ranks)] = dist.new_group(ranks=list(ranks))

    def _sync(self) -> None:
        if self.backend == "nccl":
            import torch

            torch.cuda.synchronize()

    def run(self, sizes: Sequence[int], warmup: int, iters: int, group_ranks: Sequence[int] | None = None
            ) -> list[tuple[int, float, int]]:
        """(size, max time per iteration over ranks in us, wrong elements) per size."""
        import torch
        import torch.distributed as dist

        group = self.groups[tuple(group_ranks)] if group_ranks else None
        world = len(group_ranks) if group_ranks else self.world_size
        expected = world * (world + 1) / 2  # ranks 0..w-1 of the group each contribute (local index + 1)
        index = list(group_ranks).index(self.rank) if group_ranks else self.rank
        out = []
        for size in sizes:
            count = max(size // DTYPE_BYTES, 1)
            check = torch.full((count,), float(index + 1), dtype=torch.float32, device=self.device)
            dist.all_reduce(check, group=group)
            self._sync()
            wrong = int((check != expected).sum().item())
            buf = torch.zeros(count, dtype=torch.float32, device=self.device)
            for _warmup in range(warmup):
                dist.all_reduce(buf, group=group)
            self._sync()
            dist.barrier(group=group)
            start = time.perf_counter()
            for _timed in range(iters):
                dist.all_reduce(buf, group=group)
            self._sync()
            elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64,
                                   device=self.device if self.backend == "nccl" else "cpu")
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)  # the slowest rank sets the time
            wrong_t = torch.tensor([wrong], dtype=torch.int64, device=elapsed.device)
            dist.all_reduce(wrong_t, group=group)
            out.append((size, float(elapsed.item()) * 1e6, int(wrong_t.item())))
            del check, buf
        return out

    def nccl_log(self) -> list[str]:
        try:
            with open(self.debug_file, encoding="utf-8", errors="replace") as fh:
                return fh.readlines()[-400:]
        except OSError:
            return []

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def _pick_backend(backend: str, totals: Mapping[str, float]) -> str:
    if backend != "auto":
        return backend
    return "nccl" if totals.get("GPU", 0) > 0 else "gloo"


def _alive_nodes() -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def plan_bundles(nodes: Sequence[Mapping[str, Any]], opts: Options, backend: str) -> tuple[list[dict], int, int]:
    """(bundles, ranks per node, node count) for the placement group."""
    if backend == "nccl":
        gpu_counts = [int(n.get("Resources", {}).get("GPU", 0)) for n in nodes]
        gpu_nodes = [c for c in gpu_counts if c > 0]
        if not gpu_nodes:
            raise CollectiveError("backend nccl needs GPU nodes, and Ray reports no GPUs on any alive node")
        per_node = opts.gpus_per_node or min(gpu_nodes)
        fit = sum(1 for c in gpu_nodes if c >= per_node)
        what = f"with >= {per_node} GPU(s)"
    else:
        per_node = max(opts.gpus_per_node, 2 if opts.intra_node else 1)
        fit = sum(1 for n in nodes if n.get("Resources", {}).get("CPU", 0) >= per_node)
        what = f"with >= {per_node} CPU(s)"
    count = 1 if opts.intra_node else (opts.nodes or fit)
    if count > fit or count < 1:
        raise CollectiveError(f"nodes: {count} requested, but {fit} alive node(s) {what} "
                              f"({len(nodes)} alive in all); start the missing nodes or ask for fewer")
    if not opts.intra_node and count < 2:
        raise CollectiveError(f"only {count} alive node(s) {what}: an all-reduce across nodes needs 2 or more "
                              "(use --intra-node on a single node)")
    bundle = {"GPU": per_node, "CPU": per_node} if backend == "nccl" else {"CPU": per_node}
    return [bundle] * count, per_node, count


def run(opts: Options) -> Report:
    """Place the ranks, run the sweep and the pair ring, and return the report (raises CollectiveError)."""
    opts.validate()
    started = time.monotonic()
    if opts.auth_token_path:
        os.environ.update(auth_env(opts.auth_token_path))
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ray.init(address=opts.address, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": dict(opts.env)} if opts.env else None)
    try:
        nodes = _alive_nodes()
        totals: dict[str, float] = {}
        for n in nodes:
            for k, v in n.get("Resources", {}).items():
                totals[k] = totals.get(k, 0) + v
        backend = _pick_backend(opts.backend, totals)
        bundles, per_node, count = plan_bundles(nodes, opts, backend)
        pg = placement_group(bundles, strategy="PACK" if opts.intra_node else "STRICT_SPREAD")
        try:
            try:
                ray.get(pg.ready(), timeout=min(opts.timeout_s, 120))
            except ray.exceptions.GetTimeoutError as exc:
                raise CollectiveError(
                    f"could not place {count} bundle(s) of {bundles[0]} with "
                    f"{'PACK' if opts.intra_node else 'STRICT_SPREAD'} in 120 s: {len(nodes)} alive node(s), "
                    f"cluster resources {totals}. Is every node alive with these resources free?") from exc
            node_names = {n.get("NodeID"): n.get("NodeName") or n.get("NodeManagerAddress") or "" for n in nodes}
            return _run_placed(opts, ray, pg, PlacementGroupSchedulingStrategy, backend=backend,
                               per_node=per_node, count=count, started=started, node_names=node_names)
        finally:
            remove_placement_group(pg)
    finally:
        ray.shutdown()


def _nccl_summary(probe: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("available", "reason", "version", "library", "socket_ifname", "net", "bootstrap")
    return {k: probe[k] for k in keep if k in probe}


def _ray_measure(actors: Sequence[Any], nodes: Sequence[Mapping[str, Any]], get: Any, *, size: int, iters: int,
                 concurrent: bool) -> Measure:
    """rayfleet.localize's measurement on Ray: each pair's ranks (the nodes of both sides) run the all-reduce of
    ``size`` bytes in a group of their own; a round's pairs at once unless ``concurrent`` is false."""
    names = [str(n["name"]) for n in nodes]
    created: set[tuple[int, ...]] = set()

    def ranks_of(pair: Pair) -> tuple[int, ...]:
        return tuple(sorted(r for side in pair for i in side for r in nodes[i]["ranks"]))

    def run_batch(batch: Sequence[tuple[Pair, tuple[int, ...]]]) -> list[float]:
        refs = [[actors[r].run.remote([size], 2, iters, list(ranks)) for r in ranks] for _pair, ranks in batch]
        what = "the pair test(s) " + ", ".join(" - ".join(side_label(s, names) for s in pair) for pair, _r in batch)
        done = get([ref for group in refs for ref in group], what)
        out, at = [], 0
        for (_pair, ranks), group in zip(batch, refs):
            got_size, time_us, wrong = done[at][0]  # every rank of a group returns the group's (slowest) time
            at += len(group)
            out.append(Row(got_size, time_us, len(ranks), wrong).busbw_gbps)
        return out

    def measure(pairs: Sequence[Pair]) -> list[float]:
        batch = [(pair, ranks_of(pair)) for pair in pairs]
        for _pair, ranks in batch:  # new_group is collective: every rank creates every group, in the same order
            if ranks not in created:
                get([a.new_group.remote(list(ranks)) for a in actors], "creating the pair groups")
                created.add(ranks)
        if concurrent:
            return run_batch(batch)
        return [bw for one in batch for bw in run_batch([one])]

    return measure


def _run_placed(opts, ray, pg, strategy_cls, *, backend, per_node, count, started, node_names) -> Report:
    world = per_node * count
    max_bytes = opts.max_bytes or (1 << 30 if backend == "nccl" else 16 << 20)
    sizes = sweep(opts.min_bytes, max_bytes, opts.step_factor)
    large_bytes = opts.large_bytes or max(sizes[-1] // 8, sizes[0])
    Rank = ray.remote(_Rank)
    actors = [
        Rank.options(
            num_cpus=1, num_gpus=1 if backend == "nccl" else 0,
            scheduling_strategy=strategy_cls(placement_group=pg, placement_group_bundle_index=r // per_node),
        ).remote(r, world, backend, f"/tmp/rayfleet-nccl-{os.getpid()}-{r}.log")
        for r in range(world)
    ]
    deadline = time.monotonic() + opts.timeout_s

    def get(refs, what):
        left = max(deadline - time.monotonic(), 1)
        try:
            return ray.get(refs, timeout=left)
        except ray.exceptions.GetTimeoutError as exc:
            raise CollectiveError(f"{what} did not finish in {opts.timeout_s} s (timeout_s): a rank is stuck, "
                                  "most likely on a blocked or broken link between nodes") from exc
        except ray.exceptions.RayError as exc:
            raise CollectiveError(f"{what} failed: {exc}") from exc

    try:
        where = get([a.where.remote() for a in actors], "locating the ranks")
        node_gpus: dict[str, list[str]] = {}
        for w in where:
            node_gpus.setdefault(w["node_id"], []).extend(w["gpu_ids"])
        port = get(actors[0].free_port.remote(), "choosing a rendezvous port")
        master = where[0]["ip"]
        versions = get([a.setup.remote(master, port, opts.timeout_s, sorted(node_gpus[w["node_id"]]))
                        for a, w in zip(actors, where)], "forming the torch.distributed group")[0]
        versions["ray"] = ray.__version__
        raw = get([a.run.remote(sizes, opts.warmup_iters, opts.iters) for a in actors], "the all-reduce sweep")[0]
        rows = [Row(size, t, world, wrong) for size, t, wrong in raw]

        # Nodes in rank order, and the ranks on each
        node_order: list[str] = []
        for w in where:
            if w["node_id"] not in node_order:
                node_order.append(w["node_id"])
        by_node = {nid: [w for w in where if w["node_id"] == nid] for nid in node_order}
        nodes = [{"node_id": nid, "ip": ws[0]["ip"], "node_name": node_names.get(nid) or ws[0]["ip"],
                  "name": node_label(node_names.get(nid) or "", ws[0]["ip"], opts.hosts),
                  "hostname": ws[0]["hostname"], "ranks": [w["rank"] for w in ws],
                  "gpu_ids": [g for w in ws for g in w["gpu_ids"]], "nccl": _nccl_summary(ws[0]["nccl"])}
                 for nid, ws in by_node.items()]

        pairs: list[PairResult] = []
        findings: dict[str, Any] = {}
        if opts.pairwise and len(nodes) >= 2:
            pair_size = opts.pair_bytes or sizes[-1]
            measure = _ray_measure(actors, nodes, get, size=pair_size, iters=opts.pair_iters,
                                   concurrent=opts.pair_concurrent)
            pairs, findings = check_pairs(nodes, measure, opts, pair_size)
        transport = {"network": "gloo/tcp"} if backend == "gloo" else parse_transport(
            line for log in get([a.nccl_log.remote() for a in actors], "reading NCCL's log") for line in log)
        get([a.close.remote() for a in actors], "closing the group")
        return Report(
            backend=backend, world_size=world, nodes=nodes, rows=rows, large_bytes=large_bytes, pairs=pairs,
            pair_findings=findings,
            transport=transport, min_busbw_gbps=opts.min_busbw_gbps, expect_network=list(opts.expect_network),
            duration_s=time.monotonic() - started, versions=versions)
    finally:
        for a in actors:
            ray.kill(a)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rayfleet.collective", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"),
                   help="the head's GCS address (ip:6379) or 'auto' on a cluster node")
    p.add_argument("--backend", choices=BACKENDS, default="auto", help="auto: nccl with GPUs, else gloo")
    p.add_argument("--min-bytes", default="8", help="smallest message (like nccl-tests -b), default 8")
    p.add_argument("--max-bytes", help="largest message (-e); default 1G with NCCL, 16M with gloo")
    p.add_argument("--step-factor", type=int, default=2, help="size multiplier per step (-f), default 2")
    p.add_argument("--warmup-iters", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--large-bytes", help="sizes from here up count for the peak (default max/8)")
    p.add_argument("--no-pairwise", dest="pairwise", action="store_false", help="skip the ring of node pairs")
    p.add_argument("--pair-bytes", help="message size of the pair test (default: the largest size)")
    p.add_argument("--pair-iters", type=int, default=10)
    p.add_argument("--pair-ratio", type=float, default=0.75,
                   help="a pair below this share of the best pair is slow (default 0.75)")
    p.add_argument("--pair-ring-max", type=int, default=32,
                   help="more nodes than this: the first-pass ring pairs this many blocks of nodes (default 32)")
    p.add_argument("--pair-one-at-a-time", dest="pair_concurrent", action="store_false",
                   help="run the pair tests one after another instead of a round's tests at once")
    p.add_argument("--min-busbw", dest="min_busbw_gbps", type=float, help="fail below this peak busbw (GB/s)")
    p.add_argument("--expect-network", action="append", default=[],
                   help="NCCL network that must be used, e.g. IB or Libfabric (repeatable)")
    p.add_argument("--intra-node", action="store_true", help="all ranks on one node (PACK)")
    p.add_argument("--nodes", type=int, default=0, help="number of nodes (default: every alive node)")
    p.add_argument("--gpus-per-node", type=int, default=0)
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="environment for the ranks, e.g. NCCL_SOCKET_IFNAME=ens5 (repeatable)")
    p.add_argument("--host", action="append", default=[], metavar="NODE=NAME",
                   help="name a node in the output, by its Ray node name or IP (repeatable)")
    p.add_argument("--timeout", dest="timeout_s", type=int, default=600)
    p.add_argument("--auth-token-path", help="the cluster's Ray token file (clusters with token auth)")
    p.add_argument("--options-file", help="read the options from this JSON file (used by the Ansible module)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--json-out", help="also write the JSON report to this file")
    return p


def _pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SettingsError(f"{flag}: {item!r} is not NAME=VALUE")
        out[key] = value
    return out


def options_from_args(args: argparse.Namespace) -> Options:
    if args.options_file:
        with open(args.options_file, encoding="utf-8") as fh:
            return Options.from_dict(json.load(fh))
    return Options(
        address=args.address, backend=args.backend, min_bytes=parse_size(args.min_bytes, "--min-bytes"),
        max_bytes=parse_size(args.max_bytes, "--max-bytes") if args.max_bytes else None,
        step_factor=args.step_factor, warmup_iters=args.warmup_iters, iters=args.iters,
        large_bytes=parse_size(args.large_bytes, "--large-bytes") if args.large_bytes else None,
        pairwise=args.pairwise, pair_bytes=parse_size(args.pair_bytes, "--pair-bytes") if args.pair_bytes else None,
        pair_iters=args.pair_iters, pair_ratio=args.pair_ratio, pair_ring_max=args.pair_ring_max,
        pair_concurrent=args.pair_concurrent, min_busbw_gbps=args.min_busbw_gbps,
        expect_network=args.expect_network, intra_node=args.intra_node, nodes=args.nodes,
        gpus_per_node=args.gpus_per_node, env=_pairs(args.env, "--env"), hosts=_pairs(args.host, "--host"),
        timeout_s=args.timeout_s, auth_token_path=args.auth_token_path,
    ).validate()


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 healthy, 1 the cluster failed a check (problems named), 2 the check could not run."""
    args = _parser().parse_args(argv)
    try:
        opts = options_from_args(args)
        report = run(opts)
    except RayfleetError as exc:
        print(f"rayfleet.collective: {exc}", file=sys.stderr)
        if args.json_out:
            with open(args.json_out, "w", encoding="utf-8") as fh:
                json.dump({"ok": False, "error": str(exc)}, fh)
        return 2
    data = report.to_dict()
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
    print(json.dumps(data, indent=2) if args.json else report.format())
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
