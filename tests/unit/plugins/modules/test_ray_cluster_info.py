# SPDX-License-Identifier: GPL-3.0-or-later
"""ray_cluster_info: summary and wait_for with Ray's state API faked."""

from ansible_collections.rayfleet.cluster.plugins.modules import ray_cluster_info
from conftest import run_module as run


def test_cluster_info_wait_names_missing_hosts(monkeypatch):
    nodes = [{"node_id": "a", "node_ip": "10.0.0.10", "state": "ALIVE", "is_head_node": True,
              "resources_total": {"CPU": 2.0}}]
    monkeypatch.setattr(ray_cluster_info, "state_api_fetcher", lambda address, auth_token_path=None: lambda: nodes)
    monkeypatch.setattr("rayfleet.cluster.time.sleep", lambda s: None)
    ok = run(ray_cluster_info, {"address": "http://10.0.0.10:8265"})
    assert not ok.failed and ok.result["alive_nodes"] == 1 and ok.result["cpus"] == 2.0
    out = run(ray_cluster_info, {"address": "http://10.0.0.10:8265", "timeout": 0,
                                 "wait_for": {"min_nodes": 2, "hosts": {"10.0.0.10": "h", "10.0.0.11": "w1"}}})
    assert out.failed
    assert "not registered alive: w1 (10.0.0.11)" in out.result["msg"]
    assert out.result["alive_nodes"] == 1
