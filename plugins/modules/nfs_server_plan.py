#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nfs_server_plan
short_description: Check an NFS server's settings and compute its exports and their clients, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the nfs_server role's variables and computes what the role writes - each export's clients with their
    options (the lines of C(/etc/exports.d/rayfleet.exports), NFS-Ganesha's client list and access type), the exported
    directories' owner, group and mode, and the packages and service of the implementation for the host's OS family.
  - The clients of every export are the cluster's addresses - every address of every host of groups C(ray_head) and
    C(ray_worker), IPv4 and IPv6 but link-local, as the cluster plan (M(rayfleet.cluster.cluster_plan)'s
    C(cluster.sources)) lists them - and O(nfs_server_extra_clients), each once, IPv4 first, then in text order; then
    the export's own C(clients).
  - The cluster's addresses are read from this run's cluster plan - the host's own when it is a cluster member, else
    the head's (an NFS server outside the cluster) - unless O(cluster_addresses) gives them. A run with no plan at
    hand (limited to hosts outside the cluster) computes the members' addresses from their inventory and facts with
    the cluster plan's own code; RV(cluster_source) says which.
  - "Checked: O(nfs_server_implementation) is C(kernel) or C(ganesha), the host's OS family one the role installs it
    for (Debian or RedHat); O(nfs_server_port) a TCP port (1-65535; 2049 with C(kernel), whose server the role does
    not move); O(nfs_server_exports) a list of at least one
    dict with known keys only, each path absolute (no blanks, quotes, backslashes or trailing slash) and given once,
    C(access) C(rw) or C(ro), C(squash) C(root_squash), C(all_squash) or C(no_root_squash), C(owner) and C(group)
    user or group names, C(mode) an octal string such as C('2775'); every client (O(nfs_server_extra_clients) and an
    export's C(clients)) an IP address or CIDR, checked with Python's C(ipaddress) (IPv4 and IPv6); with
    C(ganesha), the grace period (1-180) and the lease (1-120) whole seconds, as NFS-Ganesha takes them, the lease no
    longer than the grace period; and every
    export has a client."
  - A CIDR is written with its host bits cleared (C(10.1.2.3/16) as C(10.1.0.0/16)), an address as the address.
  - Every problem found fails the task at once, each naming the host, the variable (C(nfs_server_exports[<i>]) and
    the field for an export), the bad value and what was expected, before anything changes on any host.
  - The nfs_server role runs it in its validate step and registers the result; its tasks and templates print it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  nfs_server_implementation:
    description: C(kernel) (the kernel NFS server) or C(ganesha) (NFS-Ganesha in user space).
    type: raw
    required: true
  nfs_server_port:
    description: NFSv4's TCP port.
    type: raw
    required: true
  nfs_server_exports:
    description:
      - The exports, each a dict of C(path), C(owner), C(group), C(mode), C(access), C(squash) and C(clients) (see the
        nfs_server role).
    type: raw
    required: true
  nfs_server_extra_clients:
    description: Addresses or CIDRs served besides the cluster's hosts, on every export.
    type: raw
    default: []
  nfs_server_ganesha_grace_period:
    description: NFS-Ganesha's NFSv4 grace period (seconds).
    type: raw
  nfs_server_ganesha_lease_lifetime:
    description: NFS-Ganesha's NFSv4 lease lifetime (seconds), no longer than the grace period.
    type: raw
  os_family:
    description: The host's OS family (its C(os_family) fact).
    type: str
    required: true
  cluster_addresses:
    description:
      - Every address of every cluster host, in place of this run's cluster plan's C(cluster.sources).
    type: list
    elements: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Plan the NFS exports
  rayfleet.cluster.nfs_server_plan:
    nfs_server_implementation: kernel
    nfs_server_port: 2049
    nfs_server_exports:
      - path: /srv/rayfleet/shared
        owner: rayfleet
        group: rayfleet
        mode: "2775"
        access: rw
        squash: root_squash
    nfs_server_extra_clients: [192.0.2.10]
    os_family: "{{ ansible_facts.os_family }}"
  register: nfs_plan

- name: Show the exports file's lines
  ansible.builtin.debug:
    msg: "{{ nfs_plan.exports | map(attribute='exports_line') | list }}"
"""

RETURN = r"""
implementation:
  description: The NFS server implementation, C(kernel) or C(ganesha).
  returned: success
  type: str
port:
  description: NFSv4's TCP port.
  returned: success
  type: int
packages:
  description: The packages of the implementation for the host's OS family.
  returned: success
  type: list
  elements: str
  sample: [nfs-kernel-server]
service:
  description: The implementation's systemd unit.
  returned: success
  type: str
  sample: nfs-server.service
ganesha_grace_period:
  description: NFS-Ganesha's grace period (seconds); null when not a whole number (not checked with C(kernel)).
  returned: success
  type: int
ganesha_lease_lifetime:
  description: NFS-Ganesha's lease lifetime (seconds); null when not a whole number (not checked with C(kernel)).
  returned: success
  type: int
cluster_clients:
  description: The cluster's addresses and the extra clients, each once, IPv4 first, then in text order.
  returned: success
  type: list
  elements: str
  sample: [10.0.0.11, 10.0.0.12, 192.0.2.10, fd00::11]
cluster_source:
  description: Where the cluster's addresses were read - this run's cluster plan of a host, the task's
    O(cluster_addresses), or the members' facts.
  returned: always
  type: str
  sample: the cluster plan of head1
exports:
  description: Each export, resolved.
  returned: success
  type: list
  elements: dict
  contains:
    export_id:
      description: The export's place in O(nfs_server_exports), from 1 (NFS-Ganesha's C(Export_Id)).
      type: int
    path:
      description: The exported directory.
      type: str
    owner:
      description: The directory's owner (C(root) unless given).
      type: raw
    group:
      description: The directory's group (C(root) unless given).
      type: raw
    mode:
      description: The directory's mode (C(0755) unless given).
      type: str
    access:
      description: C(rw) or C(ro).
      type: str
    squash:
      description: C(root_squash), C(all_squash) or C(no_root_squash).
      type: str
    clients:
      description: The export's clients - RV(cluster_clients), then the export's own - each once.
      type: list
      elements: str
    options:
      description: The kernel server's options of each client.
      type: str
      sample: rw,sync,no_subtree_check,sec=sys,root_squash
    entries:
      description: Each client with its options, as the exports file lists it.
      type: list
      elements: str
      sample: ["10.0.0.11(rw,sync,no_subtree_check,sec=sys,root_squash)"]
    exports_line:
      description: The export's line of the exports file - the path, then each entry followed by a blank.
      type: str
    ganesha_clients:
      description: NFS-Ganesha's C(Clients) list (comma-separated).
      type: str
    ganesha_access_type:
      description: NFS-Ganesha's C(Access_Type) for the clients, C(RW) or C(RO).
      type: str
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
