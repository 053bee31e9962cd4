# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared storage of a node, probed on the node without ever hanging on a dead server.

The mounts are those the shared_storage role manages here, as its record says (``/etc/rayfleet/shared-storage.json``:
each mount's path, server, export and type, the user that writes, the probe timeout, and whether the host mounts with
its kernel's NFS client). Each mount is probed by ``rayfleet.storage_probe``, the probe the
``rayfleet.cluster.storage_check`` module runs too, as the Ray user.

Examples (on a node, in the Ray venv, as root):
  python -m rayfleet.storage                  # one line per mount
  python -m rayfleet.storage --json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from rayfleet.errors import RayfleetError
from rayfleet.storage_probe import NFS_PORT, probe_mount, read_mountinfo, run_limited, tcp_reachable

__all__ = ["Mount", "MountResult", "StorageConfig", "check", "load_config", "run_limited", "tcp_reachable"]

RECORD = "/etc/rayfleet/shared-storage.json"


@dataclass(frozen=True)
class Mount:
    path: str
    server: str
    export: str = "/"
    type: str = "nfs"


@dataclass(frozen=True)
class StorageConfig:
    mounts: tuple[Mount, ...]
    user: str | None = None
    timeout: float = 5.0
    kernel_client: bool = True
    port: int = NFS_PORT


@dataclass(frozen=True)
class MountResult:
    path: str
    ok: bool
    reason: str = ""


def load_config(path: str | Path = RECORD) -> StorageConfig | None:
    """The shared_storage role's record of this host's mounts, or None when the host has none (no record)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RayfleetError(f"{path}: cannot be read ({exc}); re-run the storage stage (playbooks/storage.yml)"
                            ) from None
    if not isinstance(data, dict):
        raise RayfleetError(f"{path}: expected a JSON object; re-run the storage stage (playbooks/storage.yml)")
    paths = data.get("paths") or []
    mounts = data.get("mounts")
    if mounts is None:
        if paths:
            raise RayfleetError(f"{path} lists {', '.join(map(str, paths))} but not how to probe them (written by an "
                                "older rayfleet): re-run the storage stage (playbooks/storage.yml)")
        return StorageConfig(())
    try:
        found = tuple(Mount(str(m["path"]), str(m["server"]), str(m.get("export") or "/"), str(m.get("type") or "nfs"))
                      for m in mounts)
        return StorageConfig(found, user=data.get("user") or None, timeout=float(data.get("timeout") or 5.0),
                             kernel_client=bool(data.get("kernel_client", True)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RayfleetError(f"{path}: a mount without path or server ({exc}); re-run the storage stage") from None


def probe(mount: Mount, mountinfo: dict[str, tuple[str, str]], config: StorageConfig) -> MountResult:
    """One mount: ok, or why not (every problem found)."""
    found = probe_mount(asdict(mount), mountinfo, timeout=config.timeout, port=config.port, user=config.user,
                        kernel_client=config.kernel_client)
    return MountResult(found["path"], found["state"] == "ok", found["reason"])


def check(config: StorageConfig, mountinfo: dict[str, tuple[str, str]] | None = None) -> list[MountResult]:
    if not config.mounts:
        return []
    mountinfo = read_mountinfo() if mountinfo is None else mountinfo
    return [probe(mount, mountinfo, config) for mount in config.mounts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.storage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", default=RECORD, help=f"the shared_storage role's record (default {RECORD})")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.record)
    except RayfleetError as exc:
        print(f"rayfleet.storage: {exc}", file=sys.stderr)
        return 2
    results = check(config) if config else []
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    elif not results:
        print("no shared storage is configured on this host")
    for r in results if not args.json else []:
        print(f"{r.path}: {'ok' if r.ok else 'degraded'}{f' ({r.reason})' if r.reason else ''}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
