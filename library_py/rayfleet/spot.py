# SPDX-License-Identifier: GPL-3.0-or-later
"""Preemption watcher: poll the cloud's interruption notice and drain this Ray node before it disappears.

Runs on spot/preemptible nodes as ``rayfleet-preemption.service`` (the ``preemption`` role), as the Ray user.

  aws  IMDSv2: PUT /latest/api/token, then GET /latest/meta-data/spot/instance-action
       (404: no notice; 200: {"action": "terminate"|"stop"|"hibernate", "time": "2026-11-23T17:02:00Z"})
  gcp  GET /computeMetadata/v1/instance/preempted with Metadata-Flavor: Google ("TRUE" once preempted;
       GCE gives about 30 s)

On a notice it asks Ray's GCS to drain this node (``ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION`` with
the seconds left until the deadline), so Ray stops scheduling onto it and reschedules work, logs what it did,
and stays up without draining again.

Examples:
  python -m rayfleet.spot --config /etc/rayfleet/ray-worker.json --provider aws
  python -m rayfleet.spot --config ... --provider aws --metadata-url http://127.0.0.1:8111 --once
  python -m rayfleet.spot --config /etc/rayfleet/ray-worker-gpu0.json --config /etc/rayfleet/ray-worker-gpu1.json ...
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from rayfleet.cluster import gcs_fetcher, get_state
from rayfleet.errors import RayfleetError
from rayfleet.raynode import RayNodeSettings, load_settings, split_address

DEFAULT_URLS = {"aws": "http://169.254.169.254", "gcp": "http://metadata.google.internal"}
GCP_NOTICE_S = 30  # GCE's preemption notice
REASON = "DRAIN_NODE_REASON_PREEMPTION"


@dataclass(frozen=True)
class Notice:
    provider: str
    action: str
    deadline_s: int  # seconds left when the notice was read
    detail: str


def _open(req: urllib.request.Request, timeout: float):
    return urllib.request.urlopen(req, timeout=timeout)  # the metadata endpoint only


def aws_notice(base_url: str, timeout: float = 2.0, now: Callable[[], dt.datetime] | None = None) -> Notice | None:
    """The spot interruption notice through IMDSv2, or None when there is none."""
    now = now or (lambda: dt.datetime.now(dt.timezone.utc))
    token_req = urllib.request.Request(f"{base_url}/latest/api/token", method="PUT",
                                       headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"})
    with _open(token_req, timeout) as resp:
        token = resp.read().decode()
    req = urllib.request.Request(f"{base_url}/latest/meta-data/spot/instance-action",
                                 headers={"X-aws-ec2-metadata-token": token})
    try:
        with _open(req, timeout) as resp:
            body = resp.read().decode()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    data = json.loads(body)
    when = dt.datetime.fromisoformat(str(data["time"]).replace("Z", "+00:00"))
    left = max(0, int((when - now()).total_seconds()))
    return Notice("aws", str(data.get("action", "terminate")), left, body.strip())


def gcp_notice(base_url: str, timeout: float = 2.0) -> Notice | None:
    req = urllib.request.Request(f"{base_url}/computeMetadata/v1/instance/preempted",
                                 headers={"Metadata-Flavor": "Google"})
    with _open(req, timeout) as resp:
        body = resp.read().decode().strip()
    return Notice("gcp", "preempted", GCP_NOTICE_S, body) if body.upper() == "TRUE" else None


def node_id_of(settings: RayNodeSettings) -> str:
    """This node's id, from the cluster's GCS node table: the alive node of this settings file's node name (one of a
    host's node instances), else of its IP."""
    fetch = gcs_fetcher(settings.gcs_address, auth_token_path=settings.auth_token_path)
    node = get_state(fetch).alive_node(settings.node_ip, settings.node_name)
    if node is None:
        which = f"named {settings.node_name}" if settings.node_name else f"with IP {settings.node_ip}"
        raise RayfleetError(f"no alive Ray node {which} in the cluster at {settings.gcs_address}")
    return node.node_id


def drain_command(settings: RayNodeSettings, node_id: str, notice: Notice) -> list[str]:
    gcs = (settings.head_address or "") if settings.role == "worker" else f"{settings.node_ip}:{settings.ports.gcs}"
    host, port = split_address(gcs, settings.ports.gcs)
    return [settings.ray_bin, "drain-node", f"--address={host}:{port}", f"--node-id={node_id}",
            f"--reason={REASON}",
            f"--reason-message={notice.provider} {notice.action} notice: {notice.detail}"[:500],
            f"--deadline-remaining-seconds={notice.deadline_s}"]


def drain(settings: RayNodeSettings, notice: Notice) -> str:
    node_id = node_id_of(settings)
    cmd = drain_command(settings, node_id, notice)
    proc = subprocess.run(cmd, env=settings.process_env(), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RayfleetError(f"ray drain-node failed (rc={proc.returncode}): {proc.stderr.strip()[-500:]}")
    return node_id


def drainer(nodes: list[RayNodeSettings], drain_one: Callable[[RayNodeSettings, Notice], str] = drain
            ) -> Callable[[Notice], str]:
    """Drain every node of this host (its node instances, ray_node_instances) on a notice; a retry drains only those
    that failed before."""
    left = list(nodes)

    def on_notice(notice: Notice) -> str:
        done, errors = [], []
        for settings in list(left):
            try:
                done.append(drain_one(settings, notice))
            except RayfleetError as exc:
                errors.append(f"{settings.node_name or settings.node_ip}: {exc}")
            else:
                left.remove(settings)
        if errors:
            raise RayfleetError("; ".join(errors) + (f" (drained: {', '.join(done)})" if done else ""))
        return ", ".join(done)

    return on_notice


def watch(read_notice: Callable[[], Notice | None], on_notice: Callable[[Notice], str], interval: float, *,
          log: Callable[[str], None], sleep: Callable[[float], None] = time.sleep, once: bool = False) -> int:
    """Poll until a notice arrives, drain once, then idle. Metadata errors are logged and retried."""
    while True:
        try:
            notice = read_notice()
        except (OSError, ValueError, KeyError) as exc:
            log(f"metadata read failed (retrying): {exc}")
            notice = None
        if notice is not None:
            log(f"interruption notice: {notice.provider} {notice.action}, {notice.deadline_s} s left ({notice.detail})")
            try:
                node_id = on_notice(notice)
            except RayfleetError as exc:
                log(f"drain failed (retrying): {exc}")
            else:
                log(f"drained Ray node {node_id} (reason {REASON}, deadline {notice.deadline_s} s); "
                    "Ray schedules no new work here and moves what it can")
                return 0
        if once:
            return 1
        sleep(interval)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.spot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, action="append",
                        help="this node's settings file (/etc/rayfleet/ray-<role>.json); once per node instance of a "
                        "host that runs several")
    parser.add_argument("--provider", choices=sorted(DEFAULT_URLS), required=True)
    parser.add_argument("--metadata-url", help="the metadata endpoint (default: the provider's)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between polls")
    parser.add_argument("--once", action="store_true", help="poll once: exit 0 after a drain, 1 without a notice")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(f"rayfleet.spot: {msg}", flush=True)

    try:
        nodes = [load_settings(path) for path in args.config]
    except RayfleetError as exc:
        log(str(exc))
        return 2
    url = (args.metadata_url or DEFAULT_URLS[args.provider]).rstrip("/")
    read = (lambda: aws_notice(url)) if args.provider == "aws" else (lambda: gcp_notice(url))
    log(f"watching {args.provider} interruption notices at {url} every {args.interval:g} s for node(s) "
        + ", ".join(n.node_name or n.node_ip for n in nodes))
    rc = watch(read, drainer(nodes), args.interval, log=log, once=args.once)
    if rc == 0 and not args.once:
        # Drained: stay up (systemd shows the drain in this unit's journal), never drain twice.
        while True:
            time.sleep(3600)
    return rc


if __name__ == "__main__":
    sys.exit(main())
