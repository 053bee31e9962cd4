# SPDX-License-Identifier: GPL-3.0-or-later
import pytest
from rayfleet.doctor import (
    Report,
    format_table,
    known_hosts_from_args,
    os_supported,
    parse_os_release,
    targets_from_inventory,
)

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'


@pytest.mark.parametrize(
    ("os_id", "version", "ok"),
    [("debian", "12", True), ("ubuntu", "22.04", True), ("ubuntu", "24.04", True), ("ubuntu", "20.04", False),
     ("rocky", "9.4", True), ("rhel", "8.9", False), ("amzn", "2023", True), ("amzn", "2", False),
     ("debian", "11", False), ("arch", "", False)],
)
def test_supported_os(os_id, version, ok):
    assert os_supported({"ID": os_id, "VERSION_ID": version}) is ok


def test_parse_os_release():
    info = parse_os_release(DEBIAN)
    assert (info["ID"], info["VERSION_ID"]) == ("debian", "12")
    assert info["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"


@pytest.mark.parametrize(
    ("args", "path"),
    [("-o UserKnownHostsFile=/x/known -o StrictHostKeyChecking=yes", "/x/known"),
     ("-oUserKnownHostsFile=/y", "/y"), ("-o StrictHostKeyChecking=yes", None), ("", None)],
)
def test_known_hosts_from_ssh_args(args, path):
    assert known_hosts_from_args(args) == path


def test_targets_follow_the_group_contract_and_ansible_vars():
    inventory = {
        "_meta": {"hostvars": {
            "h": {"ansible_host": "10.0.0.10", "ansible_user": "ubuntu", "ansible_port": 2222,
                  "ansible_ssh_private_key_file": "/k/id", "ansible_ssh_common_args": "-o UserKnownHostsFile=/k/kh"},
            "w1": {"ansible_host": "10.0.0.11", "ansible_user": "ubuntu", "ansible_private_key_file": "/k/id2"},
            "other": {"ansible_host": "10.0.0.99"},
        }},
        "all": {"children": ["ray_head", "gpu", "misc"]},
        "ray_head": {"hosts": ["h"]},
        "ray_worker": {"children": ["gpu"]},
        "gpu": {"hosts": ["w1"]},
        "misc": {"hosts": ["other"]},
    }
    targets = targets_from_inventory(inventory)
    assert [t.name for t in targets] == ["h", "w1"]
    head, worker = targets
    assert (head.address, head.port, head.user, head.key_file, head.known_hosts) == (
        "10.0.0.10", 2222, "ubuntu", "/k/id", "/k/kh")
    assert (worker.port, worker.key_file, worker.known_hosts) == (22, "/k/id2", None)


def test_table_names_each_problem():
    good = Report("h", "10.0.0.10", reachable=True, auth=True, sudo=True, python="3.11.2", os="debian 12",
                  os_supported=True, seconds=0.3)
    bad = Report("w1", "10.0.0.11", problems=["cannot reach 10.0.0.11:22: No route to host"], seconds=5.0)
    table = format_table([good, bad])
    assert good.ok and not bad.ok
    assert "w1: cannot reach 10.0.0.11:22: No route to host" in table
    assert table.splitlines()[-1] == "1/2 hosts ready, 1 not ready"


def test_a_port_that_is_not_ssh_is_named_in_the_table_with_no_traceback(tmp_path):
    """`python -m rayfleet.doctor` on a host whose port answers but speaks no SSH: the table names the reason, and
    paramiko's own error log (a traceback through Python's last-resort handler) stays off stderr."""
    import os
    import socket
    import subprocess
    import sys
    import threading
    from pathlib import Path

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer():
        conn, _addr = server.accept()
        conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    ray_head:\n      hosts:\n        web: {ansible_host: 127.0.0.1, "
                         f"ansible_port: {server.getsockname()[1]}}}\n")
    library = Path(__file__).resolve().parents[2] / "library_py"
    proc = subprocess.run([sys.executable, "-m", "rayfleet.doctor", "-i", str(inventory), "--timeout", "3"],
                          env=dict(os.environ, PYTHONPATH=str(library)), capture_output=True, text=True,
                          timeout=60, check=False)
    server.close()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "web: Error reading SSH protocol banner" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
