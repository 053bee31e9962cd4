# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests for a real GPU host (make test-gpu): NVML through rayfleet.gpu compared with nvidia-smi and torch, NCCL
through rayfleet.nccl and a torch.distributed all-reduce, and Ray's view of the GPUs. They need only python3 with
torch, nvidia-ml-py and pytest (ray where installed); on a host without an NVIDIA GPU each skips, saying so."""

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# torch numbers GPUs as NVML and nvidia-smi do only in PCI bus order; set before CUDA starts
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
if str(ROOT / "library_py") not in sys.path:
    sys.path.insert(0, str(ROOT / "library_py"))

from rayfleet.gpu import read_nvml  # noqa: E402


@pytest.fixture(scope="session")
def nvml():
    report = read_nvml()
    if not report.available:
        pytest.skip(f"no NVIDIA GPU readable on this host ({report.reason})")
    if not report.gpus:
        pytest.skip("no NVIDIA GPU on this host: NVML runs but lists no GPU")
    return report


@pytest.fixture(scope="session")
def nvidia_smi():
    path = shutil.which("nvidia-smi")
    if path is None:
        pytest.skip("nvidia-smi is not on this host's PATH")
    return path


@pytest.fixture(scope="session")
def torch_cuda(nvml):
    torch = pytest.importorskip("torch", reason="torch is not installed in this Python")
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} sees no CUDA device (a CPU build?)")
    return torch
