#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apex_plan
short_description: Check a host's Apex settings and work out how Apex is built there, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the apex role's variables and says how Apex is built - where its source comes from (C(git), a repository
    checked out at O(apex_commit); C(directory) or C(archive), a source tree or a tarball on the controller), the
    setup.py flags (C(--cpp_ext), C(--cuda_ext), then O(apex_build_options)) and the extensions' modules.
  - Given what the host holds (O(venv), O(hardware), O(cuda_home)), also the GPU architectures to compile for
    (O(apex_cuda_arch_list), else the compute capabilities of the GPUs on the PCI bus, else C(8.0;9.0)) and the build
    key - the first 16 hex digits of the sha256 of the commit, torch and its CUDA, the Python, the machine, the
    architectures, the flags and the CUDA toolkit - one compiled wheel per key, kept on the controller.
  - "Checked: O(apex_commit) is a full 40-hex commit; O(apex_source) a git repository URL (C(http), C(https) or
    C(file), with Python's C(urllib.parse), not an archive's) or an absolute path that exists on the controller;
    O(apex_source_checksum) unset (the commit pins the source); O(apex_cpp_ext) and O(apex_cuda_ext) true or false
    (the words Ansible's C(bool) filter takes), not both false; O(apex_build_options) a list of flags like
    C(--fast_layer_norm); O(apex_cuda_arch_list) empty or like C(8.0;9.0+PTX); O(apex_max_jobs) a whole number
    >= 0; O(apex_cuda_home) empty or absolute; O(apex_venv_dir) absolute."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The apex role runs it in its validate step, and again once it read the host's Ray venv, GPUs and CUDA toolkit;
    its tasks read the registered result.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  apex_commit:
    description: The pinned Apex commit.
    type: raw
    required: true
  apex_source:
    description: A git repository URL, or a source tree or tarball on the controller.
    type: raw
    required: true
  apex_source_checksum:
    description: No longer read; refused when set (empty or null is taken for unset).
    type: raw
  apex_cpp_ext:
    description: Build the C++ extensions.
    type: raw
    required: true
  apex_cuda_ext:
    description: Build the CUDA extensions.
    type: raw
    required: true
  apex_build_options:
    description: More setup.py flags.
    type: raw
    required: true
  apex_cuda_arch_list:
    description: The GPU architectures to compile for (TORCH_CUDA_ARCH_LIST); empty - from the PCI bus.
    type: raw
    required: true
  apex_max_jobs:
    description: Parallel compiler jobs; 0 - from the host's CPUs and memory.
    type: raw
    required: true
  apex_cuda_home:
    description: The CUDA toolkit; empty - what the cuda role recorded.
    type: raw
    required: true
  apex_venv_dir:
    description: The Ray venv.
    type: raw
    required: true
  venv:
    description:
      - What the host's Ray venv holds, as the role's C(files/apex_probe.py) reports it (C(torch), C(torch_cuda),
        C(python), C(machine)). Given, the build key and the architectures are worked out too.
    type: dict
  hardware:
    description: The host's M(rayfleet.cluster.gpu_hardware_info) result (its C(nvidia_gpus)), read with the CUDA
      extensions and an empty O(apex_cuda_arch_list).
    type: dict
  cuda_home:
    description: The host's CUDA toolkit (part of the build key with the CUDA extensions).
    type: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the Apex settings
  rayfleet.cluster.apex_plan:
    apex_commit: 810ffae374a2b9cb4b5c5e28eaeca7d7998fca0c
    apex_source: https://github.com/NVIDIA/apex.git
    apex_cpp_ext: true
    apex_cuda_ext: false
    apex_build_options: []
    apex_cuda_arch_list: ""
    apex_max_jobs: 0
    apex_cuda_home: ""
    apex_venv_dir: /opt/rayfleet/venv
  register: apex

- name: Show the build flags
  ansible.builtin.debug:
    msg: "{{ apex.build_flags | join(' ') }} from {{ apex.source_kind }}"
"""

RETURN = r"""
source_kind:
  description: Where the source comes from - C(git), C(directory) or C(archive).
  returned: success
  type: str
  sample: git
build_flags:
  description: The setup.py flags the wheel is built with.
  returned: success
  type: list
  elements: str
  sample: ["--cpp_ext", "--cuda_ext"]
cpp_ext:
  description: Whether the C++ extensions are built.
  returned: success
  type: bool
cuda_ext:
  description: Whether the CUDA extensions are built.
  returned: success
  type: bool
modules:
  description: The extensions' modules the import check loads.
  returned: success
  type: list
  elements: str
  sample: ["apex_C", "amp_C", "fused_layer_norm_cuda"]
arch_list:
  description: The GPU architectures to compile for (TORCH_CUDA_ARCH_LIST).
  returned: success, given O(venv)
  type: str
  sample: "9.0"
key:
  description: The build key, 16 hex digits.
  returned: success, given O(venv)
  type: str
  sample: 3f2a9c0d41e8b7a5
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
