#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_plan
short_description: Check a host's shared-storage settings and resolve its mounts, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the shared_storage role's variables and resolves each entry of O(shared_storage_mounts) - the server address
    (the given C(server), the C(ansible_host) of C(server_host), or EFS's DNS name), the export, the file system type,
    the fstab source and options, and the mount point's owner, group and mode.
  - Every problem found fails the task at once, each naming the host, the variable (C(shared_storage_mounts[<i>]) and
    the field for a mount), the bad value and what was expected, before anything changes on any host.
  - "Checked: the mounts are a list of dicts with known keys only; each path is absolute (no blanks, no trailing
    slash) and given once; C(type) is C(nfs) or C(efs), C(state) C(mounted) or C(absent); an nfs mount has C(server)
    (an IP address, checked with Python's C(ipaddress), or a DNS name) or C(server_host) (a host of group
    C(nfs_server)), not both, and an absolute C(export); an efs mount has an C(efs_id) (C(fs-) and 8 to 17 hex digits)
    and a region; C(mode) is an octal string such as C('0775'); C(shared_storage_on_degraded) is C(warn) or C(fail)
    and C(shared_storage_probe_timeout) a number > 0."
  - "Given the host's O(os_family), also where an efs mount with TLS gets amazon-efs-utils: the C(RedHat) family's
    package; elsewhere O(shared_storage_efs_utils_deb) or O(shared_storage_efs_utils_source) must be set. On
    C(Debian), a .deb given as a URL needs O(shared_storage_efs_utils_deb_checksum) (C(sha256:<64 hex digits>));
    efs-utils' source release, built where no .deb is given, is an C(https) URL with
    O(shared_storage_efs_utils_source_checksum), or an absolute path of a file on the controller - compared with the
    checksum when one is given - and O(shared_storage_efs_utils_version) a version like C(2.3.1)."
  - The shared_storage role runs it first in its validate step and registers the result; its tasks read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  shared_storage_mounts:
    description:
      - The mounts, each a dict of C(path), C(type), C(server), C(server_host), C(export), C(efs_id), C(region),
        C(tls), C(options), C(owner), C(group), C(mode) and C(state) (see the shared_storage role).
    type: list
    elements: raw
    default: []
  shared_storage_efs_tls:
    description: Whether an efs mount without C(tls) mounts through amazon-efs-utils' TLS helper.
    type: raw
    required: true
  shared_storage_efs_region:
    description: The AWS region of an efs mount without C(region).
    type: raw
  shared_storage_nfs_options:
    description: The NFS client options of a mount without C(options) (and of an efs mount without TLS).
    type: raw
    required: true
  shared_storage_boot_options:
    description: Appended to every mount's options.
    type: raw
    required: true
  shared_storage_on_degraded:
    description: C(warn) or C(fail).
    type: raw
    required: true
  shared_storage_probe_timeout:
    description: Seconds for each probe of a mount, a number > 0.
    type: raw
    required: true
  common_user:
    description: The owner of a mount point without C(owner).
    type: raw
    default: rayfleet
  common_group:
    description: The group of a mount point without C(group).
    type: raw
    default: rayfleet
  shared_storage_efs_utils_deb:
    description: amazon-efs-utils' .deb for Debian/Ubuntu, a path on the host or a URL; may be empty.
    type: raw
  shared_storage_efs_utils_deb_checksum:
    description: C(sha256:<hex>) of the .deb, read when O(shared_storage_efs_utils_deb) is a URL.
    type: raw
  shared_storage_efs_utils_source:
    description: efs-utils' source release (an https URL or a file on the controller), built on Debian/Ubuntu where
      no .deb is given; may be empty.
    type: raw
  shared_storage_efs_utils_source_checksum:
    description: C(sha256:<hex>) of the source release; required with a URL.
    type: raw
  shared_storage_efs_utils_version:
    description: The efs-utils release built from the source.
    type: raw
  os_family:
    description: The host's OS family (its C(os_family) fact). Unset, where amazon-efs-utils comes from is not
      checked.
    type: str
  distribution:
    description: The host's distribution (its C(distribution) fact), named in messages.
    type: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Plan the shared storage (the shared_storage role's tasks/plan.yml passes every variable it reads)
  rayfleet.cluster.storage_plan:
    shared_storage_mounts:
      - {path: /mnt/shared, server_host: nfs1, export: /srv/rayfleet/shared}
      - {path: /mnt/efs, type: efs, efs_id: fs-0123456789abcdef0, region: us-east-1}
    shared_storage_efs_tls: true
    shared_storage_efs_region: us-east-1
    shared_storage_nfs_options: nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport
    shared_storage_boot_options: _netdev,nofail,x-systemd.mount-timeout=30s
    shared_storage_on_degraded: warn
    shared_storage_probe_timeout: 5
  register: plan

- name: Show each mount's fstab line
  ansible.builtin.debug:
    msg: "{{ plan.wanted | map(attribute='src') | zip(plan.wanted | map(attribute='path')) | map('join', ' ') }}"
"""

RETURN = r"""
mounts:
  description:
    - Every mount of C(shared_storage_mounts), in its order, resolved.
  returned: success
  type: list
  elements: dict
  contains:
    path:
      description: The mount point.
      type: str
      returned: success
    type:
      description: C(nfs) or C(efs).
      type: str
      returned: success
    server:
      description: The address the client mounts from - C(server), the C(ansible_host) of C(server_host) (else its
        name), or C(<efs_id>.efs.<region>.amazonaws.com).
      type: str
      returned: success
    export:
      description: The exported path (C(/) for efs).
      type: str
      returned: success
    server_host:
      description: The C(nfs_server) host the mount names, or empty.
      type: str
      returned: success
    fstype:
      description: C(efs) for an efs mount with TLS, else C(nfs4).
      type: str
      returned: success
    src:
      description: The fstab source - C(<efs_id>:/) with TLS, else C(<server>:<export>) (an IPv6 address in brackets).
      type: str
      returned: success
    opts:
      description: The mount's C(options) (else C(tls) for EFS with TLS, else O(shared_storage_nfs_options)), then
        O(shared_storage_boot_options).
      type: str
      returned: success
    owner:
      description: The mount point's owner (default O(common_user)).
      type: raw
      returned: success
    group:
      description: The mount point's group (default O(common_group)).
      type: raw
      returned: success
    mode:
      description: The mount point's mode (default C(0775)).
      type: str
      returned: success
    state:
      description: C(mounted) or C(absent).
      type: str
      returned: success
wanted:
  description: The mounts with state C(mounted), as in RV(mounts).
  returned: success
  type: list
  elements: dict
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
