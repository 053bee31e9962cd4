# SPDX-License-Identifier: GPL-3.0-or-later
"""The monitoring role's DCGM exporter on GPU-group hosts with no GPU on their PCI bus (the driver forced on one of
them): nothing of DCGM installed, nothing listening, and the reason recorded. The install, the unit and the proof
that it serves every GPU's metrics need a GPU and NVIDIA's repository: neither is here."""

import json

testinfra_hosts = ["ansible://gpu"]


def test_skipped_saying_why(host):
    f = host.file("/etc/rayfleet/dcgm-exporter.json")
    assert f.exists and f.mode == 0o644
    state = json.loads(f.content_string)
    assert state == {"running": False, "reason": "no NVIDIA GPU on this host", "address": "", "dcgm_cuda_major": ""}


def test_nothing_of_dcgm_installed_or_listening(host):
    for name in ("datacenter-gpu-manager-exporter", "datacenter-gpu-manager-4-core"):
        assert not host.package(name).is_installed, f"{name} installed on a host without an NVIDIA GPU"
    assert not host.file("/etc/systemd/system/nvidia-dcgm-exporter.service.d/rayfleet.conf").exists
    listening = host.check_output("ss -Htln").split()
    assert not any(word.endswith(":9400") for word in listening), "something listens on the exporter's port"
