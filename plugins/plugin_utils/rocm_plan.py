# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The ROCm plan: a host's rocm settings checked, and ROCm's source, release, SMI tool and (with AMD's amdgpu-install)
the installer package's checked download decided, on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the rocm role's tasks read the result. Every problem
is collected, each naming the host, the variable, the bad value and what was expected: the action fails before
anything changes.

A host acts (installs ROCm) when ``rocm_enabled`` and it has an AMD GPU on the PCI bus (as
``rayfleet.cluster.gpu_hardware_info`` reports it) or ``rocm_force``; only then are the settings checked. The
distribution's ROCm (vars/<OS>.yml: its release, packages, held packages and SMI tool) is empty where the OS packages
none; the amdgpu-install package's URL for the host's release is the role's (vars/<OS>.yml), empty on Debian.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    boolean,
    is_sha256_checksum,
)

__all__ = ["DOWNLOAD_DIR", "ROCM_VARS", "SMI", "PlanError", "rocm_plan"]

SOURCES = ("distribution", "amdgpu_install")
RELEASE = re.compile(r"[0-9]+[.][0-9]+[.][0-9]+")
INSTALLER_BUILD = re.compile(r"[0-9]+-[0-9]+")
# AMD's SMI tool, where amdgpu-install puts it (the distribution's may be elsewhere)
SMI = "/opt/rocm/bin/amd-smi"
# Where the checked amdgpu-install package is kept
DOWNLOAD_DIR = "/var/cache/rayfleet/rocm"

# The role's variables the plan reads
ROCM_VARS = ("rocm_enabled", "rocm_force", "rocm_source", "rocm_version", "rocm_installer_build",
             "rocm_installer_checksums", "rocm_usecases")


def _list(value):
    return list(value) if isinstance(value, (list, tuple)) else []


def _os_name(os_facts):
    name = " ".join(str(part) for part in os_facts if part not in (None, ""))
    return name or "this OS"


def _check_source(v, default_source, rocm, *, distribution, os_name, bad, problem):
    """The problems of the source: one of distribution and amdgpu_install, the first only where the OS packages
    ROCm, the second not on Debian (AMD's installer does not support it)."""
    source = v.get("rocm_source") or default_source
    default = "or empty (%s, the default on %s)" % (default_source, os_name)
    if source not in SOURCES:
        bad("rocm_source", "distribution (Debian only) or amdgpu_install (Ubuntu and the RedHat family), %s" % default)
    elif source == "distribution" and not rocm:
        problem("rocm_source is %s, but %s does not package ROCm; expected amdgpu_install (AMD's installer), %s."
                % (_json(v.get("rocm_source")), os_name, default))
    elif source == "amdgpu_install" and distribution == "Debian":
        problem("rocm_source is %s, but AMD's amdgpu-install does not support Debian; expected distribution "
                "(Debian's ROCm), %s." % (_json(v.get("rocm_source")), default))
    return source


def _check_installer(v, installer_url, problem):
    """The amdgpu-install package's checksum for this host's URL (rocm_installer_checksums); "" when it has none."""
    checksums = v.get("rocm_installer_checksums")
    if not isinstance(checksums, Mapping):
        problem("rocm_installer_checksums is %s; expected a dict of the amdgpu-install package's URLs and their "
                "sha256 (\"%s\": \"sha256:<hex>\")." % (_json(checksums), installer_url))
        return ""
    checksum = checksums.get(installer_url, "")
    if not is_sha256_checksum(checksum):
        problem("the amdgpu_install source downloads %s, and rocm_installer_checksums has %s for that URL (expected "
                "\"sha256:<64 hex digits>\"). Fetch the package on a machine you trust, run sha256sum on it, and add "
                "\"%s\": \"sha256:<hex>\" to rocm_installer_checksums; nothing was installed."
                % (installer_url, _json(checksum), installer_url))
    return checksum


def rocm_plan(host, v, hardware, default_source, rocm, *, installer_url="", os_facts=()):
    """The host's ROCm decisions from the rocm role's variables (v, ROCM_VARS), checked; raises PlanError naming every
    problem.

    hardware: the host's rayfleet.cluster.gpu_hardware_info result (amd_gpus).
    default_source: the OS's default source; rocm: the distribution's ROCm (version, packages, hold, smi), empty where
    the OS packages none; installer_url: the amdgpu-install package's URL for this host (empty on Debian).
    os_facts: the distribution and its version (amdgpu-install does not support Debian; and for messages).
    Returns whether the host installs ROCm (act) and whether it has an AMD GPU, and where it does, the source, the
    release installed, the SMI tool, the distribution's packages and those held, and with amdgpu_install the
    installer's URL, its checksum and where the checked download is kept."""
    rocm = rocm if isinstance(rocm, Mapping) else {}
    facts = tuple(os_facts)
    os_name = _os_name(facts)

    found = Problems("rocm", host, v)
    problems, problem, bad = found.problems, found.problem, found.bad

    hw = hardware if isinstance(hardware, Mapping) else {}
    has_gpu = bool(_list(hw.get("amd_gpus")))
    for var in ("rocm_enabled", "rocm_force"):
        if boolean(v.get(var)) is None:
            bad(var, "true or false")
    act = bool(boolean(v.get("rocm_enabled"))) and (has_gpu or bool(boolean(v.get("rocm_force"))))
    if not act:
        if problems:
            raise PlanError(problems)
        return {"act": False, "has_gpu": has_gpu}

    source = _check_source(v, default_source, rocm, distribution=facts[0] if facts else None, os_name=os_name,
                           bad=bad, problem=problem)
    version = v.get("rocm_version")
    release_ok = isinstance(version, str) and RELEASE.fullmatch(version) is not None
    if not release_ok:
        bad("rocm_version", 'the ROCm release as x.y.z, such as "6.4.1"')
    build = v.get("rocm_installer_build")
    build_ok = isinstance(build, str) and INSTALLER_BUILD.fullmatch(build) is not None
    if not build_ok:
        bad("rocm_installer_build", 'the amdgpu-install package\'s build for that release, such as "60401-1"')
    usecases = v.get("rocm_usecases")
    if not (isinstance(usecases, (list, tuple)) and usecases
            and all(isinstance(item, str) and item and "," not in item for item in usecases)):
        bad("rocm_usecases", "a list of amdgpu-install use cases, not empty (such as [rocm])")
    installer = {"installer_url": "", "installer_checksum": "", "installer_file": ""}
    if source == "amdgpu_install" and facts[:1] != ("Debian",) and release_ok and build_ok:
        if not (isinstance(installer_url, str) and installer_url):
            problem("the amdgpu_install source has no amdgpu-install package URL for %s; expected Ubuntu or the "
                    "RedHat family." % os_name)
        else:
            installer = {"installer_url": installer_url,
                         "installer_checksum": _check_installer(v, installer_url, problem),
                         "installer_file": posixpath.join(DOWNLOAD_DIR, posixpath.basename(installer_url))}
    if problems:
        raise PlanError(problems)
    distribution = source == "distribution"
    return {
        "act": True,
        "has_gpu": has_gpu,
        "source": source,
        "version": rocm.get("version", version) if distribution else version,
        "smi": rocm.get("smi", SMI) if distribution else SMI,
        "packages": _list(rocm.get("packages")) if distribution else [],
        "hold": _list(rocm.get("hold")) if distribution else [],
        **installer,
    }
