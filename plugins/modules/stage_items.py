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
author:
  - rayfleet authors (@rayfleet)
options:
  items:
    description:
      - The items, each a dict with a C(kind) (file, unit, package, pip, mount, user, group, kmod, nft_table,
        sshd) and the keys that name it (C(path); C(name); C(venv) and C(name); C(family) and C(name)).
    type: list
    elements: dict
    required: true
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Watch the firewall's table in the stage record
  rayfleet.cluster.stage_items:
    items:
      - {kind: nft_table, family: inet, name: rayfleet}
"""

RETURN = r"""
rayfleet_managed:
  description: The items, as the callback collects them.
  returned: success
  type: list
  elements: dict
"""
