# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_check: NVML's view against Ray's, with both faked."""

from ansible_collections.rayfleet.cluster.plugins.modules import gpu_check
from conftest import run_module as run
from rayfleet.gpu import Gpu, NvmlReport


def _nvml(monkeypatch, report):
    monkeypatch.setattr(gpu_check, "read_nvml", lambda: report)


def _ray(monkeypatch, gpus, types=("H100",)):
    resources = None if gpus is None else {"CPU": 16.0, "GPU": gpus, **{f"accelerator_type:{t}": 1.0 for t in types}}
    monkeypatch.setattr(gpu_check, "ray_node_resources", lambda address, ip, token: resources)


EIGHT = NvmlReport(True, driver_version="570.86.15", gpus=[Gpu(i, f"GPU-{i}", "H100") for i in range(8)])
RAY = {"ray_address": "http://10.0.0.10:8265", "node_ip": "10.0.0.11"}


def test_no_driver_is_reported_not_failed(monkeypatch):
    _nvml(monkeypatch, NvmlReport(False, "no NVIDIA driver on this host (libnvidia-ml.so.1 not found)"))
    out = run(gpu_check, {})
    assert not out.failed and out.result["available"] is False and out.result["msg"].startswith("no GPU checked")
    assert run(gpu_check, {"required": True}).failed


def test_ray_and_nvml_must_agree(monkeypatch):
    _nvml(monkeypatch, EIGHT)
    _ray(monkeypatch, 8.0)
    ok = run(gpu_check, dict(RAY, expect_gpus=8))
    assert not ok.failed and ok.result["count"] == 8 and ok.result["ray_gpus"] == 8.0
    _ray(monkeypatch, 4.0)
    bad = run(gpu_check, RAY)
    assert bad.failed and "Ray reports 4 GPU(s) on this node, NVML 8" in bad.result["msg"]


def test_ray_gpus_without_a_driver_fail(monkeypatch):
    _nvml(monkeypatch, NvmlReport(False, "the NVIDIA kernel module is not loaded"))
    _ray(monkeypatch, 2.0)
    out = run(gpu_check, RAY)
    assert out.failed
    assert "Ray reports 2 GPU(s) on this node, but the NVIDIA kernel module is not loaded" in out.result["msg"]


def test_node_unknown_to_ray_fails(monkeypatch):
    _nvml(monkeypatch, EIGHT)
    _ray(monkeypatch, None)
    out = run(gpu_check, RAY)
    assert out.failed and "Ray lists no alive node with IP 10.0.0.11" in out.result["msg"]
