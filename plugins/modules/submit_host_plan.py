#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: submit_host_plan
short_description: Check a submit host's settings and the inventory, and name the cluster's client, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the submit_host role's variables and the inventory, and returns the names the role gives this cluster's
    client on the submit host - the head, its settings file (named after its C(ray_cluster_name)), the head's SSH
    address and its C(known_hosts) name, the submitting user, the tunnel unit and the commands.
  - "Checked: O(submit_host_state) C(present) or C(absent); O(submit_host_cluster_name) lowercase letters, digits and
    C(-), at most 40, starting with a letter or digit; O(submit_host_local_port) a port 1024-65535;
    O(submit_host_head_ssh_port) a port 1-65535 (a number or its digits, not a boolean); O(submit_host_tunnel_user) a
    user name (lowercase letters, digits, C(_) and C(-), at most 32); O(submit_host_user) empty or a user name
    (dots allowed); O(submit_host_head_address) empty, an IP address (IPv6 without brackets) or a DNS name;
    O(submit_host_tunnel_unit), O(submit_host_install_packages) and O(submit_host_ansible) true or false (the words
    Ansible's C(bool) filter takes)."
  - "The inventory: group C(ray_head) has exactly one host, and the submit host is in neither C(ray_head) nor
    C(ray_worker)."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - Whether the submitting user exists is the role's own check on the submit host, after this one.
  - The submit_host role runs it in its validate step and registers the result; its tasks and templates read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  submit_host_state:
    description: C(present), or C(absent) to remove this cluster's client.
    type: raw
    required: true
  submit_host_cluster_name:
    description: Names this cluster's files, commands and tunnel unit on the submit host.
    type: raw
    required: true
  submit_host_user:
    description: The user who submits jobs; empty is the login user (C(ansible_user), else the controller's C($USER)).
    type: raw
    required: true
  submit_host_local_port:
    description: Loopback port of the tunnel.
    type: raw
    required: true
  submit_host_head_address:
    description: The head's address as the submit host reaches it over SSH; empty is the head's C(ansible_host).
    type: raw
    required: true
  submit_host_head_ssh_port:
    description: The head's SSH port.
    type: raw
    required: true
  submit_host_tunnel_user:
    description: The forwarding-only account on the head.
    type: raw
    required: true
  submit_host_tunnel_unit:
    description: Keep the tunnel up with a systemd unit.
    type: raw
    required: true
  submit_host_install_packages:
    description: Install python3-venv and the OpenSSH client.
    type: raw
    required: true
  submit_host_ansible:
    description: ansible-core and this collection in the client's venv.
    type: raw
    required: true
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the submit host settings and name the cluster's client
  rayfleet.cluster.submit_host_plan:
    submit_host_state: present
    submit_host_cluster_name: team-a
    submit_host_user: alice
    submit_host_local_port: 8265
    submit_host_head_address: ""
    submit_host_head_ssh_port: 22
    submit_host_tunnel_user: rayfleet-tunnel
    submit_host_tunnel_unit: true
    submit_host_install_packages: true
    submit_host_ansible: true
  register: client

- name: Show the tunnel's unit
  ansible.builtin.debug:
    msg: "{{ client.unit }} to {{ client.head_ssh }}"
"""

RETURN = r"""
state:
  description: O(submit_host_state).
  returned: success
  type: str
  sample: present
head:
  description: The cluster's head (the one host of group C(ray_head)).
  returned: success
  type: str
head_ns:
  description: C(-<ray_cluster_name>) of the head, or empty - the suffix of the head's files.
  returned: success
  type: str
head_config:
  description: The head's Ray settings file.
  returned: success
  type: str
  sample: /etc/rayfleet/ray-head.json
preflight_state_path:
  description: The head's last preflight verdict.
  returned: success
  type: str
  sample: /etc/rayfleet/preflight.json
head_ssh:
  description: The head's address as the submit host reaches it (O(submit_host_head_address), else the head's
    C(ansible_host), else its inventory name).
  returned: success
  type: str
head_ssh_port:
  description: O(submit_host_head_ssh_port) as a number.
  returned: success
  type: int
known_host:
  description: The head's name in C(known_hosts) - its address, or C([address]:port) unless the port is 22.
  returned: success
  type: str
user:
  description: The submitting user (O(submit_host_user), else the login user).
  returned: success
  type: str
local_port:
  description: O(submit_host_local_port) as a number.
  returned: success
  type: int
unit:
  description: The tunnel's systemd unit, C(rayfleet-tunnel-<cluster>.service).
  returned: success
  type: str
commands:
  description: The client's commands in C(~/.local/bin) - C(ray-<cluster>), C(rayfleet-submit-<cluster>),
    C(rayfleet-tunnel-<cluster>).
  returned: success
  type: list
  elements: str
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
