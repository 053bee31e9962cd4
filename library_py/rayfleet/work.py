# SPDX-License-Identifier: GPL-3.0-or-later
"""The work a Ray restart would end: running jobs, live actors and tasks holding resources, read from the cluster's
GCS (Ray's own job, actor and resource tables; only the GCS port has to be reachable).

A head restart ends every job of the cluster (the GCS keeps no state across a restart): its scope is the cluster. A
worker restart ends the drivers and actors on that node and the tasks running there: its scope is the node. Ray's
own bookkeeping (the dashboard's job, the job supervisors) and rayfleet's own short-lived checks (namespace
``_rayfleet``) are not work.

Examples:
  python -m rayfleet.work --address 10.0.0.10:6379                     # the cluster's running work
  python -m rayfleet.work --address 10.0.0.10:6379 --node-ip 10.0.0.11 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rayfleet.cluster import gcs_node
from rayfleet.errors import RayfleetError
from rayfleet.raynode import auth_env

# Ray's own jobs and actors (the dashboard agent's job, the Jobs API's supervisors) and rayfleet's admission checks
INTERNAL_NAMESPACES = ("_ray_internal", "SUPERVISOR_ACTOR_RAY_NAMESPACE", "_rayfleet")
NAMESPACE = "_rayfleet"
# ActorTableData.ActorState: DEPENDENCIES_UNREADY, PENDING_CREATION, ALIVE, RESTARTING, DEAD
LIVE_ACTOR_STATES = (0, 1, 2, 3)
# resources whose use by tasks and actors counts as work (memory and the object store are not held by a task)
HELD_RESOURCES = ("CPU", "GPU")
SCOPES = ("cluster", "node")


@dataclass(frozen=True)
class Job:
    job_id: str
    submission_id: str
    entrypoint: str
    driver_ip: str

    def label(self) -> str:
        name = f"job {self.submission_id}" if self.submission_id else f"driver job {self.job_id}"
        entry = self.entrypoint if len(self.entrypoint) <= 60 else self.entrypoint[:57] + "..."
        return f"{name} ({entry!r} on {self.driver_ip})" if entry else f"{name} (on {self.driver_ip})"


@dataclass(frozen=True)
class Actor:
    actor_id: str
    name: str
    class_name: str
    job_id: str
    node_ip: str

    def label(self) -> str:
        what = f"{self.class_name} {self.name!r}" if self.name else self.class_name or self.actor_id[:12]
        return f"actor {what} of job {self.job_id} on {self.node_ip}"


@dataclass
class Work:
    """What runs in the scope: ``node_ip`` empty for the whole cluster."""

    node_ip: str = ""
    jobs: list[Job] = field(default_factory=list)
    actors: list[Actor] = field(default_factory=list)
    # resource -> amount held by tasks and actors on the node (node scope only)
    held: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.jobs or self.actors or self.held)

    def describe(self) -> str:
        parts = [j.label() for j in self.jobs] + [a.label() for a in self.actors]
        if self.held:
            where = "" if any(" on " in k for k in self.held) else f" on {self.node_ip}"
            parts.append("tasks holding " + ", ".join(f"{v:g} {k}" for k, v in sorted(self.held.items())) + where)
        return "; ".join(parts) if parts else "nothing"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "idle": not self, "summary": self.describe()}


def _internal(namespace: str) -> bool:
    return namespace.startswith(INTERNAL_NAMESPACES)


def running_jobs(infos: Mapping[Any, Any], node_id: str | None = None) -> list[Job]:
    """The live jobs among GCS JobTableData entries (``node_id``: only those whose driver runs on that node)."""
    jobs = []
    for info in infos.values():
        if info.is_dead or _internal(info.config.ray_namespace):
            continue
        if node_id is not None and bytes(info.driver_address.node_id).hex() != node_id:
            continue
        jobs.append(Job(job_id=bytes(info.job_id).hex(),
                        submission_id=dict(info.config.metadata).get("job_submission_id", ""),
                        entrypoint=str(info.entrypoint), driver_ip=info.driver_address.ip_address
                        or info.driver_ip_address))
    return sorted(jobs, key=lambda j: j.job_id)


def live_actors(infos: Mapping[Any, Any], node_id: str | None = None) -> list[Actor]:
    """The live actors among GCS ActorTableData entries (``node_id``: only those placed on that node)."""
    actors = []
    for info in infos.values():
        if info.state not in LIVE_ACTOR_STATES or _internal(info.ray_namespace):
            continue
        if node_id is not None and bytes(info.node_id).hex() != node_id:
            continue
        actors.append(Actor(actor_id=bytes(info.actor_id).hex(), name=info.name, class_name=info.class_name,
                            job_id=bytes(info.job_id).hex(), node_ip=info.address.ip_address))
    return sorted(actors, key=lambda a: a.actor_id)


def held_resources(usage: Any, node_id: str) -> dict[str, float]:
    """CPU and GPU the node's tasks and actors hold (total minus available), from GetAllResourceUsageReply."""
    for batch in usage.resource_usage_data.batch:
        if bytes(batch.node_id).hex() != node_id:
            continue
        total, available = dict(batch.resources_total), dict(batch.resources_available)
        return {k: round(total[k] - available.get(k, 0.0), 6) for k in HELD_RESOURCES
                if total.get(k, 0.0) - available.get(k, 0.0) > 1e-6}
    return {}


def find_node(nodes: Iterable[Mapping[str, Any]], node_ip: str, node_name: str | None = None) -> str | None:
    """The node id of the alive node with this name (node instances) or, without one, this IP."""
    for node in nodes:
        if node["state"] != "ALIVE":
            continue
        if (node_name and node["node_name"] == node_name) or (not node_name and node["node_ip"] == node_ip):
            return node["node_id"]
    return None


def read_work(address: str, node_ip: str = "", node_name: str | None = None, timeout: int = 10,
              auth_token_path: str | None = None) -> Work:
    """The running work a restart would end: of the cluster (no ``node_ip``), else of that node. A node Ray does
    not list alive has none. Raises RayfleetError when the GCS does not answer."""
    if auth_token_path:
        os.environ.update(auth_env(auth_token_path))
    host, _sep, port = address.rpartition(":")
    try:  # Ray's own client waits half a minute for a GCS that is not there
        socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout, 5)).close()
    except (OSError, ValueError) as exc:
        raise RayfleetError(f"the GCS at {address} did not answer: {exc}") from exc
    try:
        from ray._raylet import GcsClient
    except ImportError as exc:  # pragma: no cover - depends on the node's venv
        raise RayfleetError(f"cannot import Ray's GCS client ({exc}); is ray installed in this venv?") from exc
    try:
        client = GcsClient(address=address)
        node_id = None
        if node_ip:
            nodes = [gcs_node(info) for info in client.get_all_node_info(timeout=timeout).values()]
            node_id = find_node(nodes, node_ip, node_name)
            if node_id is None:
                return Work(node_ip=node_ip)
        jobs = running_jobs(client.get_all_job_info(timeout=timeout), node_id)

        async def actors() -> Mapping[Any, Any]:
            return await client.async_get_all_actor_info(timeout=timeout)

        actor_infos = asyncio.run(actors())
        held = held_resources(client.get_all_resource_usage(timeout=timeout), node_id) if node_id else {}
    except RayfleetError:
        raise
    except Exception as exc:  # Ray raises its own RpcError, TimeoutError, ConnectionError
        raise RayfleetError(f"the GCS at {address} did not answer: {exc}") from exc
    return Work(node_ip=node_ip, jobs=jobs, actors=live_actors(actor_infos, node_id), held=held)


def settings_work(paths: Iterable[str], timeout: int = 10) -> list[Work]:
    """The work of the Ray nodes whose settings files (``/etc/rayfleet/ray-<role>.json``, the ray_node module's) are
    given: for a head the cluster's, for a worker its own node's - what a reboot of their host would end. Files that
    are not a node's settings are passed over."""
    from rayfleet.raynode import RayNodeSettings

    found = []
    for path in sorted(paths):
        try:
            with open(path) as f:
                settings = RayNodeSettings.from_mapping(json.load(f))
        except (OSError, ValueError, TypeError, RayfleetError):
            continue
        found.append(read_work(settings.gcs_address, "" if settings.role == "head" else settings.node_ip,
                               settings.node_name, timeout=timeout, auth_token_path=settings.auth_token_path))
    return found


def merged(works: Iterable[Work]) -> Work:
    """One Work of several nodes' (a host's): their jobs and actors, each once, and the resources held on each."""
    works = list(works)
    jobs = {j.job_id: j for w in works for j in w.jobs}
    actors = {a.actor_id: a for w in works for a in w.actors}
    held = {f"{k} on {w.node_ip}" if len(works) > 1 else k: v for w in works for k, v in w.held.items()}
    return Work(node_ip=",".join(sorted({w.node_ip for w in works if w.node_ip})),
                jobs=sorted(jobs.values(), key=lambda j: j.job_id),
                actors=sorted(actors.values(), key=lambda a: a.actor_id), held=held)


def wait_idle(read: Callable[[], Work], timeout: float, interval: float = 5.0,
              clock: Callable[[], float] | None = None, sleep: Callable[[float], None] | None = None) -> Work:
    """Read the work until there is none or ``timeout`` seconds passed; the last reading."""
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    deadline = clock() + timeout
    while True:
        work = read()
        if not work or clock() >= deadline:
            return work
        sleep(min(interval, max(0.0, deadline - clock())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.work",
                                     description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--address", required=True, help="the cluster's GCS, host:port")
    parser.add_argument("--node-ip", default="", help="only this node's work (a worker's restart)")
    parser.add_argument("--node-name", default=None)
    parser.add_argument("--auth-token-path", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        work = read_work(args.address, args.node_ip, args.node_name, auth_token_path=args.auth_token_path)
    except RayfleetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(work.to_dict(), indent=2, sort_keys=True) if args.json else work.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
