# SPDX-License-Identifier: GPL-3.0-or-later
"""ray_work's verdicts on the work rayfleet.work reads (faked): report it, refuse naming it, wait for it to end."""

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import ray_work
from conftest import run_module as run
from rayfleet.work import Actor, Work

BUSY = Work(node_ip="10.0.0.11", actors=[Actor(actor_id="ab" * 8, name="ps", class_name="Trainer",
                                               job_id="02000000", node_ip="10.0.0.11")])


@pytest.fixture
def readings(monkeypatch):
    seen = {"calls": [], "readings": []}

    def read(address, node_ip="", node_name=None, timeout=10, auth_token_path=None):
        seen["calls"].append((address, node_ip))
        return seen["readings"].pop(0) if len(seen["readings"]) > 1 else seen["readings"][0]

    monkeypatch.setattr(ray_work, "read_work", read)
    monkeypatch.setattr("time.sleep", lambda s: None)
    return seen


def test_report_returns_the_work_and_refuse_fails_naming_it(readings):
    readings["readings"] = [BUSY]
    out = run(ray_work, {"gcs_address": "10.0.0.10:6379", "node_ip": "10.0.0.11"})
    assert not out.failed and not out.result["idle"] and out.result["actors"][0]["name"] == "ps"
    out = run(ray_work, {"gcs_address": "10.0.0.10:6379", "node_ip": "10.0.0.11", "running_work": "refuse",
                         "reason": "the kernel upgrade", "hint": "Drain it first."})
    assert out.failed
    assert out.result["msg"] == (
        "not going on with the kernel upgrade: it would end running work on node 10.0.0.11: actor Trainer 'ps' of "
        "job 02000000 on 10.0.0.11. Nothing was changed. Drain it first.")
    assert readings["calls"][-1] == ("10.0.0.10:6379", "10.0.0.11")


def test_wait_goes_on_once_the_work_ended_and_idle_refuses_nothing(readings):
    readings["readings"] = [BUSY, BUSY, Work()]
    out = run(ray_work, {"gcs_address": "10.0.0.10:6379", "running_work": "wait", "timeout": 600})
    assert not out.failed and out.result["idle"] and len(readings["calls"]) == 3
    readings["readings"] = [Work()]
    assert not run(ray_work, {"gcs_address": "10.0.0.10:6379", "running_work": "refuse"}).failed


def test_the_cluster_or_the_hosts_settings_files_one_of_them(readings):
    out = run(ray_work, {"running_work": "refuse"})
    assert out.failed and "one of the following is required: gcs_address, settings" in out.result["msg"]
    out = run(ray_work, {"gcs_address": "10.0.0.10:6379", "settings": ["/etc/rayfleet/ray*.json"]})
    assert out.failed and "mutually exclusive" in out.result["msg"]
