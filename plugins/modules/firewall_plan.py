#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: firewall_plan
short_description: Check a host's firewall settings and compute its nftables tables, address sets and ports
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the host's C(firewall_*) variables - sources with Python's C(ipaddress), ports within 1-65535, the worker
    port range as C(low-high) - and computes what the firewall role writes - the cluster's table, unit and files
    (one per C(ray_cluster_name)), the cluster's IPv4 and IPv6 address sets, the TCP ports closed to all but them,
    the SSH sources, and the host's shared table of ephemeral and exporter ports.
  - The cluster's addresses are given by the cluster plan (M(rayfleet.cluster.cluster_plan)'s C(cluster.sources)).
    A source inside another one is left to the wider one (an nftables interval set refuses overlapping elements).
  - Every problem found fails the task at once, each naming the variable and the host and saying what was expected,
    before anything changes on any host.
  - The firewall role runs it in its validate step and registers the result; its templates print it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  ray_cluster_name:
    description: The cluster's name in table, unit and file names (empty for the host's one unnamed cluster).
    type: str
    default: ""
  firewall_ray_allowed_sources:
    description: Extra sources (IP addresses or CIDRs) allowed to reach the Ray ports besides the cluster's hosts.
    type: raw
    default: []
  firewall_ssh_allowed_sources:
    description: Sources allowed to reach SSH besides the cluster's hosts and extra sources; empty, SSH is left open.
    type: raw
    default: []
  firewall_ray_ports:
    description: The cluster's Ray TCP ports (1-65535).
    type: raw
    required: true
  firewall_host_ports:
    description: The host's own services' TCP ports (exporters), shared by every rayfleet cluster on the host.
    type: raw
    required: true
  firewall_ray_port_range:
    description: The worker port range, C(low-high).
    type: raw
    required: true
  firewall_restrict_ephemeral_ports:
    description: Whether new connections to the host's ephemeral ports are limited to the clusters' hosts.
    type: raw
    default: true
  cluster_addresses:
    description: Every address of every cluster host (the cluster plan's C(cluster.sources)).
    type: list
    elements: str
    required: true
  ip_local_port_range:
    description: The text of the host's C(/proc/sys/net/ipv4/ip_local_port_range); required when
      O(firewall_restrict_ephemeral_ports) is true.
    type: str
  extra_ports:
    description: The node ports of the host's node instances beyond slot 0 (the cluster plan's C(host.extra_ports)).
    type: list
    elements: int
    default: []
  nfs_server_enabled:
    description: Whether a host of group C(nfs_server) serves NFS (its port is then opened to the cluster).
    type: raw
    default: true
  nfs_server_port:
    description: The NFS server's TCP port.
    type: raw
    default: 2049
  nfs_server_extra_clients:
    description: Addresses or CIDRs outside the cluster an NFS server also serves.
    type: raw
    default: []
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Read the host's ephemeral port range
  ansible.builtin.slurp:
    src: /proc/sys/net/ipv4/ip_local_port_range
  register: ephemeral

- name: Plan the firewall
  rayfleet.cluster.firewall_plan:
    firewall_ray_allowed_sources: [10.20.0.0/16]
    firewall_ssh_allowed_sources: [203.0.113.9]
    firewall_ray_ports: [6379, 8265, 10001, 8076, 8077, 8078, 8079, 8080, 52365]
    firewall_host_ports: [9100, 9400]
    firewall_ray_port_range: 10002-11999
    ip_local_port_range: "{{ ephemeral.content | b64decode }}"
  register: firewall

- name: Show the ports closed to all but the cluster
  ansible.builtin.debug:
    msg: "{{ firewall.tcp_ports }}"
"""

RETURN = r"""
table:
  description: The cluster's nftables table (C(inet) family), C(rayfleet) or C(rayfleet_<cluster name>).
  returned: success
  type: str
unit_name:
  description: The systemd unit that loads the cluster's table.
  returned: success
  type: str
rules_path:
  description: The cluster's rules file.
  returned: success
  type: str
members_dir:
  description: The directory of every cluster's hosts for the shared table.
  returned: success
  type: str
members_path:
  description: This cluster's file of hosts in RV(members_dir).
  returned: success
  type: str
ephemeral_table:
  description: The host's shared table (ephemeral and exporter ports).
  returned: success
  type: str
ephemeral_rules_path:
  description: The shared table's rules file.
  returned: success
  type: str
ephemeral_unit_name:
  description: The systemd unit that loads the shared table.
  returned: success
  type: str
cluster_v4:
  description: The cluster's IPv4 addresses and extra sources, sorted.
  returned: success
  type: list
  elements: str
cluster_v6:
  description: The cluster's IPv6 addresses and extra sources, sorted.
  returned: success
  type: list
  elements: str
ssh_v4:
  description: The IPv4 sources allowed to reach SSH; empty when SSH is not restricted.
  returned: success
  type: list
  elements: str
ssh_v6:
  description: The IPv6 sources allowed to reach SSH; empty when SSH is not restricted.
  returned: success
  type: list
  elements: str
tcp_ports:
  description: The cluster's TCP ports and the worker port range, as an nftables set's elements.
  returned: success
  type: str
  sample: 6379, 8076, 8077, 8265, 10001, 52365, 10002-11999
nfs_port:
  description: The NFS port this host serves the cluster on, 0 when it serves none.
  returned: success
  type: int
nfs_extra_clients:
  description: The extra NFS clients, each C({family, source}) (C(ip) or C(ip6)).
  returned: success
  type: list
  elements: dict
ephemeral_range:
  description: The host's ephemeral port range (C(32768-60999)); empty when not restricted.
  returned: success
  type: str
host_tcp_ports:
  description: The shared table's ports (exporters outside the ephemeral range, then the range).
  returned: success
  type: str
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
