#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: plan
short_description: Check one role's variables and work out its plan, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Takes the variables of the role named by O(role) as its argument spec (C(meta/argument_specs.yml)) declares them,
    with the role's defaults, the inventory's values and C(-e), each rendered in the host's context when the plan
    reads it; and the few variables of other roles the plan reads (for example the firewall reads
    C(nfs_server_port)), their role's default where the host sets none.
  - Checks them and returns what the role's tasks read. Every problem found fails the task at once, each naming the
    role, the host, the variable, the bad value and what was expected, before anything changes on any host. Booleans
    are read as Ansible's C(bool) reads them.
  - "C(ray): the host's Ray nodes (instances, slots, ports, units, paths, node names) in C(host); with C(given)
    C(cluster=true), once for a run, the cluster's members, expected nodes and addresses in C(cluster) instead
    (the same for every host, so each host's plan costs the same at any cluster size). C(firewall): the nftables
    tables, address sets and ports.
    C(ssh_trust): who holds the cluster key and the host certificate's principals. C(shared_storage): each mount's
    server, fstab source and options. C(nfs_server): the exports and their clients. C(monitoring): the listen
    addresses and the scrape targets. C(checkpoint_store): the store's URI and the shared directory's marker.
    C(submit_host): the cluster's client. C(pytorch): what pip installs. C(apex): the source, the build flags and,
    given the host's venv, the build key. C(nccl), C(nvidia_driver), C(cuda), C(rocm): the source, the release and
    the packages, given the host's hardware. C(common), C(image_cleanup), C(preflight), C(bake): the check alone."
  - Each role runs it in its validate step; see the role's README for its variables.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  role:
    description: The role whose plan is worked out.
    type: str
    required: true
    choices: [ray, firewall, monitoring, ssh_trust, nfs_server, shared_storage, checkpoint_store, submit_host, pytorch,
              apex, nccl, nvidia_driver, cuda, rocm, common, image_cleanup, preflight, bake]
  given:
    description:
      - What the role's earlier tasks read on the host or from the cluster plan, by name, as the role's plan takes it
        (for example the apex role's C(venv) and C(hardware), the firewall's C(cluster_addresses)). A name the role's
        plan does not take fails the task.
    type: dict
    default: {}
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the PyTorch settings and work out what pip installs
  rayfleet.cluster.plan:
    role: pytorch
  register: pytorch

- name: Work out the Apex build once the host's Ray venv and GPUs were read
  rayfleet.cluster.plan:
    role: apex
    given:
      venv: "{{ apex_venv_report }}"
      hardware: "{{ gpu_hardware }}"
      cuda_home: /usr/local/cuda
  register: apex
"""

RETURN = r"""
problems:
  description: Every problem found, each naming the role, the host and the variable.
  returned: failure
  type: list
  elements: str
host:
  description: The ray role's plan of the host's Ray nodes.
  returned: success, with O(role=ray)
  type: dict
cluster:
  description: The ray role's plan of the cluster's members (the same whichever host plans it).
  returned: success, with O(role=ray) and C(given) C(cluster=true)
  type: dict
"""
