# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_check: NVML's view against Ray's, with both faked."""

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import gpu_check
from conftest import run_module as run
from rayfleet.gpu import Gpu, NvmlReport, parse_xids


@pytest.fixture(autouse=True)
def _quiet_kernel_log(monkeypatch):
    """No Xids unless a test says so (the real journal of the test machine stays out of it)."""
    monkeypatch.setattr(gpu_check, "read_kernel_xids", lambda: ([], ""))


def _nvml(monkeypatch, report):
    monkeypatch.setattr(gpu_check, "read_gpus", lambda vendor: ("nvidia", report))


def _ray(monkeypatch, gpus, types=("H100",)):
    resources = None if gpus is None else {"CPU": 16.0, "GPU": gpus, **{f"accelerator_type:{t}": 1.0 for t in types}}
    monkeypatch.setattr(gpu_check, "ray_node_resources",
                        lambda address, ip, token, names: (resources, [] if resources else [f"IP {ip}"]))


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


BUSY = NvmlReport(True, driver_version="570.86.15",
                  gpus=[Gpu(i, f"GPU-{i}", "H100", pci_bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(8)])
KERNEL_LOG = [
    "NVRM: Xid (PCI:0000:1b:00): 79, pid=4242, name=python, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:19:00): 13, pid=77, name=python, Graphics Exception: ESR 0x404600=0x80000002",
    "nvidia-nvswitch0: unrelated line",
]


def test_hardware_xids_fail_naming_the_gpu_and_others_warn(monkeypatch):
    _nvml(monkeypatch, BUSY)
    monkeypatch.setattr(gpu_check, "read_kernel_xids", lambda: (parse_xids(KERNEL_LOG), ""))
    out = run(gpu_check, {"expect_gpus": 8})
    assert out.failed
    assert ("GPU 3 (GPU-3, 00000000:1B:00.0): Xid 79 (GPU has fallen off the bus) 1 time(s) since boot, last: "
            "pid=4242, name=python, GPU has fallen off the bus.") in out.result["msg"]
    assert out.result["warnings_found"] == [
        "GPU 1 (GPU-1, 00000000:19:00.0): Xid 13 (see NVIDIA's Xid catalog) 1 time(s) since boot, last: pid=77, "
        "name=python, Graphics Exception: ESR 0x404600=0x80000002"]
    assert [e["xid"] for e in out.result["xid_events"]] == [79, 13]
    # an operator may accept 79 (e.g. while the GPU is being replaced) or turn the check off
    assert not run(gpu_check, {"expect_gpus": 8, "fail_on_xid": [48]}).failed
    assert not run(gpu_check, {"expect_gpus": 8, "check_xid": False}).failed


def test_unreadable_kernel_log_is_a_warning(monkeypatch):
    _nvml(monkeypatch, BUSY)
    monkeypatch.setattr(gpu_check, "read_kernel_xids", lambda: (None, "no journalctl on this host"))
    out = run(gpu_check, {})
    assert not out.failed and out.result["warnings_found"] == ["Xid events not read: no journalctl on this host"]


MI300X = NvmlReport(True, driver_version="6.8.5", gpus=[
    Gpu(i, f"0x{0x5f2c0d4a1a3b00 + i:x}", "AMD Instinct MI300X", pci_bus_id=f"0000:{0x0c + 0x10 * i:02x}:00.0",
        memory_total_mib=196592) for i in range(8)])


def test_amd_gpus_are_checked_against_ray_the_same_way(monkeypatch):
    monkeypatch.setattr(gpu_check, "read_gpus", lambda vendor: ("amd", MI300X))
    _ray(monkeypatch, 8.0, types=("AMD-Instinct-MI300X",))
    ok = run(gpu_check, dict(RAY, expect_gpus=8, expect_model="MI300X"))
    assert not ok.failed and ok.result["vendor"] == "amd" and "xid_events" not in ok.result
    _ray(monkeypatch, 8.0, types=("AMD-Instinct-MI250X",))
    bad = run(gpu_check, RAY)
    assert bad.failed and "accelerator_type:AMD-Instinct-MI250X" in bad.result["msg"]


def test_dcgm_diag_failure_names_the_gpu_and_fails(monkeypatch):
    """dcgmi's recorded 4.5.2 output (tests/unit/fixtures/dcgm): its software test fails on GPU 0."""
    from pathlib import Path

    from rayfleet.dcgm import parse_diag

    recorded = (Path(__file__).parents[2] / "fixtures/dcgm/4.5.2-r2-gb10-persistence-off.json").read_text()
    _nvml(monkeypatch, EIGHT)
    asked = []

    def fake_run_diag(level, timeout):
        asked.append((level, timeout))
        return parse_diag(recorded), ""

    monkeypatch.setattr(gpu_check, "run_diag", fake_run_diag)
    out = run(gpu_check, {"dcgm_diag_level": 2})
    assert asked == [(2, 600)]
    assert out.failed and "GPU 0 (GPU-0): DCGM diag -r 2 test 'software' (Deployment) failed: Persistence" in (
        out.result["msg"])
    diag = out.result["dcgm_diag"]
    assert diag["version"] == "4.5.2" and [f["test"] for f in diag["failed"]] == ["software"] and diag["error"] == ""
    assert diag["ran"] is True
    assert "dcgm_diag" not in run(gpu_check, {}).result, "level 0 runs no diagnostic"


def test_dcgm_diag_that_cannot_run_is_a_problem(monkeypatch):
    _nvml(monkeypatch, EIGHT)
    why = "dcgmi not found (DCGM is not installed: the monitoring role installs it)"
    monkeypatch.setattr(gpu_check, "run_diag", lambda level, timeout: (None, why))
    out = run(gpu_check, {"dcgm_diag_level": 1, "dcgm_diag_timeout": 30})
    assert out.failed and "DCGM diag -r 1 was asked for (dcgm_diag_level), but dcgmi not found" in out.result["msg"]
    assert out.result["dcgm_diag"]["error"].startswith("dcgmi not found")


def test_a_hosts_node_instances_are_summed_against_the_gpus_given_to_them(monkeypatch):
    """Two node instances on one 8-GPU host (ray_node_instances), one GPU each: Ray's count is their sum, checked
    against the 2 GPUs given to them, not NVML's 8; an instance Ray does not list alive fails, named."""
    _nvml(monkeypatch, EIGHT)

    def listed(*names_gpus):
        nodes = [{"node_id": f"id-{name}", "node_ip": "10.0.0.11", "node_name": name, "state": "ALIVE",
                  "resources_total": {"CPU": 4.0, "GPU": gpus, "accelerator_type:H100": 1.0}, "start_time_ms": 1}
                 for name, gpus in names_gpus]
        nodes.append({"node_id": "id-other", "node_ip": "10.0.0.12", "state": "ALIVE",
                      "resources_total": {"GPU": 8.0}, "start_time_ms": 1})
        monkeypatch.setattr(gpu_check, "fetcher", lambda address, auth_token_path=None: lambda: nodes)

    names = ["10.0.0.11/gpu0", "10.0.0.11/gpu1"]
    listed(("10.0.0.11/gpu0", 1.0), ("10.0.0.11/gpu1", 1.0))
    ok = run(gpu_check, dict(RAY, node_names=names, ray_gpus_expected=2))
    assert not ok.failed, ok.result["msg"]
    assert ok.result["ray_gpus"] == 2.0 and ok.result["count"] == 8
    # without the expected count, NVML's 8 is what Ray must report: the check this option exists to avoid
    bad = run(gpu_check, dict(RAY, node_names=names))
    assert bad.failed and "Ray reports 2 GPU(s) on this node, NVML 8" in bad.result["msg"]
    listed(("10.0.0.11/gpu0", 1.0), ("10.0.0.11/gpu1", 0.0))
    short = run(gpu_check, dict(RAY, node_names=names, ray_gpus_expected=2))
    assert short.failed and "Ray reports 1 GPU(s) on this host's node(s), but 2 of NVML's 8" in short.result["msg"]
    listed(("10.0.0.11/gpu0", 1.0))
    gone = run(gpu_check, dict(RAY, node_names=names, ray_gpus_expected=2))
    assert gone.failed and "Ray lists no alive node with name 10.0.0.11/gpu1" in gone.result["msg"]


def test_dcgm_not_installed_is_a_warning_when_not_required(monkeypatch):
    """The preflight's default (level 1, DCGM not required): a GPU host without DCGM is reported, not failed; an
    installed DCGM whose diagnostic cannot run still fails."""
    _nvml(monkeypatch, EIGHT)
    monkeypatch.setattr(gpu_check, "dcgm_installed", lambda: False)
    monkeypatch.setattr(gpu_check, "run_diag", lambda level, timeout: pytest.fail("dcgmi is not installed"))
    out = run(gpu_check, {"dcgm_diag_level": 1, "dcgm_diag_required": False})
    assert not out.failed and out.result["problems"] == []
    assert out.result["warnings_found"] == [
        "DCGM diag -r 1 not run: dcgmi not found (DCGM is not installed: the monitoring role installs it on GPU nodes)"]
    assert out.result["dcgm_diag"]["ran"] is False and out.result["dcgm_diag"]["level"] == 1

    monkeypatch.setattr(gpu_check, "dcgm_installed", lambda: True)
    monkeypatch.setattr(gpu_check, "run_diag", lambda level, timeout: (None, "dcgmi diag -r 1 exited 255: Error: "
                                                                       "unable to establish a connection"))
    down = run(gpu_check, {"dcgm_diag_level": 1, "dcgm_diag_required": False})
    assert down.failed and "DCGM diag -r 1 was asked for (dcgm_diag_level), but dcgmi diag -r 1 exited 255" in (
        down.result["msg"])
    assert down.result["dcgm_diag"]["ran"] is False


def test_dcgm_diag_with_no_results_fails_the_node(monkeypatch):
    from rayfleet.dcgm import DiagReport

    _nvml(monkeypatch, EIGHT)
    monkeypatch.setattr(gpu_check, "run_diag", lambda level, timeout: (DiagReport(version="4.2.3"), ""))
    out = run(gpu_check, {"dcgm_diag_level": 1})
    assert out.failed and "DCGM diag -r 1 returned no test results (DCGM 4.2.3): nothing was checked" in (
        out.result["msg"])
    assert out.result["dcgm_diag"]["ran"] is False
