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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayfleet.cluster.plugins.module_utils.storage_probe import (
    probe_mount,
    read_mountinfo,
    user_entry,
)


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
    results = [probe_mount(m, mountinfo, timeout=p["timeout"], port=p["port"], user=p["user"],
                           write_probe=p["write_probe"], kernel_client=p["kernel_client"]) for m in p["mounts"]]
    degraded = ["%s: %s" % (r["path"], r["reason"]) for r in results if r["state"] != "ok"]
    out = dict(changed=False, mounts=results, degraded=degraded)
    if degraded and p["fail_on_degraded"]:
        module.fail_json(msg="degraded shared storage: " + "; ".join(degraded), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
