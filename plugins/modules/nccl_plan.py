#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_plan
short_description: Check a host's NCCL settings and decide its NCCL source and EFA use, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the nccl role's variables and decides what the role installs - where NCCL comes from and whether the host
    uses AWS's Elastic Fabric Adapter (EFA) - from the host's PCI bus as M(rayfleet.cluster.gpu_hardware_info)
    reports it (O(hardware)).
  - O(nccl_source=auto) is C(wheel) on a host with an NVIDIA GPU (or with O(nvidia_driver_force), as on image
    builders), C(none) elsewhere (gloo needs no NCCL; ROCm's torch brings RCCL). O(nccl_efa=auto) uses EFA when the
    bus has an EFA device.
  - "Checked: O(nccl_source) is C(auto), C(wheel), C(cuda_repo) or C(none); O(nccl_wheel_package) C(nvidia-nccl-cuNN);
    O(nccl_wheel_version) empty or a release like C(2.30.7) or C(2.30.7.post1) (with Python's C(packaging), each
    number without leading zeros); O(nccl_find_links) empty, an absolute path or an C(http), C(https) or C(file)
    URL; O(nccl_index_url) empty or such a URL (with Python's C(urllib.parse); neither with blanks);
    O(nccl_no_index) a boolean, true only with O(nccl_find_links) set where the wheel is installed;
    O(nccl_venv_dir) absolute; with the effective source C(cuda_repo), O(nccl_cuda_repo_version) libnccl2's package
    version like C(2.27.7-1+cuda12.9); O(nccl_efa) C(auto), true or false (the words Ansible's C(bool) filter takes);
    O(nccl_env) a dict of names starting with C(NCCL), C(FI), C(RDMAV) or C(LD_LIBRARY_PATH), without
    C(NCCL_SOCKET_IFNAME) or C(GLOO_SOCKET_IFNAME), each value a string or a number; O(nccl_socket_ifname) C(auto),
    empty, or one of the host's O(interfaces)."
  - "On a host that uses EFA: O(nccl_efa_installer_checksum) is C(sha256:<64 hex digits>), O(nccl_efa_installer_url)
    an C(https) URL, and the host's O(architecture) C(x86_64) or C(aarch64)."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The nccl role runs it in its validate step and registers the result; its tasks and templates read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  nccl_source:
    description: Where libnccl comes from - C(auto), C(wheel), C(cuda_repo) or C(none).
    type: raw
    required: true
  nccl_wheel_package:
    description: NVIDIA's NCCL wheel, C(nvidia-nccl-cuNN).
    type: raw
    required: true
  nccl_wheel_version:
    description: The wheel's pinned release; empty keeps the one torch brought.
    type: raw
    required: true
  nccl_find_links:
    description: A wheel directory on the nodes (or a URL) searched before the index; may be empty.
    type: raw
    required: true
  nccl_index_url:
    description: Another package index for the wheel; may be empty.
    type: raw
    required: true
  nccl_no_index:
    description: Install the wheel from O(nccl_find_links) alone, asking no package index (C(--no-index)).
    type: raw
    required: true
  nccl_venv_dir:
    description: The Ray venv.
    type: raw
    required: true
  nccl_cuda_repo_version:
    description: libnccl2's package version, read with the effective source C(cuda_repo).
    type: raw
  nccl_efa:
    description: AWS Elastic Fabric Adapter - C(auto) (when the PCI bus has one), true or false.
    type: raw
    required: true
  nccl_env:
    description: More environment for Ray's processes.
    type: raw
    required: true
  nccl_socket_ifname:
    description: The interface NCCL and gloo use - C(auto), empty, or an interface name.
    type: raw
    required: true
  nccl_efa_installer_version:
    description: The AWS EFA installer's release (named in messages).
    type: raw
  nccl_efa_installer_url:
    description: Where the EFA installer tarball is downloaded from, read on a host that uses EFA.
    type: raw
  nccl_efa_installer_checksum:
    description: C(sha256:<hex>) of the EFA installer tarball, read on a host that uses EFA.
    type: raw
  nvidia_driver_force:
    description: The nvidia_driver role's C(nvidia_driver_force) - NCCL from the wheel with O(nccl_source=auto) even
      without an NVIDIA GPU (image builders). Taken as Ansible's C(bool) filter takes it.
    type: raw
    default: false
  hardware:
    description: The host's M(rayfleet.cluster.gpu_hardware_info) result (its C(nvidia_gpus) and C(efa_devices)).
    type: dict
    required: true
  interfaces:
    description: The host's interface names (its C(interfaces) fact), read when O(nccl_socket_ifname) names one.
    type: list
    elements: str
  architecture:
    description: The host's architecture (its C(architecture) fact), read on a host that uses EFA; unset is not
      checked.
    type: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Look for NVIDIA GPUs and EFA devices on the PCI bus
  rayfleet.cluster.gpu_hardware_info:
  register: hw

- name: Check the NCCL settings and decide the source
  rayfleet.cluster.nccl_plan:
    nccl_source: auto
    nccl_wheel_package: nvidia-nccl-cu13
    nccl_wheel_version: ""
    nccl_find_links: ""
    nccl_index_url: ""
    nccl_no_index: false
    nccl_venv_dir: /opt/rayfleet/venv
    nccl_cuda_repo_version: ""
    nccl_efa: auto
    nccl_env: {NCCL_DEBUG: WARN}
    nccl_socket_ifname: auto
    nccl_efa_installer_version: "1.44.0"
    nccl_efa_installer_url: https://efa-installer.amazonaws.com/aws-efa-installer-1.44.0.tar.gz
    nccl_efa_installer_checksum: ""
    hardware: "{{ hw }}"
  register: nccl

- name: Show where NCCL comes from
  ansible.builtin.debug:
    msg: "{{ nccl.source }} (EFA: {{ nccl.efa }})"
"""

RETURN = r"""
source:
  description: The effective source - C(wheel), C(cuda_repo) or C(none) (O(nccl_source), C(auto) decided).
  returned: success
  type: str
  sample: wheel
efa:
  description: Whether the host uses EFA (O(nccl_efa), C(auto) decided).
  returned: success
  type: bool
efa_devices:
  description: The PCI addresses of the host's EFA devices.
  returned: success
  type: list
  elements: str
  sample: ["0000:10:1c.0"]
efa_device_rdma:
  description: Whether one of the EFA devices does RDMA reads (efa1 and later; GPUDirect over EFA).
  returned: success
  type: bool
pip_args:
  description: pip's arguments for the wheel - C(--no-deps), then C(--no-index), C(--find-links) and C(--index-url)
    where set.
  returned: success
  type: str
  sample: --no-deps --no-index --find-links /opt/rayfleet-wheels
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
