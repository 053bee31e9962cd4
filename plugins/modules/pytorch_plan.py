#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pytorch_plan
short_description: Check a host's PyTorch settings and work out what pip installs, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the pytorch role's variables and works out what pip installs into the Ray venv - torch at
    O(pytorch_version), then O(pytorch_extra_packages) - and pip's extra arguments (C(--no-index), C(--find-links),
    C(--index-url)).
  - "Checked: O(pytorch_version) is a release like C(2.13.0), optionally with a local build tag such as C(+cpu);
    O(pytorch_index_url) empty or an C(http), C(https) or C(file) URL; O(pytorch_find_links) empty, an absolute path
    or such a URL (with Python's C(urllib.parse); neither with blanks, which would split pip's arguments);
    O(pytorch_no_index) a boolean, true only with O(pytorch_find_links) set and O(pytorch_index_url) empty;
    O(pytorch_venv_dir) absolute; O(pytorch_extra_packages) a list, each requirement pinned (a name, its extras, then
    C(==), C(>=), C(<=), C(~=), C(!=), C(<) or C(>))."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The pytorch role runs it in its validate step and registers the result; its install task reads it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  pytorch_version:
    description: The torch release, pinned.
    type: raw
    required: true
  pytorch_index_url:
    description: The package index for torch; empty is PyPI.
    type: raw
    required: true
  pytorch_find_links:
    description: A wheel directory on the nodes (or a URL) searched before the index; may be empty.
    type: raw
    required: true
  pytorch_no_index:
    description: Install from O(pytorch_find_links) alone, asking no package index (C(--no-index)).
    type: raw
    required: true
  pytorch_venv_dir:
    description: The venv torch goes into (the Ray venv).
    type: raw
    required: true
  pytorch_extra_packages:
    description: More requirements installed with torch, each pinned.
    type: raw
    required: true
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the PyTorch settings
  rayfleet.cluster.pytorch_plan:
    pytorch_version: "2.13.0"
    pytorch_index_url: https://download.pytorch.org/whl/cpu
    pytorch_find_links: ""
    pytorch_no_index: false
    pytorch_venv_dir: /opt/rayfleet/venv
    pytorch_extra_packages: ["torchvision==0.29.1"]
  register: torch_plan

- name: Install PyTorch
  ansible.builtin.pip:
    name: "{{ torch_plan.packages }}"
    virtualenv: /opt/rayfleet/venv
    extra_args: "{{ torch_plan.pip_args | default(omit, true) }}"
"""

RETURN = r"""
packages:
  description: The requirements pip installs - torch pinned to O(pytorch_version), then O(pytorch_extra_packages).
  returned: success
  type: list
  elements: str
  sample: ["torch==2.13.0", "torchvision==0.29.1"]
extra_names:
  description: The names of O(pytorch_extra_packages), normalized (lower case, runs of C(-), C(_) and C(.) as one
    C(-)), sorted; the role records them in the venv and removes one that is taken out of the list.
  returned: success
  type: list
  elements: str
  sample: ["torchvision"]
pip_args:
  description: pip's extra arguments, C(--no-index), C(--find-links) and C(--index-url) where set; empty when none is.
  returned: success
  type: str
  sample: --index-url https://download.pytorch.org/whl/cpu
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
