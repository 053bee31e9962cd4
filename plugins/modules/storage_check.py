#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_check
short_description: Probe a node's shared-storage mounts (NFS, EFS) without ever hanging on a dead server
version_added: "0.1.0"
description:
  - For each mount, reads C(/proc/self/mountinfo) to tell whether the path is mounted and with which file system,
    connects to the server's NFS port, and on a mounted path runs C(statvfs) and a write/read/delete probe as
    O(user) in a child process killed after O(timeout) seconds, so a hard NFS mount whose server is gone is reported
    as not responding instead of blocking the play.
  - A path that is not mounted is also probed at the NFS protocol level with libnfs' C(nfs-ls) when it is installed
    (package C(libnfs-utils)), so the report tells a server that is down from a mount that is missing.
  - Each mount gets C(state=ok) or C(state=degraded) with the reason. The module fails only when O(fail_on_degraded)
    is set; otherwise the caller decides (the shared_storage role reports degraded mounts by host).
  - With O(kernel_client=false) (a host whose kernel has no NFS client, such as the rayfleet sandbox's containers)
    an unmounted path whose server answers the NFS protocol is C(ok) with C(mounted=false) and says so.
author:
  - rayfleet authors (@rayfleet)
options:
  mounts:
    description: The mounts to probe.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Mount point (absolute).
        type: path
        required: true
      server:
        description: NFS server address or DNS name (for EFS, the file system's DNS name).
        type: str
        required: true
      export:
        description: Exported path on the server.
        type: str
        default: /
      type:
        description: C(nfs) or C(efs).
        type: str
        default: nfs
        choices: [nfs, efs]
  timeout:
    description: Seconds allowed for each network connect, C(statvfs), write probe and protocol probe.
    type: float
    default: 5
  port:
    description: The servers' NFS port.
    type: int
    default: 2049
  user:
    description: Run the write probe (and the protocol probe's credentials) as this user; unset, as root.
    type: str
  write_probe:
    description: Write, read back and delete a small file on each mounted path.
    type: bool
    default: true
  kernel_client:
    description: Whether this host is expected to mount with its kernel NFS client (false, protocol probe only).
    type: bool
    default: true
  fail_on_degraded:
    description: Fail the task when any mount is degraded.
    type: bool
    default: false
notes:
  - Never blocks longer than about 4 x O(timeout) per mount, whatever state the server is in.
"""

EXAMPLES = r"""
- name: Probe the shared storage
  rayfleet.cluster.storage_check:
    mounts:
      - path: /mnt/shared
        server: 10.0.0.5
        export: /srv/rayfleet/shared
    user: rayfleet
  register: storage
"""

RETURN = r"""
mounts:
  description: One entry per probed mount.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Mount point.
      type: str
    state:
      description: C(ok) or C(degraded).
      type: str
    reason:
      description: Why it is degraded, or a note on an ok mount.
      type: str
    mounted:
      description: Whether the path is an NFS mount point now.
      type: bool
    fstype:
      description: The file system mounted on the path (empty when none).
      type: str
    source:
      description: The mounted source (empty when none).
      type: str
    server_reachable:
      description: Whether the server's NFS port accepted a TCP connection.
      type: bool
    protocol:
      description: The libnfs protocol probe's result - C(ok), the error it met, or why it did not run.
      type: str
    writable:
      description: Whether the write probe succeeded (null when it did not run).
      type: bool
degraded:
  description: One C(<path> - <reason>) line per degraded mount (the path, a colon, the reason).
  returned: always
  type: list
  elements: str
"""

import os
import shutil
import socket
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.rayfleet.cluster.plugins.module_utils.limited import run_limited, user_entry

# Runs in a child interpreter: statvfs, then (optionally) write/read/delete a probe file. A hard NFS mount whose
# server is gone blocks in the kernel; only this child blocks, and the parent gives up after the timeout.
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


def parse_mountinfo(text: str) -> dict:
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


def read_mountinfo() -> dict:
    with open("/proc/self/mountinfo") as fh:
        return parse_mountinfo(fh.read())


def tcp_reachable(server: str, port: int, timeout: float) -> tuple[bool, str]:
    try:
        with socket.create_connection((server, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, "%s:%d: %s" % (server, port, to_native(exc) or type(exc).__name__)


def protocol_probe(server: str, export: str, port: int, timeout: float, user=None) -> str:
    """NFSv4 READDIR of the export through libnfs (no kernel client needed): 'ok', an error, or 'not run'."""
    nfs_ls = shutil.which("nfs-ls")
    if not nfs_ls:
        return "not run (nfs-ls from libnfs-utils is not installed)"
    pw = user_entry(user)
    query = "version=4&nfsport=%d" % port
    if pw is not None:
        query += "&uid=%d&gid=%d" % (pw.pw_uid, pw.pw_gid)
    host = "[%s]" % server if ":" in server else server
    rc, out = run_limited([nfs_ls, "nfs://%s%s?%s" % (host, export if export.startswith("/") else "/" + export,
                                                      query)], timeout)
    if rc == 0:
        return "ok"
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return "error: %s" % (lines[-1] if lines else "nfs-ls exited %d" % rc)


def probe_mount(mount: dict, mountinfo: dict, p: dict) -> dict:
    path = os.path.normpath(mount["path"])
    fstype, source = mountinfo.get(path, ("", ""))
    mounted = path in mountinfo and (fstype.startswith("nfs") or fstype in ("efs", "fuse.nfs"))
    other_fs = path in mountinfo and not mounted
    reachable, why = tcp_reachable(mount["server"], p["port"], p["timeout"])
    res = dict(path=path, type=mount["type"], server=mount["server"], export=mount["export"], mounted=mounted,
               fstype=fstype if path in mountinfo else "", source=source if path in mountinfo else "",
               server_reachable=reachable, protocol="not run", writable=None, state="ok", reason="")
    problems = []
    if other_fs:
        problems.append("%s is a %s mount of %s, not the NFS share" % (path, fstype, source))
    if mounted:
        rc, out = run_limited([sys.executable, "-c", _PROBE, path, "0"], p["timeout"])
        if rc == 124:
            problems.append("mounted but not responding (statvfs blocked for %gs)" % p["timeout"])
        elif rc != 0:
            problems.append("statvfs failed: %s" % (out.splitlines()[-1] if out else rc))
        elif p["write_probe"]:
            rc, out = run_limited([sys.executable, "-c", _PROBE, path, "1"], p["timeout"], p["user"])
            res["writable"] = rc == 0
            if rc != 0:
                who = p["user"] or "root"
                problems.append("not writable by %s: %s" % (
                    who, "no answer in %gs" % p["timeout"] if rc == 124 else (out.splitlines() or [rc])[-1]))
    if not reachable:
        problems.append("server unreachable (%s)" % why)
    elif not mounted:
        res["protocol"] = protocol_probe(mount["server"], mount["export"], p["port"], p["timeout"], p["user"])
        protocol_ok = res["protocol"] == "ok"
        if mount["type"] == "efs" and res["protocol"].startswith("not run"):
            protocol_ok = True  # an EFS server port that answers is as far as a client without libnfs can go
        if not protocol_ok and not res["protocol"].startswith("not run"):
            problems.append("server does not serve %s: %s" % (mount["export"], res["protocol"]))
        if p["kernel_client"] and not other_fs:
            problems.append("not mounted")
        elif not p["kernel_client"] and protocol_ok:
            res["reason"] = "not mounted: this host has no kernel NFS client; the server answers NFSv4 for %s" % (
                mount["export"])
        elif not p["kernel_client"] and res["protocol"].startswith("not run"):
            problems.append("not mounted and cannot be probed: %s" % res["protocol"])
    if problems:
        res["state"], res["reason"] = "degraded", "; ".join(problems)
    return res


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mounts=dict(type="list", elements="dict", required=True, options=dict(
                path=dict(type="path", required=True),
                server=dict(type="str", required=True),
                export=dict(type="str", default="/"),
                type=dict(type="str", default="nfs", choices=["nfs", "efs"]),
            )),
            timeout=dict(type="float", default=5.0),
            port=dict(type="int", default=2049),
            user=dict(type="str"),
            write_probe=dict(type="bool", default=True),
            kernel_client=dict(type="bool", default=True),
            fail_on_degraded=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    bad = [m["path"] for m in p["mounts"] if not os.path.isabs(m["path"])]
    if bad:
        module.fail_json(msg="mounts: path must be absolute, got %s" % ", ".join(bad))
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout must be > 0, got %s" % p["timeout"])
    if p["user"] and user_entry(p["user"]) is None:
        module.fail_json(msg="user %s does not exist on this host" % p["user"])
    mountinfo = read_mountinfo()
    results = [probe_mount(m, mountinfo, p) for m in p["mounts"]]
    degraded = ["%s: %s" % (r["path"], r["reason"]) for r in results if r["state"] != "ok"]
    out = dict(changed=False, mounts=results, degraded=degraded)
    if degraded and p["fail_on_degraded"]:
        module.fail_json(msg="degraded shared storage: " + "; ".join(degraded), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
