# SPDX-License-Identifier: GPL-3.0-or-later
"""ray_probe: a real venv (python -m venv, no pip) with a Ray distribution's metadata in its site-packages, a real
node library directory and real files; the module's main() runs in-process."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import ray_probe
from conftest import run_module as run


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv whose python reports Ray 2.60.0 (a dist-info directory, as pip leaves it)."""
    root = tmp_path_factory.mktemp("probe") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    script = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([str(root / "bin/python"), "-c", script], capture_output=True, text=True,
                             check=True).stdout.strip()
    info = Path(purelib) / "ray-2.60.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ray\nVersion: 2.60.0\n")
    uv = Path(purelib) / "uv-0.13.10.dist-info"
    uv.mkdir()
    (uv / "METADATA").write_text("Metadata-Version: 2.1\nName: uv\nVersion: 0.13.10\n")
    (root / ".rayfleet-requirements").write_text("ray[default]==2.60.0\n")
    return root, purelib


def test_a_converged_node_reads_as_the_role_compares_it(venv, tmp_path):
    root, purelib = venv
    lib = tmp_path / "lib"
    (lib / "rayfleet").mkdir(parents=True)
    (lib / "rayfleet/raynode.py").write_text("X = 1\n")
    (lib / "rayfleet/notes.txt").write_text("not a module\n")
    nccl = tmp_path / "nccl.json"
    nccl.write_text('{"env": {"NCCL_SOCKET_IFNAME": "eth0"}}\n')
    secret = tmp_path / "checkpoint.env"
    secret.write_text("AWS_SECRET_ACCESS_KEY=s3cr3t\n")
    unit = tmp_path / "ray-worker.service"
    unit.write_text("[Unit]\n")
    out = run(ray_probe, {"venv": str(root), "lib_dir": str(lib), "read": [str(nccl), str(tmp_path / "none.json")],
                          "checksum": [str(secret), str(tmp_path / "none.env")],
                          "exists": [str(unit), str(tmp_path / "gone.service")]})
    assert not out.failed and out.result["changed"] is False
    r = out.result
    assert r["venv"]["python"] and r["venv"]["ray_version"] == "2.60.0" and r["venv"]["purelib"] == purelib
    # the installer the ray role put there (ray_installer: uv), which the roles after it install with too
    assert r["venv"]["uv_version"] == "0.13.10"
    assert r["venv"]["requirements"] == "ray[default]==2.60.0\n" and r["venv"]["pth"] is None
    assert r["lib_sha1"] == {"raynode.py": hashlib.sha1(b"X = 1\n").hexdigest()}
    assert r["files"] == {str(nccl): nccl.read_text(), str(tmp_path / "none.json"): None}
    # The secret's digest, never its content
    assert r["sha256"] == {str(secret): hashlib.sha256(secret.read_bytes()).hexdigest(),
                           str(tmp_path / "none.env"): None}
    assert "s3cr3t" not in repr(r)
    assert r["exists"] == {str(unit): True, str(tmp_path / "gone.service"): False}


def test_the_pth_is_read_from_the_venvs_site_packages(venv, tmp_path):
    root, purelib = venv
    pth = Path(purelib) / "rayfleet.pth"
    pth.write_text("/opt/rayfleet/lib\n")
    try:
        r = run(ray_probe, {"venv": str(root), "lib_dir": str(tmp_path)}).result
    finally:
        pth.unlink()
    assert r["venv"]["pth"] == "/opt/rayfleet/lib\n" and r["lib_sha1"] == {}


def test_a_fresh_host_without_the_venv_reads_empty(tmp_path):
    r = run(ray_probe, {"venv": str(tmp_path / "venv"), "lib_dir": str(tmp_path / "lib"),
                        "exists": [str(tmp_path / "x")]}, check_mode=True).result
    assert r["venv"] == {"python": False, "purelib": "", "ray_version": "", "uv_version": "", "requirements": None,
                         "pth": None}
    assert r["lib_sha1"] == {} and r["files"] == {} and r["sha256"] == {}
    assert r["exists"] == {str(tmp_path / "x"): False}


def test_a_venv_without_ray_or_with_a_broken_python_reads_no_version(tmp_path):
    broken = tmp_path / "venv"
    (broken / "bin").mkdir(parents=True)
    (broken / "bin/python").write_text("#!/bin/sh\nexit 3\n")
    (broken / "bin/python").chmod(0o755)
    r = run(ray_probe, {"venv": str(broken), "lib_dir": str(tmp_path)}).result
    assert r["venv"]["python"] and r["venv"]["ray_version"] == "" and r["venv"]["uv_version"] == ""
    assert r["venv"]["purelib"] == ""
