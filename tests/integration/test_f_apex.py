# SPDX-License-Identifier: GPL-3.0-or-later
"""The apex role on the sandbox. The CPU hosts have no CUDA toolkit: with the defaults each is skipped, saying why.
Apex's own source is on GitHub, which these machines must not reach, so the build, the controller's wheel cache and
the install run on a stand-in source tree (tests/integration/files/apex-standin: a package named apex with one C++
torch extension, apex_C, built the way Apex builds) with apex_cuda_ext false: one node compiles, every node installs
the wheel and imports apex_C, a re-run compiles nothing."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import ROOT, VENV, ansible_env, converge_again, inventory_ips

# Not in make test, to keep it short (make test-full runs it):
# Apex's build and wheel cache on a stand-in source (about 2 min).
pytestmark = pytest.mark.extended

STANDIN = ROOT / "tests/integration/files/apex-standin"


@pytest.fixture(scope="module", autouse=True)
def converged_afterwards():
    """ml.yml runs below with --tags apex and other Apex settings: where it changed the ml stage, the stage has no
    record until a whole run applies it; a plain site.yml at the end does."""
    yield
    converge_again()


def apex_run(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "playbooks/ml.yml", "-i", "inventories/sandbox", "--tags", "apex",
                           *extra], cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False,
                          timeout=600)


def test_hosts_without_a_cuda_toolkit_are_skipped_saying_why(request):
    proc = apex_run()
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in inventory_ips(request):
        assert (f"apex on {name}: skipped - no CUDA toolkit (no nvcc at /usr/local/cuda/bin/nvcc); run the cuda "
                "role on this host, or set apex_cuda_ext: false for the C++ extensions only") in proc.stdout
    assert proc.stdout.count("changed=0 ") == len(inventory_ips(request))


def test_bad_commit_is_refused_by_name(request):
    proc = apex_run("-e", "apex_commit=main")
    assert proc.returncode != 0
    assert 'apex_commit is "main"; expected a full 40-hex commit' in proc.stdout, proc.stdout[-2000:]


def test_one_node_compiles_every_node_installs_from_the_cache(request, tmp_path):
    from testinfra import get_host

    names = list(inventory_ips(request))
    cache = tmp_path / "apex-wheels"
    extra = ("-e", "apex_cuda_ext=false", "-e", f"apex_source={STANDIN}", "-e", f"apex_wheel_cache={cache}")
    hosts = {n: get_host(f"ansible://{n}", ansible_inventory=request.config.option.ansible_inventory) for n in names}
    try:
        first = apex_run(*extra)
        assert first.returncode == 0, first.stdout[-4000:]
        compiled = re.findall(r"included: .*/roles/apex/tasks/build\.yml for (\S+)", first.stdout)
        assert compiled == [names[0]], f"compiled on {compiled}, expected only on {names[0]}"
        wheels = list(cache.glob("*/apex-*.whl"))
        assert len(wheels) == 1 and wheels[0].name.startswith("apex-0.1+standin-cp311"), wheels
        for name, host in hosts.items():
            out = host.check_output(f"{VENV}/bin/python -c 'import torch, apex_C; "
                                    "t = [torch.ones(2, 3), torch.arange(4.0)]; f = apex_C.flatten(t); "
                                    "u = apex_C.unflatten(f, t); print(f.numel(), bool(torch.equal(u[1], t[1])))'")
            assert out.splitlines()[-1] == "10 True", (name, out)
            marker = host.file(f"{VENV}/rayfleet-apex.json").content_string
            assert wheels[0].parent.name in marker and wheels[0].name in marker
        again = apex_run(*extra)
        assert again.returncode == 0, again.stdout[-3000:]
        assert "tasks/build.yml for" not in again.stdout
        assert again.stdout.count("changed=0 ") == len(names), again.stdout[-1500:]
        for name in names:
            assert f"apex on {name}: 0.1+standin (build {wheels[0].parent.name}) in place" in again.stdout
    finally:
        for host in hosts.values():
            host.run(f"sudo {VENV}/bin/pip uninstall -q -y apex; sudo rm -f {VENV}/rayfleet-apex.json")
