# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.dashboard: where the head's dashboard is, and the ssh command that reaches it."""

import pytest
from rayfleet.dashboard import head_of, ssh_command

INVENTORY = {
    "_meta": {"hostvars": {
        "h": {"ansible_host": "203.0.113.10", "ansible_user": "ops", "ansible_port": 2222,
              "ansible_ssh_private_key_file": "/keys/id", "ray_node_ip": "10.0.0.10",
              "ansible_ssh_common_args": "-o UserKnownHostsFile=/keys/known_hosts"},
        "w": {"ansible_host": "203.0.113.11"}}},
    "all": {"children": ["ray_head", "ray_worker"]},
    "ray_head": {"hosts": ["h"]},
    "ray_worker": {"hosts": ["w"]},
}


def test_the_dashboard_is_on_the_heads_cluster_address_reached_over_ssh():
    head, host, port = head_of(INVENTORY)
    assert (head.name, host, port) == ("h", "10.0.0.10", 8265)
    cmd = ssh_command(head, host, port, 18265)
    assert cmd[:2] == ["ssh", "-N"] and cmd[-1] == "ops@203.0.113.10"
    assert "StrictHostKeyChecking=yes" in cmd and "UserKnownHostsFile=/keys/known_hosts" in cmd
    assert "127.0.0.1:18265:10.0.0.10:8265" in cmd and cmd[cmd.index("-p"):cmd.index("-p") + 2] == ["-p", "2222"]
    assert cmd[cmd.index("-i"):cmd.index("-i") + 2] == ["-i", "/keys/id"]


def test_an_inventory_without_one_head_is_refused():
    with pytest.raises(SystemExit, match="exactly one host in ray_head"):
        head_of({"_meta": {"hostvars": {}}, "ray_head": {"hosts": []}})
