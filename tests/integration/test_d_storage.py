# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared storage across real sandbox hosts: the head exports /srv/rayfleet/shared (role nfs_server) and every node
has the share in fstab (role shared_storage).

This machine's kernel has neither an NFS server nor an NFS client (no nfs/nfsd in /proc/filesystems, no modules),
so the server is NFS-Ganesha (user space) and the nodes reach the share over NFSv4 with libnfs (nfs-cp, nfs-cat,
nfs-ls) instead of a kernel mount: every byte still goes worker -> network -> server -> network -> worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
from conftest import (
    CONTAINERS_CONF,
    ROOT,
    SANDBOX,
    ansible_env,
    container,
    converge_again,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    ray_nodes,
    stranger,
    wait_for_cluster,
)
from testinfra import get_host

testinfra_hosts = [f"ansible://{SANDBOX}-head"]
EXPORT = "/srv/rayfleet/shared"
MOUNT = "/mnt/shared"


@pytest.fixture(scope="module", autouse=True)
def converged_afterwards():
    """storage.yml runs below with other mounts and settings, which the storage stages' records keep as their
    inputs: a plain site.yml at the end converges them again."""
    yield
    converge_again()


def _host(request, name: str):
    return get_host(f"ansible://{name}", ansible_inventory=request.config.option.ansible_inventory)


def _ids(host) -> tuple[int, int]:
    return int(host.check_output("id -u rayfleet")), int(host.check_output("id -g rayfleet"))


def _url(server: str, name: str, uid: int, gid: int) -> str:
    return f"nfs://{server}{EXPORT}/{name}?version=4&uid={uid}&gid={gid}"


def _storage_playbook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "playbooks/storage.yml", "-i", "inventories/sandbox", *args], cwd=ROOT,
                          env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)


def _wait_nfs(host, server: str, timeout: float = 60) -> None:
    """Until the server answers NFSv4 READDIR (it may be in its grace period after a restart)."""
    deadline = time.monotonic() + timeout
    while host.run(f"nfs-ls 'nfs://{server}{EXPORT}?version=4'").rc != 0:
        assert time.monotonic() < deadline, f"NFS server {server} does not answer in {timeout:g} s"
        time.sleep(1)


def test_a_file_written_on_one_worker_is_read_on_another(request):
    ips = inventory_ips(request)
    workers = sorted(n for n in ips if not n.endswith("head"))
    assert len(workers) >= 2, "needs two workers"
    head = head_host(request)
    server = node_ip(head)
    w1, w2 = _host(request, workers[0]), _host(request, workers[1])
    uid, gid = _ids(w1)
    assert _ids(w2) == (uid, gid) == _ids(head), "the Ray user must have one uid/gid on every node"
    name, data = f"probe-{uuid.uuid4().hex}.txt", uuid.uuid4().hex
    _wait_nfs(w1, server)
    try:
        put = w1.run(f"printf %s {data} > /tmp/{name} && nfs-cp /tmp/{name} '{_url(server, name, uid, gid)}'")
        assert put.rc == 0, put.stdout + put.stderr
        got = w2.run(f"nfs-cat '{_url(server, name, uid, gid)}'")
        assert got.rc == 0 and got.stdout.strip() == data, got.stdout + got.stderr
        # On the server it is the Ray user's file, in the exported directory
        assert head.check_output(f"sudo stat -c %U {EXPORT}/{name}") == "rayfleet"
        assert head.check_output(f"sudo cat {EXPORT}/{name}") == data
    finally:
        head.run(f"sudo rm -f {EXPORT}/{name}")
        w1.run(f"rm -f /tmp/{name}")


def test_root_is_squashed(request):
    """Root on a client is nobody on the server: it cannot create a file in the Ray user's directory (mode 2775),
    which root on the server could."""
    head = head_host(request)
    worker = _host(request, sorted(n for n in inventory_ips(request) if not n.endswith("head"))[0])
    name = f"root-{uuid.uuid4().hex}.txt"
    _wait_nfs(worker, node_ip(head))
    try:
        put = worker.run(f"echo x > /tmp/{name} && nfs-cp /tmp/{name} '{_url(node_ip(head), name, 0, 0)}'")
        assert put.rc != 0 and "NFS4ERR_ACCESS" in put.stdout + put.stderr, put.stdout + put.stderr
        assert not head.file(f"{EXPORT}/{name}").exists
    finally:
        head.run(f"sudo rm -f {EXPORT}/{name}")
        worker.run(f"rm -f /tmp/{name}")


def test_export_refuses_an_address_not_in_the_cluster(request):
    """The head's loopback address is not a cluster address: NFS-Ganesha must refuse it (the export's client list),
    while the head's own cluster address is served."""
    head = head_host(request)
    refused = head.run(f"nfs-ls 'nfs://127.0.0.1{EXPORT}?version=4'")
    assert refused.rc != 0, "the export answered an address outside its client list: " + refused.stdout
    _wait_nfs(head, node_ip(head))


def test_nfs_and_portmapper_closed_to_a_host_outside_the_cluster(request):
    head_ip = node_ip(head_host(request))
    probe = "timeout 3 bash -c '</dev/tcp/{ip}/{port}' && echo {port}:open || echo {port}:closed"
    script = "; ".join(probe.format(ip=head_ip, port=p) for p in (2049, 111))
    with stranger(head_ip.rsplit(".", 1)[0] + ".251") as run:
        out = run(["bash", "-c", script]).stdout.split()
    assert out == ["2049:closed", "111:closed"], out


def test_fstab_entries_never_block_boot(request):
    for name in inventory_ips(request):
        line = _host(request, name).check_output(f"findmnt --fstab --noheadings --output OPTIONS {MOUNT}")
        opts = line.split(",")
        assert {"_netdev", "nofail", "hard", "nfsvers=4.1"} <= set(opts), (name, line)
        assert any(o.startswith("x-systemd.mount-timeout=") for o in opts), (name, line)


def test_a_mount_taken_out_of_the_list_is_removed(request):
    names = sorted(inventory_ips(request))
    both = [{"path": MOUNT, "server_host": f"{SANDBOX}-head", "export": EXPORT},
            {"path": "/mnt/extra", "server_host": f"{SANDBOX}-head", "export": EXPORT}]
    proc = _storage_playbook("--tags", "shared_storage", "-e", json.dumps({"shared_storage_mounts": both}))
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in names:
        node = _host(request, name)
        assert node.run("findmnt --fstab /mnt/extra").rc == 0, f"{name}: /mnt/extra not in fstab"
        assert json.loads(node.check_output("cat /etc/rayfleet/shared-storage.json"))["paths"] == [MOUNT, "/mnt/extra"]
    proc = _storage_playbook("--tags", "shared_storage")
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in names:
        node = _host(request, name)
        assert node.run("findmnt --fstab /mnt/extra").rc == 1, f"{name}: /mnt/extra still in fstab"
        assert node.run(f"findmnt --fstab {MOUNT}").rc == 0, f"{name}: {MOUNT} was removed too"
        assert json.loads(node.check_output("cat /etc/rayfleet/shared-storage.json"))["paths"] == [MOUNT]


def test_server_down_leaves_boot_and_ray_alone_and_is_reported_by_host(request, tmp_path):
    head = head_host(request)
    ips = inventory_ips(request)
    worker = sorted(n for n in ips if not n.endswith("head"))[0]
    assert head.run("sudo systemctl stop nfs-ganesha.service").rc == 0
    try:
        old = {n["node_id"] for n in ray_nodes(head, node_ip(head)) if n["node_ip"] == ips[worker]}
        start = time.monotonic()
        podman("restart", "--time", "10", container(worker))
        took = wait_for_cluster(head, node_ip(head), sorted(ips.values()), 120, exclude_ids=old)[0]
        state = subprocess.run(["podman", "exec", container(worker), "systemctl", "is-system-running"],
                               env=dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF), capture_output=True,
                               text=True, check=False).stdout.strip()
        assert state in ("running", "degraded"), f"{worker} did not boot with the NFS server down: {state}"
        print(f"\nNFS server down: {worker} rebooted and rejoined Ray in {time.monotonic() - start:.1f} s "
              f"({took:.1f} s of waiting)")
        # The nodes' side only: the nfs_server role would start the server again (as it should).
        proc = _storage_playbook("--tags", "shared_storage", "-e", "shared_storage_on_degraded=fail")
        assert proc.returncode != 0, "storage.yml passed with the NFS server down"
        for name in ips:
            assert f"shared storage degraded on {name}: {MOUNT}: server unreachable" in proc.stdout, (
                name, proc.stdout[-3000:])
        # The preflight gate shuts on it too, naming every node (bandwidth not measured: not what is tested here)
        gate = subprocess.run(["ansible-playbook", "playbooks/preflight.yml", "-i", "inventories/sandbox", "-e",
                               "preflight_collective=false", "-e", f"preflight_report_dir={tmp_path}"], cwd=ROOT,
                              env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)
        assert gate.returncode != 0, "the preflight passed with the NFS server down"
        for name in ips:
            assert f"{name}: shared storage degraded: {MOUNT}: server unreachable" in gate.stdout, (
                name, gate.stdout[-3000:])
        assert f"{MOUNT} degraded (server unreachable" in (tmp_path / "report.md").read_text()
    finally:
        head.run("sudo systemctl start nfs-ganesha.service")
    _wait_nfs(_host(request, worker), node_ip(head))
    proc = _storage_playbook("-e", "shared_storage_on_degraded=fail")
    assert proc.returncode == 0, proc.stdout[-3000:]
