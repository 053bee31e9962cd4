# SPDX-License-Identifier: GPL-3.0-or-later
"""The Apex plan (plugins/plugin_utils/apex_plan.py): the apex role's variables checked, each bad one named with the
host, and the build worked out - source, flags, modules, architectures and build key - as the role's Jinja did
before (the build key the same, so the wheels cached and the builds recorded before keep theirs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.apex_plan import (
    APEX_VARS,
    ARCH_CAPABILITY,
    PlanError,
    apex_plan,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/apex/defaults/main.yml").read_text())
# The role's defaults as the task renders them (apex_venv_dir from ray_venv_dir; apex_source_checksum unset)
RENDERED = {**{name: DEFAULTS.get(name) for name in APEX_VARS}, "apex_venv_dir": "/opt/rayfleet/venv",
            "apex_source_checksum": ""}
COMMIT = DEFAULTS["apex_commit"]
# files/apex_probe.py's report from a CUDA build of torch, and from a CPU one
VENV = {"torch": "2.13.0+cu128", "torch_cuda": "12.8", "apex": "", "python": "cp312", "machine": "x86_64",
        "marker": {}}
CPU_VENV = {**VENV, "torch": "2.13.0+cpu", "torch_cuda": None, "machine": "aarch64"}
HOPPER = {"bus_id": "0000:18:00.0", "architecture": "hopper"}
AMPERE = {"bus_id": "0000:19:00.0", "architecture": "ampere"}
UNKNOWN = {"bus_id": "0000:1a:00.0", "architecture": "unknown"}

# What vars/main.yml and install.yml computed in Jinja before the plan (the build flags, the architectures, the key)
JINJA_FLAGS = ("{{ (['--cpp_ext'] if (apex_cpp_ext | bool) else []) + (['--cuda_ext'] if (apex_cuda_ext | bool) "
               "else []) + apex_build_options }}")
JINJA_ARCH = ("{{ apex_cuda_arch_list if apex_cuda_arch_list or not (apex_cuda_ext | bool) "
              "else (__apex_hw.nvidia_gpus | map(attribute='architecture') | unique | sort "
              "| map('extract', __apex_arch_capability) | select | join(';') or '8.0;9.0') }}")
JINJA_KEY = ("{{ {'commit': apex_commit, 'torch': __apex_venv.torch, 'torch_cuda': __apex_venv.torch_cuda, "
             "'python': __apex_venv.python, 'machine': __apex_venv.machine, 'arch': __apex_arch_list_value, "
             "'flags': __apex_build_flags, 'cuda_home': __apex_cuda_home if (apex_cuda_ext | bool) else ''} "
             "| to_json(sort_keys=true) | hash('sha256') | truncate(16, true, '') }}")


def settings(**extra) -> dict:
    return {**RENDERED, **extra}


def plan(venv=None, hardware=None, cuda_home=None, **extra) -> dict:
    return apex_plan("gpu1", settings(**extra), venv, hardware, cuda_home, is_dir=lambda path: path == "/srv/apex",
                     exists=lambda path: path in ("/srv/apex", "/srv/apex.tar.gz"))


def problems(**extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(**extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("apex on gpu1: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def jinja(template, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(template))


def test_the_defaults_pass():
    assert plan() == {"source_kind": "git", "build_flags": ["--cpp_ext", "--cuda_ext"], "cpp_ext": True,
                      "cuda_ext": True, "modules": ["apex_C", "amp_C", "fused_layer_norm_cuda"]}


@pytest.mark.parametrize(("source", "kind"), [
    ("https://github.com/NVIDIA/apex.git", "git"),
    ("file:///srv/mirrors/apex.git", "git"),
    ("/srv/apex", "directory"),
    ("/srv/apex.tar.gz", "archive"),
])
def test_where_the_source_comes_from(source, kind):
    assert plan(apex_source=source)["source_kind"] == kind


@pytest.mark.parametrize("extra", [
    {},
    {"apex_cuda_ext": False},
    {"apex_cpp_ext": "no", "apex_build_options": ["--fast_layer_norm", "--distributed_adam"]},
    {"apex_cuda_ext": "yes", "apex_cpp_ext": 0},
])
def test_the_flags_and_modules_are_the_roles(extra):
    got = plan(**extra)
    assert got["build_flags"] == jinja(JINJA_FLAGS, settings(**extra))
    modules = (["apex_C"] if got["cpp_ext"] else []) + (["amp_C", "fused_layer_norm_cuda"] if got["cuda_ext"] else [])
    assert got["modules"] == modules


# (the role's settings, the host's venv, GPUs and CUDA toolkit) -> the architectures and the key the Jinja computed
@pytest.mark.parametrize(("extra", "venv", "gpus", "cuda_home"), [
    ({}, VENV, [HOPPER], "/usr/local/cuda"),
    ({}, VENV, [HOPPER, AMPERE, HOPPER], "/usr/local/cuda-12.8"),
    ({}, VENV, [], "/usr/local/cuda"),
    ({"apex_cuda_arch_list": "8.0;9.0+PTX"}, VENV, [HOPPER], "/opt/cuda"),
    ({"apex_cuda_ext": False}, CPU_VENV, [HOPPER], "/usr/local/cuda"),
    ({"apex_cuda_ext": False, "apex_build_options": ["--distributed_adam"]}, CPU_VENV, [], "/usr/local/cuda"),
    ({"apex_commit": "0" * 40}, {**VENV, "machine": "aarch64", "python": "cp311"}, [AMPERE], "/usr/local/cuda"),
])
def test_the_architectures_and_build_key_are_the_roles(extra, venv, gpus, cuda_home):
    hardware = {"nvidia_gpus": gpus, "efa_devices": []}
    got = plan(venv, hardware, cuda_home, **extra)
    variables = {**settings(**extra), "__apex_venv": venv, "__apex_hw": hardware, "__apex_cuda_home": cuda_home,
                 "__apex_arch_capability": ARCH_CAPABILITY}
    variables["__apex_build_flags"] = jinja(JINJA_FLAGS, variables)
    variables["__apex_arch_list_value"] = jinja(JINJA_ARCH, variables)
    assert got["arch_list"] == variables["__apex_arch_list_value"]
    assert got["key"] == jinja(JINJA_KEY, variables)
    assert len(got["key"]) == 16


def test_the_key_follows_what_the_build_depends_on():
    base = plan(VENV, {"nvidia_gpus": [HOPPER]}, "/usr/local/cuda")["key"]
    assert plan(VENV, {"nvidia_gpus": [HOPPER]}, "/usr/local/cuda")["key"] == base
    assert plan({**VENV, "torch": "2.14.0+cu128"}, {"nvidia_gpus": [HOPPER]}, "/usr/local/cuda")["key"] != base
    assert plan(VENV, {"nvidia_gpus": [AMPERE]}, "/usr/local/cuda")["key"] != base
    assert plan(VENV, {"nvidia_gpus": [HOPPER]}, "/opt/cuda")["key"] != base
    # the toolkit is no part of a build without the CUDA extensions
    cpp_only = plan(CPU_VENV, None, "/usr/local/cuda", apex_cuda_ext=False)["key"]
    assert plan(CPU_VENV, None, "/opt/cuda", apex_cuda_ext=False)["key"] == cpp_only


def test_gpus_of_an_architecture_the_table_does_not_know_compile_for_the_default():
    assert plan(VENV, {"nvidia_gpus": [UNKNOWN]}, "/usr/local/cuda")["arch_list"] == "8.0;9.0"
    assert plan(VENV, {"nvidia_gpus": [UNKNOWN, HOPPER]}, "/usr/local/cuda")["arch_list"] == "9.0"
    # the GPUs were not read (a skipped task's result)
    assert plan(VENV, {"skipped": True}, "/usr/local/cuda")["arch_list"] == "8.0;9.0"


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("apex_commit", "main", 'apex_commit is "main"; expected a full 40-hex commit of github.com/NVIDIA/apex.'),
    ("apex_commit", COMMIT.upper(), "apex_commit is"),
    ("apex_source", "git@github.com:NVIDIA/apex.git", 'apex_source is "git@github.com:NVIDIA/apex.git"; expected a '
                                                      "git repository URL (http, https or file; checked out at "
                                                      "apex_commit) or an absolute path on the controller."),
    ("apex_source", "https://github.com/NVIDIA/apex/archive/main.tar.gz",
     'apex_source is "https://github.com/NVIDIA/apex/archive/main.tar.gz"; expected a git repository URL, not an '
     "archive's: an archive's bytes are not pinned by the commit, so download it to the controller and give its "
     "path."),
    ("apex_source", "/srv/none", "apex_source /srv/none does not exist on the controller; expected the Apex source "
                                 f"tree or a tarball of commit {COMMIT} there."),
    ("apex_source_checksum", "sha256:" + "0" * 64, 'apex_source_checksum is "sha256:000'),
    ("apex_cpp_ext", "maybe", 'apex_cpp_ext is "maybe"; expected true or false.'),
    ("apex_build_options", ["fast_layer_norm"], 'apex_build_options is ["fast_layer_norm"]; expected a list of '
                                                "setup.py flags like --fast_layer_norm."),
    ("apex_build_options", "--fast_layer_norm", 'apex_build_options is "--fast_layer_norm"; expected a list'),
    ("apex_cuda_arch_list", "sm_90", 'apex_cuda_arch_list is "sm_90"; expected empty (from the GPUs on the PCI bus) '
                                     "or compute capabilities like 8.0;9.0+PTX."),
    ("apex_max_jobs", -1, "apex_max_jobs is -1; expected a whole number >= 0"),
    ("apex_max_jobs", "many", 'apex_max_jobs is "many"; expected a whole number >= 0'),
    ("apex_cuda_home", "cuda", 'apex_cuda_home is "cuda"; expected empty (what the cuda role recorded) or an absolute '
                               "path."),
    ("apex_venv_dir", "venv", 'apex_venv_dir is "venv"; expected an absolute path (the Ray venv).'),
])
def test_each_bad_variable_is_named_alone(var, value, expected):
    (problem,) = problems(**{var: value})
    assert problem.startswith("apex on gpu1: " + expected), problem


def test_both_extensions_off_builds_nothing():
    (problem,) = problems(apex_cpp_ext=False, apex_cuda_ext="no")
    assert problem == ("apex on gpu1: apex_cpp_ext and apex_cuda_ext are both false; expected at least one of the "
                       "extensions (C++ or CUDA) to build.")


@pytest.mark.parametrize("checksum", ["", None])
def test_an_empty_source_checksum_is_unset(checksum):
    assert plan(apex_source_checksum=checksum)["source_kind"] == "git"


def test_every_problem_is_named_at_once():
    found = problems(apex_commit="main", apex_source="ftp://x", apex_max_jobs="x", apex_venv_dir="v")
    assert [p.split(" ")[3] for p in found] == ["apex_commit", "apex_source", "apex_max_jobs", "apex_venv_dir"]
