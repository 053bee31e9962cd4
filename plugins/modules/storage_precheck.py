#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_precheck
short_description: Whether a host can take its shared-storage mounts, read before anything changes
version_added: "0.1.0"
description:
  - Reads, in one round trip, what the shared_storage role checks on a host before any host changes.
  - Mount points that exist and are not directories.
  - Whether the kernel has an NFS client (C(nfs) or C(nfs4) in C(/proc/filesystems), else an C(nfs) kernel module
    that C(modinfo) finds, loaded on the first mount).
  - The mounts the role already manages on the host (its state file).
  - Whether the server of each new mount (one the state file does not list) answers on the NFS port within
    O(timeout) seconds. Servers that are inventory hosts (C(server_host) set) are left out, as their NFS server may
    be set up later in the same run.
  - Returns RV(problems), one sentence each, and changes nothing; the caller fails on them (the shared_storage
    role does, naming the host).
author:
  - rayfleet authors (@rayfleet)
options:
  mounts:
    description:
      - The host's wanted mounts, as M(rayfleet.cluster.plan) returns them (C(wanted)).
      - Each a dict with C(path), C(server) and C(server_host) (the inventory host that serves it, empty for a
        server outside the inventory); other keys are ignored.
    type: list
    elements: dict
    default: []
  state_file:
    description: The role's record of the mounts it manages on the host.
    type: path
    default: /etc/rayfleet/shared-storage.json
  require_kernel_client:
    description:
      - Whether a kernel without an NFS client is a problem (the role's C(shared_storage_require_kernel_client)).
    type: bool
    default: true
  timeout:
    description: Seconds a new mount's server has to answer.
    type: float
    default: 5
  port:
    description: The servers' NFS port.
    type: int
    default: 2049
extends_documentation_fragment:
  - rayfleet.cluster.attributes.info_module
seealso:
  - module: rayfleet.cluster.plan
  - module: rayfleet.cluster.storage_check
"""

EXAMPLES = r"""
- name: Read whether this host can take its mounts
  rayfleet.cluster.storage_precheck:
    mounts: "{{ plan.wanted }}"
    timeout: 5
  register: precheck

- name: Fail before anything changes
  ansible.builtin.assert:
    that: precheck.problems | length == 0
    fail_msg: "shared_storage on {{ inventory_hostname }}: {{ precheck.problems | join(' ') }}"
"""

RETURN = r"""
problems:
  description: Why the host cannot take its mounts, one sentence each (empty when it can).
  returned: always
  type: list
  elements: str
kernel_client:
  description: Whether the kernel has an NFS client (C(false) also when there is no mount to take).
  returned: always
  type: bool
managed:
  description: The mount points the role managed on the host before this run (its state file).
  returned: always
  type: list
  elements: str
not_directories:
  description: Mount points that exist and are not directories.
  returned: always
  type: list
  elements: str
no_answer:
  description: The new mounts whose server did not answer, each with its C(path) and C(server).
  returned: always
  type: list
  elements: dict
"""

import json
import os
import re
import socket
import time

from ansible.module_utils.basic import AnsibleModule

PROC_FILESYSTEMS = "/proc/filesystems"


def kernel_has_nfs(module):
    """NFS in /proc/filesystems, else an nfs kernel module that modinfo finds (no modinfo: none)."""
    try:
        with open(PROC_FILESYSTEMS) as f:
            if re.search(r"\tnfs4?\n", f.read()):
                return True
    except OSError:
        pass
    modinfo = module.get_bin_path("modinfo", opt_dirs=["/sbin", "/usr/sbin"])
    if modinfo is None:
        return False
    return module.run_command([modinfo, "-F", "filename", "nfs"])[0] == 0


def managed_before(state_file):
    """The paths the state file lists (none when it is absent or unreadable)."""
    try:
        with open(state_file) as f:
            paths = json.load(f).get("paths", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def answers(server, port, timeout):
    """Whether server:port accepts a TCP connection within timeout seconds, trying again until then."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((server, port), timeout=max(left, 0.1)):
                return True
        except OSError:
            if deadline - time.monotonic() <= 1:
                return False
            time.sleep(1)


def precheck(module, mounts, *, state_file, require_kernel_client, timeout, port):
    paths = [m["path"] for m in mounts]
    not_dirs = [p for p in paths if os.path.lexists(p) and not os.path.isdir(p)]
    kernel_client = bool(mounts) and kernel_has_nfs(module)
    managed = managed_before(state_file)
    new_outside = [m for m in mounts if m["path"] not in managed and not m.get("server_host")]
    no_answer = [{"path": m["path"], "server": m["server"]} for m in new_outside
                 if not answers(m["server"], port, timeout)]
    problems = []
    if not_dirs:
        problems.append("shared_storage_mounts path %s exists and is not a directory." % json.dumps(not_dirs))
    if mounts and not kernel_client and require_kernel_client:
        problems.append(
            "shared_storage_mounts asks for %s but kernel %s has no NFS client (no nfs in /proc/filesystems, no nfs "
            "module). Boot a kernel with NFS, or set shared_storage_require_kernel_client=false to write fstab and "
            "probe the servers only." % (json.dumps(paths), os.uname().release))
    if no_answer:
        problems.append(
            "shared_storage_mounts %s - check the address and that the server exports to this host." % ", ".join(
                "%s (server %s: no answer on port %d in %g s)" % (u["path"], json.dumps(u["server"]), port, timeout)
                for u in no_answer))
    return {"problems": problems, "kernel_client": kernel_client, "managed": managed, "not_directories": not_dirs,
            "no_answer": no_answer}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mounts=dict(type="list", elements="dict", default=[]),
            state_file=dict(type="path", default="/etc/rayfleet/shared-storage.json"),
            require_kernel_client=dict(type="bool", default=True),
            timeout=dict(type="float", default=5),
            port=dict(type="int", default=2049),
        ),
        supports_check_mode=True,
    )
    p = module.params
    bad = [m for m in p["mounts"] if not isinstance(m.get("path"), str) or not isinstance(m.get("server"), str)]
    if bad:
        module.fail_json(msg="mounts: each needs a path and a server (the storage plan's wanted), got %s" % bad)
    module.exit_json(changed=False, **precheck(module, p["mounts"], state_file=p["state_file"],
                                               require_kernel_client=p["require_kernel_client"],
                                               timeout=p["timeout"], port=p["port"]))


if __name__ == "__main__":
    main()
