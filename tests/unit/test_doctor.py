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
