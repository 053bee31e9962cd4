#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: reach_policy
short_description: Decide which unreachable hosts a run leaves out, and whether it goes on without them
version_added: "0.1.0"
description:
  - Runs on the controller only (an action plugin), once per play; nothing is sent to the hosts.
  - Reads each play host's first contact of the run, registered (O(reach_var)) by an C(ansible.builtin.setup) or
    M(rayfleet.cluster.drift_check) task with C(ignore_unreachable=true), and lists the unreachable hosts with their
    errors.
  - Fails, naming every unreachable host and its error, when the head (group C(ray_head)) is unreachable, or when
    more hosts are unreachable than O(max_unreachable) allows; otherwise returns them in RV(left_out) and names each
    in a warning. Where the first contact ran without C(ignore_unreachable) (C(site.yml)), Ansible has already taken
    them out of the play, the recap counts them unreachable and the run exits non-zero.
  - Fails, naming each host and its error, when a host was reached but its facts were not read (no Python, become
    refused). The first contact runs with C(failed_when=false), so such a host is not failed yet.
  - Fails with the converge lock's message when the first contact was refused the lock on the head
    (M(rayfleet.cluster.drift_check) in C(site.yml)).
  - Hosts left out keep their place in the cluster's configuration; the cluster plan reads their last known facts.
author:
  - rayfleet authors (@rayfleet)
options:
  max_unreachable:
    description:
      - The most hosts that may be unreachable for the run to go on with the others - a count, or a percentage of
        the play's hosts (C('10%'), rounded down). C(0) stops the run when any host is unreachable.
      - C(site.yml) passes C(rayfleet_max_unreachable), C(playbooks/preflight.yml) C(preflight_allow_missing).
    type: raw
    default: 0
  policy_var:
    description: The variable that set O(max_unreachable), named in the messages.
    type: str
    default: rayfleet_max_unreachable
  reach_var:
    description: The variable the first contact was registered as.
    type: str
    default: __rayfleet_reach
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Reach every host (an unreachable one leaves the play, not fatal yet)
  ansible.builtin.setup:
    gather_subset: [min, network]
  register: __rayfleet_reach
  any_errors_fatal: false

- name: Check the unreachable hosts against the policy
  rayfleet.cluster.reach_policy:
    max_unreachable: "{{ rayfleet_max_unreachable | default(0) }}"
  register: __rayfleet_reach_policy
  run_once: true
"""

RETURN = r"""
left_out:
  description: The unreachable hosts the run goes on without, each with its connection error.
  returned: success
  type: dict
  sample: {worker-7: "Failed to connect to the host via ssh: connect to host 10.0.0.17 port 22: No route to host"}
allowed:
  description: How many hosts the policy allows to be unreachable.
  returned: success
  type: int
hosts:
  description: How many hosts the play has.
  returned: success
  type: int
policy_var:
  description: The variable that set the policy (O(policy_var)).
  returned: success
  type: str
"""
