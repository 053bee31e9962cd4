# SPDX-License-Identifier: GPL-3.0-or-later
"""storage_check: real sockets on loopback stand in for NFS servers, a real directory for a mounted share (the
mount table is the only thing faked), and real child processes for the probes and their timeouts."""

import inspect
import os
import stat
import time

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import storage_check
from conftest import run_module as run
from rayfleet import storage, storage_probe

MOUNTINFO = (
    "22 1 0:21 / / rw,relatime shared:1 - overlay overlay rw,lowerdir=/a\n"
    "95 22 0:50 / /mnt/shared rw,relatime shared:40 - nfs4 10.0.0.5:/srv/rayfleet/shared rw,vers=4.1\n"
    "96 22 0:51 / /mnt/with\\040space rw - nfs4 10.0.0.6:/x rw\n"
    "97 22 0:52 / /scratch rw - ext4 /dev/vdb rw\n"
)


def _fake_mounts(monkeypatch, table):
    monkeypatch.setattr(storage_check, "read_mountinfo", lambda: table)


def _fake_nfs_ls(tmp_path, monkeypatch, rc, message=""):
    tool = tmp_path / "bin" / "nfs-ls"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\necho \"$1\" > {tmp_path}/nfs-ls.args\necho '{message}'\nexit {rc}\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")


def test_mountinfo_is_parsed_with_escapes():
    table = storage_probe.parse_mountinfo(MOUNTINFO)
    assert table["/mnt/shared"] == ("nfs4", "10.0.0.5:/srv/rayfleet/shared")
    assert table["/mnt/with space"] == ("nfs4", "10.0.0.6:/x")
    assert table["/scratch"] == ("ext4", "/dev/vdb")


def test_mounted_share_is_probed_for_real(tmp_path, monkeypatch, server):
    share = tmp_path / "share"
    share.mkdir()
    _fake_mounts(monkeypatch, {str(share): ("nfs4", "127.0.0.1:/export")})
    out = run(storage_check, {"mounts": [{"path": str(share), "server": "127.0.0.1"}], "port": server})
    assert not out.failed and not out.result["changed"]
    m = out.result["mounts"][0]
    assert m["state"] == "ok" and m["mounted"] and m["writable"] is True and m["server_reachable"], m
    assert out.result["degraded"] == [] and list(share.iterdir()) == [], "the write probe must clean up"


@pytest.mark.skipif(os.geteuid() != 0, reason="probing as another user needs root")
def test_share_not_writable_by_the_user_is_degraded(tmp_path, monkeypatch, server):
    share = tmp_path / "share"
    share.mkdir()
    share.chmod(0o755)  # root's; nobody cannot write
    tmp_path.chmod(tmp_path.stat().st_mode | stat.S_IXOTH)
    _fake_mounts(monkeypatch, {str(share): ("nfs4", "127.0.0.1:/export")})
    out = run(storage_check, {"mounts": [{"path": str(share), "server": "127.0.0.1"}], "port": server,
                              "user": "nobody"})
    m = out.result["mounts"][0]
    assert m["state"] == "degraded" and m["writable"] is False and "not writable by nobody" in m["reason"], m


def test_unreachable_server_is_degraded_and_can_fail_the_task(tmp_path, monkeypatch, closed_port):
    _fake_mounts(monkeypatch, {})
    args = {"mounts": [{"path": "/mnt/shared", "server": "127.0.0.1", "export": "/srv"}], "port": closed_port}
    out = run(storage_check, args)
    assert not out.failed
    assert out.result["degraded"][0].startswith(f"/mnt/shared: server unreachable (127.0.0.1:{closed_port}")
    out = run(storage_check, dict(args, fail_on_degraded=True))
    assert out.failed and out.result["msg"].startswith("degraded shared storage: /mnt/shared: server unreachable")


def test_missing_kernel_mount_is_degraded_but_says_the_server_answers(tmp_path, monkeypatch, server):
    _fake_mounts(monkeypatch, {})
    _fake_nfs_ls(tmp_path, monkeypatch, 0)
    out = run(storage_check, {"mounts": [{"path": "/mnt/shared", "server": "127.0.0.1", "export": "/srv/x"}],
                              "port": server})
    m = out.result["mounts"][0]
    assert m["state"] == "degraded" and m["reason"] == "not mounted" and m["protocol"] == "ok", m
    assert (tmp_path / "nfs-ls.args").read_text().strip() == f"nfs://127.0.0.1/srv/x?version=4&nfsport={server}"


def test_without_kernel_client_the_protocol_probe_decides(tmp_path, monkeypatch, server):
    _fake_mounts(monkeypatch, {})
    _fake_nfs_ls(tmp_path, monkeypatch, 10, "Failed to mount nfs share : NFS4ERR_ACCESS")
    args = {"mounts": [{"path": "/mnt/shared", "server": "127.0.0.1", "export": "/srv/x"}], "port": server,
            "kernel_client": False}
    m = run(storage_check, args).result["mounts"][0]
    assert m["state"] == "degraded" and "server does not serve /srv/x" in m["reason"], m
    assert "NFS4ERR_ACCESS" in m["reason"]


def test_without_kernel_client_a_serving_server_is_ok_and_says_not_mounted(tmp_path, monkeypatch, server):
    _fake_mounts(monkeypatch, {})
    _fake_nfs_ls(tmp_path, monkeypatch, 0)
    m = run(storage_check, {"mounts": [{"path": "/mnt/shared", "server": "127.0.0.1", "export": "/srv/x"}],
                            "port": server, "kernel_client": False}).result["mounts"][0]
    assert m["state"] == "ok" and not m["mounted"] and m["reason"].startswith("not mounted: this host has no kernel")


def test_another_file_system_on_the_mount_point_is_degraded(tmp_path, monkeypatch, server):
    _fake_mounts(monkeypatch, {"/mnt/shared": ("ext4", "/dev/vdb")})
    m = run(storage_check, {"mounts": [{"path": "/mnt/shared", "server": "127.0.0.1"}],
                            "port": server}).result["mounts"][0]
    assert m["state"] == "degraded" and "is a ext4 mount of /dev/vdb, not the NFS share" in m["reason"], m


def test_a_hung_probe_is_killed_after_the_timeout():
    start = time.monotonic()
    rc, out = storage_probe.run_limited(["sleep", "30"], 0.5)
    assert rc == 124 and out == "no answer in 0.5s" and time.monotonic() - start < 5


def test_bad_arguments_fail_naming_them():
    out = run(storage_check, {"mounts": [{"path": "mnt/x", "server": "h"}]})
    assert out.failed and out.result["msg"] == "mounts: path must be absolute, got mnt/x"
    out = run(storage_check, {"mounts": [{"path": "/mnt/x", "server": "h"}], "user": "no-such-user-here"})
    assert out.failed and out.result["msg"] == "user no-such-user-here does not exist on this host"


# The health check and the admission probe on the node (rayfleet.storage, in the Ray venv) with the same code: the
# module's module_utils/storage_probe.py is the node library's rayfleet/storage_probe.py.
def test_the_module_and_the_node_library_share_one_probe():
    shared = os.path.realpath(inspect.getsourcefile(storage_check.probe_mount))
    assert shared == os.path.realpath(inspect.getsourcefile(storage_probe.probe_mount))
    assert shared.endswith(os.path.join("library_py", "rayfleet", "storage_probe.py"))
    assert storage_probe.parse_mountinfo(MOUNTINFO)["/mnt/with space"] == ("nfs4", "10.0.0.6:/x")


def _both(tmp_path, monkeypatch, mount, port, mountinfo, kernel_client=True):
    """(ok, reason) from this library and from the storage_check module, for the same mount."""
    monkeypatch.setattr(storage_check, "read_mountinfo", lambda: mountinfo)
    module = run(storage_check, {"mounts": [mount], "port": port, "kernel_client": kernel_client}).result["mounts"][0]
    config = storage.StorageConfig((storage.Mount(**mount),), kernel_client=kernel_client, port=port)
    mine = storage.check(config, mountinfo)[0]
    return (mine.ok, mine.reason), (module["state"] == "ok", module["reason"])


@pytest.mark.parametrize("case", ["mounted", "unreachable", "not-mounted", "no-kernel-client", "other-fs"])
def test_the_verdicts_are_the_storage_check_modules(case, tmp_path, monkeypatch, server, closed_port):
    share = tmp_path / "share"
    share.mkdir()
    _fake_nfs_ls(tmp_path, monkeypatch, 0)
    mount = {"path": str(share), "server": "127.0.0.1", "export": "/srv/x"}
    port, mountinfo, kernel_client = server, {}, True
    if case == "mounted":
        mountinfo = {str(share): ("nfs4", "127.0.0.1:/srv/x")}
    elif case == "unreachable":
        port = closed_port
    elif case == "no-kernel-client":
        kernel_client = False
    elif case == "other-fs":
        mountinfo = {str(share): ("ext4", "/dev/vdb")}
    mine, module = _both(tmp_path, monkeypatch, mount, port, mountinfo, kernel_client)
    assert mine == module
    assert mine[0] is (case in ("mounted", "no-kernel-client"))
    assert list(share.iterdir()) == [], "the write probe cleans up"
