# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""One shared-storage mount probed without ever hanging on a dead server: the one probe that both the
``rayfleet.cluster.storage_check`` module (with the host's own Python, before the Ray venv and the node library exist;
``plugins/module_utils/storage_probe.py`` is this file) and the node library's ``rayfleet.storage`` (health timer,
admission) run. Standard library only.

- ``/proc/self/mountinfo`` says whether the path is mounted, and with which file system;
- the server's NFS port must accept a TCP connection;
- a mounted path must answer ``statvfs`` and take a write, read back and delete, as the given user, each in a child
  process killed after the timeout (a hard NFS mount whose server is gone blocks in the kernel; only the child does);
- a path that is not mounted is probed at the NFS protocol level with libnfs' ``nfs-ls`` where it is installed; on a
  host without a kernel NFS client that is all there is, and a server that answers is ok.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys

NFS_PORT = 2049
NOT_RUN = "not run"

# Runs in a child interpreter: statvfs, then (optionally) write/read/delete a probe file.
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


def user_entry(user):
    """The passwd entry of ``user``, or None when no user is given or it does not exist."""
    if not user:
        return None
    try:
        return pwd.getpwnam(user)
    except KeyError:
        return None


def run_limited(argv, timeout, user=None):
    """Run ``argv`` (list form, cwd /, own session) for at most ``timeout`` seconds; return (rc, combined output).

    rc 124 means it did not finish in time (the child is killed and left to the kernel, never waited for: it may be
    blocked on a dead NFS server); rc 127 that it could not be started. As root, ``user`` runs it with that user's
    uid and gid and no supplementary groups."""
    kwargs = {}
    pw = user_entry(user)
    if pw is not None and os.geteuid() == 0:
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


def parse_mountinfo(text):
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


def read_mountinfo():
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
        return parse_mountinfo(handle.read())


def tcp_reachable(server, port, timeout):
    try:
        with socket.create_connection((server, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, f"{server}:{port}: {str(exc) or type(exc).__name__}"


def protocol_probe(server, export, port, timeout, user=None):
    """An NFSv4 READDIR of the export through libnfs (no kernel client needed): 'ok', an error, or 'not run (...)'."""
    nfs_ls = shutil.which("nfs-ls")
    if not nfs_ls:
        return NOT_RUN + " (nfs-ls from libnfs-utils is not installed)"
    query = f"version=4&nfsport={port}"
    pw = user_entry(user)
    if pw is not None:
        query += f"&uid={pw.pw_uid}&gid={pw.pw_gid}"
    host = f"[{server}]" if ":" in server else server
    export = export if export.startswith("/") else "/" + export
    rc, out = run_limited([nfs_ls, f"nfs://{host}{export}?{query}"], timeout)
    if rc == 0:
        return "ok"
    lines = [line for line in out.splitlines() if line.strip()]
    return "error: " + (lines[-1] if lines else f"nfs-ls exited {rc}")


def probe_mount(mount, mountinfo, *, timeout=5.0, port=NFS_PORT, user=None, write_probe=True, kernel_client=True):
    """One mount ({path, server, export, type}): what was found, with state ok or degraded and the reason (every
    problem found)."""
    path = os.path.normpath(mount["path"])
    export = mount.get("export") or "/"
    kind = mount.get("type") or "nfs"
    fstype, source = mountinfo.get(path, ("", ""))
    mounted = path in mountinfo and (fstype.startswith("nfs") or fstype in ("efs", "fuse.nfs"))
    other_fs = path in mountinfo and not mounted
    reachable, why = tcp_reachable(mount["server"], port, timeout)
    res = {"path": path, "type": kind, "server": mount["server"], "export": export, "mounted": mounted,
           "fstype": fstype, "source": source, "server_reachable": reachable, "protocol": NOT_RUN, "writable": None,
           "state": "ok", "reason": ""}
    problems = []
    if other_fs:
        problems.append(f"{path} is a {fstype} mount of {source}, not the NFS share")
    if mounted:
        rc, out = run_limited([sys.executable, "-c", _PROBE, path, "0"], timeout)
        if rc == 124:
            problems.append(f"mounted but not responding (statvfs blocked for {timeout:g}s)")
        elif rc != 0:
            problems.append(f"statvfs failed: {out.splitlines()[-1] if out else rc}")
        elif write_probe:
            rc, out = run_limited([sys.executable, "-c", _PROBE, path, "1"], timeout, user)
            res["writable"] = rc == 0
            if rc != 0:
                why = f"no answer in {timeout:g}s" if rc == 124 else (out.splitlines() or [rc])[-1]
                problems.append(f"not writable by {user or 'root'}: {why}")
    if not reachable:
        problems.append(f"server unreachable ({why})")
    elif not mounted:
        res["protocol"] = protocol = protocol_probe(mount["server"], export, port, timeout, user)
        not_run = protocol.startswith(NOT_RUN)
        # an EFS server port that answers is as far as a client without libnfs can go
        protocol_ok = protocol == "ok" or (kind == "efs" and not_run)
        if not protocol_ok and not not_run:
            problems.append(f"server does not serve {export}: {protocol}")
        if kernel_client and not other_fs:
            problems.append("not mounted")
        elif not kernel_client and protocol_ok:
            res["reason"] = f"not mounted: this host has no kernel NFS client; the server answers NFSv4 for {export}"
        elif not kernel_client and not_run:
            problems.append(f"not mounted and cannot be probed: {protocol}")
    if problems:
        res["state"], res["reason"] = "degraded", "; ".join(problems)
    return res
