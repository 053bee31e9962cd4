# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared storage of a node, probed on the node without ever hanging on a dead server.

The mounts are those the shared_storage role manages here, as its record says (``/etc/rayfleet/shared-storage.json``:
each mount's path, server, export and type, the user that writes, the probe timeout, and whether the host mounts with
its kernel's NFS client). Each mount is probed as the ``rayfleet.cluster.storage_check`` module does (that module runs
with the host's own Python, before the Ray venv and this library exist):

- ``/proc/self/mountinfo`` says whether the path is mounted, and with which file system;
- the server's NFS port must accept a TCP connection;
- a mounted path must answer ``statvfs`` and take a write, read back and delete, as the Ray user, each in a child
  process killed after the timeout (a hard NFS mount whose server is gone blocks in the kernel);
- a path that is not mounted is probed at the NFS protocol level with libnfs' ``nfs-ls`` where it is installed; on a
  host without a kernel NFS client (the sandbox) that is all there is, and a server that answers is ok.

Examples (on a node, in the Ray venv, as root):
  python -m rayfleet.storage                  # one line per mount
  python -m rayfleet.storage --json
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from rayfleet.errors import RayfleetError

RECORD = "/etc/rayfleet/shared-storage.json"
NFS_PORT = 2049

_PROBE = r"""
import os, sys
path, write = sys.argv[1], sys.argv[2] == "1"
st = os.statvfs(path)
if write:
    name = os.path.join(path, ".rayfleet-probe-%s-%d" % (os.uname()[1], os.getpid()))
    data = os.urandom(64)
    with open(name, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    with open(name, "rb") as fh:
        ok = fh.read() == data
    os.unlink(name)
    if not ok:
        raise SystemExit("read back differs from what was written")
"""


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


def parse_mountinfo(text: str) -> dict[str, tuple[str, str]]:
    """mount point -> (fstype, source), the last mount on a point winning (as the kernel shows it)."""
    out = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        out[point] = (tail[0], tail[1])
    return out


def read_mountinfo() -> dict[str, tuple[str, str]]:
    return parse_mountinfo(Path("/proc/self/mountinfo").read_text())


def run_limited(argv: list[str], timeout: float, user: str | None = None) -> tuple[int, str]:
    """Run argv for at most timeout seconds, as user when given (and this is root); (rc, combined output).

    rc 124: no answer in time (the child is killed and left to the kernel, never waited for: it may be blocked on a
    dead NFS server); rc 127: it could not start."""
    kwargs: dict = {}
    if user and os.geteuid() == 0:
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            return 127, f"user {user} does not exist on this host"
        kwargs = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, cwd="/", start_new_session=True, **kwargs)
    except OSError as exc:
        return 127, str(exc)
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return 124, f"no answer in {timeout:g}s"
    return proc.returncode, (out or "").strip()


def tcp_reachable(server: str, port: int, timeout: float) -> tuple[bool, str]:
    try:
        with socket.create_connection((server, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, f"{server}:{port}: {exc or type(exc).__name__}"


def protocol_probe(mount: Mount, config: StorageConfig) -> str:
    """An NFSv4 READDIR of the export through libnfs (no kernel client needed): 'ok', an error, or 'not run (...)'."""
    nfs_ls = shutil.which("nfs-ls")
    if not nfs_ls:
        return "not run (nfs-ls from libnfs-utils is not installed)"
    query = f"version=4&nfsport={config.port}"
    if config.user:
        try:
            pw = pwd.getpwnam(config.user)
            query += f"&uid={pw.pw_uid}&gid={pw.pw_gid}"
        except KeyError:
            pass
    host = f"[{mount.server}]" if ":" in mount.server else mount.server
    export = mount.export if mount.export.startswith("/") else "/" + mount.export
    rc, out = run_limited([nfs_ls, f"nfs://{host}{export}?{query}"], config.timeout)
    if rc == 0:
        return "ok"
    lines = [line for line in out.splitlines() if line.strip()]
    return "error: " + (lines[-1] if lines else f"nfs-ls exited {rc}")


def probe(mount: Mount, mountinfo: dict[str, tuple[str, str]], config: StorageConfig) -> MountResult:
    """One mount: ok, or why not (every problem found)."""
    path = os.path.normpath(mount.path)
    fstype, source = mountinfo.get(path, ("", ""))
    mounted = path in mountinfo and (fstype.startswith("nfs") or fstype in ("efs", "fuse.nfs"))
    other_fs = path in mountinfo and not mounted
    problems = []
    note = ""
    if other_fs:
        problems.append(f"{path} is a {fstype} mount of {source}, not the NFS share")
    if mounted:
        rc, out = run_limited([sys.executable, "-c", _PROBE, path, "0"], config.timeout)
        if rc == 124:
            problems.append(f"mounted but not responding (statvfs blocked for {config.timeout:g}s)")
        elif rc != 0:
            problems.append("statvfs failed: " + (out.splitlines()[-1] if out else str(rc)))
        else:
            rc, out = run_limited([sys.executable, "-c", _PROBE, path, "1"], config.timeout, config.user)
            if rc != 0:
                why = f"no answer in {config.timeout:g}s" if rc == 124 else (out.splitlines() or [str(rc)])[-1]
                problems.append(f"not writable by {config.user or 'root'}: {why}")
    reachable, why = tcp_reachable(mount.server, config.port, config.timeout)
    if not reachable:
        problems.append(f"server unreachable ({why})")
    elif not mounted:
        protocol = protocol_probe(mount, config)
        protocol_ok = protocol == "ok" or (mount.type == "efs" and protocol.startswith("not run"))
        if not protocol_ok and not protocol.startswith("not run"):
            problems.append(f"server does not serve {mount.export}: {protocol}")
        if config.kernel_client and not other_fs:
            problems.append("not mounted")
        elif not config.kernel_client and protocol_ok:
            note = f"not mounted: this host has no kernel NFS client; the server answers NFSv4 for {mount.export}"
        elif not config.kernel_client and protocol.startswith("not run"):
            problems.append(f"not mounted and cannot be probed: {protocol}")
    if problems:
        return MountResult(path, False, "; ".join(problems))
    return MountResult(path, True, note)


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
