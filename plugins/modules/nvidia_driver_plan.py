#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_plan
short_description: Check a host's NVIDIA driver settings against its GPUs and decide the driver's packages, on the
  controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the nvidia_driver role's variables against the host's PCI bus as M(rayfleet.cluster.gpu_hardware_info)
    reports it (O(hardware)) and the role's values for the host's OS (O(default_source), O(pkg_family),
    O(cuda_repo_distro), O(cuda_repo_key), O(packages)), and decides what the role installs - the source, the kernel
    module flavour, whether Fabric Manager is needed, the packages to install and hold, and NVIDIA's repository.
  - The host installs the driver (RV(act)) when O(nvidia_driver_enabled) and it has an NVIDIA GPU or
    O(nvidia_driver_force); only then are the settings checked.
  - "Checked: the source (O(nvidia_driver_source), else O(default_source)) C(distribution) or C(cuda_repo), one the
    OS packages the driver in; O(nvidia_driver_branch) three digits; O(nvidia_driver_version) empty or a package
    version of the branch the source installs (Debian's own 535 from the distribution); O(nvidia_driver_kernel_module)
    C(auto), C(open) or C(proprietary), and the flavour it gives suits the GPUs (the open modules drive Turing and
    newer only, Blackwell needs them); O(nvidia_driver_fabric_manager) C(auto), C(always) or C(never), and the source
    carries Fabric Manager where it is needed; O(nvidia_driver_reboot) C(auto) or C(never);
    O(nvidia_driver_reboot_timeout) whole seconds, at least 1; O(nvidia_driver_mok_key_path) and
    O(nvidia_driver_mok_cert_path) both set or both empty, each a file on the controller, and one given when Secure
    Boot is on; with the C(cuda_repo) source, the fingerprint pinned for NVIDIA's repository signing key
    (O(nvidia_driver_cuda_repo_key_fingerprint) with apt, O(nvidia_driver_cuda_repo_rpm_key_fingerprint) with dnf) 40
    or 64 hex digits once blanks are removed and letters upper-cased."
  - With O(scope=repository) (the role's C(repository) entry point, which other roles use to set up the same package
    source) only the source and the key's pin are checked, and only the source and RV(repository) returned.
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The nvidia_driver role runs it in its validate step (and its repository entry point) and registers the result;
    its tasks read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  scope:
    description: C(main) (the role) or C(repository) (the package source alone).
    type: str
    choices: [main, repository]
    default: main
  nvidia_driver_enabled:
    description: Whether the role manages the driver on this host.
    type: raw
  nvidia_driver_force:
    description: Install on a host with no NVIDIA GPU (image builders, tests).
    type: raw
  nvidia_driver_source:
    description: C(distribution), C(cuda_repo), or empty for O(default_source).
    type: raw
  nvidia_driver_branch:
    description: The driver branch, three digits.
    type: raw
  nvidia_driver_version:
    description: An exact package version of the branch, or empty.
    type: raw
  nvidia_driver_kernel_module:
    description: C(auto), C(open) or C(proprietary).
    type: raw
  nvidia_driver_fabric_manager:
    description: C(auto), C(always) or C(never).
    type: raw
  nvidia_driver_reboot:
    description: C(auto) or C(never).
    type: raw
  nvidia_driver_reboot_timeout:
    description: Seconds a rebooted host may take to come back.
    type: raw
  nvidia_driver_mok_key_path:
    description: The Machine Owner Key's private key on the controller, or empty.
    type: raw
  nvidia_driver_mok_cert_path:
    description: Its certificate on the controller, or empty.
    type: raw
  nvidia_driver_cuda_repo_url:
    description: The root of NVIDIA's CUDA repositories.
    type: raw
  nvidia_driver_cuda_repo_key_fingerprint:
    description: The fingerprint NVIDIA's repository signing key must have (apt).
    type: raw
  nvidia_driver_cuda_repo_rpm_key_fingerprint:
    description: The same for dnf.
    type: raw
  hardware:
    description: The host's M(rayfleet.cluster.gpu_hardware_info) result (its C(nvidia_gpus), C(nvswitches),
      C(secure_boot) and C(flavor_required)); read with O(scope=main).
    type: dict
  default_source:
    description: The OS's default source.
    type: str
  pkg_family:
    description: The OS's package manager, C(apt) or C(dnf).
    type: str
  cuda_repo_distro:
    description: The OS's directory in NVIDIA's repository (C(debian12), C(ubuntu2404), C(rhel9), C(amzn2023)).
    type: str
  cuda_repo_key:
    description: The repository signing key's file name (C(3bf863cc.pub), C(D42D0685.pub)).
    type: str
  packages:
    description: Each source's package set on this OS (C(distribution), C(cuda_repo)), empty where the OS has none -
      C(default_flavor), C(pinning), C(versioned) (C(open) and C(proprietary)), C(other), C(fabric_manager), and
      optionally C(module_stream) and C(branch).
    type: dict
  architecture:
    description: The host's architecture (its C(architecture) fact); NVIDIA's repository calls C(aarch64) C(sbsa).
    type: str
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
- name: Look at the accelerators on the PCI bus
  rayfleet.cluster.gpu_hardware_info:
  register: hw

- name: Check the driver settings and decide the packages
  rayfleet.cluster.nvidia_driver_plan:
    nvidia_driver_enabled: true
    nvidia_driver_force: false
    nvidia_driver_source: ""
    nvidia_driver_branch: "580"
    nvidia_driver_version: ""
    nvidia_driver_kernel_module: auto
    nvidia_driver_fabric_manager: auto
    nvidia_driver_reboot: auto
    nvidia_driver_reboot_timeout: 1200
    nvidia_driver_mok_key_path: ""
    nvidia_driver_mok_cert_path: ""
    nvidia_driver_cuda_repo_url: https://developer.download.nvidia.com/compute/cuda/repos
    nvidia_driver_cuda_repo_key_fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
    nvidia_driver_cuda_repo_rpm_key_fingerprint: ""
    hardware: "{{ hw }}"
    default_source: cuda_repo
    pkg_family: apt
    cuda_repo_distro: ubuntu2404
    cuda_repo_key: 3bf863cc.pub
    packages:
      distribution: {}
      cuda_repo:
        default_flavor: open
        pinning: [nvidia-driver-pinning-580]
        versioned:
          open: [nvidia-headless-580-open, nvidia-utils-580]
          proprietary: [nvidia-headless-580, nvidia-utils-580]
        other: []
        fabric_manager: [nvidia-fabricmanager-580, libnvidia-nscq-580]
    architecture: x86_64
    distribution: Ubuntu
    distribution_version: "24.04"
  register: driver

- name: Show what would be installed
  ansible.builtin.debug:
    msg: "{{ driver.install_names }} ({{ driver.flavor }} kernel module)"
  when: driver.act
"""

RETURN = r"""
act:
  description: Whether the host installs the driver (O(nvidia_driver_enabled), and an NVIDIA GPU or
    O(nvidia_driver_force)).
  returned: success, with O(scope=main)
  type: bool
has_gpu:
  description: Whether the PCI bus has an NVIDIA GPU.
  returned: success, with O(scope=main)
  type: bool
source:
  description: The effective source, C(distribution) or C(cuda_repo).
  returned: success, where the host installs the driver or with O(scope=repository)
  type: str
  sample: cuda_repo
flavor:
  description: The kernel module flavour - O(nvidia_driver_kernel_module), else what the GPUs call for, else the
    source's default.
  returned: success, where the host installs the driver
  type: str
  sample: open
architectures:
  description: The GPUs' architectures, once each.
  returned: success, where the host installs the driver
  type: list
  elements: str
branch:
  description: The branch the source installs (Debian's own from the distribution, else O(nvidia_driver_branch)).
  returned: success, where the host installs the driver
  type: str
fabric_manager:
  description: Whether Fabric Manager is installed and started (C(always), or C(auto) with an NVSwitch on the bus).
  returned: success, where the host installs the driver
  type: bool
fabric_manager_packages:
  description: The source's Fabric Manager packages.
  returned: success, where the host installs the driver
  type: list
  elements: str
pinning:
  description: The packages that pin the branch in NVIDIA's apt repositories.
  returned: success, where the host installs the driver
  type: list
  elements: str
install_names:
  description: The packages to install, the versioned ones pinned to O(nvidia_driver_version) when it is set
    (C(name=version) with apt, C(name-version) with dnf).
  returned: success, where the host installs the driver
  type: list
  elements: str
hold_names:
  description: The packages to hold (apt) or lock (dnf).
  returned: success, where the host installs the driver
  type: list
  elements: str
module_stream:
  description: The dnf module stream of the branch and flavour (empty without one).
  returned: success, where the host installs the driver
  type: str
repository:
  description: NVIDIA's repository for this host - C(pkg_family), C(distro), C(arch), C(name), C(base) (its URL),
    C(key) and C(key_url) (its signing key), C(key_var) (the variable pinning the key's fingerprint), C(key_value)
    (as written) and C(key_pin) (normalised; null when it is not 40 or 64 hex digits).
  returned: success, where the host installs the driver or with O(scope=repository)
  type: dict
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
