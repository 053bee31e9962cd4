# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_hardware_info and module_utils.gpu_hardware against fake sysfs/procfs trees."""

import os

import pytest
from ansible_collections.rayfleet.cluster.plugins.module_utils import gpu_hardware as hw
from ansible_collections.rayfleet.cluster.plugins.modules import gpu_hardware_info
from conftest import run_module as run


def _pci(root, bus_id, vendor, device, pci_class, driver=""):
    d = root / "bus" / "pci" / "devices" / bus_id
    d.mkdir(parents=True)
    (d / "vendor").write_text(f"0x{vendor:04x}\n")
    (d / "device").write_text(f"0x{device:04x}\n")
    (d / "class").write_text(f"0x{pci_class:06x}\n")
    if driver:
        target = root / "bus" / "pci" / "drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(target, d / "driver")


def _hgx_h100(root, driver="nvidia"):
    """An HGX H100 board: 8 GPUs (3D controller), 4 NVSwitches, plus a NIC and the host bridge."""
    for i in range(8):
        _pci(root, f"0000:{0x18 + i:02x}:00.0", 0x10DE, 0x2330, 0x030200, driver)
    for i in range(4):
        _pci(root, f"0000:{0x05 + i:02x}:00.0", 0x10DE, 0x22A3, 0x068000)
    _pci(root, "0000:00:00.0", 0x8086, 0x09A2, 0x060000)
    _pci(root, "0000:a0:00.0", 0x1D0F, 0xEFA1, 0x020000, "efa")


def test_hgx_board_is_read_as_gpus_and_switches(tmp_path):
    _hgx_h100(tmp_path)
    found = hw.classify(hw.read_pci_devices(str(tmp_path / "bus" / "pci" / "devices")))
    assert len(found["nvidia_gpus"]) == 8 and len(found["nvswitches"]) == 4 and found["amd_gpus"] == []
    assert found["nvidia_gpus"][0] == {"bus_id": "0000:18:00.0", "device_id": "0x2330", "driver": "nvidia",
                                       "architecture": "hopper"}
    assert found["efa_devices"] == [{"bus_id": "0000:a0:00.0", "device_id": "0xefa1", "driver": "efa",
                                     "generation": 1}]


def test_other_amazon_devices_are_not_efa(tmp_path):
    _pci(tmp_path, "0000:00:04.0", 0x1D0F, 0x8061, 0x010802, "nvme")  # EBS NVMe controller
    _pci(tmp_path, "0000:00:05.0", 0x1D0F, 0xEC20, 0x020000, "ena")   # ENA network adapter
    found = hw.classify(hw.read_pci_devices(str(tmp_path / "bus" / "pci" / "devices")))
    assert found["efa_devices"] == []


@pytest.mark.parametrize("device, arch", [(0x20B0, "ampere"), (0x1EB8, "turing"), (0x2182, "turing"),
                                          (0x2236, "ampere"), (0x2335, "hopper"), (0x26B9, "ada"),
                                          (0x2901, "blackwell"), (0x1DB6, "pre-turing")])
def test_architecture_from_device_id(device, arch):
    assert hw.nvidia_architecture(device) == arch


def gpu(arch):
    return {"architecture": arch}


def test_flavour_follows_the_gpus():
    assert hw.kernel_module_flavor([gpu("hopper")])[0] == "open"
    assert hw.kernel_module_flavor([gpu("blackwell")])[0] == "open"
    assert hw.kernel_module_flavor([gpu("pre-turing")])[0] == "proprietary"
    assert hw.kernel_module_flavor([gpu("ampere"), gpu("turing")]) == ("", "")
    assert hw.kernel_module_flavor([]) == ("", "")
    with pytest.raises(ValueError, match="pre-turing need the proprietary kernel module and hopper the open"):
        hw.kernel_module_flavor([gpu("pre-turing"), gpu("hopper")])


def test_loaded_module_and_its_flavour(tmp_path):
    sys_root, proc_root = tmp_path / "sys", tmp_path / "proc"
    assert hw.loaded_nvidia_module(str(sys_root), str(proc_root))["loaded"] is False
    (sys_root / "module" / "nvidia").mkdir(parents=True)
    (sys_root / "module" / "nvidia" / "version").write_text("570.124.06\n")
    (proc_root / "driver" / "nvidia").mkdir(parents=True)
    (proc_root / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n")
    got = hw.loaded_nvidia_module(str(sys_root), str(proc_root))
    assert got == {"loaded": True, "version": "570.124.06", "flavor": "open", "nouveau_loaded": False,
                   "amdgpu_loaded": False}
    (proc_root / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Release Build\n")
    assert hw.loaded_nvidia_module(str(sys_root), str(proc_root))["flavor"] == "proprietary"


def test_secure_boot_state(tmp_path):
    assert hw.secure_boot_state(str(tmp_path)) == "not-efi"
    efivars = tmp_path / "firmware" / "efi" / "efivars"
    efivars.mkdir(parents=True)
    assert hw.secure_boot_state(str(tmp_path)) == "unknown"
    (efivars / hw.SECURE_BOOT_VAR).write_bytes(b"\x06\x00\x00\x00\x01")
    assert hw.secure_boot_state(str(tmp_path)) == "enabled"
    (efivars / hw.SECURE_BOOT_VAR).write_bytes(b"\x06\x00\x00\x00\x00")
    assert hw.secure_boot_state(str(tmp_path)) == "disabled"


def _module_on(monkeypatch, tmp_path, modinfo_out=None):
    root = str(tmp_path / "bus" / "pci" / "devices")
    monkeypatch.setattr(gpu_hardware_info, "read_pci_devices", lambda: hw.read_pci_devices(root))
    monkeypatch.setattr(gpu_hardware_info, "loaded_nvidia_module",
                        lambda: hw.loaded_nvidia_module(str(tmp_path / "sys"), str(tmp_path / "proc")))
    monkeypatch.setattr(gpu_hardware_info, "secure_boot_state", lambda: "not-efi")
    monkeypatch.setattr(gpu_hardware_info.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/sbin/modinfo")
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        version = (modinfo_out or {}).get(argv[2], "")
        return (0, version + "\n", "") if version else (1, "", "modinfo: ERROR: Module nvidia not found.\n")

    monkeypatch.setattr(gpu_hardware_info.AnsibleModule, "run_command", run_command)
    return calls


def test_module_on_a_bare_hgx_host(monkeypatch, tmp_path):
    _hgx_h100(tmp_path, driver="")
    kernel = os.uname()[2]
    calls = _module_on(monkeypatch, tmp_path, {"6.8.0-1024-aws": "570.124.06"})
    out = run(gpu_hardware_info, {"kernels": ["6.8.0-1024-aws"]})
    r = out.result
    assert not out.failed and r["changed"] is False
    assert len(r["nvidia_gpus"]) == 8 and len(r["nvswitches"]) == 4
    assert r["flavor_required"] == "open" and "hopper" in r["flavor_reason"]
    assert r["all_bound"] is False and r["nvidia_module"]["loaded"] is False
    assert r["modules_built"] == {kernel: "", "6.8.0-1024-aws": "570.124.06"}
    assert calls[0] == ["/sbin/modinfo", "-k", kernel, "-F", "version", "nvidia"]


def test_module_on_a_host_without_gpus(monkeypatch, tmp_path):
    _pci(tmp_path, "0000:00:00.0", 0x8086, 0x1237, 0x060000)
    _module_on(monkeypatch, tmp_path)
    r = run(gpu_hardware_info, {}).result
    assert r["nvidia_gpus"] == [] and r["all_bound"] is False and r["flavor_required"] == ""


def test_module_fails_on_gpus_no_single_module_drives(monkeypatch, tmp_path):
    _pci(tmp_path, "0000:18:00.0", 0x10DE, 0x1DB6, 0x030200)  # V100
    _pci(tmp_path, "0000:19:00.0", 0x10DE, 0x2901, 0x030200)  # B200
    _module_on(monkeypatch, tmp_path)
    out = run(gpu_hardware_info, {})
    assert out.failed and "no single NVIDIA kernel module drives them all" in out.result["msg"]
