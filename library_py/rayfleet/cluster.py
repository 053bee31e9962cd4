# SPDX-License-Identifier: GPL-3.0-or-later
"""Cluster membership read through Ray's own APIs: the state API of the head's dashboard
(``ray.util.state.list_nodes``, for an ``http://`` address), or the GCS node table (Ray's ``GcsClient``, what
``ray status`` and ``ray drain-node`` use, for a ``host:port`` address). Nodes need only the GCS port: the dashboard
can stay on the head's loopback.

Examples:
  python -m rayfleet.cluster --address 10.0.0.10:6379                     # table of nodes (GCS)
  python -m rayfleet.cluster --address http://127.0.0.1:8265 --json       # machine-readable (state API, on the head)
  python -m rayfleet.cluster --address 10.0.0.10:6379 --min-nodes 3 --timeout 120
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayfleet.errors import ClusterWaitTimeout, RayfleetError
from rayfleet.raynode import auth_env

# Ray adds these bookkeeping resources to every node; they are not capacity.
_INTERNAL_PREFIXES = ("node:",)


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    node_ip: str
    state: str
    is_head: bool = False
    node_name: str = ""
    resources: Mapping[str, float] = field(default_factory=dict)
    start_time_ms: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.state == "ALIVE"

    @property
    def name(self) -> str:
        """Ray's node name: its IP unless it was started with another (a host's node instances)."""
        return self.node_name or self.node_ip

    @property
    def admitted(self) -> bool:
        """Whether it passed its admission checks before its Ray started (rayfleet.admission's label)."""
        from rayfleet.admission import LABEL_KEY, LABEL_PASSED

        return self.labels.get(LABEL_KEY) == LABEL_PASSED

    @classmethod
    def from_state(cls, node: Any) -> NodeInfo:
        """From a ray.util.state NodeState (or its dict form)."""
        get = node.get if isinstance(node, Mapping) else lambda k, d=None: getattr(node, k, d)
        total = get("resources_total") or {}
        resources = {k: float(v) for k, v in total.items() if not k.startswith(_INTERNAL_PREFIXES)}
        return cls(
            node_id=str(get("node_id")),
            node_ip=str(get("node_ip")),
            state=str(get("state")),
            is_head=bool(get("is_head_node", False)),
            node_name=str(get("node_name") or ""),
            resources=resources,
            start_time_ms=int(get("start_time_ms") or 0),
            labels={str(k): str(v) for k, v in (get("labels") or {}).items()},
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["resources"] = dict(sorted(self.resources.items()))
        data["labels"] = dict(sorted(self.labels.items()))
        return data


@dataclass(frozen=True)
class ClusterState:
    nodes: tuple[NodeInfo, ...]

    @property
    def alive(self) -> list[NodeInfo]:
        return [n for n in self.nodes if n.alive]

    def totals(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for node in self.alive:
            for key, value in node.resources.items():
                total[key] = total.get(key, 0.0) + value
        return dict(sorted(total.items()))

    def alive_by_ip(self) -> dict[str, NodeInfo]:
        """The newest alive node per IP (a restarted node leaves a DEAD record behind)."""
        out: dict[str, NodeInfo] = {}
        for node in sorted(self.alive, key=lambda n: n.start_time_ms):
            out[node.node_ip] = node
        return out

    def alive_by_name(self) -> dict[str, NodeInfo]:
        """The newest alive node per node name (Ray's --node-name, which is the node's IP unless set): the key of
        a host's several node instances (ray_node_instances), which share its IP."""
        out: dict[str, NodeInfo] = {}
        for node in sorted(self.alive, key=lambda n: n.start_time_ms):
            out[node.node_name or node.node_ip] = node
        return out

    def alive_node(self, ip: str, name: str | None = None) -> NodeInfo | None:
        """The alive node named ``name`` when given (one instance of a host's several), else the newest with ``ip``."""
        return self.alive_by_name().get(name) if name else self.alive_by_ip().get(ip)

    def to_dict(self) -> dict[str, Any]:
        totals = self.totals()
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "alive_nodes": len(self.alive),
            "dead_nodes": len(self.nodes) - len(self.alive),
            "total_resources": totals,
            "gpus": totals.get("GPU", 0.0),
            "cpus": totals.get("CPU", 0.0),
            # the alive nodes by name: proved at admission before their Ray started, or started otherwise
            "admitted_nodes": sorted({n.name for n in self.alive if n.admitted}),
            "unadmitted_nodes": sorted({n.name for n in self.alive if not n.admitted}),
        }

    def joined(self, expected: Mapping[str, str]) -> list[str]:
        """The alive nodes (by name) that are none of ``expected``'s (IP or node name -> inventory name): nodes that
        joined from outside the inventory (the autoscaler's, a spot replacement)."""
        return sorted({n.name for n in self.alive if n.name not in expected and n.node_ip not in expected})


Fetcher = Callable[[], Iterable[Any]]


def state_api_fetcher(address: str, timeout: int = 10, auth_token_path: str | None = None) -> Fetcher:
    """A fetcher that lists nodes through Ray's state API at the head's dashboard address.

    With ``auth_token_path`` the requests carry the cluster's Ray token (RAY_AUTH_MODE=token).
    """
    if auth_token_path:
        os.environ.update(auth_env(auth_token_path))

    def fetch() -> list[Any]:
        try:
            from ray.util.state import list_nodes
        except ImportError as exc:  # pragma: no cover - depends on the node's venv
            raise RayfleetError(f"cannot import ray.util.state ({exc}); install ray[default] in this venv") from exc
        return list_nodes(address=address, detail=True, limit=10000, timeout=timeout,
                          raise_on_missing_output=False)

    return fetch


def _enum_name(message: Any, enum: str, value: int) -> str:
    """The name of a protobuf enum value of message's type (its number as text when the enum is unknown)."""
    kind = getattr(type(message), enum, None)
    try:
        return kind.Name(value) if kind is not None else str(value)
    except (ValueError, AttributeError):
        return str(value)


def gcs_node(info: Any) -> dict[str, Any]:
    """One GcsNodeInfo (Ray's protobuf) as the state API's node fields, and whether the node is draining (its
    state_snapshot, which the raylet reports) and why a dead node died (its death_info)."""
    state = type(info).GcsNodeState.Name(info.state) if hasattr(type(info), "GcsNodeState") else (
        "ALIVE" if info.state == 0 else "DEAD")
    snapshot = getattr(info, "state_snapshot", None)
    death = getattr(info, "death_info", None)
    return {
        "node_id": bytes(info.node_id).hex(),
        "node_ip": info.node_manager_address,
        "state": state,
        "is_head_node": bool(info.is_head_node),
        "node_name": info.node_name,
        "resources_total": dict(info.resources_total),
        "start_time_ms": int(info.start_time_ms),
        "labels": dict(getattr(info, "labels", {}) or {}),
        "draining": snapshot is not None and _enum_name(snapshot, "State", snapshot.state) == "DRAINING",
        "death_reason": _enum_name(death, "Reason", death.reason) if death is not None and death.reason else "",
        "death_reason_message": str(getattr(death, "reason_message", "") or "") if death is not None else "",
    }


def gcs_fetcher(address: str, timeout: int = 10, auth_token_path: str | None = None) -> Fetcher:
    """A fetcher that reads the node table from the cluster's GCS (``host:port``), with the cluster's Ray token
    when ``auth_token_path`` is given. Only the GCS port has to be reachable."""
    if auth_token_path:
        os.environ.update(auth_env(auth_token_path))

    def fetch() -> list[Any]:
        try:
            from ray._raylet import GcsClient
        except ImportError as exc:  # pragma: no cover - depends on the node's venv
            raise RayfleetError(f"cannot import Ray's GCS client ({exc}); is ray installed in this venv?") from exc
        infos = GcsClient(address=address).get_all_node_info(timeout=timeout)
        return [gcs_node(info) for info in infos.values()]

    return fetch


def fetcher(address: str, timeout: int = 10, auth_token_path: str | None = None) -> Fetcher:
    """The state API for an ``http(s)://`` dashboard address, else the GCS at ``host:port``."""
    if address.startswith(("http://", "https://")):
        return state_api_fetcher(address, timeout=timeout, auth_token_path=auth_token_path)
    return gcs_fetcher(address, timeout=timeout, auth_token_path=auth_token_path)


def get_state(fetch: Fetcher) -> ClusterState:
    return ClusterState(tuple(NodeInfo.from_state(n) for n in fetch()))


def missing_hosts(state: ClusterState, expected: Mapping[str, str]) -> list[str]:
    """Inventory names (values of ``expected``: ip or node name -> name) with no alive node of that IP or name (a
    host's node instances are expected by their node names, ``<ip>/<instance>``)."""
    alive = set(state.alive_by_ip()) | set(state.alive_by_name())
    return sorted(name for key, name in expected.items() if key not in alive)


def lacking_resources(node: NodeInfo, want: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """Resources whose reported amount differs from the wanted one: name -> (wanted, found)."""
    return {k: (float(v), node.resources.get(k, 0.0)) for k, v in want.items()
            if abs(node.resources.get(k, 0.0) - float(v)) > 1e-6}


def wait_for(
    fetch: Fetcher,
    *,
    min_nodes: int = 0,
    min_gpus: float = 0,
    expected: Mapping[str, str] | None = None,
    max_missing: int = 0,
    timeout: float = 120,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ClusterState:
    """Poll until at least ``min_nodes`` alive nodes, ``min_gpus`` GPUs, and every expected IP is alive (all but
    ``max_missing`` of them, for a check that may go on without some: it names them, ``missing_hosts``).

    ``expected`` maps node IP -> inventory host name, so a timeout names the hosts that never joined.
    """
    expected = dict(expected or {})
    deadline = clock() + timeout
    last_error: Exception | None = None
    state: ClusterState | None = None
    while True:
        try:
            state = get_state(fetch)
            last_error = None
            missing = missing_hosts(state, expected)
            if (len(state.alive) >= min_nodes and state.totals().get("GPU", 0.0) >= min_gpus
                    and len(missing) <= max_missing):
                return state
        except Exception as exc:  # the head may still be starting: keep polling until the deadline
            last_error = exc
        if clock() >= deadline:
            break
        sleep(interval)
    if state is None:
        raise ClusterWaitTimeout(
            f"could not read the cluster state in {timeout:g} s: {last_error}. "
            "Is the head up, and its GCS (ray_gcs_port) or dashboard (ray_dashboard_port, on the head's loopback by "
            "default) reachable from here?")
    parts = [f"{len(state.alive)} alive node(s) (wanted >= {min_nodes})"]
    gpus = state.totals().get("GPU", 0.0)
    if min_gpus:
        parts.append(f"{gpus:g} GPU(s) (wanted >= {min_gpus:g})")
    missing = missing_hosts(state, expected)
    if missing:
        parts.append("not registered alive: " + ", ".join(
            f"{name} ({ip})" for ip, name in sorted(expected.items()) if name in missing)
            + (f" (at most {max_missing} may be missing)" if max_missing else ""))
    if last_error is not None:
        parts.append(f"last error: {last_error}")
    raise ClusterWaitTimeout(f"cluster not ready after {timeout:g} s: " + "; ".join(parts) +
                             ". Check 'journalctl -u ray-worker' on the missing hosts.", state)


def format_table(state: ClusterState) -> str:
    rows = [("NODE_IP", "STATE", "HEAD", "CPU", "GPU", "NODE_ID")]
    for n in sorted(state.nodes, key=lambda n: (not n.is_head, n.node_ip, n.start_time_ms)):
        rows.append((n.node_ip, n.state, "yes" if n.is_head else "", f"{n.resources.get('CPU', 0):g}",
                     f"{n.resources.get('GPU', 0):g}", n.node_id[:12]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    totals = state.totals()
    lines.append(f"alive: {len(state.alive)}/{len(state.nodes)}  CPU: {totals.get('CPU', 0):g}  "
                 f"GPU: {totals.get('GPU', 0):g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True,
                        help="the cluster's GCS (host:port, e.g. 10.0.0.10:6379) or the head's dashboard URL "
                             "(e.g. http://127.0.0.1:8265)")
    parser.add_argument("--min-nodes", type=int, default=0)
    parser.add_argument("--min-gpus", type=float, default=0)
    parser.add_argument("--timeout", type=float, default=0, help="wait up to this many seconds (0: no wait)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--auth-token-path", help="the cluster's Ray token file (clusters with token auth)")
    args = parser.parse_args(argv)
    fetch = fetcher(args.address, auth_token_path=args.auth_token_path)
    try:
        state = wait_for(fetch, min_nodes=args.min_nodes, min_gpus=args.min_gpus, timeout=args.timeout)
    except RayfleetError as exc:
        print(f"rayfleet.cluster: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(state.to_dict(), indent=2) if args.json else format_table(state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
