# SPDX-License-Identifier: GPL-3.0-or-later
"""The rocm role on a sandbox host without a GPU (rocm_force): Debian 12's ROCm 5.2 userspace.

Real here: the packages, their holds, the Ray user's groups (render owns /dev/kfd, video /dev/dri), the state
record, and the SMI tool running against a host with no AMD GPU. A GPU and the amdgpu driver are not.
"""

import json
from pathlib import Path

import yaml

testinfra_hosts = ["ansible://amd"]

ROOT = Path(__file__).resolve().parents[2]
DEBIAN = yaml.safe_load((ROOT / "roles/rocm/vars/Debian.yml").read_text())["__rocm_distribution"]


def test_rocm_userspace_installed_and_held(host):
    for name in DEBIAN["packages"]:
        assert host.package(name).is_installed, f"{name} is not installed"
    assert host.package("rocminfo").version.startswith(DEBIAN["version"] + ".")
    held = set(host.check_output("apt-mark showhold").split())
    assert set(DEBIAN["hold"]) <= held, f"not held: {sorted(set(DEBIAN['hold']) - held)}"


def test_ray_user_can_open_the_gpu_devices(host):
    groups = host.user("rayfleet").groups
    assert "render" in groups and "video" in groups, groups


def test_no_nvidia_stack_on_the_amd_host(host):
    assert not host.package("nvidia-kernel-dkms").is_installed
    assert not host.file("/etc/rayfleet/nvidia-driver.json").exists


def test_state_record_says_no_amd_gpu(host):
    state = json.loads(host.file("/etc/rayfleet/rocm.json").content_string)
    assert state == {"source": "distribution", "version": DEBIAN["version"], "gpus": [], "amdgpu_loaded": False,
                     "driver": "not loaded (no AMD GPU on this host)", "users": ["rayfleet"]}


def test_smi_tool_runs_and_finds_no_gpu(host):
    assert host.file(DEBIAN["smi"]).exists
    out = host.run(DEBIAN["smi"] + " --showproductname")
    text = out.stdout + out.stderr
    assert out.rc != 127 and text.strip(), f"{DEBIAN['smi']} did not run: rc={out.rc} {text}"
    assert "Traceback" not in text, text
    assert "GPU[0]" not in text, f"an AMD GPU was listed on a host without one:\n{text}"


def test_gpu_check_reads_the_amd_host_through_the_smi_tool(host):
    """rayfleet.gpu (gpu_check's reader) on the AMD host: no NVML, so the SMI tool, which lists no GPU here."""
    src = (ROOT / "library_py/rayfleet/gpu.py").read_text()
    assert "RAYFLEET_EOF" not in src
    for vendor in ("amd", "auto"):
        cmd = host.run(f"python3 - --json --vendor {vendor} <<'RAYFLEET_EOF'\n{src}\nRAYFLEET_EOF")
        assert cmd.rc == 0, cmd.stderr
        report = json.loads(cmd.stdout)
        assert report["vendor"] == "amd" and report["available"] is False and report["count"] == 0, report
        assert "rocm-smi lists no AMD GPU here" in report["reason"], report["reason"]
        assert "Traceback" not in report["reason"] and report["problems"] == []
