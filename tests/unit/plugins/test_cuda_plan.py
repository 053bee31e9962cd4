# SPDX-License-Identifier: GPL-3.0-or-later
"""The CUDA plan (plugins/plugin_utils/cuda_plan.py): the cuda role's variables checked, each bad one named with the
host, and the toolkit's source, release, home, packages and host compiler decided from the role's OS-specific
values as the role decided them in Jinja before."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cuda_plan import CUDA_VARS, PlanError, cuda_plan

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = {**yaml.safe_load((ROOT / "roles/cuda/defaults/main.yml").read_text()), "cuda_force": False}
FACTS = {
    "Debian": {"distribution": "Debian", "distribution_major_version": "12", "distribution_version": "12.11"},
    "Ubuntu": {"distribution": "Ubuntu", "distribution_major_version": "22", "distribution_version": "22.04"},
    "RedHat": {"distribution": "Rocky", "distribution_major_version": "9", "distribution_version": "9.6"},
}
GPU_HOST = {"nvidia_gpus": [{"bus_id": "0000:18:00.0", "architecture": "hopper", "driver": "nvidia"}]}
CPU_HOST = {"nvidia_gpus": []}
SAME = object()  # a default argument: GPU_HOST


def os_values(name):
    """(default source, the distribution's CUDA) from the role's vars/<OS>.yml, rendered for a host of that OS."""
    raw = yaml.safe_load((ROOT / "roles/cuda/vars" / f"{name}.yml").read_text())
    toolkit = raw["__cuda_distribution"]
    if isinstance(toolkit.get("version"), str):
        toolkit = dict(toolkit, version=jinja2.Template(toolkit["version"]).render(ansible_facts=FACTS[name]))
    return raw["__cuda_default_source"], toolkit


def plan(hardware=SAME, os_name="Debian", **extra) -> dict:
    hardware = GPU_HOST if hardware is SAME else hardware
    v = {name: DEFAULTS[name] for name in CUDA_VARS} | extra
    facts = FACTS[os_name]
    return cuda_plan("gpu1", v, hardware, *os_values(os_name),
                     os_facts=(facts["distribution"], facts["distribution_version"]))


def problems(hardware=SAME, os_name="Debian", **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(hardware, os_name, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("cuda on gpu1: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def test_a_host_without_a_gpu_is_left_alone_unchecked():
    assert plan(CPU_HOST) == {"act": False, "has_gpu": False}
    assert plan(CPU_HOST, cuda_source="conda", cuda_version="latest")["act"] is False
    assert plan(GPU_HOST, cuda_enabled=False) == {"act": False, "has_gpu": True}


@pytest.mark.parametrize(("enabled", "force", "hardware", "act"), [
    (True, False, GPU_HOST, True),
    (True, False, CPU_HOST, False),
    (True, True, CPU_HOST, True),
    (True, "true", CPU_HOST, True),
    (True, "False", CPU_HOST, False),
    (False, True, GPU_HOST, False),
    (True, False, {}, False),
])
def test_whether_the_host_installs_the_toolkit(enabled, force, hardware, act):
    assert plan(hardware, cuda_enabled=enabled, cuda_force=force)["act"] is act


def test_debian_distribution_toolkit():
    # what the gpu_stack scenario installs (cuda_force from nvidia_driver_force on Debian 12, no GPU)
    assert plan(CPU_HOST, cuda_force=True) == {
        "act": True, "has_gpu": False, "source": "distribution", "version": "11.8", "home": "/usr",
        "packages": ["nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc"], "host_compiler": "/usr/bin/cuda-g++"}
    assert plan(cuda_version="11.8")["version"] == "11.8"


@pytest.mark.parametrize(("os_name", "extra", "expected"), [
    ("Debian", {"cuda_source": "cuda_repo"},
     {"source": "cuda_repo", "version": "12.8", "home": "/usr/local/cuda-12.8", "packages": ["cuda-toolkit-12-8"],
      "host_compiler": ""}),
    ("Ubuntu", {}, {"source": "cuda_repo", "version": "12.8", "home": "/usr/local/cuda-12.8",
                    "packages": ["cuda-toolkit-12-8"], "host_compiler": ""}),
    ("Ubuntu", {"cuda_version": "12.10"}, {"source": "cuda_repo", "version": "12.10", "home": "/usr/local/cuda-12.10",
                                           "packages": ["cuda-toolkit-12-10"], "host_compiler": ""}),
    ("Ubuntu", {"cuda_source": "distribution"}, {"source": "distribution", "version": "11.5", "home": "/usr",
                                                 "packages": ["nvidia-cuda-toolkit"], "host_compiler": ""}),
    ("RedHat", {"cuda_version": "13.0", "cuda_packages": ["cuda-nvcc-13-0", "cuda-cudart-devel-13-0"]},
     {"source": "cuda_repo", "version": "13.0", "home": "/usr/local/cuda-13.0",
      "packages": ["cuda-nvcc-13-0", "cuda-cudart-devel-13-0"], "host_compiler": ""}),
])
def test_decisions(os_name, extra, expected):
    assert plan(os_name=os_name, **extra) == {"act": True, "has_gpu": True, **expected}


@pytest.mark.parametrize(("os_name", "var", "value", "expected"), [
    ("Debian", "cuda_source", "conda", 'cuda_source is "conda"; expected distribution or cuda_repo (Debian 12.11 '
                                       "packages CUDA 11.8), or empty (distribution, the default on Debian 12.11)."),
    ("RedHat", "cuda_source", "distribution", 'cuda_source is "distribution", but Rocky 9.6 does not package CUDA; '
                                              "expected cuda_repo (NVIDIA's repository), or empty (cuda_repo, the "
                                              "default on Rocky 9.6)."),
    ("Debian", "cuda_version", "12.8", 'cuda_version is "12.8" with cuda_source distribution, but Debian 12.11 '
                                       'packages CUDA 11.8 only; expected empty (or "11.8"), or cuda_source: '
                                       "cuda_repo for another release."),
    ("Ubuntu", "cuda_version", "12", 'cuda_version is "12"; expected the toolkit\'s major.minor as a string such as '
                                     '"12.8" (quoted: YAML reads 12.10 as 12.1), or empty for the source\'s default.'),
    ("Ubuntu", "cuda_version", 12.8, "cuda_version is 12.8; expected the toolkit's major.minor as a string"),
    ("Ubuntu", "cuda_version", "12.8.1", 'cuda_version is "12.8.1"; expected'),
    ("Ubuntu", "cuda_enabled", "maybe", 'cuda_enabled is "maybe"; expected true or false.'),
])
def test_each_bad_variable_is_named_alone(os_name, var, value, expected):
    (problem,) = problems(os_name=os_name, **{var: value})
    assert problem.startswith("cuda on gpu1: " + expected), problem


def test_every_problem_is_named_at_once():
    found = problems(os_name="Ubuntu", cuda_source="nvidia", cuda_version="twelve", cuda_force="sometimes")
    assert [p.split(";")[0] for p in found] == [
        'cuda on gpu1: cuda_force is "sometimes"',
        'cuda on gpu1: cuda_source is "nvidia"',
        'cuda on gpu1: cuda_version is "twelve"',
    ]
