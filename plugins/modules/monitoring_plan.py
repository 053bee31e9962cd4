#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: monitoring_plan
short_description: Check the monitoring role's settings and parse its listen addresses, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the monitoring role's variables and returns the values its tasks print - the listen addresses of
    Prometheus and Grafana parsed into address and port, the exporters' ports as numbers, and on the monitoring host
    with Grafana on, the pinned fingerprint of Grafana's repository signing key, normalised.
  - "Checked: O(monitoring_host) a host of the inventory; O(monitoring_prometheus_listen) and
    O(monitoring_grafana_listen) C(address:port), the address an IP literal checked with Python's C(ipaddress) (IPv4
    such as C(127.0.0.1), or IPv6 in brackets such as C([::1])) and the port 1-65535, with Grafana on not the
    address and port Prometheus binds; O(monitoring_node_exporter_port)
    and O(monitoring_dcgm_exporter_port) TCP ports (1-65535; a number or its digits, not a boolean), different from
    each other; O(monitoring_prometheus_retention) digits and one unit of C(s), C(m), C(h), C(d), C(w) or C(y);
    O(monitoring_scrape_interval) digits above zero and one unit of C(ms), C(s), C(m) or C(h);
    O(monitoring_grafana_version) a release or empty; O(monitoring_dcgm_version) and
    O(monitoring_dcgm_exporter_version) package versions (an epoch allowed), both set or both empty;
    O(monitoring_dcgm_cuda_major) two digits or empty; O(monitoring_dcgm_exporter_collectors) empty or a file on the
    controller; O(monitoring_grafana) true or false."
  - On the monitoring host, with O(monitoring_grafana) true, the fingerprint pinned for Grafana's repository signing
    key - O(monitoring_grafana_key_fingerprint) on Debian-family hosts (apt), O(monitoring_grafana_rpm_key_fingerprint)
    on the others (dnf) - is 40 or 64 hex digits once spaces are removed and letters upper-cased.
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - On the monitoring host, given O(cluster), the cluster's scrape targets (RV(scrape_targets)) - each member's node
    exporter where the member runs monitoring and node exporter, and the DCGM exporter of each member of
    O(gpu_hosts) with it on - at the member's cluster IP and its own port. A member's settings are those its
    inventory sets (the cluster plan's C(cluster.scrape.monitoring)), else this host's; a bad one fails naming the
    member.
  - The monitoring role runs it in its validate step and registers the result; its tasks and templates print it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  monitoring_host:
    description: The inventory host that runs Prometheus.
    type: raw
    required: true
  monitoring_prometheus_listen:
    description: Where Prometheus listens, C(address:port).
    type: raw
    required: true
  monitoring_prometheus_retention:
    description: How long Prometheus keeps samples (e.g. C(15d)).
    type: raw
    required: true
  monitoring_scrape_interval:
    description: Scrape and rule evaluation interval (e.g. C(15s)).
    type: raw
    required: true
  monitoring_node_exporter_port:
    description: Node exporter's port.
    type: raw
    required: true
  monitoring_dcgm_exporter_port:
    description: The DCGM exporter's port, not node exporter's.
    type: raw
    required: true
  monitoring_dcgm_version:
    description: DCGM's package version, or empty.
    type: raw
    default: ""
  monitoring_dcgm_exporter_version:
    description: The DCGM exporter's package version, or empty (set with O(monitoring_dcgm_version) or not at all).
    type: raw
    default: ""
  monitoring_dcgm_cuda_major:
    description: DCGM's CUDA flavour (two digits), or empty.
    type: raw
    default: ""
  monitoring_dcgm_exporter_collectors:
    description: Controller path of a counters CSV in dcgm-exporter's format, or empty.
    type: raw
    default: ""
  monitoring_grafana:
    description: Whether Grafana runs on the monitoring host.
    type: raw
    default: false
  monitoring_grafana_version:
    description: Grafana's release, or empty.
    type: raw
    default: ""
  monitoring_grafana_listen:
    description: Where Grafana listens, C(address:port).
    type: raw
    required: true
  monitoring_grafana_key_fingerprint:
    description: The fingerprint of Grafana's apt repository signing key (spaces allowed).
    type: raw
  monitoring_grafana_rpm_key_fingerprint:
    description: The fingerprint of Grafana's dnf repository signing key (spaces allowed).
    type: raw
  os_family:
    description: The host's OS family (its C(os_family) fact); C(Debian) picks apt's key, any other dnf's.
    type: str
  monitoring_node_exporter:
    description: Whether this host runs node exporter; a member's own setting where its inventory leaves it unset.
    type: raw
  monitoring_dcgm_exporter:
    description: Whether GPU hosts run the DCGM exporter; a member's own setting where its inventory leaves it unset.
    type: raw
  cluster:
    description:
      - The cluster plan's members (C(members)), their cluster IPs (C(ips)) and the exporter settings each member's
        inventory sets (C(monitoring)) - the C(rayfleet.cluster.cluster_plan) result's C(cluster.scrape), empty with
        network membership.
      - Read on the monitoring host only; without it there are no scrape targets.
    type: dict
  gpu_hosts:
    description: The hosts of group C(gpu) (the DCGM exporter's).
    type: list
    elements: str
    default: []
  membership:
    description:
      - The cluster plan's membership. With V(network) the exporters are discovered from Ray's node table on the
        monitoring host (C(python -m rayfleet.targets)), and O(cluster) is not read.
    type: str
    default: static
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the monitoring settings
  rayfleet.cluster.monitoring_plan:
    monitoring_host: "{{ monitoring_host }}"
    monitoring_prometheus_listen: "127.0.0.1:9090"
    monitoring_prometheus_retention: 15d
    monitoring_scrape_interval: 15s
    monitoring_node_exporter_port: 9100
    monitoring_dcgm_exporter_port: 9400
    monitoring_grafana: true
    monitoring_grafana_listen: "[::1]:3000"
    monitoring_grafana_key_fingerprint: B53A E77B ADB6 30A6 8304 6005 963F A277 1045 8545
    os_family: "{{ ansible_facts.os_family }}"
  register: monitoring_plan

- name: Show where Grafana listens
  ansible.builtin.debug:
    msg: "{{ monitoring_plan.grafana_listen.address }} port {{ monitoring_plan.grafana_listen.port }}"
"""

RETURN = r"""
monitoring_host:
  description: The monitoring host.
  returned: success
  type: str
is_monitoring_host:
  description: Whether this host is the monitoring host.
  returned: success
  type: bool
prometheus_listen:
  description: Where Prometheus listens, parsed.
  returned: success
  type: dict
  contains:
    address:
      description: The address, in Python's canonical form (IPv6 without brackets).
      type: str
      sample: 127.0.0.1
    port:
      description: The port.
      type: int
      sample: 9090
    listen:
      description: The address and port, IPv6 in brackets.
      type: str
      sample: 127.0.0.1:9090
grafana_listen:
  description: Where Grafana listens, parsed as RV(prometheus_listen) is.
  returned: success
  type: dict
  sample: {address: "::1", port: 3000, listen: "[::1]:3000"}
node_exporter_port:
  description: Node exporter's port.
  returned: success
  type: int
dcgm_exporter_port:
  description: The DCGM exporter's port.
  returned: success
  type: int
dcgm_cuda_major:
  description: DCGM's CUDA flavour as text (empty - the major of the CUDA version the driver supports).
  returned: success
  type: str
dcgm_exporter_collectors:
  description: The counters CSV's controller path, or empty.
  returned: success
  type: str
grafana_key:
  description: Grafana's repository signing key for this host's package manager; null unless this is the
    monitoring host with O(monitoring_grafana) true.
  returned: success
  type: dict
  contains:
    var:
      description: The variable pinning its fingerprint.
      type: str
      sample: monitoring_grafana_key_fingerprint
    url:
      description: Where the key is fetched.
      type: str
      sample: https://apt.grafana.com/gpg.key
    value:
      description: The pinned fingerprint as given.
      type: str
    pin:
      description: The pinned fingerprint normalised - no spaces, upper case.
      type: str
      sample: B53AE77BADB630A683046005963FA27710458545
discovered:
  description: Whether the exporters are discovered from Ray's node table (O(membership=network)).
  returned: success
  type: bool
scrape_targets:
  description: >-
    The cluster's scrape targets on the monitoring host given O(cluster) (none with RV(discovered)), else null.
  returned: success
  type: dict
  contains:
    node:
      description: Each member's node exporter, C(address:port) (IPv6 in brackets), in the members' order.
      type: list
      elements: str
      sample: ["10.0.0.1:9100", "10.0.0.2:9100"]
    dcgm:
      description: The DCGM exporter of each GPU member with it on, by inventory name.
      type: dict
      sample: {gpu1: "10.0.0.3:9400"}
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
