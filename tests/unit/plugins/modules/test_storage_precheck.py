# SPDX-License-Identifier: GPL-3.0-or-later
"""storage_precheck: real directories and files for the mount points, a real state file, a server socket on
loopback for a server that answers and a closed port for one that does not; /proc/filesystems is a file of ours."""

import json

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import storage_precheck
from conftest import run_module as run

WITH_NFS = "nodev\tsysfs\nnodev\ttmpfs\n\text4\nnodev\tnfs\nnodev\tnfs4\n"
WITHOUT_NFS = "nodev\tsysfs\nnodev\ttmpfs\n\text4\n"


@pytest.fixture
def proc(tmp_path, monkeypatch):
    """/proc/filesystems, written by the test."""
    path = tmp_path / "filesystems"
    monkeypatch.setattr(storage_precheck, "PROC_FILESYSTEMS", str(path))
    return path


def mount(path, server="127.0.0.1", server_host=""):
    return {"path": str(path), "server": server, "server_host": server_host, "fstype": "nfs", "export": "/x"}


def test_a_host_that_can_take_its_mounts_has_no_problem(tmp_path, proc, server):
    proc.write_text(WITH_NFS)
    (tmp_path / "shared").mkdir()
    out = run(storage_precheck, {"mounts": [mount(tmp_path / "shared"), mount(tmp_path / "new")],
                                 "state_file": str(tmp_path / "none.json"), "port": server, "timeout": 2})
    assert not out.failed and out.result["changed"] is False
    assert out.result["problems"] == [] and out.result["kernel_client"] is True
    assert out.result["managed"] == [] and out.result["no_answer"] == []


def test_a_mount_point_that_is_a_file_is_named(tmp_path, proc, server):
    proc.write_text(WITH_NFS)
    (tmp_path / "data").write_text("a file\n")
    r = run(storage_precheck, {"mounts": [mount(tmp_path / "data")], "state_file": str(tmp_path / "none.json"),
                               "port": server}).result
    assert r["not_directories"] == [str(tmp_path / "data")]
    listed = json.dumps([str(tmp_path / "data")])
    assert r["problems"] == [f"shared_storage_mounts path {listed} exists and is not a directory."]


def test_a_kernel_without_nfs_is_a_problem_unless_not_required(tmp_path, proc, server, monkeypatch):
    proc.write_text(WITHOUT_NFS)
    monkeypatch.setattr(storage_precheck.AnsibleModule, "get_bin_path", lambda *a, **k: None)  # no modinfo
    args = {"mounts": [mount(tmp_path / "m")], "state_file": str(tmp_path / "none.json"), "port": server}
    r = run(storage_precheck, args).result
    assert r["kernel_client"] is False and len(r["problems"]) == 1
    assert "has no NFS client" in r["problems"][0] and "shared_storage_require_kernel_client=false" in r["problems"][0]
    r = run(storage_precheck, {**args, "require_kernel_client": False}).result
    assert r["kernel_client"] is False and r["problems"] == []


def test_a_kernel_with_the_nfs_module_only_has_a_client(tmp_path, proc, server, monkeypatch):
    proc.write_text(WITHOUT_NFS)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "modinfo").write_text("#!/bin/sh\necho /lib/modules/x/nfs.ko\n")
    (bin_dir / "modinfo").chmod(0o755)
    monkeypatch.setattr(storage_precheck.AnsibleModule, "get_bin_path", lambda *a, **k: str(bin_dir / "modinfo"))
    r = run(storage_precheck, {"mounts": [mount(tmp_path / "m")], "state_file": str(tmp_path / "none.json"),
                               "port": server}).result
    assert r["kernel_client"] is True and r["problems"] == []


def test_only_new_mounts_servers_outside_the_inventory_are_probed(tmp_path, proc, closed_port):
    proc.write_text(WITH_NFS)
    state = tmp_path / "shared-storage.json"
    state.write_text(json.dumps({"paths": [str(tmp_path / "old")]}))
    port = closed_port
    mounts = [mount(tmp_path / "old"), mount(tmp_path / "in-cluster", server="10.0.0.5", server_host="nfs1"),
              mount(tmp_path / "new")]
    r = run(storage_precheck, {"mounts": mounts, "state_file": str(state), "port": port, "timeout": 1.5}).result
    assert r["managed"] == [str(tmp_path / "old")]
    assert r["no_answer"] == [{"path": str(tmp_path / "new"), "server": "127.0.0.1"}]
    assert r["problems"] == [f'shared_storage_mounts {tmp_path / "new"} (server "127.0.0.1": no answer on port {port} '
                             "in 1.5 s) - check the address and that the server exports to this host."]


def test_no_mounts_reads_only_the_state(tmp_path, proc):
    proc.write_text(WITHOUT_NFS)
    state = tmp_path / "shared-storage.json"
    state.write_text("{broken")
    r = run(storage_precheck, {"state_file": str(state)}, check_mode=True).result
    assert r == {"changed": False, "problems": [], "kernel_client": False, "managed": [], "not_directories": [],
                 "no_answer": []}


def test_a_mount_without_a_server_is_refused(tmp_path):
    out = run(storage_precheck, {"mounts": [{"path": "/mnt/x"}]})
    assert out.failed and "each needs a path and a server" in out.result["msg"]
