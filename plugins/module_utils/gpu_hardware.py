# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""What a host's hardware and kernel say about its accelerators, read from sysfs and procfs (no driver needed).

Used before any driver is installed, with the system Python: which NVIDIA and AMD GPUs sit on the PCI bus, which
NVSwitches (Fabric Manager needed), which kernel driver each GPU is bound to, which NVIDIA kernel module is loaded
(version, open or proprietary), whether nouveau holds the GPUs, and the Secure Boot state.
"""

from __future__ import annotations

import os

NVIDIA_VENDOR = 0x10DE
AMD_VENDOR = 0x1002
AMAZON_VENDOR = 0x1D0F
# AWS Elastic Fabric Adapter generations (efa0: p3dn/c5n; efa1: p4d, RDMA read; efa2: p5; efa3: later types)
EFA_DEVICES = (0xEFA0, 0xEFA1, 0xEFA2, 0xEFA3)
PCI_CLASS_DISPLAY = 0x03  # base class: 0x0300 VGA, 0x0302 3D controller, 0x0380 other display
PCI_CLASS_BRIDGE_OTHER = 0x0680  # NVSwitch shows up as an NVIDIA "other bridge"
SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-e98c0f1e82b9"

# NVIDIA PCI device-id ranges per architecture (from the PCI ID database's NVIDIA entries). Ordered: the first
# matching range wins (GA100 sits inside the Turing span, GH100 inside the GA10x one).
_ARCH_RANGES = (
    (0x2080, 0x20FF, "ampere"),     # GA100: A100, A30, A800
    (0x1E00, 0x21FF, "turing"),     # TU102/TU104/TU106/TU116/TU117: T4, RTX 20xx
    (0x2300, 0x23FF, "hopper"),     # GH100: H100, H200, H800, GH200
    (0x2200, 0x25FF, "ampere"),     # GA10x: A10, A40, A16, RTX 30xx
    (0x2600, 0x28FF, "ada"),        # AD10x: L4, L40, L40S, RTX 40xx
    (0x2900, 0x2FFF, "blackwell"),  # GB100/GB102/GB20x: B200, GB200, RTX PRO 6000, RTX 50xx
)
# Architectures whose GPUs the open kernel modules support (Turing and newer); older ones need the proprietary one.
OPEN_CAPABLE = ("turing", "ampere", "hopper", "ada", "blackwell")
# Where rayfleet takes the open modules unless told otherwise: the data-centre generations NVIDIA ships them for
# by default (Hopper) and those that only the open modules support (Grace Hopper, Blackwell).
OPEN_PREFERRED = ("hopper", "blackwell")


def nvidia_architecture(device_id: int) -> str:
    for low, high, arch in _ARCH_RANGES:
        if low <= device_id <= high:
            return arch
    return "pre-turing" if device_id < 0x1E00 else "unknown"


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _hex(text: str) -> int:
    try:
        return int(text, 16)
    except ValueError:
        return -1


def read_pci_devices(root: str = "/sys/bus/pci/devices") -> list[dict]:
    """Every PCI function: bus id, vendor, device, class (24-bit) and the kernel driver bound to it."""
    devices = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return devices
    for name in names:
        base = os.path.join(root, name)
        driver_link = os.path.join(base, "driver")
        driver = os.path.basename(os.path.realpath(driver_link)) if os.path.islink(driver_link) else ""
        devices.append(dict(bus_id=name, vendor=_hex(_read(os.path.join(base, "vendor"))),
                            device=_hex(_read(os.path.join(base, "device"))),
                            pci_class=_hex(_read(os.path.join(base, "class"))), driver=driver))
    return devices


def classify(devices: list[dict]) -> dict:
    """NVIDIA GPUs (with architecture), NVSwitches, AMD GPUs and AWS EFA devices among the PCI functions."""
    nvidia, switches, amd, efa = [], [], [], []
    for dev in devices:
        base_class = dev["pci_class"] >> 16 if dev["pci_class"] >= 0 else -1
        sub_class = dev["pci_class"] >> 8 if dev["pci_class"] >= 0 else -1
        entry = dict(bus_id=dev["bus_id"], device_id="0x%04x" % dev["device"], driver=dev["driver"])
        if dev["vendor"] == NVIDIA_VENDOR and base_class == PCI_CLASS_DISPLAY:
            nvidia.append(dict(entry, architecture=nvidia_architecture(dev["device"])))
        elif dev["vendor"] == NVIDIA_VENDOR and sub_class == PCI_CLASS_BRIDGE_OTHER:
            switches.append(entry)
        elif dev["vendor"] == AMD_VENDOR and base_class == PCI_CLASS_DISPLAY:
            amd.append(entry)
        elif dev["vendor"] == AMAZON_VENDOR and dev["device"] in EFA_DEVICES:
            efa.append(dict(entry, generation=EFA_DEVICES.index(dev["device"])))
    return dict(nvidia_gpus=nvidia, nvswitches=switches, amd_gpus=amd, efa_devices=efa)


def kernel_module_flavor(gpus: list[dict]) -> tuple[str, str]:
    """('open'|'proprietary'|'', why) for these NVIDIA GPUs; '' when the GPUs do not decide it.

    Raises ValueError when no single flavour drives them all (pre-Turing next to Grace Hopper/Blackwell).
    """
    archs = sorted({g["architecture"] for g in gpus})
    old = [a for a in archs if a not in OPEN_CAPABLE and a != "unknown"]
    new = [a for a in archs if a in OPEN_PREFERRED]
    if old and new:
        raise ValueError("GPUs of architectures %s need the proprietary kernel module and %s the open one: no single "
                         "NVIDIA kernel module drives them all" % (", ".join(old), ", ".join(new)))
    if old:
        return "proprietary", "%s GPUs are not supported by the open kernel modules" % ", ".join(old)
    if new:
        return "open", "%s GPUs: NVIDIA's open kernel modules (required on Grace Hopper and Blackwell)" % (
            ", ".join(new))
    return "", ""


def loaded_nvidia_module(sys_root: str = "/sys", proc_root: str = "/proc") -> dict:
    """The NVIDIA kernel module now loaded: version and flavour ('' when none is loaded)."""
    # Debian renames the module file nvidia-current.ko; the loaded module may show as nvidia or nvidia_current
    names = [n for n in ("nvidia", "nvidia_current") if os.path.isdir(os.path.join(sys_root, "module", n))]
    version = _read(os.path.join(sys_root, "module", names[0], "version")) if names else ""
    banner = _read(os.path.join(proc_root, "driver", "nvidia", "version"))
    loaded = bool(names)
    flavor = ""
    if loaded:
        flavor = "open" if "Open Kernel Module" in banner else "proprietary"
    return dict(loaded=loaded, version=version, flavor=flavor if banner else "",
                nouveau_loaded=os.path.isdir(os.path.join(sys_root, "module", "nouveau")),
                amdgpu_loaded=os.path.isdir(os.path.join(sys_root, "module", "amdgpu")))


def secure_boot_state(sys_root: str = "/sys") -> str:
    """'enabled', 'disabled', 'not-efi' (legacy BIOS boot, or no EFI variables visible) or 'unknown'."""
    efi = os.path.join(sys_root, "firmware", "efi")
    if not os.path.isdir(efi):
        return "not-efi"
    try:
        with open(os.path.join(efi, "efivars", SECURE_BOOT_VAR), "rb") as fh:
            data = fh.read()
    except OSError:
        return "unknown"
    # efivarfs: 4 bytes of attributes, then the value (one byte: 1 = Secure Boot on)
    if len(data) < 5:
        return "unknown"
    return "enabled" if data[4] == 1 else "disabled"
