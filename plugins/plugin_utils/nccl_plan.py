# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The NCCL plan: a host's NCCL settings checked, and where its NCCL comes from and whether it uses EFA, decided on
the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the nccl role's tasks and templates read the result.
Every problem is collected, each naming the host, the variable and the bad value, and saying what was expected: the
action fails before anything changes.

The decisions read the host's PCI bus as ``rayfleet.cluster.gpu_hardware_info`` reports it: with ``nccl_source: auto``
NCCL comes from the wheel on a host with an NVIDIA GPU (or ``nvidia_driver_force``: image builders), from nowhere
elsewhere (gloo needs no NCCL; ROCm's torch brings RCCL); with ``nccl_efa: auto`` the host uses EFA when the bus has
an EFA device.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    boolean,
    is_sha256_checksum,
    is_url,
)

try:
    from packaging.version import InvalidVersion, Version

    HAS_PACKAGING = True
except ImportError:  # the pattern below checks the same shape
    HAS_PACKAGING = False

SOURCES = ("auto", "wheel", "cuda_repo", "none")
WHEEL_PACKAGE = re.compile(r"nvidia-nccl-cu[0-9]+")
# A release like 2.30.7, optionally 2.30.7.post1 (without packaging)
WHEEL_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?")
# libnccl2's package version in NVIDIA's CUDA repository (apt and dnf)
CUDA_REPO_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\+cuda[0-9]+\.[0-9]+")
# The names nccl_env may set: NCCL's, libfabric's, libibverbs' and the library path
ENV_PREFIXES = ("NCCL", "FI", "RDMAV", "LD_LIBRARY_PATH")
# Set from nccl_socket_ifname, never through nccl_env
SOCKET_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
EFA_ARCHITECTURES = ("x86_64", "aarch64")

# The variables the plan reads (the nccl role's, and the nvidia_driver role's nvidia_driver_force)
NCCL_VARS = ("nccl_source", "nccl_wheel_package", "nccl_wheel_version", "nccl_find_links", "nccl_index_url",
             "nccl_no_index", "nccl_venv_dir", "nccl_cuda_repo_version", "nccl_efa", "nccl_env", "nccl_socket_ifname",
             "nccl_efa_installer_version", "nccl_efa_installer_url", "nccl_efa_installer_checksum",
             "nvidia_driver_force")


def efa_setting(value):
    """nccl_efa as "auto", True or False; None when it is none of them."""
    if isinstance(value, str) and value == "auto":
        return "auto"
    return boolean(value)


def wheel_release(value):
    """True when value is a wheel release like 2.30.7 or 2.30.7.post1 (each number without leading zeros when
    ``packaging`` is at hand: the version pip reports is compared with it as text)."""
    if not isinstance(value, str):
        return False
    if not HAS_PACKAGING:
        return WHEEL_VERSION.fullmatch(value) is not None
    try:
        version = Version(value)
    except InvalidVersion:
        return False
    if len(version.release) != 3:
        return False
    written = ".".join(str(number) for number in version.release)
    if version.post is not None:
        written += ".post%d" % version.post
    # an epoch, pre-, dev- or local release, or another spelling, reads differently
    return value == written


def _path(value):
    """True when value is an absolute path without blanks (pip's arguments are split at blanks)."""
    return isinstance(value, str) and value.startswith("/") and not any(c.isspace() for c in value)


def _list(value):
    return list(value) if isinstance(value, (list, tuple)) else []


def decide(v, hardware):
    """The effective source (wheel, cuda_repo or none; nccl_source itself when it is not auto, checked or not) and
    whether EFA is wanted (None when nccl_efa is none of auto, true or false), from the host's hardware."""
    hw = hardware if isinstance(hardware, Mapping) else {}
    source = v.get("nccl_source")
    if source == "auto":
        gpu = bool(_list(hw.get("nvidia_gpus"))) or boolean(v.get("nvidia_driver_force")) is True
        source = "wheel" if gpu else "none"
    efa = efa_setting(v.get("nccl_efa"))
    if efa == "auto":
        efa = bool(_list(hw.get("efa_devices")))
    return source, efa


def _check_settings(host, v, source, bad, problems):
    """The problems of the role's variables besides the interface and the EFA installer."""
    if v.get("nccl_source") not in SOURCES:
        bad("nccl_source", "auto, wheel, cuda_repo or none")
    package = v.get("nccl_wheel_package")
    if not (isinstance(package, str) and WHEEL_PACKAGE.fullmatch(package)):
        bad("nccl_wheel_package", "nvidia-nccl-cuNN, NVIDIA's NCCL wheel for torch's CUDA major version "
            "(nvidia-nccl-cu12, nvidia-nccl-cu13)")
    version = v.get("nccl_wheel_version")
    if version != "" and not wheel_release(version):
        bad("nccl_wheel_version", "empty (the wheel torch's CUDA build brought) or a release like 2.30.7 (or "
            "2.30.7.post1), without leading zeros")
    links = v.get("nccl_find_links")
    if links != "" and not (_path(links) or is_url(links)):
        bad("nccl_find_links", "empty, an absolute path on the nodes or an http://, https:// or file:// URL, "
            "without blanks")
    index = v.get("nccl_index_url")
    if index != "" and not is_url(index):
        bad("nccl_index_url", "empty or an http://, https:// or file:// URL, without blanks")
    no_index = boolean(v.get("nccl_no_index"))
    if no_index is None:
        bad("nccl_no_index", "true or false")
    elif no_index and source == "wheel" and links == "":
        problems.append("nccl on %s: nccl_no_index is true and nccl_find_links is empty; expected a wheel directory "
                        "in nccl_find_links that holds %s (pip asks no index)."
                        % (host, v.get("nccl_wheel_package")))
    venv = v.get("nccl_venv_dir")
    if not (isinstance(venv, str) and venv.startswith("/")):
        bad("nccl_venv_dir", "an absolute path (the Ray venv)")
    repo_version = v.get("nccl_cuda_repo_version")
    if source == "cuda_repo" and not (isinstance(repo_version, str) and CUDA_REPO_VERSION.fullmatch(repo_version)):
        problems.append("nccl on %s: nccl_cuda_repo_version is %s with nccl_source %s; expected libnccl2's package "
                        "version in NVIDIA's CUDA repository, like 2.27.7-1+cuda12.9."
                        % (host, _json(repo_version), _json(v.get("nccl_source"))))
    if efa_setting(v.get("nccl_efa")) is None:
        bad("nccl_efa", "auto, true or false")
    _check_env(host, v.get("nccl_env"), bad, problems)


def _check_env(host, env, bad, problems):
    if not isinstance(env, Mapping):
        bad("nccl_env", "a dict of environment variables for Ray's processes (NCCL_*, FI_*, RDMAV_*, "
            "LD_LIBRARY_PATH)")
        return
    socket = [key for key in SOCKET_ENV if key in env]
    if socket:
        problems.append("nccl on %s: nccl_env sets %s; expected the interface in nccl_socket_ifname (the role sets "
                        "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME from it)." % (host, " and ".join(socket)))
    names = [key for key in env if key not in SOCKET_ENV
             and not (isinstance(key, str) and key.startswith(ENV_PREFIXES))]
    if names:
        problems.append("nccl on %s: nccl_env has %s; expected names starting with NCCL, FI, RDMAV or "
                        "LD_LIBRARY_PATH (other variables for Ray's processes go in ray_env)." % (host, _json(names)))
    for key, value in env.items():
        if value is None or not isinstance(value, (str, int, float)):
            problems.append("nccl on %s: nccl_env's %s is %s; expected a string or a number (the variable's value)."
                            % (host, key, _json(value)))


def _check_interface(host, v, interfaces, problems):
    ifname = v.get("nccl_socket_ifname")
    if (isinstance(ifname, str) and ifname in ("", "auto")) or interfaces is None:
        return
    names = sorted(str(name) for name in _list(interfaces))
    if not (isinstance(ifname, str) and ifname in names):
        problems.append("nccl on %s: nccl_socket_ifname is %s, but this host has no such interface (it has: %s); "
                        "expected auto, empty, or one of those." % (host, _json(ifname), ", ".join(names)))


def _check_efa_installer(host, v, hardware, architecture, problems):
    """The problems of the EFA installer's settings, on a host that uses EFA."""
    hw = hardware if isinstance(hardware, Mapping) else {}
    if efa_setting(v.get("nccl_efa")) == "auto":
        why = "this host has %d EFA device(s)" % len(_list(hw.get("efa_devices")))
    else:
        why = "this host has been given nccl_efa: %s" % _json(v.get("nccl_efa"))
    runs = "so the AWS EFA installer %s runs here" % v.get("nccl_efa_installer_version")
    checksum = v.get("nccl_efa_installer_checksum")
    if not is_sha256_checksum(checksum):
        problems.append("nccl on %s: nccl_efa_installer_checksum is %s; %s, %s: expected sha256:<64 lower-case hex "
                        "digits> of %s from a download you checked against AWS's signature "
                        "(efa-installer.amazonaws.com/*.sig), or nccl_efa: false to run without EFA."
                        % (host, _json(checksum), why, runs, v.get("nccl_efa_installer_url")))
    if not is_url(v.get("nccl_efa_installer_url"), ("https",)):
        problems.append("nccl on %s: nccl_efa_installer_url is %s; %s, %s: expected an https:// URL of the installer "
                        "tarball." % (host, _json(v.get("nccl_efa_installer_url")), why, runs))
    if architecture is not None and architecture not in EFA_ARCHITECTURES:
        problems.append("nccl on %s: the host's architecture is %s; %s, but the AWS EFA installer supports x86_64 and "
                        "aarch64 only: expected nccl_efa: false on this host." % (host, _json(architecture), why))


def nccl_plan(host, v, hardware, interfaces=None, architecture=None):
    """The host's NCCL decisions from the nccl role's variables (v, NCCL_VARS), checked; raises PlanError naming every
    problem.

    hardware: the host's rayfleet.cluster.gpu_hardware_info result (nvidia_gpus, efa_devices).
    interfaces: the host's interface names (its interfaces fact), read when nccl_socket_ifname names one (None:
    not known, not checked).
    architecture: the host's architecture fact, read on a host that uses EFA (None: not checked).
    Returns the effective source (wheel, cuda_repo or none), whether EFA is used, the EFA devices' PCI addresses,
    whether one of them does RDMA reads (efa1 and later: GPUDirect over EFA), and pip's arguments for the wheel."""
    found = Problems("nccl", host, v)
    problems, bad = found.problems, found.bad

    source, efa = decide(v, hardware)
    _check_settings(host, v, source, bad, problems)
    _check_interface(host, v, interfaces, problems)
    if efa:
        _check_efa_installer(host, v, hardware, architecture, problems)
    if problems:
        raise PlanError(problems)
    hw = hardware if isinstance(hardware, Mapping) else {}
    devices = [device for device in _list(hw.get("efa_devices")) if isinstance(device, Mapping)]
    return {
        "source": source,
        "efa": efa,
        "efa_devices": [device.get("bus_id") for device in devices],
        "efa_device_rdma": any(isinstance(device.get("generation"), int) and device["generation"] >= 1
                               for device in devices),
        "pip_args": pip_args(v),
    }


def pip_args(v):
    """pip's arguments for NCCL's wheel (it needs no other package): --no-deps, then --no-index, --find-links and
    --index-url where set."""
    links, index = v.get("nccl_find_links"), v.get("nccl_index_url")
    return " ".join(["--no-deps"] + (["--no-index"] if boolean(v.get("nccl_no_index")) else [])
                    + (["--find-links " + links] if links else []) + (["--index-url " + index] if index else []))
