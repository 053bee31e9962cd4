#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_plan
short_description: Check a host's Ray settings and compute its nodes and the cluster's, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the host's C(ray_*) variables and computes its Ray nodes - one, or one per item of C(ray_node_instances) -
    with each node's slot, ports, worker port slice, unit, container name, settings and record paths, temp dir and
    Ray node name; and the cluster's members (C(ray_head) then C(ray_worker)), their IPs and every node Ray must list
    alive.
  - Every problem found fails the task at once, each naming the variable and the host and saying what was expected,
    before anything changes on any host.
  - IP addresses are checked with Python's C(ipaddress); C(ray_version) must be a PEP 440 release, at least 2.52 when
    C(ray_auth_mode) is C(token) (older Ray ignores token authentication).
  - It checks the role's other settings that need no look at the host too - the token's path, the cluster's name, a
    worker's head address, the stop drain and liveness timings, the preemption watcher, the dashboard's metrics URLs
    and, with O(ray_runtime=container), the container settings, the container's GPUs and the NVIDIA Container
    Toolkit's key pin. O(ray_auth_token_path) and O(ray_container_image_archive) are looked up on the controller.
  - The ray role (its C(tasks/plan.yml)) gives every option; one a task leaves out reads as its default here, the
    role's default.
  - The ray role runs it in its validate step and registers the result; its tasks, the cluster check and the
    preflight read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  ray_node_role:
    description: C(head) or C(worker).
    type: str
    required: true
  ray_node_ip:
    description: The host's IP address on the cluster network.
    type: str
    required: true
  ray_version:
    description: The Ray release the host runs (PEP 440).
    type: str
    required: true
  ray_auth_mode:
    description: C(token) or C(disabled).
    type: str
    required: true
  ray_auth_token_path:
    description:
      - The controller's file of the cluster's Ray token, an absolute path that is not a directory.
      - Required with O(ray_auth_mode=token); not read with C(disabled).
    type: str
  ray_membership:
    description:
      - C(static) (the cluster's sources are its members' addresses) or C(network) (they are O(ray_cluster_networks));
        C(network) needs O(ray_auth_mode=token) and the host's address in one of the networks.
    type: str
    default: static
  ray_cluster_networks:
    description: The cluster's networks (CIDRs), the sources with O(ray_membership=network).
    type: raw
    default: []
  ray_cluster_name:
    description:
      - The cluster's name in unit and file names - lowercase letters, digits and C(-), starting with a letter or
        digit, at most 31 - or empty for the host's one unnamed cluster.
    type: str
    default: ""
  ray_head_address:
    description:
      - The head as a worker reaches it, a host name or IP address. Empty (the ray role's default) on a worker, the
        cluster IP of the first host of group C(ray_head) (its C(ray_node_ip) where the inventory sets it, else its
        default-route address); required where that group is empty, unless O(ray_state=baked). Not read on the
        head.
    type: str
  ray_state:
    description: C(started), C(stopped), C(restarted) or C(baked) (not with O(ray_runtime=container)).
    type: str
    default: started
  ray_stop_drain_s:
    description: Seconds a stopping worker drains, a whole number of at least 0.
    type: raw
    default: 20
  ray_liveness_check_interval_s:
    description: Seconds between a raylet's checks that the GCS still knows its node, a whole number of at least 1.
    type: raw
    default: 5
  ray_restart_sec:
    description: Seconds systemd waits before it restarts a failed node, a whole number of at least 1.
    type: raw
    default: 5
  ray_gcs_reconnect_timeout_s:
    description: Seconds a node waits for the head's GCS to come back before it exits, a whole number of at least 1.
    type: raw
    default: 30
  ray_wait_timeout:
    description: Seconds the run waits for Ray's nodes, a whole number of at least 1.
    type: raw
    default: 180
  ray_restart_running_jobs:
    description: Whether a restart of Ray may end running jobs, true or false.
    type: raw
    default: false
  ray_restart_wait_s:
    description: Seconds a restart waits for running jobs to end, a whole number of at least 0.
    type: raw
    default: 0
  ray_limit_nofile:
    description: The open-files limit of the node's unit (C(LimitNOFILE)), a whole number from 1 to the kernel's
      ceiling, 1073741816.
    type: raw
    default: 65536
  ray_resources:
    description: Custom resources of the node, names (not C(CPU), C(GPU), C(memory) or C(object_store_memory)) mapped
      to amounts >= 0.
    type: raw
    default: {}
  ray_preemption_provider:
    description: C(aws) or C(gcp), the cloud whose interruption notice the preemption watcher polls.
    type: str
    default: aws
  ray_preemption_metadata_url:
    description: The preemption watcher's metadata endpoint, C(http(s)://host[:port]), or empty for the provider's own.
    type: str
    default: ""
  ray_preemption_interval_s:
    description: Seconds between the preemption watcher's polls, a whole number of at least 1.
    type: raw
    default: 5
  ray_dashboard_prometheus_url:
    description: The Prometheus the head's dashboard reads, an C(http(s)://) URL, or empty.
    type: str
    default: ""
  ray_dashboard_grafana_url:
    description: The Grafana the head's dashboard embeds, an C(http(s)://) URL, or empty.
    type: str
    default: ""
  ray_dashboard_grafana_iframe_url:
    description: Grafana's address as the browser reaches it, an C(http(s)://) URL, or empty.
    type: str
    default: ""
  ray_runtime:
    description: C(host) or C(container).
    type: str
    default: host
  ray_container_engine:
    description: C(podman) or C(docker) (read with O(ray_runtime=container), as are the other C(ray_container_*)).
    type: str
    default: podman
  ray_container_image:
    description: The node image, C(registry/name:tag) in lowercase; required with O(ray_runtime=container).
    type: str
    default: ""
  ray_container_image_archive:
    description: An image archive file on the controller, or empty.
    type: str
    default: ""
  ray_container_pull:
    description: C(missing) or C(always).
    type: str
    default: missing
  ray_container_python:
    description: The command of the image's Python (one word of letters, digits, C(.), C(_), C(/) and C(-)).
    type: str
    default: python
  ray_container_shm_size_mb:
    description: The container's C(/dev/shm) in MiB, a whole number, or null.
    type: raw
  ray_container_gpus:
    description:
      - C(all), or a list of the host's GPU indices or UUIDs, each once; a list of GPUs only on hosts of group C(gpu).
    type: raw
    default: all
  ray_container_nvidia_key_url:
    description: Where the NVIDIA Container Toolkit's signing key is fetched (named in the fingerprint's message).
    type: str
    default: https://nvidia.github.io/libnvidia-container/gpgkey
  ray_container_nvidia_key_fingerprint:
    description:
      - The fingerprint that key must have, 40 hex digits (or 64 for a version 5 or 6 key), spaces allowed; read on
        hosts of group C(gpu) with O(ray_runtime=container).
    type: raw
    default: C95B321B61E88C1809C4F759DDCAE044F796ECB0
  ray_num_cpus:
    description: CPUs Ray offers on the node (null - what Ray detects).
    type: raw
  ray_num_gpus:
    description: GPUs Ray offers on the node (null - what Ray detects).
    type: raw
  ray_object_store_memory:
    description: Object store bytes (null - Ray's default); at least 75 MiB.
    type: raw
  ray_temp_dir:
    description: Ray's temp dir (absolute).
    type: str
    required: true
  ray_node_instances:
    description: The host's several Ray nodes, each C({name, gpus[, slot]}); empty for its one node.
    type: list
    elements: raw
    default: []
  ray_node_instance_slots:
    description: How many equal slots the host is cut into (null - one per instance).
    type: raw
  ray_node_instance_port_step:
    description: How far each slot's node ports lie from the previous slot's.
    type: raw
    required: true
  ray_gcs_port:
    description: The head's GCS port.
    type: raw
    required: true
  ray_dashboard_port:
    description: The head's dashboard port.
    type: raw
    required: true
  ray_client_server_port:
    description: The head's Ray client port.
    type: raw
    required: true
  ray_object_manager_port:
    description: A node's object manager port (slot 0).
    type: raw
    required: true
  ray_node_manager_port:
    description: A node's node manager port (slot 0).
    type: raw
    required: true
  ray_dashboard_agent_grpc_port:
    description: A node's dashboard agent gRPC port (slot 0).
    type: raw
    required: true
  ray_runtime_env_agent_port:
    description: A node's runtime env agent port (slot 0).
    type: raw
    required: true
  ray_metrics_export_port:
    description: A node's metrics export port (slot 0).
    type: raw
    required: true
  ray_dashboard_agent_listen_port:
    description: A node's dashboard agent HTTP port (slot 0).
    type: raw
    required: true
  ray_min_worker_port:
    description: The first port of the host's worker port range.
    type: raw
    required: true
  ray_max_worker_port:
    description: The last port of the host's worker port range.
    type: raw
    required: true
  ray_health_enabled:
    description:
      - Whether the host runs the health timer (C(rayfleet-health.timer)); true or false.
      - The health variables are checked only when the task gives them (the ray role gives all six).
    type: raw
  ray_health_interval_s:
    description: Seconds between the health checks, a whole number of at least 10.
    type: raw
  ray_health_dir:
    description: The directory of the site's health scripts (absolute).
    type: raw
  ray_health_script_timeout_s:
    description: Seconds each health script may run, a whole number of at least 1.
    type: raw
  ray_health_drain:
    description: Whether a failing node is drained in Ray; true or false.
    type: raw
  ray_health_textfile_dir:
    description: Node exporter's textfile collector directory (absolute).
    type: raw
  left_out:
    description:
      - The hosts this run goes on without (unreachable). They stay members of the cluster with their nodes expected,
        but the run does not wait for their nodes.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
# the other options as the ray role's defaults; the host is in group gpu (its instances name GPUs)
- name: Plan the Ray nodes (the ray role's tasks/plan.yml passes every variable it reads)
  rayfleet.cluster.cluster_plan:
    ray_node_role: worker
    ray_node_ip: 10.0.0.5
    ray_version: "2.60.0"
    ray_auth_mode: token
    ray_auth_token_path: /srv/rayfleet/credentials/ray_auth_token
    ray_head_address: 10.0.0.1
    ray_runtime: container
    ray_container_image: registry.example.com/ray-node:2.60.0
    ray_temp_dir: /tmp/ray
    ray_node_instances: [{name: gpu0, gpus: [0]}, {name: gpu1, gpus: [1]}]
    ray_node_instance_port_step: 100
    ray_gcs_port: 6379
    ray_dashboard_port: 8265
    ray_client_server_port: 10001
    ray_object_manager_port: 8076
    ray_node_manager_port: 8077
    ray_dashboard_agent_grpc_port: 8078
    ray_runtime_env_agent_port: 8079
    ray_metrics_export_port: 8080
    ray_dashboard_agent_listen_port: 52365
    ray_min_worker_port: 10002
    ray_max_worker_port: 11999
  register: plan

- name: Show the second instance's unit and node manager port
  ansible.builtin.debug:
    msg: "{{ plan.host.instances[1].unit }} {{ plan.host.instances[1].ports.node_manager }}"
"""

RETURN = r"""
host:
  description: This host's plan.
  returned: success
  type: dict
  contains:
    role:
      description: C(head) or C(worker).
      type: str
      returned: success
    node_ip:
      description: The host's IP (normalized).
      type: str
      returned: success
    head_address:
      description: Where this host's Ray reaches the head's GCS (without the port) - on a worker O(ray_head_address)
        or its default, empty on a baked one (its launch file names the head); on the head, its own IP.
      type: str
      returned: success
    gcs_address:
      description: The same with the GCS port, C(host:port) (an IPv6 address in brackets) - a worker's with the head's
        O(ray_gcs_port) (the head's inventory value, else the ray role's default; a worker follows the head's port
        whatever its own says), the head's with its own; empty on a baked worker.
      type: str
      returned: success
    ns:
      description: C(-<ray_cluster_name>), or empty.
      type: str
      returned: success
    slot_count:
      description: How many slots the host is cut into.
      type: int
      returned: success
    instances:
      description:
      - One per Ray node of the host, in C(ray_node_instances)' order (one unnamed item for the host's one
        node), each with C(name), C(index), C(slot), C(gpus), C(ports) (every Ray port, the worker port slice as
        C(min_worker)/C(max_worker)), C(label), C(suffix), C(unit), C(container_name), C(config_path),
        C(container_record), C(temp_dir) and C(node_name) (C(<ip>/<name>), empty for the one node).
      type: list
      elements: dict
      returned: success
    units:
      description: Every node's systemd unit.
      type: list
      elements: str
      returned: success
    any_role_units:
      description: The units of this cluster a node of this host may run under, whichever its role (the firewall
        starts before them).
      type: list
      elements: str
      returned: success
    config_paths:
      description: Every node's settings file.
      type: list
      elements: str
      returned: success
    expected_nodes:
      description: Ray node name -> inventory name of this host's nodes.
      type: dict
      returned: success
    extra_ports:
      description: The node ports of the instances beyond slot 0 (the firewall opens them).
      type: list
      elements: int
      returned: success
cluster:
  description: The cluster as the inventory describes it.
  returned: success
  type: dict
  contains:
    members:
      description: The head then the workers.
      type: list
      elements: str
      returned: success
    ips:
      description: Inventory name -> cluster IP.
      type: dict
      returned: success
    expected_nodes:
      description: 'Every node Ray must list alive: node name -> inventory name.'
      type: dict
      returned: success
    head:
      description: The head's inventory name.
      type: str
      returned: success
    head_ip:
      description: The head's cluster IP.
      type: str
      returned: success
    cluster_name:
      description: The head's C(ray_cluster_name) (empty for the host's one unnamed cluster), which names its settings
        file and units; hosts outside the cluster (a submit host) read them by it.
      type: str
      returned: success
    addresses:
      description: Inventory name -> every address the host may connect from (its IPv4 addresses, then its IPv6
        ones but link-local, from its facts, but those of local container and VM bridges such as docker0; its
        cluster IP alone when its facts are not known).
      type: dict
      returned: success
    sources:
      description: Every member's addresses in one list, IPv4 first, each once (the firewall's and SSH trust's
        sources).
      type: list
      elements: str
      returned: success
    known_hosts:
      description: Inventory name -> the host's C(known_hosts) entry from its facts, C(names) (inventory name,
        C(ansible_host), hostname, FQDN and its addresses) and C(key), its ed25519 host key (empty where its facts
        hold none). SSH trust writes it; a changed host key is an input of the stages that read the cluster.
      type: dict
      returned: success
    monitoring:
      description: Inventory name -> the exporter settings its inventory sets (C(monitoring_enabled),
        C(monitoring_node_exporter), C(monitoring_node_exporter_port), C(monitoring_dcgm_exporter),
        C(monitoring_dcgm_exporter_port); those unset are left out). The monitoring host scrapes each member by
        them, so a member's new port is an input of the monitoring stage there.
      type: dict
      returned: success
      sample: {head: {}, gpu1: {monitoring_dcgm_exporter_port: 9500}}
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
