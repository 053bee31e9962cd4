#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rocm_plan
short_description: Check a host's ROCm settings and decide its source, release and installer download, on the
  controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the rocm role's variables and decides what the role installs - the source, the release, the SMI tool, the
    distribution's packages and those held, and with AMD's C(amdgpu-install) the package's URL, its sha256 and where
    the checked download is kept - from the OS's default source (O(default_source)), the ROCm the distribution
    packages (O(distribution_rocm)) and the installer's URL for the host (O(installer_url)).
  - The host installs ROCm (RV(act)) when O(rocm_enabled) and it has an AMD GPU on the PCI bus, as
    M(rayfleet.cluster.gpu_hardware_info) reports it (O(hardware)), or O(rocm_force); only then are the settings
    checked.
  - "Checked: the source (O(rocm_source), else O(default_source)) C(distribution) or C(amdgpu_install), the first only
    where the OS packages ROCm, the second not on Debian; O(rocm_version) x.y.z; O(rocm_installer_build) digits, a
    hyphen and digits (C(60401-1)); O(rocm_usecases) a list of use cases, not empty; with C(amdgpu_install),
    O(rocm_installer_checksums) a dict whose entry for O(installer_url) is C(sha256:<64 lower-case hex digits>)."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The rocm role runs it in its validate step and registers the result; its tasks read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  rocm_enabled:
    description: Whether the role manages ROCm on this host.
    type: raw
    required: true
  rocm_force:
    description: Install on a host with no AMD GPU (image builders, tests).
    type: raw
    required: true
  rocm_source:
    description: C(distribution), C(amdgpu_install), or empty for O(default_source).
    type: raw
    required: true
  rocm_version:
    description: The ROCm release for C(amdgpu_install), x.y.z.
    type: raw
    required: true
  rocm_installer_build:
    description: The build of that release's C(amdgpu-install) package.
    type: raw
    required: true
  rocm_installer_checksums:
    description: C(sha256:<hex>) of the C(amdgpu-install) package for each URL it is downloaded from.
    type: raw
    required: true
  rocm_usecases:
    description: C(amdgpu-install --usecase) values.
    type: raw
    required: true
  hardware:
    description: The host's M(rayfleet.cluster.gpu_hardware_info) result (its C(amd_gpus)).
    type: dict
    required: true
  default_source:
    description: The OS's default source.
    type: str
    required: true
  distribution_rocm:
    description: The ROCm the distribution packages - C(version), C(packages), C(hold) and C(smi) - empty where it
      packages none.
    type: dict
    required: true
  installer_url:
    description: The C(amdgpu-install) package's URL for this host's release (empty on Debian).
    type: str
    default: ""
  distribution:
    description: The host's distribution (its C(distribution) fact); AMD's installer does not support Debian.
    type: str
  distribution_version:
    description: Its version (the C(distribution_version) fact), for messages.
    type: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Look for AMD GPUs on the PCI bus
  rayfleet.cluster.gpu_hardware_info:
  register: hw

- name: Check the ROCm settings and decide the install
  rayfleet.cluster.rocm_plan:
    rocm_enabled: true
    rocm_force: false
    rocm_source: ""
    rocm_version: "6.4.1"
    rocm_installer_build: "60401-1"
    rocm_installer_checksums:
      "https://repo.radeon.com/amdgpu-install/6.4.1/ubuntu/noble/amdgpu-install_6.4.60401-1_all.deb": "sha256:<hex>"
    rocm_usecases: [rocm]
    hardware: "{{ hw }}"
    default_source: amdgpu_install
    distribution_rocm: {}
    installer_url: https://repo.radeon.com/amdgpu-install/6.4.1/ubuntu/noble/amdgpu-install_6.4.60401-1_all.deb
    distribution: Ubuntu
    distribution_version: "24.04"
  register: rocm

- name: Show the download
  ansible.builtin.debug:
    msg: "{{ rocm.installer_url }} -> {{ rocm.installer_file }}"
  when: rocm.act and rocm.source == 'amdgpu_install'
"""

RETURN = r"""
act:
  description: Whether the host installs ROCm (O(rocm_enabled), and an AMD GPU or O(rocm_force)).
  returned: success
  type: bool
has_gpu:
  description: Whether the PCI bus has an AMD GPU.
  returned: success
  type: bool
source:
  description: The effective source, C(distribution) or C(amdgpu_install).
  returned: success, where the host installs ROCm
  type: str
  sample: amdgpu_install
version:
  description: The release installed (the distribution's, or O(rocm_version)).
  returned: success, where the host installs ROCm
  type: str
  sample: "6.4.1"
smi:
  description: The SMI tool that lists the GPUs (the distribution's, else C(/opt/rocm/bin/amd-smi)).
  returned: success, where the host installs ROCm
  type: str
packages:
  description: The distribution's ROCm packages (empty with C(amdgpu_install)).
  returned: success, where the host installs ROCm
  type: list
  elements: str
hold:
  description: The distribution's packages to hold (empty with C(amdgpu_install)).
  returned: success, where the host installs ROCm
  type: list
  elements: str
installer_url:
  description: The C(amdgpu-install) package's URL (empty from the distribution).
  returned: success, where the host installs ROCm
  type: str
installer_checksum:
  description: Its C(sha256:<hex>) from O(rocm_installer_checksums) (empty from the distribution).
  returned: success, where the host installs ROCm
  type: str
installer_file:
  description: Where the checked download is kept on the host (empty from the distribution).
  returned: success, where the host installs ROCm
  type: str
  sample: /var/cache/rayfleet/rocm/amdgpu-install_6.4.60401-1_all.deb
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
