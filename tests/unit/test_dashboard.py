# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.dashboard: where the head's dashboard is, and the ssh command that reaches it."""

from pathlib import Path

import pytest
from rayfleet.dashboard import head_of, ssh_command

ROOT = Path(__file__).resolve().parents[2]

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


def test_the_dashboard_is_on_the_heads_loopback_reached_over_ssh():
    head, host, port = head_of(INVENTORY)
    assert (head.name, host, port) == ("h", "127.0.0.1", 8265)
    cmd = ssh_command(head, host, port, 18265)
    assert cmd[:2] == ["ssh", "-N"] and cmd[-1] == "ops@203.0.113.10"
    assert "StrictHostKeyChecking=yes" in cmd and "UserKnownHostsFile=/keys/known_hosts" in cmd
    assert "127.0.0.1:18265:127.0.0.1:8265" in cmd and cmd[cmd.index("-p"):cmd.index("-p") + 2] == ["-p", "2222"]
    assert cmd[cmd.index("-i"):cmd.index("-i") + 2] == ["-i", "/keys/id"]


def test_an_empty_dashboard_host_means_the_cluster_address():
    inventory = {**INVENTORY, "_meta": {"hostvars": {**INVENTORY["_meta"]["hostvars"]}}}
    inventory["_meta"]["hostvars"]["h"] = {**inventory["_meta"]["hostvars"]["h"], "ray_dashboard_host": ""}
    assert head_of(inventory)[1:] == ("10.0.0.10", 8265)


def test_the_default_is_the_ray_roles():
    import yaml
    from rayfleet.dashboard import DEFAULT_DASHBOARD_HOST, DEFAULT_DASHBOARD_PORT

    defaults = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())
    role_default = (defaults["ray_dashboard_host"], defaults["ray_dashboard_port"])
    assert role_default == (DEFAULT_DASHBOARD_HOST, DEFAULT_DASHBOARD_PORT)


def test_an_inventory_without_one_head_is_refused():
    with pytest.raises(SystemExit, match="exactly one host in ray_head"):
        head_of({"_meta": {"hostvars": {}}, "ray_head": {"hosts": []}})


def _with_head_vars(**hv):
    inventory = {**INVENTORY, "_meta": {"hostvars": {**INVENTORY["_meta"]["hostvars"]}}}
    inventory["_meta"]["hostvars"]["h"] = {**inventory["_meta"]["hostvars"]["h"], **hv}
    return inventory


def test_grafana_is_forwarded_where_the_monitoring_role_runs_it_on_the_head():
    from rayfleet.dashboard import grafana_of

    head = head_of(INVENTORY)[0]
    assert grafana_of(INVENTORY, head) is None  # monitoring_grafana is off by default
    assert grafana_of(_with_head_vars(monitoring_grafana=True), head) == ("127.0.0.1", 3000)
    assert grafana_of(_with_head_vars(monitoring_grafana=True, monitoring_grafana_listen="[::1]:3300"),
                      head) == ("::1", 3300)
    assert grafana_of(_with_head_vars(monitoring_grafana=True, monitoring_enabled=False), head) is None
    assert grafana_of(_with_head_vars(monitoring_grafana=True, monitoring_host="w"), head) is None
    cmd = ssh_command(head, "127.0.0.1", 8265, 18265, ("127.0.0.1", 3000, 3000))
    assert cmd.count("-L") == 2 and "127.0.0.1:3000:127.0.0.1:3000" in cmd


def test_the_grafana_default_is_the_monitoring_roles():
    import yaml

    defaults = yaml.safe_load((ROOT / "roles/monitoring/defaults/main.yml").read_text())
    assert defaults["monitoring_grafana"] is False and defaults["monitoring_grafana_listen"] == "127.0.0.1:3000"
