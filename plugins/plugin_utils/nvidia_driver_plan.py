# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The NVIDIA driver plan: a host's nvidia_driver settings checked against its GPUs, and the driver's source, kernel
module flavour, packages and NVIDIA's repository decided, on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the nvidia_driver role's tasks read the
result. Every problem is collected, each naming the host, the variable, the bad value and what was expected: the
action fails before anything changes.

The decisions read the host's PCI bus as ``rayfleet.cluster.gpu_hardware_info`` reports it and the role's
OS-specific values (vars/<OS>.yml: the default source, the package manager, the package sets of each source, NVIDIA's
repository for the distribution). A host acts (installs the driver) when ``nvidia_driver_enabled`` and it has an
NVIDIA GPU or ``nvidia_driver_force``; only then are the settings checked.

The ``repository`` scope is the role's ``repository`` entry point (other roles set up NVIDIA's repository or the
distribution's components with it): only the source and, for NVIDIA's repository, the signing key's pinned
fingerprint are checked and decided.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    _whole,
    boolean,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.openpgp import pinned_fingerprint

__all__ = ["NVIDIA_DRIVER_VARS", "OS_ARGS", "PlanError", "nvidia_driver_plan", "repository"]

SOURCES = ("distribution", "cuda_repo")
KERNEL_MODULES = ("auto", "open", "proprietary")
FABRIC_MANAGER = ("auto", "always", "never")
REBOOT = ("auto", "never")
SCOPES = ("main", "repository")
# A driver branch (its major version) and a package version of one (580.95.05-1, 535.261.03-1~deb12u1)
BRANCH = re.compile(r"[0-9]{3}")
VERSION = re.compile(r"[0-9]{3}[.][0-9]+([.][0-9]+)?([-~+][A-Za-z0-9.~+-]*)?")
# The variable pinning the fingerprint of NVIDIA's repository signing key, per package manager
KEY_VARS = {"apt": "nvidia_driver_cuda_repo_key_fingerprint", "dnf": "nvidia_driver_cuda_repo_rpm_key_fingerprint"}

# The role's variables the plan reads
NVIDIA_DRIVER_VARS = ("nvidia_driver_enabled", "nvidia_driver_force", "nvidia_driver_source", "nvidia_driver_branch",
                      "nvidia_driver_version", "nvidia_driver_kernel_module", "nvidia_driver_fabric_manager",
                      "nvidia_driver_reboot", "nvidia_driver_reboot_timeout", "nvidia_driver_mok_key_path",
                      "nvidia_driver_mok_cert_path", "nvidia_driver_cuda_repo_url",
                      "nvidia_driver_cuda_repo_key_fingerprint", "nvidia_driver_cuda_repo_rpm_key_fingerprint")
# The role's OS-specific values (vars/<OS>.yml) it reads: the default source, the package manager (apt or dnf), the
# distribution's name in NVIDIA's repository paths, the repository's key file, and the package sets of each source
OS_ARGS = ("default_source", "pkg_family", "cuda_repo_distro", "cuda_repo_key", "packages")


def _list(value):
    return list(value) if isinstance(value, (list, tuple)) else []


def _os_name(os_facts):
    """"Debian 12" from the distribution and its version (for messages); "this OS" when they are unknown."""
    name = " ".join(str(part) for part in os_facts if part not in (None, ""))
    return name or "this OS"


def _carried(packages):
    """The sources with a package set on this OS (a distribution that packages no driver has none)."""
    packages = packages if isinstance(packages, Mapping) else {}
    return [source for source in SOURCES if isinstance(packages.get(source), Mapping) and packages.get(source)]


def repository(v, os_values, architecture):
    """NVIDIA's repository for this host (used with the cuda_repo source): its distribution and architecture
    directories, base URL, name, signing key and the variable pinning its fingerprint, the pin normalised (None when
    it is not 40 or 64 hex digits)."""
    family = os_values.get("pkg_family")
    distro = os_values.get("cuda_repo_distro")
    arch = "sbsa" if architecture == "aarch64" else architecture
    base = "%s/%s/%s" % (v.get("nvidia_driver_cuda_repo_url"), distro, arch)
    key = os_values.get("cuda_repo_key")
    key_var = KEY_VARS["apt" if family == "apt" else "dnf"]
    return {
        "pkg_family": family,
        "distro": distro,
        "arch": arch,
        "name": "cuda-%s-%s" % (distro, arch),
        "base": base,
        "key": key,
        "key_url": "%s/%s" % (base, key),
        "key_var": key_var,
        "key_value": v.get(key_var),
        "key_pin": pinned_fingerprint(v.get(key_var)),
    }


def _check_source(v, os_values, os_name, repo, *, bad, problem):
    """The effective source when this OS carries it, else None (a problem named); with NVIDIA's repository, the
    signing key's pin checked."""
    source = v.get("nvidia_driver_source") or os_values.get("default_source")
    carried = _carried(os_values.get("packages"))
    default = "empty (%s, the default on %s)" % (os_values.get("default_source"), os_name)
    if source not in SOURCES:
        bad("nvidia_driver_source", "distribution or cuda_repo (%s has: %s), or %s"
            % (os_name, ", ".join(carried) or "none", default))
        return None
    if source not in carried:
        problem("nvidia_driver_source is %s, but %s does not package the NVIDIA driver; expected %s, or %s."
                % (_json(source), os_name, " or ".join(carried) or "another OS", default))
        return None
    if source == "cuda_repo" and repo["key_pin"] is None:
        problem("the cuda_repo source needs the fingerprint of NVIDIA's repository signing key (%s) in %s; it is %s "
                "(expected 40 hex digits, or 64 for a version 5 or 6 key; spaces allowed). Set it to the fingerprint "
                "NVIDIA publishes for that key, or to the one `gpg --show-keys` prints for a copy you trust; the key "
                "is checked against it before the package manager trusts it."
                % (repo["key_url"], repo["key_var"], _json(repo["key_value"])))
    return source


def _check_version(v, branch, bad, problem):
    """nvidia_driver_branch three digits, nvidia_driver_version empty or a package version of the branch the source
    installs (branch: the source's own, Debian's 535, or nvidia_driver_branch)."""
    given = v.get("nvidia_driver_branch")
    if isinstance(given, bool) or not (isinstance(given, (str, int)) and BRANCH.fullmatch(str(given))):
        bad("nvidia_driver_branch", 'three digits, the driver branch such as "580"')
    version = v.get("nvidia_driver_version")
    if version == "":
        return
    example = '"%s.261.03-1"' % (branch if BRANCH.fullmatch(str(branch)) else "580")
    if not (isinstance(version, str) and VERSION.fullmatch(version)):
        bad("nvidia_driver_version", "empty (the branch's newest) or a package version of branch %s, e.g. %s"
            % (branch, example))
    elif BRANCH.fullmatch(str(branch)) and not version.startswith("%s." % branch):
        problem("nvidia_driver_version is %s, which is not of branch %s, the branch this source installs; expected "
                "empty (the branch's newest) or a package version of branch %s, e.g. %s."
                % (_json(version), branch, branch, example))


def _check_mok(v, secure_boot, has_gpu, *, is_file, bad, problem):
    """The Secure Boot key pair: both paths or neither, files on the controller, one given when Secure Boot is on."""
    key, cert = v.get("nvidia_driver_mok_key_path"), v.get("nvidia_driver_mok_cert_path")
    for var, value in (("nvidia_driver_mok_key_path", key), ("nvidia_driver_mok_cert_path", cert)):
        if not isinstance(value, str):
            bad(var, "empty, or the path of a file on the controller")
    if not (isinstance(key, str) and isinstance(cert, str)):
        return
    if bool(key) != bool(cert):
        problem("nvidia_driver_mok_key_path is %s and nvidia_driver_mok_cert_path is %s; expected both (an enrolled "
                "Machine Owner Key's private key and its certificate) or neither." % (_json(key), _json(cert)))
    for var, value, what in (("nvidia_driver_mok_key_path", key, "the Machine Owner Key's private key"),
                             ("nvidia_driver_mok_cert_path", cert, "its certificate (DER)")):
        if value and not is_file(value):
            bad(var, "a file on the controller (%s), or empty" % what)
    if secure_boot == "enabled" and has_gpu and not key:
        problem("Secure Boot is on, so the kernel loads only a signed nvidia module, and a module DKMS signs with a "
                "key the firmware does not know would leave this host without a GPU driver. Enroll a Machine Owner "
                "Key (openssl req -new -x509 -newkey rsa:2048 -nodes -days 36500 -outform DER -keyout mok.key -out "
                "mok.der; mokutil --import mok.der; reboot and confirm in the MOK manager) and set "
                "nvidia_driver_mok_key_path / nvidia_driver_mok_cert_path to it, or turn Secure Boot off. Nothing was "
                "installed.")


def _flavor(v, hw, packages):
    """The kernel module flavour: nvidia_driver_kernel_module, else what the GPUs call for, else the source's
    default."""
    chosen = v.get("nvidia_driver_kernel_module")
    if chosen != "auto":
        return chosen
    return hw.get("flavor_required") or packages.get("default_flavor")


def _packages(v, packages, flavor, family):
    """The packages to install (the versioned ones pinned to nvidia_driver_version: name=version with apt,
    name-version with dnf) and those to hold."""
    versioned = _list(packages["versioned"][flavor])
    other = _list(packages.get("other"))
    version = v.get("nvidia_driver_version")
    sep = "=" if family == "apt" else "-"
    install = ["%s%s%s" % (name, sep, version) for name in versioned] if version else list(versioned)
    return install + other, versioned + other


def nvidia_driver_plan(host, v, os_values, hardware=None, *, architecture=None, os_facts=(), scope="main",
                       is_file=os.path.isfile):
    """The host's driver decisions from the nvidia_driver role's variables (v, NVIDIA_DRIVER_VARS), checked; raises
    PlanError naming every problem.

    os_values: the role's OS-specific values (OS_ARGS); packages maps each source to its package set (default_flavor,
    pinning, versioned: {open, proprietary}, other, fabric_manager, module_stream, branch), empty where the OS has
    none.
    hardware: the host's rayfleet.cluster.gpu_hardware_info result (nvidia_gpus, nvswitches, secure_boot,
    flavor_required).
    architecture: the host's architecture fact (NVIDIA's repository path: sbsa for aarch64).
    os_facts: the distribution and its version, for messages.
    scope: main (the role), or repository (the repository entry point: the source and the key's pin only).
    is_file(path): whether path is a file on the controller (the Secure Boot key pair)."""
    os_values = os_values if isinstance(os_values, Mapping) else {}
    os_name = _os_name(os_facts)

    found = Problems("nvidia_driver", host, v)
    problems, problem, bad = found.problems, found.problem, found.bad

    if scope not in SCOPES:
        raise PlanError(["nvidia_driver on %s: the plan's scope is %s; expected main or repository."
                         % (host, _json(scope))])
    repo = repository(v, os_values, architecture)
    if scope == "repository":
        source = _check_source(v, os_values, os_name, repo, bad=bad, problem=problem)
        if problems:
            raise PlanError(problems)
        return {"source": source, "repository": repo}

    hw = hardware if isinstance(hardware, Mapping) else {}
    gpus = [gpu for gpu in _list(hw.get("nvidia_gpus")) if isinstance(gpu, Mapping)]
    has_gpu = bool(_list(hw.get("nvidia_gpus")))
    for var in ("nvidia_driver_enabled", "nvidia_driver_force"):
        if boolean(v.get(var)) is None:
            bad(var, "true or false")
    act = bool(boolean(v.get("nvidia_driver_enabled"))) and (has_gpu or bool(boolean(v.get("nvidia_driver_force"))))
    if not act:
        if problems:
            raise PlanError(problems)
        return {"act": False, "has_gpu": has_gpu}

    source = _check_source(v, os_values, os_name, repo, bad=bad, problem=problem)
    packages = os_values["packages"][source] if source else {}
    branch = packages.get("branch", v.get("nvidia_driver_branch"))
    _check_version(v, branch, bad, problem)
    for var, choices in (("nvidia_driver_kernel_module", KERNEL_MODULES),
                         ("nvidia_driver_fabric_manager", FABRIC_MANAGER), ("nvidia_driver_reboot", REBOOT)):
        if v.get(var) not in choices:
            bad(var, " or ".join(choices))
    if _whole(v.get("nvidia_driver_reboot_timeout"), 1) is None:
        bad("nvidia_driver_reboot_timeout", "whole seconds, at least 1 (how long a rebooted host may take to come "
            "back)")
    _check_mok(v, hw.get("secure_boot"), has_gpu, is_file=is_file, bad=bad, problem=problem)

    archs = list(dict.fromkeys(str(gpu.get("architecture")) for gpu in gpus))
    flavor = _flavor(v, hw, packages) if v.get("nvidia_driver_kernel_module") in KERNEL_MODULES else None
    if (flavor == "open" and "pre-turing" in archs) or (flavor == "proprietary" and "blackwell" in archs):
        problem("nvidia_driver_kernel_module is %s (flavour %s), but the GPUs here are %s: the open kernel modules "
                "drive Turing and newer only, and Blackwell GPUs need them; expected auto."
                % (_json(v.get("nvidia_driver_kernel_module")), flavor, ", ".join(archs)))
    elif source and flavor is not None and flavor not in (packages.get("versioned") or {}):
        problem("the %s source on %s has no packages for the %s kernel module flavour; expected "
                "nvidia_driver_kernel_module auto, open or proprietary." % (source, os_name, _json(flavor)))
    choice = v.get("nvidia_driver_fabric_manager")
    nvswitches = _list(hw.get("nvswitches"))
    fabric_manager = choice == "always" or (choice == "auto" and bool(nvswitches))
    if source and fabric_manager and not _list(packages.get("fabric_manager")):
        why = ("nvidia_driver_fabric_manager is always" if choice == "always"
               else "%d NVSwitch(es) on the PCI bus" % len(nvswitches))
        problem("the %s source (nvidia_driver_source %s) on %s does not carry NVIDIA Fabric Manager, which this host "
                "needs (%s); expected nvidia_driver_source: cuda_repo."
                % (source, _json(v.get("nvidia_driver_source")), os_name, why))
    if problems:
        raise PlanError(problems)

    install, hold = _packages(v, packages, flavor, repo["pkg_family"])
    return {
        "act": True,
        "has_gpu": has_gpu,
        "source": source,
        "flavor": flavor,
        "architectures": archs,
        "branch": str(branch),
        "fabric_manager": fabric_manager,
        "fabric_manager_packages": _list(packages.get("fabric_manager")),
        "pinning": _list(packages.get("pinning")),
        "install_names": install,
        "hold_names": hold,
        "module_stream": (packages.get("module_stream") or {}).get(flavor, ""),
        "repository": repo,
    }
