# SPDX-License-Identifier: GPL-3.0-or-later
"""The NCCL plan (plugins/plugin_utils/nccl_plan.py): the nccl role's variables checked, each bad one named with the
host, and the effective source and EFA use decided from the PCI bus as the role decided them in Jinja before."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils import nccl_plan as module
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nccl_plan import (
    NCCL_VARS,
    PlanError,
    decide,
    nccl_plan,
    wheel_release,
)

ROOT = Path(__file__).resolve().parents[3]
RAW_DEFAULTS = yaml.safe_load((ROOT / "roles/nccl/defaults/main.yml").read_text())
CONTEXT = {**yaml.safe_load((ROOT / "roles/pytorch/defaults/main.yml").read_text()),
           **yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text()), **RAW_DEFAULTS}
# The role's defaults as the task renders them (nccl_find_links from pytorch_find_links, nccl_venv_dir from
# ray_venv_dir, the installer's URL from its version)
DEFAULTS = {name: jinja2.Template(value).render(**CONTEXT) if isinstance(value, str) else value
            for name, value in RAW_DEFAULTS.items()}
CHECKSUM = "sha256:" + "0123456789abcdef" * 4
GPU = {"bus_id": "0000:18:00.0", "device_id": "0x2330", "architecture": "hopper", "driver": "nvidia"}
EFA0 = {"bus_id": "0000:10:1c.0", "device_id": "0xefa0", "driver": "efa", "generation": 0}
EFA2 = {"bus_id": "0000:20:1c.0", "device_id": "0xefa2", "driver": "efa", "generation": 2}
CPU_HOST = {"nvidia_gpus": [], "efa_devices": []}
GPU_HOST = {"nvidia_gpus": [GPU], "efa_devices": []}
EFA_HOST = {"nvidia_gpus": [GPU], "efa_devices": [EFA0, EFA2]}
INTERFACES = ["lo", "eth0", "ens5"]
SAME = object()  # a default argument: GPU_HOST or INTERFACES


def settings(**extra) -> dict:
    """The variables the role passes (its defaults, rendered)."""
    return {name: DEFAULTS.get(name) for name in NCCL_VARS if name in DEFAULTS} | extra


def plan(hardware=SAME, interfaces=SAME, architecture="x86_64", **extra) -> dict:
    return nccl_plan("gpu1", settings(**extra), GPU_HOST if hardware is SAME else hardware,
                     INTERFACES if interfaces is SAME else interfaces, architecture)


def problems(hardware=SAME, interfaces=SAME, architecture="x86_64", **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(hardware, interfaces, architecture, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("nccl on gpu1: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def test_defaults_are_rendered_and_pass():
    assert DEFAULTS["nccl_find_links"] == "" and DEFAULTS["nccl_venv_dir"] == "/opt/rayfleet/venv"
    assert DEFAULTS["nccl_efa_installer_url"].endswith("aws-efa-installer-1.44.0.tar.gz")
    assert plan() == {"source": "wheel", "efa": False, "efa_devices": [], "efa_device_rdma": False,
                      "pip_args": "--no-deps"}
    assert plan(CPU_HOST) == {"source": "none", "efa": False, "efa_devices": [], "efa_device_rdma": False,
                              "pip_args": "--no-deps"}


# (nccl_source, nvidia_driver_force, hardware) -> the effective source, as vars/main.yml's Jinja decided it
@pytest.mark.parametrize(("source", "force", "hardware", "expected"), [
    ("auto", False, GPU_HOST, "wheel"),
    ("auto", False, CPU_HOST, "none"),
    ("auto", False, {}, "none"),
    ("auto", True, CPU_HOST, "wheel"),
    ("auto", "yes", CPU_HOST, "wheel"),
    ("auto", "no", GPU_HOST, "wheel"),
    ("auto", None, CPU_HOST, "none"),
    ("wheel", False, CPU_HOST, "wheel"),
    ("cuda_repo", False, CPU_HOST, "cuda_repo"),
    ("none", True, GPU_HOST, "none"),
])
def test_effective_source(source, force, hardware, expected):
    v = {"nccl_source": source, "nccl_efa": "auto"}
    if force is not None:
        v["nvidia_driver_force"] = force
    assert decide(v, hardware)[0] == expected


# (nccl_efa, hardware) -> whether EFA is used: auto when the bus has an EFA device, else the bool filter's reading
@pytest.mark.parametrize(("efa", "hardware", "expected"), [
    ("auto", EFA_HOST, True),
    ("auto", GPU_HOST, False),
    ("auto", {}, False),
    ("auto", {"nvidia_gpus": [], "efa_devices": [EFA0]}, True),
    (True, CPU_HOST, True),
    (False, EFA_HOST, False),
    (1, CPU_HOST, True),
    (0, EFA_HOST, False),
    ("yes", CPU_HOST, True),
    ("True", CPU_HOST, True),
    ("off", EFA_HOST, False),
    ("0", EFA_HOST, False),
])
def test_efa_decision(efa, hardware, expected):
    assert decide({"nccl_source": "auto", "nccl_efa": efa}, hardware)[1] is expected


@pytest.mark.parametrize(("extra", "expected"), [
    ({"nccl_find_links": "/w"}, "--no-deps --find-links /w"),
    ({"nccl_find_links": "/w", "nccl_no_index": True}, "--no-deps --no-index --find-links /w"),
    # as the role's default renders pytorch_no_index, and as -e gives it
    ({"nccl_find_links": "/w", "nccl_no_index": "True"}, "--no-deps --no-index --find-links /w"),
    ({"nccl_index_url": "https://download.pytorch.org/whl/cu130"},
     "--no-deps --index-url https://download.pytorch.org/whl/cu130"),
])
def test_pips_arguments_for_the_wheel(extra, expected):
    assert plan(**extra)["pip_args"] == expected


def test_an_offline_site_names_its_wheel_directory():
    (problem,) = problems(nccl_no_index=True)
    assert problem == ("nccl on gpu1: nccl_no_index is true and nccl_find_links is empty; expected a wheel directory "
                       "in nccl_find_links that holds nvidia-nccl-cu13 (pip asks no index).")
    (problem,) = problems(nccl_no_index="often")
    assert problem == 'nccl on gpu1: nccl_no_index is "often"; expected true or false.'
    # no wheel to install (a CPU host): nothing to ask an index for
    assert plan(CPU_HOST, nccl_no_index=True)["source"] == "none"


def test_efa_host_with_a_checksum():
    got = plan(EFA_HOST, nccl_efa_installer_checksum=CHECKSUM)
    assert got == {"source": "wheel", "efa": True, "efa_devices": ["0000:10:1c.0", "0000:20:1c.0"],
                   "efa_device_rdma": True, "pip_args": "--no-deps"}
    # efa0 (p4d's predecessor generation) does no RDMA reads
    only_efa0 = plan({"nvidia_gpus": [GPU], "efa_devices": [EFA0]}, nccl_efa_installer_checksum=CHECKSUM)
    assert only_efa0["efa_device_rdma"] is False
    # the devices are listed whether or not EFA is used
    assert plan(EFA_HOST, nccl_efa=False)["efa_devices"] == ["0000:10:1c.0", "0000:20:1c.0"]


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("nccl_source", "Wheel", 'nccl_source is "Wheel"; expected auto, wheel, cuda_repo or none.'),
    ("nccl_source", None, "nccl_source is null; expected auto, wheel, cuda_repo or none."),
    ("nccl_wheel_package", "nvidia-nccl", 'nccl_wheel_package is "nvidia-nccl"; expected nvidia-nccl-cuNN'),
    ("nccl_wheel_package", "nvidia-nccl-cu12\n", "nccl_wheel_package is \"nvidia-nccl-cu12\\n\"; expected"),
    ("nccl_wheel_version", "latest", 'nccl_wheel_version is "latest"; expected empty (the wheel torch\'s CUDA build '
                                     "brought) or a release like 2.30.7"),
    ("nccl_wheel_version", "2.30", 'nccl_wheel_version is "2.30"; expected empty'),
    ("nccl_wheel_version", "2.30.7rc1", 'nccl_wheel_version is "2.30.7rc1"; expected empty'),
    ("nccl_wheel_version", 2.3, "nccl_wheel_version is 2.3; expected empty"),
    ("nccl_find_links", "wheels/", 'nccl_find_links is "wheels/"; expected empty, an absolute path on the nodes or '
                                   "an http://, https:// or file:// URL, without blanks."),
    ("nccl_find_links", "ftp://mirror/wheels", 'nccl_find_links is "ftp://mirror/wheels"; expected empty'),
    ("nccl_find_links", "/srv/my wheels", 'nccl_find_links is "/srv/my wheels"; expected empty'),
    ("nccl_find_links", "https://", 'nccl_find_links is "https://"; expected empty'),
    ("nccl_index_url", "/srv/index", 'nccl_index_url is "/srv/index"; expected empty or an http://, https:// or '
                                     "file:// URL, without blanks."),
    ("nccl_index_url", "http://[::1/simple", 'nccl_index_url is "http://[::1/simple"; expected empty'),
    ("nccl_venv_dir", "opt/venv", 'nccl_venv_dir is "opt/venv"; expected an absolute path (the Ray venv).'),
    ("nccl_efa", "maybe", 'nccl_efa is "maybe"; expected auto, true or false.'),
    ("nccl_efa", "Auto", 'nccl_efa is "Auto"; expected auto, true or false.'),
    ("nccl_efa", 2, "nccl_efa is 2; expected auto, true or false."),
    ("nccl_env", ["NCCL_DEBUG=WARN"], 'nccl_env is ["NCCL_DEBUG=WARN"]; expected a dict of environment variables'),
    ("nccl_env", {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": 4, "nccl_debug": "INFO"},
     'nccl_env has ["OMP_NUM_THREADS", "nccl_debug"]; expected names starting with NCCL, FI, RDMAV or '
     "LD_LIBRARY_PATH (other variables for Ray's processes go in ray_env)."),
    ("nccl_env", {"NCCL_SOCKET_IFNAME": "eth0"},
     "nccl_env sets NCCL_SOCKET_IFNAME; expected the interface in nccl_socket_ifname"),
    ("nccl_env", {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"},
     "nccl_env sets NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME; expected the interface in nccl_socket_ifname"),
    ("nccl_env", {"NCCL_DEBUG": None}, "nccl_env's NCCL_DEBUG is null; expected a string or a number"),
    ("nccl_env", {"FI_EFA_FORK_SAFE": ["1"]}, 'nccl_env\'s FI_EFA_FORK_SAFE is ["1"]; expected a string or a number'),
])
def test_each_bad_variable_is_named_alone(var, value, expected):
    (problem,) = problems(**{var: value})
    assert problem.startswith("nccl on gpu1: " + expected), problem


def test_cuda_repo_version_is_read_with_the_effective_source_cuda_repo():
    (problem,) = problems(nccl_source="cuda_repo", nccl_cuda_repo_version="2.27.7")
    assert problem == ('nccl on gpu1: nccl_cuda_repo_version is "2.27.7" with nccl_source "cuda_repo"; expected '
                       "libnccl2's package version in NVIDIA's CUDA repository, like 2.27.7-1+cuda12.9.")
    assert plan(nccl_source="cuda_repo", nccl_cuda_repo_version="2.27.7-1+cuda12.9")["source"] == "cuda_repo"
    # not read otherwise
    assert plan(nccl_cuda_repo_version="junk")["source"] == "wheel"


@pytest.mark.parametrize("value", ["", "2.30.7", "2.30.7.post1", "10.0.0", "2.27.3.post12"])
def test_wheel_versions_accepted(value):
    assert plan(nccl_wheel_version=value)["source"] == "wheel"


@pytest.mark.parametrize("value", ["2.30.7-1", "2.30.7.post", "v2.30.7", "1!2.30.7", "2.30.7+local", "2.30.7.dev1",
                                   " 2.30.7", "2.30.7.1", "02.30.7", "2.30.7.post01"])
def test_wheel_versions_refused(value):
    assert not wheel_release(value)


def test_wheel_versions_without_packaging(monkeypatch):
    monkeypatch.setattr(module, "HAS_PACKAGING", False)
    assert wheel_release("2.30.7") and wheel_release("2.30.7.post1")
    assert not wheel_release("2.30.7-1") and not wheel_release("2.30") and not wheel_release("2.30.7\n")


@pytest.mark.parametrize(("var", "value"), [
    ("nccl_find_links", "/srv/wheels"),
    ("nccl_find_links", "https://download.pytorch.org/whl/cu130"),
    ("nccl_find_links", "file:///srv/wheels"),
    ("nccl_index_url", "https://pypi.example.com/simple"),
    ("nccl_index_url", "http://10.0.0.5:8080/simple"),
    ("nccl_index_url", "file:///srv/index"),
    ("nccl_env", {"NCCL_DEBUG": "WARN", "FI_EFA_FORK_SAFE": 1, "RDMAV_HUGEPAGES_SAFE": "1",
                  "LD_LIBRARY_PATH": "/opt/lib", "NCCL_IB_TIMEOUT": 22.5}),
    ("nccl_efa", "auto"),
    ("nccl_efa", False),
    ("nccl_efa", "no"),
    ("nccl_wheel_package", "nvidia-nccl-cu12"),
    ("nccl_socket_ifname", ""),
    ("nccl_socket_ifname", "ens5"),
])
def test_good_values_pass(var, value):
    plan(**{var: value})


def test_every_problem_is_named_at_once():
    found = problems(nccl_source="nccl", nccl_venv_dir="venv", nccl_env={"PATH": "/bin"}, nccl_socket_ifname="eth9")
    assert [p.split(";")[0] for p in found] == [
        'nccl on gpu1: nccl_source is "nccl"',
        'nccl on gpu1: nccl_venv_dir is "venv"',
        'nccl on gpu1: nccl_env has ["PATH"]',
        'nccl on gpu1: nccl_socket_ifname is "eth9", but this host has no such interface (it has: ens5, eth0, lo)',
    ]


def test_interface_must_be_the_hosts():
    (problem,) = problems(nccl_socket_ifname="eth9")
    assert problem == ('nccl on gpu1: nccl_socket_ifname is "eth9", but this host has no such interface (it has: '
                       "ens5, eth0, lo); expected auto, empty, or one of those.")
    # not read with auto or empty: no facts needed
    assert plan(interfaces=None, nccl_socket_ifname="auto")["source"] == "wheel"
    (problem,) = problems(interfaces=[], nccl_socket_ifname="eth0")
    assert "(it has: )" in problem
    # not known (the offline inventory check, without the host's facts): left to the host's own check
    assert plan(interfaces=None, nccl_socket_ifname="eth0")["source"] == "wheel"
    (problem,) = problems(nccl_socket_ifname=None)
    assert problem.startswith("nccl on gpu1: nccl_socket_ifname is null, but this host has no such interface")


def test_efa_installer_needs_a_checksum_on_an_efa_host():
    (problem,) = problems(EFA_HOST)
    assert problem == (
        'nccl on gpu1: nccl_efa_installer_checksum is ""; this host has 2 EFA device(s), so the AWS EFA installer '
        "1.44.0 runs here: expected sha256:<64 lower-case hex digits> of "
        "https://efa-installer.amazonaws.com/aws-efa-installer-1.44.0.tar.gz from a download you checked against "
        "AWS's signature (efa-installer.amazonaws.com/*.sig), or nccl_efa: false to run without EFA.")
    (problem,) = problems(CPU_HOST, nccl_efa=True, nccl_efa_installer_checksum="sha256:ABC")
    assert 'checksum is "sha256:ABC"; this host has been given nccl_efa: true, so the AWS EFA installer' in problem
    # not read without EFA
    assert plan(EFA_HOST, nccl_efa=False, nccl_efa_installer_url="http://x", architecture="ppc64le")["efa"] is False
    assert plan(GPU_HOST, nccl_efa_installer_checksum="")["efa"] is False


def test_efa_installer_url_and_architecture():
    found = problems(EFA_HOST, architecture="ppc64le", nccl_efa_installer_checksum=CHECKSUM,
                     nccl_efa_installer_url="http://efa-installer.amazonaws.com/aws-efa-installer-1.44.0.tar.gz")
    assert found == [
        'nccl on gpu1: nccl_efa_installer_url is "http://efa-installer.amazonaws.com/aws-efa-installer-1.44.0.tar.gz";'
        " this host has 2 EFA device(s), so the AWS EFA installer 1.44.0 runs here: expected an https:// URL of the "
        "installer tarball.",
        'nccl on gpu1: the host\'s architecture is "ppc64le"; this host has 2 EFA device(s), but the AWS EFA '
        "installer supports x86_64 and aarch64 only: expected nccl_efa: false on this host.",
    ]
    assert plan(EFA_HOST, architecture="aarch64", nccl_efa_installer_checksum=CHECKSUM)["efa"] is True
    # an unknown architecture (no facts) is not checked
    assert plan(EFA_HOST, architecture=None, nccl_efa_installer_checksum=CHECKSUM)["efa"] is True


def test_bad_nccl_efa_skips_the_installer_checks():
    (problem,) = problems(EFA_HOST, nccl_efa="maybe")
    assert problem.startswith('nccl on gpu1: nccl_efa is "maybe"')
