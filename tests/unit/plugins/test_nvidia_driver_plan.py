# SPDX-License-Identifier: GPL-3.0-or-later
"""The NVIDIA driver plan (plugins/plugin_utils/nvidia_driver_plan.py): the nvidia_driver role's variables checked
against the host's GPUs, each bad one named with the host, and the source, kernel module flavour, packages and
NVIDIA's repository decided from the role's OS-specific values as the role decided them in Jinja before."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nvidia_driver_plan import (
    NVIDIA_DRIVER_VARS,
    PlanError,
    nvidia_driver_plan,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/nvidia_driver/defaults/main.yml").read_text())
FACTS = {
    "Debian": {"distribution": "Debian", "distribution_major_version": "12", "distribution_version": "12.11",
               "architecture": "x86_64"},
    "Ubuntu": {"distribution": "Ubuntu", "distribution_major_version": "24", "distribution_version": "24.04",
               "architecture": "x86_64"},
    "RedHat": {"distribution": "Rocky", "distribution_major_version": "9", "distribution_version": "9.6",
               "architecture": "aarch64"},
}
GPU = {"bus_id": "0000:18:00.0", "device_id": "0x2330", "architecture": "hopper", "driver": "nvidia"}
NVSWITCH = {"bus_id": "0000:05:00.0", "device_id": "0x22a3", "driver": ""}
NO_GPU = {"nvidia_gpus": [], "nvswitches": [], "secure_boot": "not-efi", "flavor_required": ""}
HOPPER = {"nvidia_gpus": [GPU], "nvswitches": [], "secure_boot": "disabled", "flavor_required": "open"}
AMPERE = {"nvidia_gpus": [dict(GPU, architecture="ampere")] * 2, "nvswitches": [], "secure_boot": "disabled",
          "flavor_required": ""}
VOLTA = {"nvidia_gpus": [dict(GPU, architecture="pre-turing")], "nvswitches": [], "secure_boot": "disabled",
         "flavor_required": "proprietary"}
BLACKWELL = {"nvidia_gpus": [dict(GPU, architecture="blackwell")], "nvswitches": [], "secure_boot": "disabled",
             "flavor_required": "open"}
PIN = "EB693B3035CD5710E231E123A4B469963BF863CC"
RPM_PIN = "610C7B14E068A878070D4C7CD42D06856A2DE5A6"
MOK = ("/ctl/mok.key", "/ctl/mok.der")
SAME = object()  # a default argument: HOPPER


def render(value, context):
    if isinstance(value, str):
        return jinja2.Template(value).render(**context)
    if isinstance(value, list):
        return [render(item, context) for item in value]
    if isinstance(value, dict):
        return {key: render(item, context) for key, item in value.items()}
    return value


def os_values(name="Debian", branch="580"):
    """The role's vars/<OS>.yml as the task renders them for a host of that OS."""
    raw = yaml.safe_load((ROOT / "roles/nvidia_driver/vars" / f"{name}.yml").read_text())
    got = render(raw, {"ansible_facts": FACTS[name], "nvidia_driver_branch": branch})
    return {"default_source": got["__nvidia_driver_default_source"], "pkg_family": got["__nvidia_driver_pkg_family"],
            "cuda_repo_distro": got["__nvidia_driver_cuda_repo_distro"],
            "cuda_repo_key": got["__nvidia_driver_cuda_repo_key"],
            "packages": {"distribution": got["__nvidia_driver_distribution"],
                         "cuda_repo": got["__nvidia_driver_cuda_repo"]}}


def plan(hardware=SAME, os_name="Debian", files=MOK, scope="main", **extra) -> dict:
    hardware = HOPPER if hardware is SAME else hardware
    v = {name: DEFAULTS[name] for name in NVIDIA_DRIVER_VARS} | extra
    facts = FACTS[os_name]
    return nvidia_driver_plan("gpu1", v, os_values(os_name, str(v["nvidia_driver_branch"])), hardware,
                              architecture=facts["architecture"],
                              os_facts=(facts["distribution"], facts["distribution_version"]), scope=scope,
                              is_file=lambda path: path in files)


def problems(hardware=SAME, os_name="Debian", files=MOK, scope="main", **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(hardware, os_name, files, scope, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("nvidia_driver on gpu1: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def test_a_host_without_a_gpu_is_left_alone_unchecked():
    assert plan(NO_GPU) == {"act": False, "has_gpu": False}
    # its settings are not read
    assert plan(NO_GPU, nvidia_driver_branch="latest", nvidia_driver_source="ppa")["act"] is False
    assert plan(HOPPER, nvidia_driver_enabled=False) == {"act": False, "has_gpu": True}


@pytest.mark.parametrize(("enabled", "force", "hardware", "act"), [
    (True, False, HOPPER, True),
    (True, False, NO_GPU, False),
    (True, True, NO_GPU, True),
    (True, "yes", NO_GPU, True),
    ("true", "false", NO_GPU, False),
    (False, True, HOPPER, False),
    ("no", True, NO_GPU, False),
    (True, False, {}, False),
])
def test_whether_the_host_installs_the_driver(enabled, force, hardware, act):
    got = plan(hardware, nvidia_driver_enabled=enabled, nvidia_driver_force=force)
    assert got["act"] is act
    assert got["has_gpu"] is bool(hardware.get("nvidia_gpus"))


def test_debian_distribution_source_on_a_cpu_builder():
    # what the gpu_stack scenario installs (nvidia_driver_force on Debian 12, no GPU)
    got = plan(NO_GPU, nvidia_driver_force=True)
    packages = ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "libnvidia-cfg1",
                "nvidia-persistenced"]
    assert got == {
        "act": True, "has_gpu": False, "source": "distribution", "flavor": "proprietary", "architectures": [],
        "branch": "535", "fabric_manager": False, "fabric_manager_packages": [], "pinning": [],
        "install_names": packages, "hold_names": packages, "module_stream": "",
        "repository": {
            "pkg_family": "apt", "distro": "debian12", "arch": "x86_64", "name": "cuda-debian12-x86_64",
            "base": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64", "key": "3bf863cc.pub",
            "key_url": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub",
            "key_var": "nvidia_driver_cuda_repo_key_fingerprint", "key_value": PIN, "key_pin": PIN},
    }


def test_versioned_packages_are_pinned_apt_and_dnf():
    got = plan(nvidia_driver_version="535.261.03-1~deb12u1")
    assert got["source"] == "distribution" and got["flavor"] == "open"
    assert got["install_names"] == ["nvidia-open-kernel-dkms=535.261.03-1~deb12u1", "nvidia-smi=535.261.03-1~deb12u1",
                                    "libcuda1=535.261.03-1~deb12u1", "libnvidia-ml1=535.261.03-1~deb12u1",
                                    "libnvidia-cfg1=535.261.03-1~deb12u1", "nvidia-persistenced"]
    assert got["hold_names"] == ["nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1",
                                 "libnvidia-cfg1", "nvidia-persistenced"]
    got = plan(os_name="RedHat", nvidia_driver_version="580.95.05-1",
               nvidia_driver_cuda_repo_rpm_key_fingerprint=RPM_PIN)
    assert got["install_names"] == ["nvidia-driver-cuda-580.95.05-1", "kmod-nvidia-open-dkms-580.95.05-1",
                                    "nvidia-persistenced"]
    assert got["module_stream"] == "nvidia-driver:580-open"


def test_ubuntu_cuda_repo_pins_the_branch():
    got = plan(AMPERE, os_name="Ubuntu", nvidia_driver_branch="570")
    assert got["source"] == "cuda_repo" and got["flavor"] == "open" and got["architectures"] == ["ampere"]
    assert got["pinning"] == ["nvidia-driver-pinning-570"]
    assert got["install_names"] == ["nvidia-headless-570-open", "nvidia-utils-570"]
    assert got["repository"]["name"] == "cuda-ubuntu2404-x86_64"
    got = plan(AMPERE, os_name="Ubuntu", nvidia_driver_source="distribution", nvidia_driver_kernel_module="proprietary")
    assert got["install_names"] == ["nvidia-headless-580-server", "nvidia-utils-580-server",
                                    "libnvidia-compute-580-server"]


def test_flavour_auto_follows_the_gpus_else_the_source():
    assert plan(VOLTA, os_name="Ubuntu")["flavor"] == "proprietary"
    assert plan(HOPPER)["flavor"] == "open"
    assert plan(AMPERE)["flavor"] == "proprietary"  # Debian's default
    assert plan(AMPERE, nvidia_driver_kernel_module="open")["flavor"] == "open"


def test_redhat_repository_on_arm_and_its_rpm_key():
    got = plan(os_name="RedHat", nvidia_driver_cuda_repo_rpm_key_fingerprint=RPM_PIN.lower()[:20] + " "
               + RPM_PIN.lower()[20:])
    repo = got["repository"]
    assert repo["base"] == "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/sbsa"
    assert repo["key_url"].endswith("/rhel9/sbsa/D42D0685.pub") and repo["name"] == "cuda-rhel9-sbsa"
    assert repo["key_var"] == "nvidia_driver_cuda_repo_rpm_key_fingerprint" and repo["key_pin"] == RPM_PIN


def test_redhat_needs_its_rpm_key_pinned():
    (problem,) = problems(os_name="RedHat")
    assert problem == (
        "nvidia_driver on gpu1: the cuda_repo source needs the fingerprint of NVIDIA's repository signing key "
        "(https://developer.download.nvidia.com/compute/cuda/repos/rhel9/sbsa/D42D0685.pub) in "
        'nvidia_driver_cuda_repo_rpm_key_fingerprint; it is "" (expected 40 hex digits, or 64 for a version 5 or 6 '
        "key; spaces allowed). Set it to the fingerprint NVIDIA publishes for that key, or to the one `gpg "
        "--show-keys` prints for a copy you trust; the key is checked against it before the package manager trusts "
        "it.")
    # the distribution source needs no key
    assert plan(nvidia_driver_cuda_repo_key_fingerprint="")["source"] == "distribution"


def test_redhat_has_no_distribution_source():
    (problem,) = problems(os_name="RedHat", nvidia_driver_source="distribution")
    assert problem == ('nvidia_driver on gpu1: nvidia_driver_source is "distribution", but Rocky 9.6 does not package '
                       "the NVIDIA driver; expected cuda_repo, or empty (cuda_repo, the default on Rocky 9.6).")


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("nvidia_driver_source", "ppa", 'nvidia_driver_source is "ppa"; expected distribution or cuda_repo (Debian 12.11 '
                                    "has: distribution, cuda_repo), or empty (distribution, the default on Debian "
                                    "12.11)."),
    ("nvidia_driver_branch", "58", 'nvidia_driver_branch is "58"; expected three digits, the driver branch such as '
                                   '"580".'),
    ("nvidia_driver_branch", True, "nvidia_driver_branch is true; expected three digits"),
    ("nvidia_driver_version", "latest", 'nvidia_driver_version is "latest"; expected empty (the branch\'s newest) or '
                                        'a package version of branch 535, e.g. "535.261.03-1".'),
    ("nvidia_driver_version", None, "nvidia_driver_version is null; expected empty"),
    ("nvidia_driver_version", "580.95.05-1", 'nvidia_driver_version is "580.95.05-1", which is not of branch 535, the '
                                             "branch this source installs; expected empty (the branch's newest) or a "
                                             'package version of branch 535, e.g. "535.261.03-1".'),
    ("nvidia_driver_kernel_module", "nouveau", 'nvidia_driver_kernel_module is "nouveau"; expected auto or open or '
                                               "proprietary."),
    ("nvidia_driver_fabric_manager", "yes", 'nvidia_driver_fabric_manager is "yes"; expected auto or always or never.'),
    ("nvidia_driver_reboot", "always", 'nvidia_driver_reboot is "always"; expected auto or never.'),
    ("nvidia_driver_reboot_timeout", 0, "nvidia_driver_reboot_timeout is 0; expected whole seconds, at least 1"),
    ("nvidia_driver_reboot_timeout", "ten", 'nvidia_driver_reboot_timeout is "ten"; expected whole seconds'),
    ("nvidia_driver_enabled", "maybe", 'nvidia_driver_enabled is "maybe"; expected true or false.'),
    ("nvidia_driver_mok_key_path", None, "nvidia_driver_mok_key_path is null; expected empty, or the path of a file "
                                         "on the controller."),
])
def test_each_bad_variable_is_named_alone(var, value, expected):
    (problem,) = problems(**{var: value})
    assert problem.startswith("nvidia_driver on gpu1: " + expected), problem


@pytest.mark.parametrize(("var", "value"), [
    ("nvidia_driver_branch", 580),
    ("nvidia_driver_version", "535.261.03"),
    ("nvidia_driver_version", "535.261.03-1~deb12u1"),
    ("nvidia_driver_reboot_timeout", "600"),
    ("nvidia_driver_enabled", "yes"),
    ("nvidia_driver_kernel_module", "open"),
    ("nvidia_driver_fabric_manager", "never"),
    ("nvidia_driver_reboot", "never"),
    ("nvidia_driver_source", "cuda_repo"),
    ("nvidia_driver_cuda_repo_key_fingerprint", "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC"),
])
def test_good_values_pass(var, value):
    assert plan(**{var: value})["act"] is True


def test_branch_version_follows_the_source():
    # NVIDIA's repository installs nvidia_driver_branch; Debian's own is 535 whatever the branch says
    assert plan(nvidia_driver_source="cuda_repo", nvidia_driver_version="580.95.05-1")["branch"] == "580"
    assert "which is not of branch 580" in problems(nvidia_driver_source="cuda_repo",
                                                    nvidia_driver_version="535.261.03-1")[0]


def test_flavour_must_suit_the_gpus():
    (problem,) = problems(VOLTA, nvidia_driver_kernel_module="open")
    assert problem == ('nvidia_driver on gpu1: nvidia_driver_kernel_module is "open" (flavour open), but the GPUs '
                       "here are pre-turing: the open kernel modules drive Turing and newer only, and Blackwell GPUs "
                       "need them; expected auto.")
    (problem,) = problems(BLACKWELL, nvidia_driver_kernel_module="proprietary")
    assert "(flavour proprietary), but the GPUs here are blackwell" in problem
    assert plan(BLACKWELL)["flavor"] == "open"


def test_fabric_manager_where_nvswitches_need_it():
    hgx = dict(HOPPER, nvswitches=[NVSWITCH, NVSWITCH])
    (problem,) = problems(hgx)
    assert problem == ('nvidia_driver on gpu1: the distribution source (nvidia_driver_source "") on Debian 12.11 does '
                       "not carry NVIDIA Fabric Manager, which this host needs (2 NVSwitch(es) on the PCI bus); "
                       "expected nvidia_driver_source: cuda_repo.")
    (problem,) = problems(nvidia_driver_fabric_manager="always")
    assert "which this host needs (nvidia_driver_fabric_manager is always)" in problem
    assert plan(hgx, nvidia_driver_fabric_manager="never")["fabric_manager"] is False
    got = plan(hgx, nvidia_driver_source="cuda_repo")
    assert got["fabric_manager"] is True
    assert got["fabric_manager_packages"] == ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]


def test_secure_boot_key_pair():
    assert plan(nvidia_driver_mok_key_path=MOK[0], nvidia_driver_mok_cert_path=MOK[1])["act"] is True
    found = problems(nvidia_driver_mok_key_path="/ctl/other.key", nvidia_driver_mok_cert_path="")
    assert found == [
        'nvidia_driver on gpu1: nvidia_driver_mok_key_path is "/ctl/other.key" and nvidia_driver_mok_cert_path is ""; '
        "expected both (an enrolled Machine Owner Key's private key and its certificate) or neither.",
        'nvidia_driver on gpu1: nvidia_driver_mok_key_path is "/ctl/other.key"; expected a file on the controller (the '
        "Machine Owner Key's private key), or empty.",
    ]
    (problem,) = problems(nvidia_driver_mok_key_path=MOK[0], nvidia_driver_mok_cert_path="/ctl/none.der")
    assert problem.startswith('nvidia_driver on gpu1: nvidia_driver_mok_cert_path is "/ctl/none.der"; expected a file')


def test_secure_boot_on_needs_a_key_on_a_gpu_host():
    secure = dict(HOPPER, secure_boot="enabled")
    (problem,) = problems(secure)
    assert problem.startswith("nvidia_driver on gpu1: Secure Boot is on, so the kernel loads only a signed nvidia "
                              "module")
    assert plan(secure, nvidia_driver_mok_key_path=MOK[0], nvidia_driver_mok_cert_path=MOK[1])["act"] is True
    # a builder without a GPU loads no module
    assert plan(dict(NO_GPU, secure_boot="enabled"), nvidia_driver_force=True)["act"] is True


def test_every_problem_is_named_at_once():
    found = problems(nvidia_driver_branch="5xx", nvidia_driver_reboot="sometimes", nvidia_driver_reboot_timeout=-1,
                     nvidia_driver_mok_cert_path=MOK[1])
    assert [p.split(";")[0] for p in found] == [
        'nvidia_driver on gpu1: nvidia_driver_branch is "5xx"',
        'nvidia_driver on gpu1: nvidia_driver_reboot is "sometimes"',
        "nvidia_driver on gpu1: nvidia_driver_reboot_timeout is -1",
        'nvidia_driver on gpu1: nvidia_driver_mok_key_path is "" and nvidia_driver_mok_cert_path is "/ctl/mok.der"',
    ]


def test_repository_scope_checks_the_source_and_key_only():
    got = plan(None, scope="repository", nvidia_driver_source="cuda_repo", nvidia_driver_branch="junk")
    assert set(got) == {"source", "repository"} and got["source"] == "cuda_repo"
    assert got["repository"]["key_pin"] == PIN
    # the distribution's components (the rocm role on Debian) need no key
    assert plan(None, scope="repository", nvidia_driver_source="distribution",
                nvidia_driver_cuda_repo_key_fingerprint="")["source"] == "distribution"
    (problem,) = problems(None, scope="repository", nvidia_driver_source="cuda_repo",
                          nvidia_driver_cuda_repo_key_fingerprint="nope")
    assert 'in nvidia_driver_cuda_repo_key_fingerprint; it is "nope"' in problem
    (problem,) = problems(None, os_name="RedHat", scope="repository", nvidia_driver_source="distribution")
    assert "does not package the NVIDIA driver" in problem
    with pytest.raises(PlanError, match="the plan's scope is \"all\""):
        plan(scope="all")
