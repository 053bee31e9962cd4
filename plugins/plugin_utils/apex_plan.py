# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The Apex plan: the apex role's variables checked, and how Apex is built, on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the apex role's tasks read the result. Every problem
is collected, each naming the host, the variable and the bad value, and saying what was expected: the action fails
before anything changes.

The validate step checks the settings and says where the source comes from (a git repository checked out at
``apex_commit``, a source tree or a tarball on the controller), the build flags and the extensions' modules. Given
what the host holds (torch in the Ray venv, its GPUs, its CUDA toolkit), the plan also computes the build key - one
compiled wheel per key, kept on the controller - and the GPU architectures to compile for.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    _whole,
    boolean,
    is_url,
)

APEX_VARS = ("apex_commit", "apex_source", "apex_source_checksum", "apex_cpp_ext", "apex_cuda_ext",
             "apex_build_options", "apex_cuda_arch_list", "apex_max_jobs", "apex_cuda_home", "apex_venv_dir")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
# A URL of an archive rather than of a repository
ARCHIVE_URL = re.compile(r"^(https?|file)://.*[.](tar([.](gz|bz2|xz|zst))?|tgz|zip)$")
BUILD_OPTION = re.compile(r"^--[a-z0-9_]+$")
ARCH_LIST = re.compile(r"^[0-9]+[.][0-9]+(\+PTX)?(;[0-9]+[.][0-9]+(\+PTX)?)*$")
# TORCH_CUDA_ARCH_LIST from the architectures on the PCI bus (compute capabilities of their data-centre parts)
ARCH_CAPABILITY = {
    "pre-turing": "7.0",
    "turing": "7.5",
    "ampere": "8.0;8.6",
    "ada": "8.9",
    "hopper": "9.0",
    "blackwell": "10.0",
}
# Compiled for when the PCI bus shows no GPU the table knows
DEFAULT_ARCH_LIST = "8.0;9.0"
# The extensions' modules the import check loads
CPP_MODULES = ("apex_C",)
CUDA_MODULES = ("amp_C", "fused_layer_norm_cuda")
# How long the build key is (hex digits of a sha256)
KEY_LENGTH = 16


def source_kind(source, is_dir):
    """git (a repository URL, checked out at the commit), directory or archive (on the controller)."""
    if isinstance(source, str) and source.startswith("/"):
        return "directory" if is_dir(source) else "archive"
    return "git"


def arch_list(v, cuda_ext, hardware):
    """TORCH_CUDA_ARCH_LIST: apex_cuda_arch_list when set (or without the CUDA extensions), else the compute
    capabilities of the GPUs on the host's PCI bus (hardware: its gpu_hardware_info result), else 8.0;9.0."""
    given = v.get("apex_cuda_arch_list")
    if given or not cuda_ext:
        return given
    hw = hardware if isinstance(hardware, Mapping) else {}
    gpus = hw.get("nvidia_gpus") if isinstance(hw.get("nvidia_gpus"), list) else []
    architectures = sorted({str(gpu.get("architecture")) for gpu in gpus if isinstance(gpu, Mapping)})
    capabilities = [ARCH_CAPABILITY[name] for name in architectures if ARCH_CAPABILITY.get(name)]
    return ";".join(capabilities) or DEFAULT_ARCH_LIST


def build_key(fields):
    """The build key: the first 16 hex digits of the sha256 of the fields' JSON with sorted keys (as Ansible's
    to_json(sort_keys=true) | hash('sha256') | truncate(16, true, '') wrote it, so the wheels cached and the builds
    recorded before keep their keys)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]


def _check(host, v, exists, bad, problems):
    """The problems of the role's variables; returns (cpp_ext, cuda_ext), each None when it is no boolean."""
    if not (isinstance(v.get("apex_commit"), str) and COMMIT.match(v["apex_commit"])):
        bad("apex_commit", "a full 40-hex commit of github.com/NVIDIA/apex")
    source = v.get("apex_source")
    if isinstance(source, str) and source.startswith("/"):
        if not exists(source):
            problems.append("apex on %s: apex_source %s does not exist on the controller; expected the Apex source "
                            "tree or a tarball of commit %s there." % (host, source, v.get("apex_commit")))
    elif not is_url(source):
        bad("apex_source", "a git repository URL (http, https or file; checked out at apex_commit) or an absolute "
            "path on the controller")
    elif ARCHIVE_URL.match(source):
        bad("apex_source", "a git repository URL, not an archive's: an archive's bytes are not pinned by the commit, "
            "so download it to the controller and give its path")
    if v.get("apex_source_checksum") not in ("", None):
        problems.append(
            "apex on %s: apex_source_checksum is %s, but Apex's source is now checked out with git at apex_commit "
            "(the commit id is the hash of the whole source), and no archive is downloaded: expected no "
            "apex_source_checksum, and apex_source the repository (https://github.com/NVIDIA/apex.git or a mirror) or "
            "a tarball or source tree on the controller." % (host, _json(v.get("apex_source_checksum"))))
    cpp_ext, cuda_ext = boolean(v.get("apex_cpp_ext")), boolean(v.get("apex_cuda_ext"))
    for var, value in (("apex_cpp_ext", cpp_ext), ("apex_cuda_ext", cuda_ext)):
        if value is None:
            bad(var, "true or false")
    if cpp_ext is False and cuda_ext is False:
        problems.append("apex on %s: apex_cpp_ext and apex_cuda_ext are both false; expected at least one of the "
                        "extensions (C++ or CUDA) to build." % host)
    options = v.get("apex_build_options")
    if not (isinstance(options, (list, tuple)) and all(isinstance(o, str) and BUILD_OPTION.match(o) for o in options)):
        bad("apex_build_options", "a list of setup.py flags like --fast_layer_norm")
    arches = v.get("apex_cuda_arch_list")
    if not (arches == "" or (isinstance(arches, str) and ARCH_LIST.match(arches))):
        bad("apex_cuda_arch_list", "empty (from the GPUs on the PCI bus) or compute capabilities like 8.0;9.0+PTX")
    if _whole(v.get("apex_max_jobs")) is None:
        bad("apex_max_jobs", "a whole number >= 0 (0: the host's CPUs, at most one per 4 GiB)")
    home = v.get("apex_cuda_home")
    if not (home == "" or (isinstance(home, str) and home.startswith("/"))):
        bad("apex_cuda_home", "empty (what the cuda role recorded) or an absolute path")
    venv = v.get("apex_venv_dir")
    if not (isinstance(venv, str) and venv.startswith("/")):
        bad("apex_venv_dir", "an absolute path (the Ray venv)")
    return cpp_ext, cuda_ext


def apex_plan(host, v, venv=None, hardware=None, cuda_home=None, *, is_dir=os.path.isdir, exists=os.path.exists):
    """How Apex is built on host from the apex role's variables (v, APEX_VARS), checked; raises PlanError naming
    every problem.

    venv: what the host's Ray venv holds (files/apex_probe.py's report: torch, torch_cuda, python, machine), hardware:
    its gpu_hardware_info result (read with the CUDA extensions and no apex_cuda_arch_list), cuda_home: its CUDA
    toolkit. Given venv, the build key and the architectures are worked out too.
    is_dir(path), exists(path): on the controller (apex_source given as a path).
    Returns where the source comes from, the build flags, the extensions and the modules they bring; given venv, the
    architectures to compile for (TORCH_CUDA_ARCH_LIST) and the build key."""
    found = Problems("apex", host, v)
    problems, bad = found.problems, found.bad

    cpp_ext, cuda_ext = _check(host, v, exists, bad, problems)
    if problems:
        raise PlanError(problems)
    flags = (["--cpp_ext"] if cpp_ext else []) + (["--cuda_ext"] if cuda_ext else []) + list(v["apex_build_options"])
    out = {
        "source_kind": source_kind(v["apex_source"], is_dir),
        "build_flags": flags,
        "cpp_ext": cpp_ext,
        "cuda_ext": cuda_ext,
        "modules": (list(CPP_MODULES) if cpp_ext else []) + (list(CUDA_MODULES) if cuda_ext else []),
    }
    if venv is None:
        return out
    venv = venv if isinstance(venv, Mapping) else {}
    out["arch_list"] = arch_list(v, cuda_ext, hardware)
    out["key"] = build_key({
        "commit": v["apex_commit"], "torch": venv.get("torch"), "torch_cuda": venv.get("torch_cuda"),
        "python": venv.get("python"), "machine": venv.get("machine"), "arch": out["arch_list"], "flags": flags,
        "cuda_home": cuda_home if cuda_ext else "",
    })
    return out
