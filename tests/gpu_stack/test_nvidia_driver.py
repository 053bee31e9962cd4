# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia_driver role on a sandbox host without a GPU (nvidia_driver_force): Debian 12's non-free driver.

What can be true here is checked for real: the packages (compute only, no X server), their holds, the nouveau
blacklist, the persistence daemon's unit, the role's state record, and the real libnvidia-ml read through NVML's
Python binding, which must say that the kernel module is not loaded. What cannot happen here - a kernel module built
and loaded (no GPU, and the host kernel is not Debian's, so there are no headers for it) - must be reported as such.
"""

import json
import re
from pathlib import Path

import yaml

testinfra_hosts = ["ansible://nvidia"]

ROOT = Path(__file__).resolve().parents[2]
DEBIAN = yaml.safe_load((ROOT / "roles/nvidia_driver/vars/Debian.yml").read_text())["__nvidia_driver_distribution"]
DRIVER_PACKAGES = DEBIAN["versioned"]["proprietary"] + DEBIAN["other"]


def test_compute_driver_packages_installed_without_x(host):
    for name in DRIVER_PACKAGES:
        assert host.package(name).is_installed, f"{name} is not installed"
    assert host.package("nvidia-kernel-dkms").version.startswith(DEBIAN["branch"] + ".")
    # --no-install-recommends: a compute node gets no X server or desktop driver bits
    for name in ("xserver-xorg-core", "nvidia-driver", "xserver-xorg-video-nvidia"):
        assert not host.package(name).is_installed, f"{name} should not be installed on a compute node"


def test_driver_packages_are_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    assert set(DRIVER_PACKAGES) <= held, f"not held: {sorted(set(DRIVER_PACKAGES) - held)}"
    # apt would keep them back rather than upgrade them
    sim = host.run("apt-get -s -o Debug::NoLocking=1 install --only-upgrade nvidia-kernel-dkms")
    assert sim.rc == 0 and "Inst nvidia-kernel-dkms" not in sim.stdout, sim.stdout


def test_non_free_source_is_configured(host):
    src = host.file("/etc/apt/sources.list.d/rayfleet-nvidia.sources")
    assert src.exists and src.mode == 0o644
    assert "non-free" in src.content_string and "non-free-firmware" in src.content_string


def test_nouveau_is_blacklisted(host):
    conf = host.file("/etc/modprobe.d/rayfleet-nouveau.conf")
    assert conf.exists and conf.user == "root" and conf.mode == 0o644
    lines = conf.content_string.splitlines()
    assert "blacklist nouveau" in lines and "options nouveau modeset=0" in lines
    # modprobe reads it: nouveau is blacklisted in its effective configuration
    assert "blacklist nouveau" in host.check_output("/usr/sbin/modprobe --showconfig")


def test_persistence_daemon_enabled_not_running_without_gpu(host):
    unit = host.service("nvidia-persistenced")
    assert unit.is_enabled
    assert not unit.is_running, "nvidia-persistenced cannot run without a GPU; the role must not start it here"


def test_state_record_says_not_loaded_no_gpu(host):
    f = host.file("/etc/rayfleet/nvidia-driver.json")
    assert f.exists and f.mode == 0o644
    state = json.loads(f.content_string)
    assert state["source"] == "distribution" and state["flavor"] == "proprietary" and state["held"] is True
    assert state["packages"] == DRIVER_PACKAGES
    assert state["gpus"] == [] and state["module_loaded"] is False
    assert state["module"] == "not loaded (no NVIDIA GPU on this host)"
    assert state["reboot_pending"] is False
    # DKMS built nothing: there are no headers for this (non-Debian) host kernel
    assert state["built_for"] == {}


def test_dkms_has_the_module_source_but_no_build(host):
    status = host.run("/usr/sbin/dkms status")
    assert status.rc == 0
    # e.g. "nvidia-current/535.261.03: added" - the source is registered, nothing is built or installed
    assert re.search(r"nvidia[\w-]*[/,] ?" + re.escape(DEBIAN["branch"] + "."), status.stdout), status.stdout
    assert "installed" not in status.stdout, status.stdout
    kernel = host.check_output("uname -r")
    built = host.run(f"/usr/sbin/modinfo -k {kernel} nvidia")
    assert built.rc != 0, "a module built for the host kernel is not expected here"


def test_real_nvml_reports_the_module_not_loaded(host):
    """rayfleet.gpu.read_nvml against the real libnvidia-ml.so.1 installed by the role (no GPU, no module)."""
    src = (ROOT / "library_py/rayfleet/gpu.py").read_text()
    assert "RAYFLEET_EOF" not in src
    cmd = host.run(f"python3 - --json <<'RAYFLEET_EOF'\n{src}\nRAYFLEET_EOF")
    assert cmd.rc == 0, cmd.stderr
    report = json.loads(cmd.stdout)
    assert report["available"] is False and report["count"] == 0
    assert report["reason"].startswith("the NVIDIA kernel module is not loaded"), report["reason"]
    assert report["problems"] == []
