#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_cluster_info
short_description: Read a Ray cluster's nodes and resources, optionally waiting for a minimum membership
version_added: "0.1.0"
description:
  - Lists the cluster's nodes through Ray's state API (C(ray.util.state.list_nodes)) at the head's
    dashboard address, or straight from the cluster's GCS at C(host:port) - no dashboard needed, for clusters that
    run without one and for nodes that cannot reach the head's loopback-only dashboard - and returns alive/dead
    counts and total resources.
  - With O(wait_for), polls until at least O(wait_for.min_nodes) nodes and O(wait_for.min_gpus) GPUs are
    alive and every host in O(wait_for.hosts) has an alive node (all but O(wait_for.max_missing) of them); on
    timeout it fails naming the hosts that are missing.
  - Read-only. Must run with the Ray venv's interpreter.
author:
  - rayfleet authors (@rayfleet)
options:
  address:
    description:
      - The head's dashboard URL, e.g. C(http://10.0.0.10:8265) (Ray's state API), or the cluster's GCS address,
        C(10.0.0.10:6379) (Ray's GCS client, where only the GCS port has to be reachable).
    type: str
    required: true
  wait_for:
    description: Membership to wait for. Without it the current state is returned at once.
    type: dict
    suboptions:
      min_nodes:
        description: Minimum number of alive nodes.
        type: int
        default: 0
      min_gpus:
        description: Minimum number of GPUs summed over alive nodes.
        type: float
        default: 0
      hosts:
        description:
          - Hosts that must each have an alive node, as a mapping of node IP to a name used in messages
            (normally the inventory host name).
          - A key may also be a Ray node name (C(--node-name)), as a host's several node instances are
            expected - C(<node_ip>/<instance>) (the ray role's C(ray_node_instances)).
        type: dict
        default: {}
      max_missing:
        description:
          - How many of O(wait_for.hosts) may have no alive node for the wait to end (a check that goes on without
            them, such as a preflight allowed to); RV(missing) names them.
        type: int
        default: 0
  timeout:
    description: Seconds to wait for O(wait_for).
    type: int
    default: 120
  auth_token_path:
    description:
      - File holding the cluster's Ray token, for clusters with Ray token authentication (C(RAY_AUTH_MODE=token)).
    type: path
extends_documentation_fragment:
  - rayfleet.cluster.attributes.info_module
seealso:
  - module: rayfleet.cluster.ray_node
"""

EXAMPLES = r"""
- name: Wait for every inventory host to be an alive Ray node
  rayfleet.cluster.ray_cluster_info:
    address: "http://{{ hostvars[groups['ray_head'][0]].ansible_default_ipv4.address }}:8265"
    wait_for:
      min_nodes: "{{ groups['ray_head'] | length + groups['ray_worker'] | length }}"
      hosts: "{{ dict(groups['ray_worker'] | map('extract', hostvars, ['ansible_default_ipv4', 'address'])
               | zip(groups['ray_worker'])) }}"
    timeout: 180
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python
  register: cluster

- name: The same from any node, through the GCS (the dashboard listens on the head's loopback)
  rayfleet.cluster.ray_cluster_info:
    address: "{{ hostvars[groups['ray_head'][0]].ansible_default_ipv4.address }}:6379"
    auth_token_path: /etc/rayfleet/auth-token
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python

- name: Show total GPUs
  ansible.builtin.debug:
    msg: "{{ cluster.gpus }} GPUs on {{ cluster.alive_nodes }} nodes"
"""

RETURN = r"""
nodes:
  description: Every node Ray knows, alive or dead.
  returned: always
  type: list
  elements: dict
  contains:
    node_id: {description: Ray node id., type: str}
    node_ip: {description: Node IP., type: str}
    state: {description: C(ALIVE) or C(DEAD)., type: str}
    is_head: {description: Whether this is the head node., type: bool}
    node_name: {description: Ray's node name., type: str}
    resources: {description: Total resources of the node (without Ray's C(node:*) entries)., type: dict}
    start_time_ms: {description: "Start time, milliseconds since the epoch.", type: int}
alive_nodes:
  description: Number of alive nodes.
  returned: always
  type: int
  sample: 3
dead_nodes:
  description: Number of nodes Ray lists as dead (e.g. before a restart).
  returned: always
  type: int
  sample: 0
total_resources:
  description: Resources summed over alive nodes.
  returned: always
  type: dict
  sample: {CPU: 6.0, memory: 3.0e10, object_store_memory: 8.0e8}
cpus:
  description: CPUs summed over alive nodes.
  returned: always
  type: float
gpus:
  description: GPUs summed over alive nodes.
  returned: always
  type: float
missing:
  description: The names (values of O(wait_for.hosts)) that have no alive node.
  returned: always
  type: list
  elements: str
  sample: [worker2]
admitted_nodes:
  description: The alive nodes (by Ray node name) that passed their admission checks on their host before their Ray
    started (the Ray node label C(rayfleet.io/admission=passed)).
  returned: always
  type: list
  elements: str
  sample: [10.0.0.10, 10.0.0.11]
unadmitted_nodes:
  description: The alive nodes (by Ray node name) started without rayfleet's admission checks (no
    C(rayfleet.io/admission) label) - by hand, or by an older rayfleet release.
  returned: always
  type: list
  elements: str
  sample: []
joined:
  description: The alive nodes (by Ray node name) that are none of O(wait_for.hosts) - nodes that joined from outside
    the inventory, such as the autoscaler's or a spot replacement booted from a baked image. Empty without
    O(wait_for.hosts).
  returned: always
  type: list
  elements: str
  sample: [10.0.0.23]
ray_version:
  description: Version of Ray in the interpreter that ran the module.
  returned: always
  type: str
  sample: 2.60.0
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.rayfleet.cluster.plugins.module_utils.rayfleet_common import (
    require_rayfleet,
)

try:
    from rayfleet.cluster import fetcher, missing_hosts, wait_for
    from rayfleet.errors import ClusterWaitTimeout, RayfleetError
    from rayfleet.raynode import auth_env
except ImportError:
    pass  # reported by require_rayfleet()


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            address=dict(type="str", required=True),
            wait_for=dict(type="dict", options=dict(
                min_nodes=dict(type="int", default=0),
                min_gpus=dict(type="float", default=0),
                hosts=dict(type="dict", default={}),
                max_missing=dict(type="int", default=0),
            )),
            timeout=dict(type="int", default=120),
            auth_token_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    require_rayfleet(module)
    p = module.params
    want = p["wait_for"] or {}
    # Ray reads its auth settings when it is first imported: set them before anything imports ray.
    os.environ.update(auth_env(p["auth_token_path"]))
    try:
        import ray
        ray_version = ray.__version__
    except ImportError:
        ray_version = ""
    expected = dict((str(k), str(v)) for k, v in (want.get("hosts") or {}).items())
    if (want.get("max_missing") or 0) < 0:
        module.fail_json(msg="wait_for.max_missing is %s; expected a count >= 0" % want["max_missing"])
    try:
        state = wait_for(
            fetcher(p["address"], auth_token_path=p["auth_token_path"]),
            min_nodes=want.get("min_nodes") or 0,
            min_gpus=want.get("min_gpus") or 0,
            expected=expected,
            max_missing=want.get("max_missing") or 0,
            timeout=p["timeout"] if want else 0,
        )
    except ClusterWaitTimeout as exc:
        extra = exc.state.to_dict() if exc.state is not None else {}
        module.fail_json(msg=to_native(exc), ray_version=ray_version, **extra)
    except RayfleetError as exc:
        module.fail_json(msg=to_native(exc), ray_version=ray_version)
    module.exit_json(changed=False, ray_version=ray_version, missing=missing_hosts(state, expected),
                     joined=state.joined(expected) if expected else [], **state.to_dict())


if __name__ == "__main__":
    main()
