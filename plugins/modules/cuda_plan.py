#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_plan
short_description: Check a host's CUDA toolkit settings and decide its source, release and packages, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the cuda role's variables and decides what the role installs - the source, the release, the toolkit's
    home, the packages and the host compiler nvcc is pointed at - from the OS's default source (O(default_source))
    and the toolkit the distribution packages (O(distribution_cuda)).
  - The host installs the toolkit (RV(act)) when O(cuda_enabled) and it has an NVIDIA GPU on the PCI bus, as
    M(rayfleet.cluster.gpu_hardware_info) reports it (O(hardware)), or O(cuda_force); only then are the settings
    checked.
  - "Checked: the source (O(cuda_source), else O(default_source)) C(distribution) or C(cuda_repo), the first only
    where the OS packages CUDA; O(cuda_version) empty or a major.minor string such as C(12.8), and from the
    distribution only the distribution's own release."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The cuda role runs it in its validate step and registers the result; its tasks read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  cuda_enabled:
    description: Whether the role manages the toolkit on this host.
    type: raw
    required: true
  cuda_force:
    description: Install on a host with no NVIDIA GPU (image builders, tests).
    type: raw
    required: true
  cuda_source:
    description: C(distribution), C(cuda_repo), or empty for O(default_source).
    type: raw
    required: true
  cuda_version:
    description: The toolkit's major.minor, or empty (the distribution's, or 12.8 from NVIDIA's repository).
    type: raw
    required: true
  cuda_packages:
    description: Packages to install instead of the source's default.
    type: raw
    default: []
  hardware:
    description: The host's M(rayfleet.cluster.gpu_hardware_info) result (its C(nvidia_gpus)).
    type: dict
    required: true
  default_source:
    description: The OS's default source.
    type: str
    required: true
  distribution_cuda:
    description: The CUDA the distribution packages - C(version), C(packages), C(home) and optionally
      C(host_compiler) - empty where it packages none.
    type: dict
    required: true
  distribution:
    description: The host's distribution (its C(distribution) fact), for messages.
    type: str
  distribution_version:
    description: Its version (the C(distribution_version) fact), for messages.
    type: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Look for NVIDIA GPUs on the PCI bus
  rayfleet.cluster.gpu_hardware_info:
  register: hw

- name: Check the CUDA settings and decide the toolkit
  rayfleet.cluster.cuda_plan:
    cuda_enabled: true
    cuda_force: false
    cuda_source: ""
    cuda_version: ""
    cuda_packages: []
    hardware: "{{ hw }}"
    default_source: distribution
    distribution_cuda:
      version: "11.8"
      packages: [nvidia-cuda-toolkit, nvidia-cuda-toolkit-gcc]
      home: /usr
      host_compiler: /usr/bin/cuda-g++
    distribution: Debian
    distribution_version: "12"
  register: cuda

- name: Show the toolkit
  ansible.builtin.debug:
    msg: "CUDA {{ cuda.version }} in {{ cuda.home }} from {{ cuda.packages | join(', ') }}"
  when: cuda.act
"""

RETURN = r"""
act:
  description: Whether the host installs the toolkit (O(cuda_enabled), and an NVIDIA GPU or O(cuda_force)).
  returned: success
  type: bool
has_gpu:
  description: Whether the PCI bus has an NVIDIA GPU.
  returned: success
  type: bool
source:
  description: The effective source, C(distribution) or C(cuda_repo).
  returned: success, where the host installs the toolkit
  type: str
  sample: cuda_repo
version:
  description: The release, major.minor - O(cuda_version), else the distribution's, else 12.8 from NVIDIA's
    repository.
  returned: success, where the host installs the toolkit
  type: str
  sample: "12.8"
home:
  description: Where the toolkit lives (C(/usr/local/cuda-X.Y) from NVIDIA's repository, the distribution's home).
  returned: success, where the host installs the toolkit
  type: str
  sample: /usr/local/cuda-12.8
packages:
  description: The packages to install - O(cuda_packages), else the source's (C(cuda-toolkit-X-Y) from NVIDIA's
    repository).
  returned: success, where the host installs the toolkit
  type: list
  elements: str
host_compiler:
  description: The host compiler nvcc and CMake are pointed at (the distribution's; empty for the default one).
  returned: success, where the host installs the toolkit
  type: str
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
