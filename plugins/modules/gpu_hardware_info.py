#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_hardware_info
short_description: A host's accelerators as the PCI bus and the kernel see them, before and after a driver install
version_added: "0.1.0"
description:
  - Reads C(/sys/bus/pci/devices) for NVIDIA GPUs (with their architecture, from the PCI device id), NVSwitches
    (which need Fabric Manager) and AMD GPUs, and the kernel driver each is bound to. Needs no driver and no
    third-party Python library, so it runs on a bare host with the system Python.
  - Reports the NVIDIA kernel module now loaded (version, open or proprietary), whether nouveau or amdgpu is loaded,
    the Secure Boot state from the EFI variables, and for each kernel in O(kernels) (plus the running one) the
    version of the C(nvidia) module built for it (through C(modinfo -k), which follows Debian's C(nvidia-current)
    alias), so a caller can tell whether a reboot would load the installed driver.
  - Computes the NVIDIA kernel module flavour the GPUs call for (C(open) on Hopper and Blackwell, C(proprietary) on
    GPUs older than Turing, empty when either works) and whether every NVIDIA GPU is bound to the C(nvidia) driver.
author:
  - rayfleet authors (@rayfleet)
options:
  kernels:
    description: Kernel releases (as in C(/lib/modules)) to look for a built C(nvidia) module in, besides the running
      one; for an image baked to boot another kernel.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - rayfleet.cluster.attributes.info_module
seealso:
  - module: rayfleet.cluster.gpu_check
"""

EXAMPLES = r"""
- name: Look at the accelerators before installing a driver
  rayfleet.cluster.gpu_hardware_info:
  register: hw

- name: Say so on a host without NVIDIA GPUs
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: no NVIDIA PCI device"
  when: hw.nvidia_gpus | length == 0
"""

RETURN = r"""
nvidia_gpus:
  description: NVIDIA display-class PCI functions.
  returned: always
  type: list
  elements: dict
  contains:
    bus_id:
      description: PCI address.
      type: str
      sample: "0000:18:00.0"
    device_id:
      description: PCI device id.
      type: str
      sample: "0x2330"
    architecture:
      description: turing, ampere, hopper, ada, blackwell, pre-turing or unknown.
      type: str
    driver:
      description: The kernel driver bound to it (empty when none).
      type: str
      sample: nvidia
nvswitches:
  description: NVIDIA NVSwitch bridges (bus_id, device_id, driver); non-empty means Fabric Manager is needed.
  returned: always
  type: list
  elements: dict
amd_gpus:
  description: AMD display-class PCI functions (bus_id, device_id, driver).
  returned: always
  type: list
  elements: dict
efa_devices:
  description:
    - AWS Elastic Fabric Adapters (bus_id, device_id, driver, generation - 0 for efa0 ... 3 for efa3).
    - Non-empty means NCCL needs the EFA software and the aws-ofi-nccl plugin (role C(nccl)).
  returned: always
  type: list
  elements: dict
nvidia_module:
  description: The NVIDIA kernel module now loaded - loaded, version, flavor (open/proprietary), and whether
    nouveau_loaded / amdgpu_loaded.
  returned: always
  type: dict
modules_built:
  description: Kernel release -> version of the nvidia module built for it (empty when there is none).
  returned: always
  type: dict
  sample: {"6.1.0-28-amd64": "535.261.03"}
kernel:
  description: The running kernel release.
  returned: always
  type: str
secure_boot:
  description: enabled, disabled, not-efi or unknown.
  returned: always
  type: str
flavor_required:
  description: The NVIDIA kernel module flavour the GPUs call for (open, proprietary, or empty when either works).
  returned: always
  type: str
flavor_reason:
  description: Why that flavour.
  returned: always
  type: str
all_bound:
  description: Whether there are NVIDIA GPUs and every one is bound to the nvidia driver.
  returned: always
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayfleet.cluster.plugins.module_utils.gpu_hardware import (
    classify,
    kernel_module_flavor,
    loaded_nvidia_module,
    read_pci_devices,
    secure_boot_state,
)
from ansible_collections.rayfleet.cluster.plugins.module_utils.rayfleet_common import C_LOCALE


def built_module_version(module, modinfo, kernel):
    """Version of the nvidia module that kernel would load ('' when none is built or installed for it)."""
    if not modinfo:
        return ""
    rc, out, _err = module.run_command([modinfo, "-k", kernel, "-F", "version", "nvidia"], environ_update=C_LOCALE)
    return out.strip().splitlines()[0] if rc == 0 and out.strip() else ""


def main():
    module = AnsibleModule(argument_spec=dict(kernels=dict(type="list", elements="str", default=[])),
                           supports_check_mode=True)
    hw = classify(read_pci_devices())
    try:
        flavor, why = kernel_module_flavor(hw["nvidia_gpus"])
    except ValueError as exc:
        module.fail_json(msg=str(exc), **hw)
    kernel = os.uname()[2]
    modinfo = module.get_bin_path("modinfo")
    kernels = [kernel] + [k for k in module.params["kernels"] if k != kernel]
    module.exit_json(
        changed=False, kernel=kernel, secure_boot=secure_boot_state(), nvidia_module=loaded_nvidia_module(),
        modules_built={k: built_module_version(module, modinfo, k) for k in kernels},
        flavor_required=flavor, flavor_reason=why,
        all_bound=bool(hw["nvidia_gpus"]) and all(g["driver"] == "nvidia" for g in hw["nvidia_gpus"]), **hw)


if __name__ == "__main__":
    main()
