# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The CUDA plan: a host's cuda settings checked, and the toolkit's source, release, home, packages and host compiler
decided, on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the cuda role's tasks read the result. Every problem
is collected, each naming the host, the variable, the bad value and what was expected: the action fails before
anything changes.

A host acts (installs the toolkit) when ``cuda_enabled`` and it has an NVIDIA GPU on the PCI bus (as
``rayfleet.cluster.gpu_hardware_info`` reports it) or ``cuda_force``; only then are the settings checked. The
distribution's toolkit (vars/<OS>.yml: its release, packages, home and host compiler) is empty where the OS packages
none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError, Problems, _json, boolean

__all__ = ["CUDA_VARS", "REPO_DEFAULT_VERSION", "PlanError", "cuda_plan"]

SOURCES = ("distribution", "cuda_repo")
# The toolkit's release from NVIDIA's repository when cuda_version is empty
REPO_DEFAULT_VERSION = "12.8"
VERSION = re.compile(r"[0-9]+[.][0-9]+")

# The role's variables the plan reads
CUDA_VARS = ("cuda_enabled", "cuda_force", "cuda_source", "cuda_version", "cuda_packages")


def _list(value):
    return list(value) if isinstance(value, (list, tuple)) else []


def _os_name(os_facts):
    name = " ".join(str(part) for part in os_facts if part not in (None, ""))
    return name or "this OS"


def decide(v, default_source, toolkit):
    """The effective source (cuda_source, else the OS's default), release, home, packages and host compiler, as
    given (checked or not)."""
    source = v.get("cuda_source") or default_source
    distribution = source == "distribution"
    version = v.get("cuda_version") or (toolkit.get("version", "") if distribution else REPO_DEFAULT_VERSION)
    if distribution:
        home = toolkit.get("home", "/usr")
        default_packages = _list(toolkit.get("packages"))
    else:
        home = "/usr/local/cuda-%s" % version
        default_packages = ["cuda-toolkit-%s" % str(version).replace(".", "-")]
    return {
        "source": source,
        "version": version,
        "home": home,
        "packages": v.get("cuda_packages") or default_packages,
        "host_compiler": toolkit.get("host_compiler", "") if distribution else "",
    }


def cuda_plan(host, v, hardware, default_source, toolkit, *, os_facts=()):
    """The host's toolkit decisions from the cuda role's variables (v, CUDA_VARS), checked; raises PlanError naming
    every problem.

    hardware: the host's rayfleet.cluster.gpu_hardware_info result (nvidia_gpus).
    default_source: the OS's default source; toolkit: the distribution's CUDA (version, packages, home,
    host_compiler), empty where the OS packages none.
    os_facts: the distribution and its version, for messages.
    Returns whether the host installs the toolkit (act) and whether it has an NVIDIA GPU, and where it does, the
    source, the release (major.minor), the toolkit's home, the packages and the host compiler nvcc is pointed at
    (empty: the default one)."""
    toolkit = toolkit if isinstance(toolkit, Mapping) else {}
    os_name = _os_name(os_facts)

    found = Problems("cuda", host, v)
    problems, problem, bad = found.problems, found.problem, found.bad

    hw = hardware if isinstance(hardware, Mapping) else {}
    has_gpu = bool(_list(hw.get("nvidia_gpus")))
    for var in ("cuda_enabled", "cuda_force"):
        if boolean(v.get(var)) is None:
            bad(var, "true or false")
    act = bool(boolean(v.get("cuda_enabled"))) and (has_gpu or bool(boolean(v.get("cuda_force"))))
    if not act:
        if problems:
            raise PlanError(problems)
        return {"act": False, "has_gpu": has_gpu}

    plan = decide(v, default_source, toolkit)
    source = plan["source"]
    packaged = "%s packages CUDA %s" % (os_name, toolkit["version"]) if toolkit.get("version") else (
        "%s does not package CUDA" % os_name)
    default = "or empty (%s, the default on %s)" % (default_source, os_name)
    source_ok = False
    if source not in SOURCES:
        bad("cuda_source", "distribution or cuda_repo (%s), %s" % (packaged, default))
    elif source == "distribution" and not toolkit:
        problem("cuda_source is %s, but %s; expected cuda_repo (NVIDIA's repository), %s."
                % (_json(v.get("cuda_source")), packaged, default))
    else:
        source_ok = True
    given = v.get("cuda_version")
    if given not in ("", None) and not (isinstance(given, str) and VERSION.fullmatch(given)):
        bad("cuda_version", 'the toolkit\'s major.minor as a string such as "12.8" (quoted: YAML reads 12.10 as '
            "12.1), or empty for the source's default")
    elif source == "distribution" and toolkit and given and given != toolkit.get("version"):
        problem("cuda_version is %s with cuda_source distribution, but %s only; expected empty (or %s), or "
                "cuda_source: cuda_repo for another release." % (_json(given), packaged, _json(toolkit.get("version"))))
    elif source_ok and not (isinstance(plan["version"], str) and VERSION.fullmatch(plan["version"])):
        problem("the %s source's CUDA release is %s; expected major.minor such as \"12.8\": set cuda_version."
                % (source, _json(plan["version"])))
    if problems:
        raise PlanError(problems)
    return {"act": True, "has_gpu": has_gpu, **plan}
