# SPDX-License-Identifier: GPL-3.0-or-later
"""The ROCm plan (plugins/plugin_utils/rocm_plan.py): the rocm role's variables checked, each bad one named with the
host, and ROCm's source, release, SMI tool and the amdgpu-install package's checked download decided from the
role's OS-specific values as the role decided them in Jinja before."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.rocm_plan import ROCM_VARS, PlanError, rocm_plan

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/rocm/defaults/main.yml").read_text())
ROLE_VARS = yaml.safe_load((ROOT / "roles/rocm/vars/main.yml").read_text())
FACTS = {
    "Debian": {"distribution": "Debian", "distribution_major_version": "12", "distribution_version": "12.11",
               "distribution_release": "bookworm"},
    "Ubuntu": {"distribution": "Ubuntu", "distribution_major_version": "24", "distribution_version": "24.04",
               "distribution_release": "noble"},
    "RedHat": {"distribution": "Rocky", "distribution_major_version": "9", "distribution_version": "9.6",
               "distribution_release": "Blue Onyx"},
}
NOBLE_URL = "https://repo.radeon.com/amdgpu-install/6.4.1/ubuntu/noble/amdgpu-install_6.4.60401-1_all.deb"
EL_URL = "https://repo.radeon.com/amdgpu-install/6.4.1/el/9.6/amdgpu-install-6.4.60401-1.el9.noarch.rpm"
CHECKSUM = "sha256:" + "0123456789abcdef" * 4
AMD_HOST = {"amd_gpus": [{"bus_id": "0000:c1:00.0", "device_id": "0x74a1", "driver": "amdgpu"}]}
CPU_HOST = {"amd_gpus": []}
SAME = object()  # a default argument: AMD_HOST


def os_values(name, v):
    """(default source, the distribution's ROCm, the installer's URL) from the role's vars/<OS>.yml, rendered for a
    host of that OS with the variables v."""
    raw = yaml.safe_load((ROOT / "roles/rocm/vars" / f"{name}.yml").read_text())
    context = {**v, "rocm_repo_url": DEFAULTS["rocm_repo_url"], "ansible_facts": FACTS[name]}
    context["__rocm_installer_version"] = jinja2.Template(ROLE_VARS["__rocm_installer_version"]).render(**context)
    url = jinja2.Template(raw["__rocm_installer_url"]).render(**context) if "__rocm_installer_url" in raw else ""
    return raw["__rocm_default_source"], raw["__rocm_distribution"], url


def plan(hardware=SAME, os_name="Ubuntu", **extra) -> dict:
    hardware = AMD_HOST if hardware is SAME else hardware
    checksums = {NOBLE_URL: CHECKSUM, EL_URL: CHECKSUM}
    v = {name: DEFAULTS[name] for name in ROCM_VARS} | {"rocm_installer_checksums": checksums} | extra
    facts = FACTS[os_name]
    default_source, rocm, url = os_values(os_name, v)
    return rocm_plan("gpu1", v, hardware, default_source, rocm, installer_url=url,
                     os_facts=(facts["distribution"], facts["distribution_version"]))


def problems(hardware=SAME, os_name="Ubuntu", **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(hardware, os_name, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("rocm on gpu1: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def test_a_host_without_an_amd_gpu_is_left_alone_unchecked():
    assert plan(CPU_HOST) == {"act": False, "has_gpu": False}
    assert plan(CPU_HOST, rocm_version="latest", rocm_installer_checksums={})["act"] is False
    assert plan(AMD_HOST, rocm_enabled=False) == {"act": False, "has_gpu": True}


@pytest.mark.parametrize(("enabled", "force", "hardware", "act"), [
    (True, False, AMD_HOST, True),
    (True, False, CPU_HOST, False),
    (True, True, CPU_HOST, True),
    (True, "yes", CPU_HOST, True),
    (False, True, AMD_HOST, False),
    (True, False, {}, False),
])
def test_whether_the_host_installs_rocm(enabled, force, hardware, act):
    assert plan(hardware, rocm_enabled=enabled, rocm_force=force)["act"] is act


def test_debian_distribution_rocm():
    # what the gpu_stack scenario installs (rocm_force on Debian 12, no GPU)
    assert plan(CPU_HOST, "Debian", rocm_force=True) == {
        "act": True, "has_gpu": False, "source": "distribution", "version": "5.2", "smi": "/usr/bin/rocm-smi",
        "packages": ["libamdhip64-5", "rocminfo", "rocm-smi", "firmware-amd-graphics"],
        "hold": ["libamdhip64-5", "rocminfo", "rocm-smi"], "installer_url": "", "installer_checksum": "",
        "installer_file": ""}
    # the checksums are not read from the distribution
    assert plan(os_name="Debian", rocm_installer_checksums={})["source"] == "distribution"


@pytest.mark.parametrize(("os_name", "url", "file"), [
    ("Ubuntu", NOBLE_URL, "/var/cache/rayfleet/rocm/amdgpu-install_6.4.60401-1_all.deb"),
    ("RedHat", EL_URL, "/var/cache/rayfleet/rocm/amdgpu-install-6.4.60401-1.el9.noarch.rpm"),
])
def test_amdgpu_install_downloads_the_checked_package(os_name, url, file):
    assert plan(os_name=os_name) == {
        "act": True, "has_gpu": True, "source": "amdgpu_install", "version": "6.4.1", "smi": "/opt/rocm/bin/amd-smi",
        "packages": [], "hold": [], "installer_url": url, "installer_checksum": CHECKSUM, "installer_file": file}


def test_the_installer_needs_its_checksum():
    (problem,) = problems(rocm_installer_checksums={EL_URL: CHECKSUM})
    assert problem == (
        f"rocm on gpu1: the amdgpu_install source downloads {NOBLE_URL}, and rocm_installer_checksums has \"\" for "
        "that URL (expected \"sha256:<64 hex digits>\"). Fetch the package on a machine you trust, run sha256sum on "
        f"it, and add \"{NOBLE_URL}\": \"sha256:<hex>\" to rocm_installer_checksums; nothing was installed.")
    (problem,) = problems(rocm_installer_checksums={NOBLE_URL: CHECKSUM.upper()})
    assert "rocm_installer_checksums has \"SHA256:0123" in problem
    (problem,) = problems(rocm_installer_checksums=[NOBLE_URL])
    assert problem.startswith(f'rocm on gpu1: rocm_installer_checksums is ["{NOBLE_URL}"]; expected a dict')


@pytest.mark.parametrize(("os_name", "var", "value", "expected"), [
    ("Ubuntu", "rocm_source", "conda", 'rocm_source is "conda"; expected distribution (Debian only) or '
                                       "amdgpu_install (Ubuntu and the RedHat family), or empty (amdgpu_install, the "
                                       "default on Ubuntu 24.04)."),
    ("Ubuntu", "rocm_source", "distribution", 'rocm_source is "distribution", but Ubuntu 24.04 does not package ROCm; '
                                              "expected amdgpu_install (AMD's installer), or empty (amdgpu_install, "
                                              "the default on Ubuntu 24.04)."),
    ("Debian", "rocm_source", "amdgpu_install", 'rocm_source is "amdgpu_install", but AMD\'s amdgpu-install does not '
                                                "support Debian; expected distribution (Debian's ROCm), or empty "
                                                "(distribution, the default on Debian 12.11)."),
    ("Ubuntu", "rocm_version", "6.4", 'rocm_version is "6.4"; expected the ROCm release as x.y.z, such as "6.4.1".'),
    ("Debian", "rocm_version", "latest", 'rocm_version is "latest"; expected the ROCm release as x.y.z'),
    ("Ubuntu", "rocm_installer_build", "60401", 'rocm_installer_build is "60401"; expected the amdgpu-install '
                                                'package\'s build for that release, such as "60401-1".'),
    ("Ubuntu", "rocm_usecases", [], "rocm_usecases is []; expected a list of amdgpu-install use cases, not empty "
                                    "(such as [rocm])."),
    ("Ubuntu", "rocm_usecases", "rocm", 'rocm_usecases is "rocm"; expected a list'),
    ("Ubuntu", "rocm_usecases", ["rocm,hip"], 'rocm_usecases is ["rocm,hip"]; expected a list'),
    ("Ubuntu", "rocm_force", "maybe", 'rocm_force is "maybe"; expected true or false.'),
])
def test_each_bad_variable_is_named_alone(os_name, var, value, expected):
    (problem,) = problems(os_name=os_name, **{var: value})
    assert problem.startswith("rocm on gpu1: " + expected), problem


def test_every_problem_is_named_at_once():
    found = problems(os_name="Debian", rocm_source="amdgpu_install", rocm_version="6", rocm_installer_build="x",
                     rocm_usecases=[])
    assert [p.split(";")[0] for p in found] == [
        'rocm on gpu1: rocm_source is "amdgpu_install", but AMD\'s amdgpu-install does not support Debian',
        'rocm on gpu1: rocm_version is "6"',
        'rocm on gpu1: rocm_installer_build is "x"',
        "rocm on gpu1: rocm_usecases is []",
    ]
