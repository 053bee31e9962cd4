#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: inventory_check
short_description: Check an inventory for rayfleet offline, from the inventory alone
version_added: "0.1.0"
description:
  - Runs on the controller only (an action plugin). It contacts no host and gathers no facts; the playbook
    C(rayfleet.cluster.check) runs it once, on C(localhost).
  - Checks the group contract first - exactly one host in C(ray_head), a group C(ray_worker) (which may be empty)
    and no host in both.
  - Then, on every host where C(site.yml) runs a role (the roles of its stages, on the groups their plays target, a
    role left out where its C(<role>_enabled) is false), renders the role's variables as the role sees them - the
    inventory and C(-e) over the roles' defaults - and checks them against the role's argument spec and then its
    plan, with the same code the role's validate tasks run on the controller. Cluster-wide checks run across the
    hosts - a worker's Ray release and token mode against the head's, each address in C(ray_cluster_networks) under
    network membership, the firewall's and the NFS exports' sources.
  - Facts a fact cache holds for a host (C(fact_caching)) are read. The checks only a host can tell - the PCI bus, the
    host's sshd, its ephemeral port range, the interfaces and OS family where no cached facts say - are listed as
    deferred; C(site.yml) and C(rayfleet.cluster.validate) make them when they reach the host. A host whose
    C(ray_node_ip) comes from its facts is planned at its C(ansible_host) where that is an address, else at a
    stand-in address, its own address check deferred.
  - Fails naming every problem, each with the host and the variable, and what was expected.
  - With O(scope=contract), checks the group contract only (every playbook of the collection does so first).
author:
  - rayfleet authors (@rayfleet)
options:
  scope:
    description: What is checked - the whole inventory, or the group contract only.
    type: str
    choices: [inventory, contract]
    default: inventory
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the inventory offline
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check the group contract and every host's variables
      rayfleet.cluster.inventory_check:
      register: check

    - name: Show what waits for the hosts
      ansible.builtin.debug:
        var: check.deferred
"""

RETURN = r"""
problems:
  description: Every problem found, each one sentence naming the host, the variable and what was expected.
  returned: always
  type: list
  elements: str
deferred:
  description:
    - The checks only the hosts can make, one line each with the hosts they wait for (the first three, then a count).
  returned: always
  type: list
  elements: str
checked:
  description: For each role checked, the number of hosts it was checked on.
  returned: always
  type: dict
hosts:
  description: The number of hosts checked.
  returned: always
  type: int
"""
