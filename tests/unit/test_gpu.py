# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.gpu against a fake NVML: what is read, and which findings fail a node."""

import json
from types import SimpleNamespace

import pytest
from rayfleet import gpu
from rayfleet.errors import RayfleetError, SettingsError


class FakeNvml:
    """The part of pynvml that rayfleet.gpu calls, with GPUs described as dicts."""

    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_NVLINK_MAX_LINKS = 18

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self, gpus=(), init_error=None, library="12.570.86.15"):
        self.gpus = [dict(g) for g in gpus]
        self.init_error = init_error
        self.library = library
        self.shutdown = False

    def _get(self, h, key):
        value = self.gpus[h].get(key)
        if value is None:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return value

    def nvmlInit(self):
        if self.init_error is not None:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return b"570.86.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12080

    def nvmlSystemGetNVMLVersion(self):
        return self.library.encode()

    def nvmlDeviceGetMigMode(self, h):
        return self._get(h, "mig")

    def nvmlDeviceGetNvLinkState(self, h, link):
        links = self.gpus[h].get("nvlinks")
        if links is None or link >= len(links):
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        return links[link]

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return self.gpus[h]["uuid"].encode()

    def nvmlDeviceGetName(self, h):
        return self.gpus[h].get("name", "NVIDIA H100 80GB HBM3")

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=f"00000000:{h + 0x18:02X}:00.0".encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=80 * (1 << 30))

    def nvmlDeviceGetPersistenceMode(self, h):
        return self._get(h, "persistence")

    def nvmlDeviceGetEccMode(self, h):
        return (1, 1)

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter):
        assert (error_type, counter) == (1, 0)
        return self._get(h, "ecc")

    def nvmlDeviceGetRemappedRows(self, h):
        return self._get(h, "remap")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._get(h, "width")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5


HEALTHY = {"uuid": "GPU-0", "persistence": 1, "ecc": 0, "remap": (0, 0, 0, 0), "width": 16}


def _gpus(n, **changes):
    out = [dict(HEALTHY, uuid=f"GPU-{i:04x}") for i in range(n)]
    for index, fields in changes.items():
        out[int(index[1:])].update(fields)
    return out


def test_healthy_node_reads_everything_and_passes():
    nvml = FakeNvml(_gpus(8))
    report = gpu.read_nvml(nvml)
    assert report.available and len(report.gpus) == 8 and nvml.shutdown
    first = report.gpus[0]
    assert first.uuid == "GPU-0000" and first.pci_bus_id == "00000000:18:00.0" and first.memory_total_mib == 81920
    assert first.persistence_mode and first.ecc_uncorrected_volatile == 0 and first.pcie_width == 16
    assert report.driver_version == "570.86.15" and report.cuda_driver_version == "12.8"
    assert gpu.problems(report, expect=8, ray_gpus=8.0) == ([], [])
    assert "8 GPU(s)" in gpu.format_table(report)


def test_findings_name_the_gpu():
    report = gpu.read_nvml(FakeNvml(_gpus(4, g1={"ecc": 3}, g2={"remap": (0, 0, 1, 0)}, g3={"width": 8},
                                          g0={"persistence": 0})))
    bad, warn = gpu.problems(report, expect=4)
    assert any(p.startswith("GPU 1 (GPU-0001, 00000000:19:00.0) has 3 uncorrected ECC error(s)") for p in bad)
    assert any("GPU 2" in p and "row remapping pending" in p for p in bad)
    assert any("GPU 3" in p and "PCIe link x8 of x16" in p for p in bad)
    assert len(bad) == 3 and len(warn) == 1 and "persistence mode off" in warn[0]
    assert gpu.problems(report, expect=4, check_pcie=False)[0] == bad[:2]


def test_count_ray_mismatch_and_duplicate_uuid():
    report = gpu.read_nvml(FakeNvml(_gpus(7)))
    bad = gpu.problems(report, expect=8, ray_gpus=4)[0]
    assert bad[0].startswith("NVML sees 7 GPU(s), expected 8")
    assert bad[1].startswith("Ray reports 4 GPU(s) on this node, NVML 7")
    twice = gpu.read_nvml(FakeNvml(_gpus(2, g1={"uuid": "GPU-0000"})))
    assert "same UUID as GPU 0: one GPU is assigned twice" in gpu.problems(twice)[0][0]


def test_unsupported_fields_are_none_not_errors():
    report = gpu.read_nvml(FakeNvml([dict(HEALTHY, persistence=None, ecc=None, remap=None, width=None)]))
    g = report.gpus[0]
    assert (g.persistence_mode, g.ecc_uncorrected_volatile, g.remap_pending, g.pcie_width) == (None, None, None, None)
    assert gpu.problems(report) == ([], [])


NO_DRIVER = [(12, "no NVIDIA driver on this host (libnvidia-ml.so.1 not found)"),
             (9, "the NVIDIA kernel module is not loaded")]


@pytest.mark.parametrize(("code", "text"), NO_DRIVER)
def test_no_driver_is_a_reason_not_a_crash(code, text):
    report = gpu.read_nvml(FakeNvml(init_error=code))
    assert not report.available and report.reason.startswith(text)
    assert gpu.problems(report) == ([], [])
    bad = gpu.problems(report, expect=8)[0]
    assert bad == [f"expected 8 GPU(s), but {report.reason}"]


# Scenarios of an 8-GPU HGX H100 node (fields as NVML returns them for an H100 SXM5: 18 NVLink4 links, MIG capable;
# constructed from NVIDIA's published specifications, not recorded on a GPU).
SXM = dict(HEALTHY, mig=(0, 0), nvlinks=[1] * 18)


def _hgx(**changes):
    gpus = [dict(SXM, uuid=f"GPU-{i:04x}") for i in range(8)]
    for index, fields in changes.items():
        gpus[int(index[1:])].update(fields)
    return gpus


def test_hgx_healthy_with_model_driver_and_ray_type():
    report = gpu.read_nvml(FakeNvml(_hgx()))
    g = report.gpus[0]
    assert (g.mig_mode, g.nvlink_up, g.nvlink_total) == (False, 18, 18) and report.nvml_version == "12.570.86.15"
    assert gpu.problems(report, expect=8, ray_gpus=8, expect_model="H100", min_driver="535.104",
                        ray_accelerator_types=["H100"]) == ([], [])
    assert "18/18" in gpu.format_table(report)


def test_hgx_one_gpu_missing():
    report = gpu.read_nvml(FakeNvml(_hgx()[:7]))
    bad = gpu.problems(report, expect=8, ray_gpus=7)[0]
    assert bad == [bad[0]] and bad[0].startswith("NVML sees 7 GPU(s), expected 8")


def test_hgx_ecc_errors_fail_or_warn():
    report = gpu.read_nvml(FakeNvml(_hgx(g5={"ecc": 2})))
    bad, warn = gpu.problems(report, expect=8)
    assert bad == ["GPU 5 (GPU-0005, 00000000:1D:00.0) has 2 uncorrected ECC error(s) since boot"] and warn == []
    bad, warn = gpu.problems(report, expect=8, fail_on_ecc=False)
    assert bad == [] and "GPU 5" in warn[0]


def test_hgx_mig_enabled_is_reported():
    report = gpu.read_nvml(FakeNvml(_hgx(g2={"mig": (1, 1)})))
    bad, warn = gpu.problems(report)
    assert bad == [] and warn == ["GPU 2 (GPU-0002, 00000000:1A:00.0): MIG mode is on; Ray schedules whole GPUs, "
                                  "so MIG instances are not used as such"]


def test_hgx_nvlink_down_names_the_gpu():
    report = gpu.read_nvml(FakeNvml(_hgx(g3={"nvlinks": [1] * 17 + [0]})))
    bad = gpu.problems(report)[0]
    assert len(bad) == 1 and bad[0].startswith("GPU 3 (GPU-0003, 00000000:1B:00.0): 17 of 18 NVLink links up")
    assert gpu.problems(report, check_nvlink=False) == ([], [])


def test_wrong_model_old_driver_and_ray_type():
    report = gpu.read_nvml(FakeNvml(_hgx(g0={"name": "NVIDIA A100-SXM4-80GB"})))
    bad = gpu.problems(report, expect_model="h100", min_driver="575", ray_accelerator_types=["H100"])[0]
    assert "GPU 0 (GPU-0000, 00000000:18:00.0) is a NVIDIA A100-SXM4-80GB, expected h100" in bad
    assert "driver 570.86.15 is older than the required 575" in bad
    assert any(p.startswith("Ray reports accelerator_type:H100 on this node, NVML sees NVIDIA A100") for p in bad)
    assert gpu.accelerator_type_matches("A100", "NVIDIA A100-SXM4-80GB")
    assert gpu.accelerator_type_matches("L4", "NVIDIA L4") and not gpu.accelerator_type_matches("L4", "NVIDIA L40S")


def test_library_not_the_running_driver():
    report = gpu.read_nvml(FakeNvml(_hgx(), library="12.580.95.05"))
    assert any("NVML library 12.580.95.05 is not the running driver 570.86.15" in p for p in gpu.problems(report)[0])
    mismatch = gpu.read_nvml(FakeNvml(init_error=18))
    assert not mismatch.available and mismatch.reason.startswith("driver/library version mismatch")


def test_xid_lines_of_old_and_new_drivers_are_parsed():
    events = gpu.parse_xids([
        "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been detected",
        "NVRM: Xid (PCI:0000:18:00): 94, pid='<unknown>', name=<unknown>, Contained: CE User Channel (0x9)",
        "NVRM: GPU at PCI:0000:18:00: GPU-abc",
    ])
    assert [(e.bus_id, e.xid) for e in events] == [("0000:3b:00", 48), ("0000:18:00", 94)]
    assert events[0].detail.startswith("An uncorrectable double bit error")
    assert gpu.bus_key("00000000:3B:00.0") == gpu.bus_key("0000:3b:00") == (0, 0x3B, 0)


def test_an_xid_from_a_gpu_nvml_no_longer_lists_is_still_named():
    report = gpu.read_nvml(FakeNvml(_hgx()[:1]))
    lost = gpu.parse_xids(["NVRM: Xid (PCI:0000:99:00): 79, GPU has fallen off the bus."])
    bad, warn = gpu.xid_findings(report, lost, set(gpu.HARDWARE_XIDS))
    assert bad == ["the GPU at 0000:99:00 (not listed by NVML now): Xid 79 (GPU has fallen off the bus) 1 time(s) "
                   "since boot, last: GPU has fallen off the bus."] and warn == []


# AMD SMI outputs in the shapes AMD documents (amd-smi static --json of ROCm 6; rocm-smi --json of ROCm 5.x),
# constructed from AMD's documentation - not recorded on an AMD GPU
AMD_SMI_STATIC = [
    {"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "asic_serial": "0x5F2C0D4A1A3B0000"},
     "bus": {"bdf": "0000:0c:00.0"}, "vram": {"size": {"value": 196592, "unit": "MB"}},
     "driver": {"name": "amdgpu", "version": "6.8.5"}},
    {"gpu": 1, "asic": {"market_name": "AMD Instinct MI300X", "asic_serial": "0x5F2C0D4A1A3B0001"},
     "bus": {"bdf": "0000:22:00.0"}, "vram": {"size": {"value": 196592, "unit": "MB"}},
     "driver": {"name": "amdgpu", "version": "6.8.5"}},
]
ROCM_SMI = {
    "card1": {"Card series": "Instinct MI210", "Card model": "0x0c34", "PCI Bus": "0000:83:00.0",
              "Unique ID": "0x9a1b2c3d4e5f6071", "VRAM Total Memory (B)": "68702699520"},
    "card0": {"Card series": "Instinct MI210", "Card model": "0x0c34", "PCI Bus": "0000:03:00.0",
              "Unique ID": "0x9a1b2c3d4e5f6070", "VRAM Total Memory (B)": "68702699520"},
    "system": {"Driver version": "6.1.0"},
}


def test_amd_smi_static_output_is_read():
    for shape in (AMD_SMI_STATIC, {"gpu_data": AMD_SMI_STATIC}):
        report = gpu.parse_amd_smi(shape)
        assert report.driver_version == "6.8.5" and len(report.gpus) == 2
        g = report.gpus[1]
        assert (g.index, g.name, g.pci_bus_id, g.memory_total_mib) == (1, "AMD Instinct MI300X", "0000:22:00.0",
                                                                       196592)
    assert gpu.problems(report, expect=2, expect_model="MI300X", ray_accelerator_types=["AMD-Instinct-MI300X"],
                        ray_gpus=2) == ([], [])


def test_rocm_smi_output_is_read_in_card_order():
    report = gpu.parse_rocm_smi(ROCM_SMI)
    assert [g.pci_bus_id for g in report.gpus] == ["0000:03:00.0", "0000:83:00.0"]
    assert report.gpus[0].memory_total_mib == 65520 and report.driver_version == "6.1.0"
    assert report.gpus[0].uuid == "0x9a1b2c3d4e5f6070"


def test_accelerator_types_match_words_not_substrings():
    assert gpu.accelerator_type_matches("H100", "NVIDIA H100 80GB HBM3")
    assert not gpu.accelerator_type_matches("H10", "NVIDIA H100 80GB HBM3")
    assert gpu.accelerator_type_matches("AMD-Instinct-MI300X-OAM", "AMD Instinct MI300X")
    assert not gpu.accelerator_type_matches("AMD-Instinct-MI250X", "AMD Instinct MI300X")


# Containerized nodes (ray_runtime: container): which GPUs a container gets and what it really sees.
def test_assignment_by_index_or_uuid_resolves_to_uuids_in_order():
    report = gpu.read_nvml(FakeNvml(_gpus(4)))
    assert gpu.resolve_assignment(report, [2, "GPU-0000"]) == ["GPU-0002", "GPU-0000"]
    assert gpu.resolve_assignment(report, []) == []


@pytest.mark.parametrize(("wanted", "words"), [
    ([4], ["GPU 4", "no such index", "4 GPU(s) (0-3)"]),
    (["GPU-ffff"], ["'GPU-ffff'", "GPU-0000, GPU-0001"]),
    ([1, "GPU-0001"], ["listed twice", "GPU-0001"]),
])
def test_a_bad_assignment_names_the_gpu(wanted, words):
    report = gpu.read_nvml(FakeNvml(_gpus(4)))
    with pytest.raises(SettingsError) as err:
        gpu.resolve_assignment(report, wanted)
    for word in words:
        assert word in str(err.value)


def test_container_sees_exactly_its_gpus_or_the_check_says_what_differs():
    assert gpu.container_gpu_problems("ray-worker", ["GPU-1"], ["GPU-1"], {"ray-teamb-worker": ["GPU-2"]}) == []
    found = gpu.container_gpu_problems("ray-worker", ["GPU-1", "GPU-3"], ["GPU-1", "GPU-2"],
                                       {"ray-teamb-worker": ["GPU-2"], "ray-c-worker": []})
    assert found == ["container ray-worker does not see its GPU(s) GPU-3",
                     "container ray-worker sees GPU(s) it was not given: GPU-2",
                     "containers ray-worker and ray-teamb-worker both see GPU(s) GPU-2"]


def test_container_gpus_reads_nvml_inside_the_container():
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        out = {"available": True, "gpus": [{"uuid": "GPU-7"}], "problems": []}
        return SimpleNamespace(returncode=0, stdout=json.dumps(out), stderr="")

    assert gpu.container_gpus("podman", "ray-worker", "python3", run=run) == ["GPU-7"]
    assert calls[0][:5] == ["podman", "exec", "ray-worker", "python3", "-m"]

    def no_driver(cmd, **kw):
        return SimpleNamespace(returncode=0, stdout=json.dumps({"available": False, "gpus": []}), stderr="")

    assert gpu.container_gpus("docker", "ray-worker", run=no_driver) == []

    def gone(cmd, **kw):
        return SimpleNamespace(returncode=125, stdout="", stderr="Error: no container with name ray-worker")

    with pytest.raises(RayfleetError, match="no container with name ray-worker"):
        gpu.container_gpus("podman", "ray-worker", run=gone)


# /dev/kmsg records as the kernel returns them, one per read (prio,seq,usec,flags;text, then KEY=value lines)
KMSG = [
    b"6,1204,8812345,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
    b" SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n",
    b"4,1205,8812399,-;nvidia-nvswitch0: link 3 down\n",
    b"garbage without a header\n",
]


def test_kmsg_records_give_their_text_and_the_first_sequence_number():
    lines, first = gpu.parse_kmsg_records(KMSG)
    assert first == 1204 and len(lines) == 2 and lines[1] == "nvidia-nvswitch0: link 3 down"
    events = gpu.parse_xids(lines)
    assert [(e.bus_id, e.xid) for e in events] == [("0000:18:00", 79)]
    assert gpu.parse_kmsg_records([b"6,0,1,-;Linux version 6.1\n"]) == (["Linux version 6.1"], 0)


def test_without_journalctl_xids_come_from_kmsg_with_a_note_when_it_wrapped(monkeypatch):
    monkeypatch.setattr(gpu.shutil, "which", lambda name: None)
    monkeypatch.setattr(gpu, "read_kmsg", lambda: (gpu.parse_kmsg_records(KMSG)[0], "read from /dev/kmsg: lost"))
    events, note = gpu.read_kernel_xids()
    assert [e.xid for e in events] == [79] and note == "read from /dev/kmsg: lost"
    monkeypatch.setattr(gpu, "read_kmsg", lambda: (None, "/dev/kmsg cannot be read (Permission denied)"))
    why = "no journalctl on this host, and /dev/kmsg cannot be read (Permission denied)"
    assert gpu.read_kernel_xids() == (None, why)


def test_read_kmsg_reads_records_until_none_is_left(tmp_path):
    missing = gpu.read_kmsg(str(tmp_path / "no-kmsg"))
    assert missing[0] is None and "cannot be read" in missing[1]
    lines, _note = gpu.read_kmsg()  # this host's own ring buffer, where readable (root)
    if lines is None:
        pytest.skip(f"/dev/kmsg is not readable here: {_note}")
    assert lines, "the kernel ring buffer of a running host is never empty"


def test_ray_gpus_are_checked_against_the_gpus_given_when_fewer_than_the_host_has():
    """A container node given 2 of the host's 8 GPUs (ray_container_gpus): Ray's 2 is right, Ray's 8 is not."""
    report = gpu.NvmlReport(True, driver_version="570.86.15", nvml_version="12.570.86.15",
                            gpus=[gpu.Gpu(i, f"GPU-{i}", "NVIDIA H100") for i in range(8)])
    assert gpu.problems(report, ray_gpus=2.0, ray_gpus_expected=2, check_pcie=False, check_nvlink=False)[0] == []
    bad, _warn = gpu.problems(report, ray_gpus=8.0, ray_gpus_expected=2, check_pcie=False, check_nvlink=False)
    assert len(bad) == 1 and bad[0].startswith("Ray reports 8 GPU(s) on this host's node(s), but 2 of NVML's 8")
