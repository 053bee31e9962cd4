#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: doctor_report
short_description: The doctor's table of whether rayfleet can work on each host
version_added: "0.1.0"
description:
  - Runs on the controller only (an action plugin), in the last play of the playbook C(rayfleet.cluster.doctor).
  - Reads, for every host of O(groups), what the playbook's two C(ansible.builtin.raw) tasks registered there
    (C(__rayfleet_doctor_probe), C(__rayfleet_doctor_become)) and judges the host - SSH (reachable, host key known and
    unchanged, login accepted, as Ansible connects for C(site.yml)), privilege escalation (become, as the roles use
    it), a python3 of 3.8 or later, and an OS the roles support (Debian 12, Ubuntu 22.04 and 24.04, RHEL, Rocky and
    AlmaLinux 9, Amazon Linux 2023).
  - Each failure is put in words - a host key that changed or is unknown (never trusted on first use), a refused
    login, a name that does not resolve, no SSH server answering - with the last line ssh printed.
  - Never fails itself; the playbook fails after the table when RV(not_ready) is not empty.
author:
  - rayfleet authors (@rayfleet)
options:
  groups:
    description: The inventory groups whose hosts are judged (each host once).
    type: list
    elements: str
    default: [ray_head, ray_worker]
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Judge every host from its probe
  rayfleet.cluster.doctor_report:
    groups: [ray_head, ray_worker, gpu, nfs_server, ray_submit]
  register: doctor

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ doctor.table }}"
"""

RETURN = r"""
table:
  description: The table - a header, one line per host, then each problem after its host's name, then the count ready.
  returned: always
  type: list
  elements: str
hosts:
  description: Each host's verdict - host, address, ssh, become, python, os, ok and problems.
  returned: always
  type: list
  elements: dict
not_ready:
  description: The hosts that are not ready.
  returned: always
  type: list
  elements: str
"""
