# SPDX-License-Identifier: GPL-3.0-or-later
"""Admission's link check: a worker's network is pair-tested against nodes already proved, before its raylet starts.

The node is not in the cluster yet, so nothing can be scheduled on it: it reaches the cluster as a Ray client
(``ray://<head>:<client server port>``, with the cluster's token) and places one all-reduce rank on a proved node
(an alive node labelled ``rayfleet.io/admission=passed`` on another host), while the other rank runs in this process.
The two ranks run the preflight's all-reduce (``rayfleet.collective``: torch.distributed, warm-up then timed in-place
all-reduces of float32) two nodes at a time, and the bus bandwidth is compared with:

  reference  the same all-reduce between two proved nodes (the peer and another proved host), measured just before:
             the node passes when it reaches ``ratio`` x the reference (the preflight's pair ratio), so the figure is
             judged against the cluster's own hardware under its current load, not a table;
  floor      ``min_busbw_gbps``, when set: an absolute floor in GB/s the pair must reach as well.

One rank per node, with gloo over the node's Ray network (``GLOO_SOCKET_IFNAME`` from the node's settings): it needs
no free GPU on the proved node, so a node joins a cluster whose GPUs are all busy, and it finds what admission is for
- a NIC negotiated down, a bad cable, a throttled or filtered link, a node its peers cannot connect to. The GPU fabric
at full width (NCCL over EFA or InfiniBand, every GPU of both nodes) is the preflight's all-reduce, which counts the
node before any job is submitted.

Not applicable (the node is admitted on its other checks, and the next preflight pair-tests it): the head (the
cluster's first node), a node with the check turned off, a cluster with no proved node on another host yet, and a
Ray venv without torch (the pytorch role installs it after Ray's first start; a baked image has it). With a single
proved host there is no reference: only the floor applies.

Examples (on a node, in the Ray venv, as the Ray user; the node's own Ray need not run):
  python -m rayfleet.link --config /etc/rayfleet/ray-worker.json
  python -m rayfleet.link --config /etc/rayfleet/ray-worker.json --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import socket
import sys
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rayfleet.admission import LABEL_KEY, LABEL_PASSED
from rayfleet.errors import RayfleetError, SettingsError
from rayfleet.health import FAILED, NOT_APPLICABLE, OK

if TYPE_CHECKING:  # pragma: no cover
    from rayfleet.raynode import RayNodeSettings


class Unreachable(RayfleetError):
    """The cluster's Ray client server does not answer: no verdict on this node, which tries again."""


class NotApplicable(RayfleetError):
    """What the check needs is not on this node (torch)."""


@dataclass(frozen=True)
class LinkCheck:
    """The link check's settings (``link_check`` in a node's settings file)."""

    bytes: int = 16 << 20
    warmup: int = 2
    iters: int = 5
    ratio: float = 0.75
    min_busbw_gbps: float | None = None
    timeout_s: float = 60.0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> LinkCheck | None:
        """None (or absent): the check is off."""
        if data is None:
            return None
        if not isinstance(data, Mapping):
            raise SettingsError(f"link_check: expected a mapping of the link check's settings or null, got {data!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise SettingsError(f"link_check: unknown keys {unknown}; expected some of {sorted(fields)}")
        out = dict(data)

        def number(key: str, kind: type, low: float, high: float | None = None) -> None:
            value = out.get(key, getattr(cls, key))
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if kind is int:
                ok = ok and float(value).is_integer()
            if not ok or value < low or (high is not None and value > high):
                bounds = f">= {low:g}" + (f" and <= {high:g}" if high is not None else "")
                raise SettingsError(f"link_check.{key}: expected a {'whole ' if kind is int else ''}number "
                                    f"{bounds}, got {value!r}")
            out[key] = kind(value)

        number("bytes", int, 4, 1 << 34)
        number("warmup", int, 0, 100)
        number("iters", int, 1, 1000)
        number("ratio", float, 0.0, 1.0)
        number("timeout_s", float, 5)
        if out.get("min_busbw_gbps") is not None:
            number("min_busbw_gbps", float, 0.0)
        return cls(**out)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def floor(self, reference: float | None) -> float:
        """The bus bandwidth the pair must reach (GB/s): ratio x reference and the absolute floor, the higher."""
        want = [self.min_busbw_gbps or 0.0]
        if reference:
            want.append(self.ratio * reference)
        return max(want)


def choose_peers(nodes: Sequence[Mapping[str, Any]], own_ip: str) -> list[dict[str, Any]]:
    """Proved peers to pair with, one node per host, on hosts other than own_ip's: workers before the head (whose
    network carries the cluster's control traffic), rotated by own_ip so that nodes joining together spread over
    the proved ones. The first is the peer; the second, if any, completes the reference pair."""
    by_ip: dict[str, dict[str, Any]] = {}
    for node in sorted(nodes, key=lambda n: (str(n.get("node_ip")), str(n.get("node_name") or ""))):
        ip = str(node.get("node_ip") or "")
        if (node.get("state") == "ALIVE" and not node.get("draining") and ip and ip != own_ip
                and (node.get("labels") or {}).get(LABEL_KEY) == LABEL_PASSED):
            by_ip.setdefault(ip, dict(node))
    workers = [n for n in by_ip.values() if not n.get("is_head_node")]
    heads = [n for n in by_ip.values() if n.get("is_head_node")]
    if workers:
        start = zlib.crc32(own_ip.encode()) % len(workers)
        workers = workers[start:] + workers[:start]
    return workers + heads


def name_of(node: Mapping[str, Any]) -> str:
    return str(node.get("node_name") or node.get("node_ip"))


@dataclass(frozen=True)
class Measurement:
    """What the pair tests measured (GB/s bus bandwidth; reference None: a single proved host)."""

    peer: str
    busbw_gbps: float
    wrong: int = 0
    reference_pair: tuple[str, str] | None = None
    reference_gbps: float | None = None
    seconds: float = 0.0


def judge(opts: LinkCheck, m: Measurement) -> tuple[str, str]:
    """(state, reason) for a measurement."""
    size = _size_text(opts.bytes)
    what = f"all-reduce with {m.peer} at {size}: {m.busbw_gbps:.3f} GB/s bus bandwidth"
    ref = (f"{opts.ratio:g} x {m.reference_gbps:.3f} GB/s between {m.reference_pair[0]} and {m.reference_pair[1]}"
           if m.reference_gbps and m.reference_pair else "")
    if m.wrong:
        return FAILED, f"{what}, but {m.wrong} element(s) came back wrong: the link corrupts data"
    floor = opts.floor(m.reference_gbps)
    parts = [p for p in (ref, f"the floor {opts.min_busbw_gbps:g} GB/s" if opts.min_busbw_gbps else "") if p]
    against = " and ".join(parts)
    if not floor:
        return OK, (f"{what}; no reference (one proved host, and no floor set): the preflight pair-tests the "
                    "cluster")
    if m.busbw_gbps < floor:
        return FAILED, f"{what}, below {against} (a slow NIC, cable or link on this node)"
    return OK, f"{what}, at least {against}"


def _size_text(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


# ---- the measurement, through a Ray client --------------------------------------------------------------------

CONNECT_ATTEMPTS = 3


def connect(ray: Any, client: str, attempts: int = CONNECT_ATTEMPTS, sleep: Callable[[float], None] = time.sleep
            ) -> None:
    """ray.init through the head's client server. The server starts a process of its own for each client, and that
    start has been seen to fail now and then (a race in gRPC's fork handling): it is tried again; a server that
    never serves is no verdict on this node (Unreachable)."""
    for attempt in range(1, attempts + 1):
        try:
            ray.init(client, logging_level="ERROR", log_to_driver=False)
            return
        except ConnectionError as exc:
            if attempt == attempts:
                last = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
                raise Unreachable(f"the cluster's Ray client server at {client} did not serve this node in "
                                  f"{attempts} attempts: {last}") from None
            sleep(1.0)


def measure(settings: RayNodeSettings, opts: LinkCheck, peers: Sequence[Mapping[str, Any]]) -> Measurement:
    """Run the reference pair (peers[0] - peers[1], when there are two) and this node's pair (this process -
    peers[0]) through a Ray client connection to the cluster."""
    from rayfleet.collective import Row, _Rank
    from rayfleet.raynode import split_address

    try:
        import torch  # noqa: F401  (the ranks' library: here and, through the node library, on the peers)
    except ImportError as exc:
        raise NotApplicable(f"torch is not installed in this node's Ray venv ({exc}): the pytorch role installs it") \
            from None
    os.environ.update(settings.auth_env())
    os.environ.update(settings.collective_env())
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    host = split_address(settings.gcs_address, settings.ports.gcs)[0]
    client = f"ray://{host}:{settings.ports.client_server}"
    try:
        socket.create_connection((host, settings.ports.client_server), timeout=3).close()
    except OSError as exc:
        raise Unreachable(f"the cluster's Ray client server at {client} does not answer ({exc})") from None
    started = time.monotonic()
    deadline = started + opts.timeout_s
    connect(ray, client)
    try:
        rank_cls = ray.remote(_Rank)

        def place(node: Mapping[str, Any], rank: int) -> Any:
            return rank_cls.options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(str(node["node_id"]), soft=False),
            ).remote(rank, 2, "gloo", os.devnull)

        def get(refs: Any, what: str) -> Any:
            try:
                return ray.get(refs, timeout=max(deadline - time.monotonic(), 1))
            except ray.exceptions.GetTimeoutError:
                raise RayfleetError(f"{what} did not finish in {opts.timeout_s:g} s (link_check.timeout_s)") \
                    from None
            except ray.exceptions.RayError as exc:
                raise RayfleetError(f"{what} failed: {exc}") from None

        reference_gbps = None
        reference_pair = None
        if len(peers) > 1:
            pair = [place(peers[0], 0), place(peers[1], 1)]
            try:
                port = get(pair[0].free_port.remote(), f"placing a rank on {name_of(peers[0])}")
                get([a.setup.remote(str(peers[0]["node_ip"]), port, int(opts.timeout_s), []) for a in pair],
                    f"the reference pair {name_of(peers[0])} - {name_of(peers[1])}")
                rows = get([a.run.remote([opts.bytes], opts.warmup, opts.iters) for a in pair],
                           "the reference all-reduce")[0]
                get([a.close.remote() for a in pair], "closing the reference pair")
            finally:
                for actor in pair:
                    ray.kill(actor)
            size, time_us, _wrong = rows[0]
            reference_gbps = Row(size, time_us, 2).busbw_gbps
            reference_pair = (name_of(peers[0]), name_of(peers[1]))

        peer = place(peers[0], 1)
        local = _Rank(0, 2, "gloo", os.devnull)
        try:
            with socket.socket() as s:
                s.bind((settings.node_ip, 0))
                port = s.getsockname()[1]
            joined = peer.setup.remote(settings.node_ip, port, int(opts.timeout_s), [])
            try:
                local.setup(settings.node_ip, port, int(max(deadline - time.monotonic(), 5)), [])
            except Exception as exc:  # torch raises its own errors: the peer never connected
                raise RayfleetError(f"{name_of(peers[0])} could not form a group with this node at "
                                    f"{settings.node_ip}:{port} ({str(exc).splitlines()[0] if str(exc) else exc}): "
                                    "a firewall or a broken link between them") from None
            get(joined, f"the pair with {name_of(peers[0])}")
            theirs = peer.run.remote([opts.bytes], opts.warmup, opts.iters)
            size, time_us, wrong = local.run([opts.bytes], opts.warmup, opts.iters)[0]
            get(theirs, f"the all-reduce with {name_of(peers[0])}")
        finally:
            local.close()
            ray.kill(peer)
        return Measurement(peer=name_of(peers[0]), busbw_gbps=Row(size, time_us, 2).busbw_gbps, wrong=wrong,
                           reference_pair=reference_pair, reference_gbps=reference_gbps,
                           seconds=time.monotonic() - started)
    finally:
        ray.shutdown()


def _nodes(settings: RayNodeSettings) -> list[dict[str, Any]]:
    from rayfleet.cluster import gcs_fetcher

    try:
        return list(gcs_fetcher(settings.gcs_address, auth_token_path=settings.auth_token_path)())
    except RayfleetError:
        raise
    except Exception as exc:  # Ray's RPC errors: the head is up but does not answer in time
        raise Unreachable(f"the head's GCS at {settings.gcs_address} did not answer: {exc}") from None


@dataclass
class Environment:
    """What the check reads; replaced by fakes in tests."""

    nodes: Callable[[RayNodeSettings], Sequence[Mapping[str, Any]]] = _nodes
    measure: Callable[[RayNodeSettings, LinkCheck, Sequence[Mapping[str, Any]]], Measurement] = measure


def check(settings: RayNodeSettings, env: Environment | None = None) -> tuple[str, str, dict[str, Any]]:
    """(state, reason, details) of this node's link check. Raises Unreachable when the cluster does not answer."""
    env = env or Environment()
    opts = settings.link_check
    if settings.role == "head":
        return NOT_APPLICABLE, "the head is the cluster's first proved node", {}
    if opts is None:
        return NOT_APPLICABLE, "turned off (link_check: null)", {}
    peers = choose_peers(env.nodes(settings), settings.node_ip)
    if not peers:
        return NOT_APPLICABLE, ("no proved node on another host to pair with yet: the preflight pair-tests the "
                                "cluster"), {}
    try:
        m = env.measure(settings, opts, peers[:2])
    except (NotApplicable, Unreachable):
        raise
    except RayfleetError as exc:
        return FAILED, f"pair test with {name_of(peers[0])}: {exc}", {"peer": name_of(peers[0])}
    state, reason = judge(opts, m)
    details = {"peer": m.peer, "busbw_gbps": round(m.busbw_gbps, 4), "bytes": opts.bytes,
               "reference_pair": list(m.reference_pair) if m.reference_pair else None,
               "reference_gbps": round(m.reference_gbps, 4) if m.reference_gbps else None,
               "floor_gbps": round(opts.floor(m.reference_gbps), 4), "seconds": round(m.seconds, 2)}
    return state, reason, details


def main(argv: Sequence[str] | None = None) -> int:
    from rayfleet.raynode import load_settings

    parser = argparse.ArgumentParser(prog="python -m rayfleet.link", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the node's settings file")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
        state, reason, details = check(settings)
    except NotApplicable as exc:
        state, reason, details = NOT_APPLICABLE, str(exc), {}
    except RayfleetError as exc:
        print(f"rayfleet.link: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"state": state, "reason": reason, **details}, indent=2, sort_keys=True))
    else:
        print(f"link: {state} - {reason}")
    return 1 if state == FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
