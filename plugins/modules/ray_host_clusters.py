#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_host_clusters
short_description: The Ray clusters a host already runs, and whether another fits beside them
version_added: "0.1.0"
description:
  - Reads the settings files M(rayfleet.cluster.ray_node) wrote on the host (C(ray[-<cluster>]-<role>[-<instance>].json)
    under O(settings_dir)), each node venv's recorded requirements, and each container node's record of what its
    container runs.
  - Compares the cluster about to be configured with them and returns, without changing anything,
    RV(collisions) - a worker whose cluster name is already another head's cluster, ports, temp dir or a venv with
    other packages shared with another cluster - and RV(unwanted), this cluster's nodes the plan no longer has.
  - With O(gpus), also returns RV(gpu_collisions), the GPUs another cluster's container already has.
  - The caller decides what to do with them (the ray role fails before anything changes on a collision).
author:
  - rayfleet authors (@rayfleet)
options:
  settings_dir:
    description: Where the nodes' settings files are.
    type: path
    default: /etc/rayfleet
  cluster_name:
    description: The cluster's C(ray_cluster_name) (empty for the host's one unnamed cluster).
    type: str
    default: ""
  role:
    description: The role of this cluster's nodes on the host.
    type: str
    required: true
    choices: [head, worker]
  head:
    description: The C(host:port) of the head this host's worker nodes join, or the head's own for a head.
    type: str
    default: ""
  instances:
    description:
      - The host's planned nodes (the cluster plan's instances), each a dict with its instance C(name) (empty for a
        host's one node) and C(ports) (Ray's port names); other keys are ignored.
      - The nodes' worker ranges are taken from O(worker_port_range).
    type: list
    elements: dict
    default: []
  worker_port_range:
    description: The first and last port of the cluster's worker port range on this host.
    type: list
    elements: int
    default: []
  temp_dir:
    description: The cluster's Ray temp dir.
    type: str
    default: ""
  venv:
    description: The cluster's Ray venv.
    type: str
    default: ""
  requirements:
    description: What the cluster installs into its venv (the text the ray role records in it).
    type: str
    default: ""
  gpus:
    description: The GPU UUIDs this cluster's containers get on the host.
    type: list
    elements: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.info_module
seealso:
  - module: rayfleet.cluster.ray_node
"""

EXAMPLES = r"""
- name: Check the cluster fits beside the others on this host
  rayfleet.cluster.ray_host_clusters:
    cluster_name: teamb
    role: worker
    head: 10.0.0.10:6380
    instances: [{name: "", ports: {gcs: 6380, node_manager: 8177}}]
    worker_port_range: [12000, 12999]
    temp_dir: /tmp/ray-teamb
    venv: /opt/rayfleet/venv-teamb
  register: neighbours
  failed_when: neighbours.collisions | length > 0
"""

RETURN = r"""
clusters:
  description: Every node rayfleet configured on the host; a settings file that cannot be read carries C(error).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The node's settings file.
      type: str
    name:
      description: Its cluster name (empty for the unnamed cluster).
      type: str
    role:
      description: C(head) or C(worker).
      type: str
    instance:
      description: Its instance name (empty for a host's one node).
      type: str
    head_address:
      description: The head a worker joins.
      type: str
    ports:
      description: Its ports.
      type: dict
    temp_dir:
      description: Its Ray temp dir.
      type: str
    venv:
      description: Its Ray venv.
      type: str
    container:
      description: What its container runs, for a container node.
      type: dict
collisions:
  description: Why the cluster does not fit beside the others, one sentence each (empty when it fits).
  returned: always
  type: list
  elements: str
unwanted:
  description: This cluster's nodes on the host that O(instances) no longer has, with their unit and files.
  returned: always
  type: list
  elements: dict
  contains:
    unit:
      description: The node's systemd unit.
      type: str
    files:
      description: Its unit file, settings file and container record.
      type: list
      elements: str
gpu_collisions:
  description: The GPUs of O(gpus) another cluster's container already has, one sentence per container.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayfleet.cluster.plugins.module_utils.ray_host_clusters import (
    collisions,
    gpu_collisions,
    ports_of,
    read_clusters,
    unwanted,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings_dir=dict(type="path", default="/etc/rayfleet"),
            cluster_name=dict(type="str", default=""),
            role=dict(type="str", required=True, choices=["head", "worker"]),
            head=dict(type="str", default=""),
            instances=dict(type="list", elements="dict", default=[]),
            worker_port_range=dict(type="list", elements="int", default=[]),
            temp_dir=dict(type="str", default=""),
            venv=dict(type="str", default=""),
            requirements=dict(type="str", default=""),
            gpus=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["worker_port_range"] and len(p["worker_port_range"]) != 2:
        module.fail_json(msg="worker_port_range: expected [first, last], got %s" % p["worker_port_range"])
    found = read_clusters(p["settings_dir"])
    ports = set()
    names = [str(instance.get("name") or "") for instance in p["instances"]] or [""]
    for instance in p["instances"]:
        ports |= ports_of({k: v for k, v in (instance.get("ports") or {}).items()
                           if k not in ("min_worker", "max_worker")})
    if p["worker_port_range"]:
        ports |= set(range(p["worker_port_range"][0], p["worker_port_range"][1] + 1))
    me = dict(name=p["cluster_name"], role=p["role"], head=p["head"], ports=ports, temp_dir=p["temp_dir"],
              venv=p["venv"], requirements=p["requirements"])
    module.exit_json(
        changed=False,
        clusters=found,
        collisions=collisions(found, me),
        unwanted=unwanted(found, p["cluster_name"], p["role"], names),
        gpu_collisions=gpu_collisions(found, p["cluster_name"], p["gpus"] or []),
    )


if __name__ == "__main__":
    main()
