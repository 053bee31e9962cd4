#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stage_items
short_description: Declare items a stage manages through commands, for its drift record
version_added: "0.1.0"
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Most items a stage manages are taken from its tasks' results (files, units, packages, ...) by the
    C(rayfleet.cluster.stage_items) callback. State applied through a command - an nftables table a unit loads -
    is declared with this module, and M(rayfleet.cluster.stage_record) records it with the rest.
  - So is what a task skipped on a re-run manages (pip, skipped where the venv already holds the packages; a package
    task, skipped where the drift check found its packages installed), so that the record of a stage applied again
    covers what its first run did.
author:
  - rayfleet authors (@rayfleet)
options:
  items:
    description:
      - The items, each a dict with a C(kind) (file, unit, package, pip, mount, user, group, kmod, nft_table,
        sshd) and the keys that name it (C(path); C(name); C(venv) and C(name); C(family) and C(name)). A unit
        named without a type is a C(.service), as M(ansible.builtin.systemd_service) takes it.
    type: list
    elements: dict
    default: []
  files:
    description: Files and directories (absolute paths) - one C(file) item each.
    type: list
    elements: path
    default: []
  packages:
    description:
      - System packages (apt, dnf), named as a package task takes them (C(name), C(name=version)), one C(package)
        item each - for a package task skipped where the drift check found every package installed
        (RV(rayfleet.cluster.stage_gate#module:installed_packages)).
    type: list
    elements: str
    default: []
  pip:
    description:
      - pip packages in a venv, named by the requirements pip installs them with (C(ray[default]==2.60.0) is
        C(ray)), one C(pip) item each.
    type: dict
    suboptions:
      venv:
        description: The venv.
        type: path
        required: true
      requirements:
        description: The requirements, as given to M(ansible.builtin.pip).
        type: list
        elements: str
        required: true
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Watch the firewall's table in the stage record
  rayfleet.cluster.stage_items:
    items:
      - {kind: nft_table, family: inet, name: rayfleet}

- name: Watch the firewall's package in the stage record (its package task skips it where it is installed)
  rayfleet.cluster.stage_items:
    packages: [nftables]

- name: Watch Ray and its companions in the stage record (pip skips them on a re-run)
  rayfleet.cluster.stage_items:
    pip:
      venv: /opt/rayfleet/venv
      requirements: ["ray[default]==2.60.0", "nvidia-ml-py==13.580.82"]
"""

RETURN = r"""
rayfleet_managed:
  description: The items, as the callback collects them.
  returned: success
  type: list
  elements: dict
"""
