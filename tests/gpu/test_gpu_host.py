# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet's GPU reading against the real driver: NVML (rayfleet.gpu) vs nvidia-smi and torch, NCCL
(rayfleet.nccl) vs torch, a NCCL all-reduce over every local GPU, and Ray's GPU count and accelerator type."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from rayfleet import gpu, nccl

SMI_FIELDS = ("index", "uuid", "name", "pci.bus_id", "memory.total", "driver_version", "persistence_mode",
              "ecc.mode.current", "pcie.link.width.current", "pcie.link.width.max", "mig.mode.current")


def smi_rows(nvidia_smi: str) -> list[dict[str, str]]:
    out = subprocess.run([nvidia_smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return [dict(zip(SMI_FIELDS, (v.strip() for v in row))) for row in csv.reader(io.StringIO(out)) if row]


def _flag(text: str) -> bool | None:
    return {"Enabled": True, "Disabled": False}.get(text)


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def test_nvml_agrees_with_nvidia_smi(nvml, nvidia_smi):
    print(gpu.format_table(nvml))
    rows = smi_rows(nvidia_smi)
    assert len(rows) == len(nvml.gpus), f"nvidia-smi lists {len(rows)} GPUs, NVML {len(nvml.gpus)}"
    assert {r["driver_version"] for r in rows} == {nvml.driver_version}
    for g, r in zip(nvml.gpus, rows):
        assert (g.index, g.uuid, g.name) == (int(r["index"]), r["uuid"], r["name"])
        assert g.pci_bus_id.lower() == r["pci.bus_id"].lower()
        assert g.memory_total_mib == int(r["memory.total"])
        assert g.persistence_mode == _flag(r["persistence_mode"])
        assert g.ecc_enabled == _flag(r["ecc.mode.current"])
        assert g.pcie_width == _int(r["pcie.link.width.current"])
        assert g.pcie_max_width == _int(r["pcie.link.width.max"])
        assert g.mig_mode == _flag(r["mig.mode.current"])


def test_nvml_library_is_the_running_drivers(nvml):
    # NVML's version is "<CUDA major>.<driver version>" (13.580.159.04 on driver 580.159.04, CUDA 13.0)
    assert nvml.nvml_version.endswith("." + nvml.driver_version), (nvml.nvml_version, nvml.driver_version)
    assert nvml.nvml_version.split(".")[0] == nvml.cuda_driver_version.split(".")[0], nvml
    found, warnings = gpu.problems(nvml, expect=len(nvml.gpus))
    print("problems:", found or "none", "warnings:", warnings or "none")
    assert not [p for p in found if "is not the running driver" in p or "expected" in p], found


def test_torch_sees_the_same_gpus(nvml, torch_cuda):
    assert torch_cuda.cuda.device_count() == len(nvml.gpus)
    for g in nvml.gpus:
        assert torch_cuda.cuda.get_device_name(g.index) == g.name


def test_nccl_probe_reads_torchs_nccl(torch_cuda):
    found = nccl.probe()
    print(json.dumps(found, indent=2))
    assert found["available"], found.get("reason")
    assert tuple(int(p) for p in found["version"].split(".")) == tuple(torch_cuda.cuda.nccl.version())
    assert "error" not in found["bootstrap"] and found["bootstrap"]["address"]


def test_nccl_all_reduce_over_every_local_gpu(nvml, torch_cuda, tmp_path):
    """One process per GPU (torch.multiprocessing), NCCL all-reduce, every rank checks the sum."""
    script = tmp_path / "allreduce.py"
    script.write_text(
        "import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp\n"
        "def work(rank, world, path):\n"
        "    dist.init_process_group('nccl', init_method='file://' + path, rank=rank, world_size=world)\n"
        "    torch.cuda.set_device(rank)\n"
        "    t = torch.full((1 << 24,), float(rank + 1), device='cuda')\n"
        "    dist.all_reduce(t)\n"
        "    torch.cuda.synchronize()\n"
        "    assert torch.all(t == world * (world + 1) / 2).item(), t[:4]\n"
        "    dist.destroy_process_group()\n"
        "if __name__ == '__main__':\n"
        "    world = torch.cuda.device_count()\n"
        "    mp.spawn(work, args=(world, sys.argv[1]), nprocs=world)\n"
        "    print('all-reduce ok over', world, 'GPU(s)')\n")
    env = dict(os.environ, NCCL_DEBUG="WARN", PYTHONPATH=str(ROOT / "library_py"))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "rendezvous")], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"all-reduce ok over {len(nvml.gpus)} GPU(s)" in proc.stdout


def test_ray_reports_nvmls_gpus_and_model(nvml):
    ray = pytest.importorskip("ray", reason="ray is not installed in this Python (carry its wheels: README)")
    ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    try:
        resources = ray.cluster_resources()
    finally:
        ray.shutdown()
    assert resources.get("GPU") == float(len(nvml.gpus)), resources
    types = [k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")]
    assert types and all(gpu.accelerator_type_matches(t, nvml.gpus[0].name) for t in types), (types, nvml.gpus[0].name)


def test_no_hardware_xid_since_boot(nvml):
    events, why_not = gpu.read_kernel_xids()
    if events is None:
        pytest.skip(f"the kernel log cannot be read here: {why_not}")
    bad, warn = gpu.xid_findings(nvml, events, set(gpu.HARDWARE_XIDS))
    print("Xid events:", [(e.bus_id, e.xid) for e in events] or "none", "warnings:", warn or "none",
          "source:", why_not or ("journald" if shutil.which("journalctl") else "/dev/kmsg"))
    assert bad == [], bad
