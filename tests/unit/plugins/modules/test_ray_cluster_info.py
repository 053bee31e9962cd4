# SPDX-License-Identifier: GPL-3.0-or-later
"""ray_cluster_info: summary and wait_for with Ray's state API and GCS client faked."""

from ansible_collections.rayfleet.cluster.plugins.modules import ray_cluster_info
from conftest import run_module as run


def test_cluster_info_wait_names_missing_hosts(monkeypatch):
    nodes = [{"node_id": "a", "node_ip": "10.0.0.10", "state": "ALIVE", "is_head_node": True,
              "resources_total": {"CPU": 2.0}}]
    monkeypatch.setattr("rayfleet.cluster.state_api_fetcher",
                        lambda address, timeout=10, auth_token_path=None: lambda: nodes)
    monkeypatch.setattr("rayfleet.cluster.time.sleep", lambda s: None)
    ok = run(ray_cluster_info, {"address": "http://10.0.0.10:8265"})
    assert not ok.failed and ok.result["alive_nodes"] == 1 and ok.result["cpus"] == 2.0
    out = run(ray_cluster_info, {"address": "http://10.0.0.10:8265", "timeout": 0,
                                 "wait_for": {"min_nodes": 2, "hosts": {"10.0.0.10": "h", "10.0.0.11": "w1"}}})
    assert out.failed
    assert "not registered alive: w1 (10.0.0.11)" in out.result["msg"]
    assert out.result["alive_nodes"] == 1


def test_a_gcs_address_reads_the_gcs_and_a_url_the_state_api(monkeypatch):
    used = []

    def fake(kind):
        def make(address, timeout=10, auth_token_path=None):
            used.append((kind, address, auth_token_path))
            return lambda: [{"node_id": "a", "node_ip": "10.0.0.10", "state": "ALIVE", "is_head_node": True,
                             "resources_total": {"CPU": 2.0, "GPU": 8.0}}]
        return make

    monkeypatch.setattr("rayfleet.cluster.gcs_fetcher", fake("gcs"))
    monkeypatch.setattr("rayfleet.cluster.state_api_fetcher", fake("state"))
    gcs = run(ray_cluster_info, {"address": "10.0.0.10:6379", "auth_token_path": "/etc/rayfleet/auth-token"})
    url = run(ray_cluster_info, {"address": "http://127.0.0.1:8265"})
    assert not gcs.failed and gcs.result["gpus"] == 8.0 and not url.failed
    assert used == [("gcs", "10.0.0.10:6379", "/etc/rayfleet/auth-token"), ("state", "http://127.0.0.1:8265", None)]
