# SPDX-License-Identifier: GPL-3.0-or-later
"""Admission: a Ray node proves itself on its host before its raylet starts, so it never gets work unproved.

``rayfleet.raynode exec`` (what every Ray unit runs, on a node converged by ``site.yml`` and on one booted from a
baked image alike) runs these checks in a child process before ``ray start``, at every start and restart:

  gpu       NVML (rayfleet.gpu): at least as many GPUs as the node is given (num_gpus: the plan's ray_num_gpus, or
            the launch file's), none with uncorrected ECC errors, failed or pending row remapping, a narrowed PCIe
            link or an NVLink link down; not applicable on a host without GPUs where the node is given none.
  dcgm      DCGM's level-1 diagnostic (``dcgmi diag -r 1``), where DCGM is installed and the host has NVIDIA GPUs.
  nccl      NCCL bootstraps under the node's environment, on the node's Ray address (rayfleet.nccl), where the host
            has NVIDIA GPUs.
  storage   the shared storage the shared_storage role mounts here is mounted and takes a write as the Ray user
            (rayfleet.storage); not applicable where none is configured, or while its server does not answer.
  versions  a worker's Ray and Python are the head's (the cluster's metadata in the head's GCS), and its node library
            is the head's (the digest the head publishes when it starts; a new library restarts the head).
  link      a worker's link, pair-tested against a node already proved (rayfleet.link): an all-reduce with one rank
            here and one on a proved node of another host, reached as a Ray client, at no less than the settings'
            ratio of two proved nodes' figure; run last, and only when the checks above pass.

A node that passes starts with the Ray node label ``rayfleet.io/admission=passed``, which the preflight's verdict
reads. A node whose checks fail does not start: ``rayfleet.raynode exec`` exits REFUSED, which the unit's
RestartPreventExitStatus keeps from restarting, so the node stays out of the cluster until the cause is fixed and the
unit is started again (``site.yml`` does). The reason is printed to the unit's journal and recorded in the node's
admission file (``<temp_dir>/rayfleet-admission.json``: time, verdict, each check); the health timer, which the unit
starts when it fails, exports it as ``rayfleet_admission_ok{check, node, rayfleet_cluster}``.

A worker that cannot reach its head's GCS yet exits UNREACHABLE: that is no verdict on the node, and the unit tries
again after its restart delay, as it does when ``ray start`` finds no head. A shared-storage server that does not
answer is the cluster's fault, not the node's: the storage check does not apply then (the preflight's gate shuts).

Examples (on a node, in the Ray venv, as the Ray user):
  python -m rayfleet.admission --config /etc/rayfleet/ray-worker.json            # check, print, record
  python -m rayfleet.admission --config /etc/rayfleet/ray-worker.json --json --no-record
  python -m rayfleet.admission --config /etc/rayfleet/ray-head.json --publish --publish-wait 0   # the head
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rayfleet.errors import RayfleetError
from rayfleet.health import FAILED, NOT_APPLICABLE, OK
from rayfleet.health import CheckResult as Check
from rayfleet.raynode import RayNodeSettings, auth_env, load_settings, split_address

RECORD_NAME = "rayfleet-admission.json"
# The node library's digest in the head's GCS (its internal key-value store)
KV_NAMESPACE = b"rayfleet"
KV_LIBRARY_KEY = b"node_library"
# Ray's own record of the cluster's Ray and Python versions (ray._common.usage: CLUSTER_METADATA_KEY in the "cluster"
# namespace), which the head writes when it starts
KV_CLUSTER_NAMESPACE = b"cluster"
KV_CLUSTER_METADATA = b"CLUSTER_METADATA"
GCS_TIMEOUT_S = 10
CONNECT_TIMEOUT_S = 3
PUBLISH_WAIT_S = 120
# A head publishes its library digest a second or two after its GCS answers: a worker that starts with it asks
# again, once a second, this many times before it compares Ray and Python only
LIBRARY_WAIT_TRIES = 20
# The Ray node label a node admitted here starts with (ray start --labels): the preflight's verdict and the submit
# gate tell a proved node from one started otherwise
LABEL_KEY = "rayfleet.io/admission"
LABEL_PASSED = "passed"
# Exit status of the checks' child process and of rayfleet.raynode exec
PASSED, REFUSED, UNREACHABLE = 0, 3, 75


class Unavailable(RayfleetError):
    """What the checks need from another host (the head's GCS) does not answer yet: no verdict on this node, which
    tries again."""


class HeadUnreachable(Unavailable):
    """The head's GCS does not answer yet."""


def library_digest(root: Path | None = None) -> str:
    """sha256 over the node library's Python files (their paths and contents): equal on two nodes exactly when
    they run the same library."""
    root = root or Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def local_versions() -> dict[str, str]:
    """This node's Ray, Python and node library."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ray_version = version("ray")
    except PackageNotFoundError:
        ray_version = ""
    return {"ray": ray_version, "python": ".".join(map(str, sys.version_info[:3])), "library": library_digest()}


# ---- the head's GCS ------------------------------------------------------------------------------------------

def _gcs_client(settings: RayNodeSettings) -> Any:
    host, port = split_address(settings.gcs_address, settings.ports.gcs)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise HeadUnreachable(f"the head's GCS at {settings.gcs_address} does not answer ({exc})") from None
    os.environ.update(auth_env(settings.auth_token_path))
    try:
        from ray._raylet import GcsClient
    except ImportError as exc:  # pragma: no cover - depends on the node's venv
        raise RayfleetError(f"cannot import Ray's GCS client ({exc}); is ray installed in this venv?") from exc
    return GcsClient(address=settings.gcs_address)


def head_versions(settings: RayNodeSettings) -> dict[str, str | None]:
    """The head's Ray and Python (Ray's cluster metadata) and node library digest (None: the head published none)."""
    client = _gcs_client(settings)
    try:
        raw = client.internal_kv_get(KV_CLUSTER_METADATA, KV_CLUSTER_NAMESPACE, timeout=GCS_TIMEOUT_S)
        library = client.internal_kv_get(KV_LIBRARY_KEY, KV_NAMESPACE, timeout=GCS_TIMEOUT_S)
    except Exception as exc:  # Ray raises its own RPC errors: the head is up but does not answer in time
        raise HeadUnreachable(f"the head's GCS at {settings.gcs_address} did not answer: {exc}") from None
    try:
        meta = json.loads(raw) if raw else {}
    except ValueError:
        meta = {}
    published = json.loads(library) if library else {}
    return {"ray": meta.get("ray_version"), "python": meta.get("python_version"),
            "library": published.get("digest") if isinstance(published, dict) else None}


def publish(settings: RayNodeSettings, wait_s: float = PUBLISH_WAIT_S, sleep: Callable[[float], None] = time.sleep
            ) -> str:
    """The head: put its node library's digest into its GCS, for joining workers to compare with; waits for the
    GCS to come up (at most wait_s)."""
    if settings.role != "head":
        raise RayfleetError("--publish: only the head publishes its node library")
    value = json.dumps({"digest": library_digest(), "published": time.time()}).encode()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            client = _gcs_client(settings)
            client.internal_kv_put(KV_LIBRARY_KEY, value, True, KV_NAMESPACE, timeout=GCS_TIMEOUT_S)
            return f"published the node library digest {library_digest()[:12]} at {settings.gcs_address}"
        except Exception as exc:  # the GCS is still starting
            if time.monotonic() >= deadline:
                kind = HeadUnreachable if isinstance(exc, HeadUnreachable) else RayfleetError
                raise kind(f"could not publish the node library at {settings.gcs_address} in {wait_s:g} s: "
                           f"{exc}") from None
            sleep(1.0)


# ---- the checks ----------------------------------------------------------------------------------------------

def gpu_check(settings: RayNodeSettings, vendor: str, report: Any) -> Check:
    from rayfleet.gpu import problems

    given = settings.num_gpus or 0
    if not report.available:
        if given:
            return Check("gpu", FAILED, f"the node is given {given} GPU(s) (num_gpus), but {report.reason}")
        return Check("gpu", NOT_APPLICABLE, report.reason)
    count = len(report.gpus)
    if not count and not given:
        return Check("gpu", NOT_APPLICABLE, "no GPU on this host")
    bad, _warnings = problems(report)
    if count < given:
        bad.insert(0, f"{vendor} sees {count} GPU(s), the node is given {given} (num_gpus)")
    if bad:
        return Check("gpu", FAILED, "; ".join(bad))
    return Check("gpu", OK, f"{vendor}: {count} GPU(s)" + (f", {given} given to this node" if given else ""))


def dcgm_check(vendor: str, report: Any) -> Check:
    from rayfleet import dcgm

    if vendor != "nvidia" or not report.available or not report.gpus:
        return Check("dcgm", NOT_APPLICABLE, "no NVIDIA GPU on this host")
    if not dcgm.installed():
        return Check("dcgm", NOT_APPLICABLE, "DCGM is not installed on this host")
    result, why = dcgm.run_diag(1, dcgm.TIMEOUTS[1])
    if result is None:
        return Check("dcgm", FAILED, why)
    bad, _warn = dcgm.diag_findings(result, {g.index: g.uuid for g in report.gpus}, 1)
    return Check("dcgm", FAILED, "; ".join(bad)) if bad else Check("dcgm", OK, "DCGM diag -r 1 passed")


def nccl_check(config: str, vendor: str, report: Any) -> Check:
    from rayfleet import nccl

    if vendor != "nvidia" or not report.available or not report.gpus:
        return Check("nccl", NOT_APPLICABLE, "no NVIDIA GPU on this host")
    result = nccl.probe_as_node(config)
    if result.get("ok"):
        return Check("nccl", OK, f"NCCL {result.get('version', '?')} bootstraps on {result.get('node_ip')}")
    return Check("nccl", FAILED, str(result.get("reason") or "the NCCL probe failed"))


def storage_check() -> Check:
    """The shared storage as the health check probes it. A server that does not answer is the cluster's fault, not
    this node's: the check does not apply then (a node boots and joins with its NFS server down, and the preflight's
    gate shuts until the server answers); a mount of a server that answers must be there and take a write."""
    from rayfleet import storage
    from rayfleet.health import storage_check as probe

    try:
        config = storage.load_config()
    except RayfleetError:
        config = None  # the probe says why it cannot read the record
    for mount in config.mounts if config else []:
        reachable, why = storage.tcp_reachable(mount.server, config.port, config.timeout)
        if not reachable:
            return Check("storage", NOT_APPLICABLE, f"{mount.path}: the shared storage's server does not answer "
                         f"({why}): the cluster's storage is down, not this node (the preflight's gate shuts until it "
                         "answers)")
    found = probe()
    return Check("storage", found.state, found.reason)


def versions_check(settings: RayNodeSettings, mine: Mapping[str, str],
                   theirs: Callable[[RayNodeSettings], Mapping[str, str | None]],
                   sleep: Callable[[float], None] = time.sleep) -> Check:
    if settings.role == "head":
        return Check("versions", NOT_APPLICABLE, f"the head is the cluster's reference (Ray {mine['ray']})")
    head = theirs(settings)  # HeadUnreachable propagates: no verdict
    for _attempt in range(LIBRARY_WAIT_TRIES):
        if head.get("library"):
            break
        sleep(1.0)  # a head that started moments ago publishes once its GCS answers
        head = theirs(settings)
    bad = []
    for what, name in (("ray", "Ray"), ("python", "Python")):
        if head.get(what) and head[what] != mine[what]:
            bad.append(f"{name} {mine[what]} here, {head[what]} on the head")
    if head.get("library") and head["library"] != mine["library"]:
        bad.append(f"node library {mine['library'][:12]} here, {str(head['library'])[:12]} on the head (a "
                   "different rayfleet release, or an edited library: run site.yml, or bake the image again)")
    if bad:
        return Check("versions", FAILED, "; ".join(bad))
    note = "" if head.get("library") else "; the head published no node library digest"
    return Check("versions", OK, f"Ray {mine['ray']}, Python {mine['python']} as on the head{note}")


def link_check(settings: RayNodeSettings) -> tuple[Check, dict[str, Any]]:
    """The worker's link, pair-tested against a proved node (rayfleet.link); raises HeadUnreachable when the
    cluster's Ray client server does not answer (no verdict)."""
    from rayfleet import link

    try:
        state, reason, details = link.check(settings)
    except link.NotApplicable as exc:
        return Check("link", NOT_APPLICABLE, str(exc)), {}
    except link.Unreachable as exc:
        raise HeadUnreachable(str(exc)) from None
    return Check("link", state, reason), details


def _read_gpus() -> tuple[str, Any]:
    from rayfleet.gpu import read_gpus

    return read_gpus("auto")


@dataclass
class Environment:
    """What the checks read; replaced by fakes in tests."""

    read_gpus: Callable[[], tuple[str, Any]] = _read_gpus
    dcgm: Callable[[str, Any], Check] = dcgm_check
    nccl: Callable[[str, str, Any], Check] = nccl_check
    storage: Callable[[], Check] = storage_check
    versions: Callable[[], Mapping[str, str]] = local_versions
    head_versions: Callable[[RayNodeSettings], Mapping[str, str | None]] = head_versions
    link: Callable[[RayNodeSettings], tuple[Check, dict[str, Any]]] = link_check
    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep


def admit(config: str, settings: RayNodeSettings, env: Environment) -> dict[str, Any]:
    """Every check once, in order; the record the node's admission file holds. Raises Unavailable when a worker's
    head does not answer (no verdict)."""
    vendor, report = env.read_gpus()
    checks: list[Check] = [gpu_check(settings, vendor, report), env.dcgm(vendor, report),
                           env.nccl(config, vendor, report), env.storage()]
    mine = dict(env.versions())
    checks.append(versions_check(settings, mine, env.head_versions, env.sleep))
    # Last, and only for a node the other checks pass: it takes seconds, and needs the head's Ray and library
    link: dict[str, Any] = {}
    if any(c.failed for c in checks):
        checks.append(Check("link", NOT_APPLICABLE, "not run: the node is refused on the checks above"))
    else:
        found, link = env.link(settings)
        checks.append(found)
    now = env.now()
    return {
        "time": dt.datetime.fromtimestamp(now, dt.timezone.utc).replace(microsecond=0).isoformat().replace(
            "+00:00", "Z"),
        "timestamp": round(now, 3),
        "node": settings.node_name or settings.node_ip,
        "role": settings.role,
        "config": config,
        "ok": not any(c.failed for c in checks),
        "checks": [c.to_dict() for c in checks],
        "versions": mine,
        "link": link,
    }


def record_path(settings: RayNodeSettings) -> Path:
    return Path(settings.temp_dir) / RECORD_NAME


def write_record(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def read_record(settings: RayNodeSettings) -> dict[str, Any] | None:
    try:
        data = json.loads(record_path(settings).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def failures(record: Mapping[str, Any]) -> list[str]:
    return [f"{c['name']}: {c['reason']}" for c in record.get("checks") or [] if not c.get("ok")]


def summary(record: Mapping[str, Any]) -> str:
    lines = [f"{record['node']} ({record['role']}): {'admitted' if record['ok'] else 'REFUSED'}"]
    lines += [f"  {c['name']}: {c['state']}" + (f" - {c['reason']}" if c["reason"] else "") for c in record["checks"]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.admission", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the node's settings file")
    parser.add_argument("--publish", action="store_true",
                        help="the head: publish its node library's digest in its GCS (waits for the GCS)")
    parser.add_argument("--publish-wait", type=float, default=PUBLISH_WAIT_S, metavar="S",
                        help=f"--publish: seconds to wait for the GCS (default {PUBLISH_WAIT_S}; 0: try once)")
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="write no admission file (a check by hand)")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")
    args = parser.parse_args(argv)

    def say(msg: str) -> None:
        print(f"rayfleet.admission: {msg}", file=sys.stderr, flush=True)

    try:
        settings = load_settings(args.config)
        if args.publish:
            say(publish(settings, args.publish_wait))
            return PASSED
        record = admit(args.config, settings, Environment())
    except Unavailable as exc:
        say(f"{exc}; no verdict yet, the unit tries again")
        return UNREACHABLE
    except RayfleetError as exc:
        say(str(exc))
        return 2
    if args.record:
        try:
            write_record(record_path(settings), record)
        except OSError as exc:
            say(f"cannot write the admission file {record_path(settings)}: {exc}")
    print(json.dumps(record, indent=2, sort_keys=True) if args.json else summary(record), flush=True)
    if not record["ok"]:
        say(f"{record['node']} refused: " + "; ".join(failures(record)))
    return PASSED if record["ok"] else REFUSED


if __name__ == "__main__":
    sys.exit(main())
