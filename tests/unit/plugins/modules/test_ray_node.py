# SPDX-License-Identifier: GPL-3.0-or-later
"""ray_node's decisions (write, start, restart, nothing) with systemd and Ray's state API faked."""

import json

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import ray_node
from conftest import run_module as run
from rayfleet.work import Job, Work


class FakeSystemd:
    """systemctl with one unit: records actions; a (re)start gives the node a new Ray node id."""

    active = False
    actions: list = []

    def __init__(self, module):
        pass

    def is_active(self, unit):
        return FakeSystemd.active

    def action(self, verb, unit):
        FakeSystemd.actions.append((verb, unit))
        FakeSystemd.active = verb != "stop"
        if verb in ("start", "restart"):
            FakeCluster.generation += 1


class FakeCluster:
    generation = 0
    cpus = 2.0
    addresses: list = []
    node_name = ""

    @classmethod
    def fetcher(cls, address, timeout=10):
        cls.addresses.append(address)

        def fetch():
            if not FakeSystemd.active:
                raise ConnectionError("connection refused")
            return [{"node_id": f"node-{cls.generation}", "node_ip": "10.0.0.10", "node_name": cls.node_name,
                     "state": "ALIVE",
                     "is_head_node": True, "resources_total": {"CPU": cls.cpus, "node:10.0.0.10": 1.0},
                     "start_time_ms": cls.generation}]
        return fetch


class FakeWork:
    """The running work rayfleet.work reads: each read takes the next of ``readings`` (the last one repeats; none:
    idle), and records the scope it was asked for."""

    readings: list = []
    calls: list = []
    warnings: list = []

    @classmethod
    def read(cls, address, node_ip="", node_name=None, timeout=10, auth_token_path=None):
        cls.calls.append((address, node_ip))
        if not cls.readings:
            return Work(node_ip=node_ip)
        return cls.readings.pop(0) if len(cls.readings) > 1 else cls.readings[0]


TRAINING = Work(jobs=[Job(job_id="02000000", submission_id="train-7", entrypoint="python train.py",
                          driver_ip="10.0.0.10")])


@pytest.fixture
def node_env(tmp_path, monkeypatch):
    ray_bin = tmp_path / "ray"
    ray_bin.write_text("#!/bin/sh\n")
    ray_bin.chmod(0o755)
    FakeSystemd.active, FakeSystemd.actions = False, []
    FakeCluster.generation, FakeCluster.cpus, FakeCluster.addresses, FakeCluster.node_name = 0, 2.0, [], ""
    monkeypatch.setattr(ray_node, "Systemd", FakeSystemd)
    monkeypatch.setattr(ray_node, "systemd_is_init", lambda: True)
    monkeypatch.setattr(ray_node, "gcs_fetcher", FakeCluster.fetcher)
    monkeypatch.setattr(ray_node.time, "sleep", lambda s: None)
    FakeWork.readings, FakeWork.calls, FakeWork.warnings = [], [], []
    monkeypatch.setattr(ray_node, "read_work", FakeWork.read)
    monkeypatch.setattr(ray_node.AnsibleModule, "warn", lambda self, text: FakeWork.warnings.append(text))
    base = {"role": "head", "node_ip": "10.0.0.10", "ray_bin": str(ray_bin), "num_cpus": 2,
            "config_path": str(tmp_path / "ray-head.json"), "wait_timeout": 5}
    return base, tmp_path / "ray-head.json"


def test_first_run_writes_settings_and_starts(node_env):
    args, config = node_env
    out = run(ray_node, args)
    assert not out.failed, out.result
    assert out.result["changed"] and out.result["action"] == "started"
    assert out.result["node_id"] == "node-1"
    assert out.result["resources"] == {"CPU": 2.0}
    assert FakeSystemd.actions == [("start", "ray-head.service")]
    assert json.loads(config.read_text())["num_cpus"] == 2
    # checked in the GCS node table, not through the dashboard (which may listen on the head's loopback only)
    assert set(FakeCluster.addresses) == {"10.0.0.10:6379"} and out.result["gcs_address"] == "10.0.0.10:6379"


def test_rerun_with_same_settings_touches_nothing(node_env):
    args, config = node_env
    run(ray_node, args)
    mtime = config.stat().st_mtime_ns
    out = run(ray_node, args)
    assert not out.failed and not out.result["changed"] and out.result["action"] == "none"
    assert FakeSystemd.actions == [("start", "ray-head.service")]
    assert config.stat().st_mtime_ns == mtime
    assert out.result["node_id"] == "node-1"


def test_changed_setting_restarts_and_waits_for_a_new_node(node_env):
    args, _config = node_env
    run(ray_node, args)
    FakeCluster.cpus = 4.0
    out = run(ray_node, {**args, "num_cpus": 4})
    assert not out.failed, out.result
    assert out.result["action"] == "restarted" and out.result["changed_keys"] == ["num_cpus"]
    assert out.result["node_id"] == "node-2"
    assert FakeSystemd.actions[-1] == ("restart", "ray-head.service")


def test_a_new_link_check_is_written_for_the_next_start_and_restarts_nothing(node_env):
    args, config = node_env
    run(ray_node, args)
    out = run(ray_node, {**args, "link_check": {"ratio": 0.3, "bytes": 4194304}})
    assert not out.failed, out.result
    assert out.result["changed"] and out.result["action"] == "none" and out.result["changed_keys"] == ["link_check"]
    assert FakeSystemd.actions == [("start", "ray-head.service")] and out.result["node_id"] == "node-1"
    assert json.loads(config.read_text())["link_check"] == {
        "bytes": 4194304, "iters": 5, "min_busbw_gbps": None, "ratio": 0.3, "timeout_s": 60.0, "warmup": 2}
    out = run(ray_node, {**args, "link_check": {"ratio": 0.3, "bytes": 4194304}})
    assert not out.result["changed"]
    bad = run(ray_node, {**args, "link_check": {"ratio": 2.0}})
    assert bad.failed and "link_check.ratio: expected a number >= 0 and <= 1, got 2.0" in bad.result["msg"]


def test_check_mode_shows_diff_and_changes_nothing(node_env):
    args, config = node_env
    run(ray_node, args)
    out = run(ray_node, {**args, "num_cpus": 4, "ports": {"dashboard": 9265}}, check_mode=True, diff=True)
    assert out.result["changed"] and out.result["action"] == "restarted"
    assert out.result["changed_keys"] == ["num_cpus", "ports.dashboard"]
    assert '"num_cpus": 2' in out.result["diff"]["before"] and '"num_cpus": 4' in out.result["diff"]["after"]
    assert json.loads(config.read_text())["num_cpus"] == 2
    assert FakeSystemd.actions == [("start", "ray-head.service")]


def test_bad_port_fails_before_anything_changes(node_env):
    args, config = node_env
    out = run(ray_node, {**args, "ports": {"gcs": 70000}})
    assert out.failed
    assert out.result["msg"] == "ray_node (head): ports.gcs: expected a port 1-65535, got 70000"
    assert not config.exists() and FakeSystemd.actions == []


def test_unresolvable_head_address_fails_before_anything_changes(node_env):
    args, config = node_env
    worker = {**args, "role": "worker", "head_address": "no-such-head.invalid",
              "config_path": str(config.with_name("ray-worker.json"))}
    out = run(ray_node, worker)
    assert out.failed
    assert "head_address: host 'no-such-head.invalid' does not resolve" in out.result["msg"]
    assert not config.with_name("ray-worker.json").exists() and FakeSystemd.actions == []


def test_node_registering_with_wrong_resources_fails_naming_them(node_env, monkeypatch):
    args, _config = node_env
    clock = iter(range(0, 1000, 3))
    monkeypatch.setattr(ray_node.time, "monotonic", lambda: next(clock))
    out = run(ray_node, {**args, "num_cpus": 4})
    assert out.failed
    assert "did not register alive within 5 s" in out.result["msg"]
    assert "resources differ (name: wanted, found): CPU: 4, 2" in out.result["msg"]
    assert "journalctl -u ray-head" in out.result["msg"]


def test_node_registering_without_its_labels_fails_naming_them(node_env, monkeypatch):
    args, _config = node_env
    clock = iter(range(0, 1000, 3))
    monkeypatch.setattr(ray_node.time, "monotonic", lambda: next(clock))
    out = run(ray_node, {**args, "labels": {"market": "spot"}})
    assert out.failed
    assert "labels differ (key: wanted, found): market: spot, None" in out.result["msg"]


def test_a_bad_label_fails_before_anything_changes(node_env):
    args, config = node_env
    out = run(ray_node, {**args, "labels": {"ray.io/node-id": "x"}})
    assert out.failed
    assert "labels.ray.io/node-id: the prefixes ray.io/, rayfleet.io/ are reserved" in out.result["msg"]
    assert not config.exists() and FakeSystemd.actions == []


def test_stopped_stops_an_active_node(node_env):
    args, _config = node_env
    run(ray_node, args)
    out = run(ray_node, {"role": "head", "state": "stopped", "config_path": args["config_path"]})
    assert out.result["changed"] and out.result["action"] == "stopped"
    assert FakeSystemd.actions[-1] == ("stop", "ray-head.service")
    out = run(ray_node, {"role": "head", "state": "stopped", "config_path": args["config_path"]})
    assert not out.result["changed"]


def _worker(tmp_path, monkeypatch, listed):
    """A worker whose unit is active; the GCS lists it alive only when listed() is true."""
    def fetcher(address, timeout=10):
        def fetch():
            nodes = [{"node_id": "head", "node_ip": "10.0.0.10", "state": "ALIVE", "is_head_node": True,
                      "resources_total": {}}]
            if listed():
                nodes.append({"node_id": f"w-{FakeCluster.generation}", "node_ip": "10.0.0.11", "state": "ALIVE",
                              "resources_total": {}})
            return nodes
        return fetch
    monkeypatch.setattr(ray_node, "gcs_fetcher", fetcher)
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(ray_node.time, "monotonic", lambda: next(clock))
    ray_bin = tmp_path / "ray"
    return {"role": "worker", "node_ip": "10.0.0.11", "head_address": "10.0.0.10:6379", "ray_bin": str(ray_bin),
            "config_path": str(tmp_path / "ray-worker.json"), "wait_timeout": 60}


def test_worker_with_a_dead_raylet_is_restarted(node_env, tmp_path, monkeypatch):
    alive = {"raylet": True}
    args = _worker(tmp_path, monkeypatch, lambda: alive["raylet"])
    assert not run(ray_node, args).failed
    alive["raylet"] = False  # the raylet exited (a drain), the unit still runs
    FakeSystemd.actions.clear()
    orig = FakeSystemd.action

    def restart(self, verb, unit):
        orig(self, verb, unit)
        alive["raylet"] = True
    monkeypatch.setattr(FakeSystemd, "action", restart)
    out = run(ray_node, args)
    assert not out.failed, out.result
    assert out.result["action"] == "restarted" and "did not list this node alive" in out.result["restart_reason"]
    assert FakeSystemd.actions == [("restart", "ray-worker.service")]


def test_worker_is_not_restarted_when_the_head_does_not_answer(node_env, tmp_path, monkeypatch):
    args = _worker(tmp_path, monkeypatch, lambda: True)
    assert not run(ray_node, args).failed
    FakeSystemd.actions.clear()

    def down(address, timeout=10):
        def fetch():
            raise ConnectionError("connection refused")
        return fetch
    monkeypatch.setattr(ray_node, "gcs_fetcher", down)
    out = run(ray_node, args)
    assert out.failed and "did not register alive" in out.result["msg"]
    assert FakeSystemd.actions == [], "no restart without Ray's word that the node is gone"


def test_a_node_instance_waits_for_its_own_name_not_its_hosts_ip(node_env):
    """One of a host's several nodes (ray_node_instances) is started with --node-name <ip>/<instance> and waits
    for Ray to list that name: another node of the same IP does not count."""
    base, path = node_env
    FakeCluster.node_name = "10.0.0.10/gpu1"
    out = run(ray_node, dict(base, node_name="10.0.0.10/gpu1"))
    assert not out.failed, out.result.get("msg")
    assert "--node-name=10.0.0.10/gpu1" in out.result["ray_start_args"]
    assert json.loads(path.read_text())["node_name"] == "10.0.0.10/gpu1"
    FakeCluster.node_name = "10.0.0.10/gpu0"
    bad = run(ray_node, dict(base, node_name="10.0.0.10/gpu1", state="restarted"))
    assert bad.failed and "no alive node named 10.0.0.10/gpu1 is registered" in bad.result["msg"]


def test_a_node_refused_at_admission_fails_at_once_with_the_reasons(node_env, tmp_path, monkeypatch):
    """The unit's admission checks refuse the node (its record, written after the start, says why): the module
    fails naming them instead of waiting out wait_timeout; a refusal from before this start is no verdict on it."""
    from rayfleet import admission

    args, _config = node_env
    record = {"ok": False, "timestamp": 0.0, "checks": [
        {"name": "gpu", "ok": False, "reason": "the node is given 1 GPU(s) (num_gpus), but NVML not available"}]}
    args = dict(args, temp_dir=str(tmp_path / "raytmp"), wait_timeout=1)

    class Refusing(FakeSystemd):
        def action(self, verb, unit):
            FakeSystemd.actions.append((verb, unit))
            admission.write_record(tmp_path / "raytmp" / admission.RECORD_NAME, dict(record, timestamp=1e12))

    monkeypatch.setattr(ray_node, "Systemd", Refusing)
    out = run(ray_node, args)
    assert out.failed
    assert out.result["msg"].startswith("Ray head on 10.0.0.10 was refused at admission and did not start: gpu: the "
                                        "node is given 1 GPU(s) (num_gpus), but NVML not available. Its record: "
                                        f"{tmp_path}/raytmp/rayfleet-admission.json")

    # an old refusal (before this start) is not taken for this start's: the wait runs its course
    monkeypatch.setattr(ray_node, "Systemd", FakeSystemd)
    admission.write_record(tmp_path / "raytmp" / admission.RECORD_NAME, record)
    out = run(ray_node, args)
    assert not out.failed, out.result


def test_a_restart_that_would_end_running_jobs_is_refused_before_anything_changes(node_env):
    """On the head a restart ends the cluster's jobs: the module reads them (the cluster's scope), fails naming them
    and leaves the settings file and the running node as they were."""
    args, config = node_env
    run(ray_node, args)
    before = config.read_text()
    FakeWork.readings = [TRAINING]
    out = run(ray_node, {**args, "num_cpus": 4})
    assert out.failed
    assert out.result["msg"].startswith(
        "ray_node (head) on 10.0.0.10: not restarting Ray (num_cpus changed): it would end running work on the "
        "cluster (a head restart ends every job): job train-7 ('python train.py' on 10.0.0.10).")
    assert "ray_restart_running_jobs=true" in out.result["msg"] and "ray_restart_wait_s" in out.result["msg"]
    assert out.result["running_work"]["jobs"][0]["submission_id"] == "train-7"
    assert FakeSystemd.actions == [("start", "ray-head.service")] and config.read_text() == before
    assert FakeWork.calls == [("10.0.0.10:6379", "")]


def test_a_refused_restart_for_a_new_ray_is_kept_and_done_by_the_next_run(node_env, tmp_path):
    """A restart the role asks for (a new Ray in the venv: nothing in the settings file shows it) refused for running
    work is kept beside the settings file; a later run with nothing new to say restarts the node then."""
    args, _config = node_env
    run(ray_node, args)
    FakeWork.readings = [TRAINING]
    out = run(ray_node, {**args, "restart_reasons": ["Ray 2.61.0 installed in its venv"]})
    assert out.failed and "not restarting Ray (Ray 2.61.0 installed in its venv)" in out.result["msg"]
    pending = tmp_path / "ray-head.json.restart-pending"
    assert json.loads(pending.read_text()) == ["Ray 2.61.0 installed in its venv"]
    FakeWork.readings = []
    out = run(ray_node, args)
    assert not out.failed, out.result
    assert out.result["action"] == "restarted"
    assert out.result["restart_reason"] == "kept from an earlier run: Ray 2.61.0 installed in its venv"
    assert not pending.exists() and FakeSystemd.actions[-1] == ("restart", "ray-head.service")
    assert not run(ray_node, args).result["changed"]


def test_running_work_restart_restarts_and_reports_what_ended(node_env):
    args, _config = node_env
    run(ray_node, args)
    FakeWork.readings, FakeCluster.cpus = [TRAINING], 4.0
    out = run(ray_node, {**args, "num_cpus": 4, "running_work": "restart"})
    assert not out.failed, out.result
    assert out.result["action"] == "restarted" and out.result["lost_work"]["jobs"][0]["job_id"] == "02000000"
    assert FakeWork.warnings == ["restarting Ray on 10.0.0.10 ended running work: job train-7 ('python train.py' on "
                                 "10.0.0.10)"]


def test_running_work_wait_restarts_once_the_work_ended_and_refuses_after_the_timeout(node_env, monkeypatch):
    args, _config = node_env
    run(ray_node, args)
    FakeWork.readings, FakeCluster.cpus = [TRAINING, TRAINING, Work(node_ip="10.0.0.10")], 4.0
    out = run(ray_node, {**args, "num_cpus": 4, "running_work": "wait", "running_work_timeout": 600})
    assert not out.failed, out.result
    assert out.result["action"] == "restarted" and "lost_work" not in out.result and len(FakeWork.calls) == 3

    clock = iter(range(0, 100_000, 100))
    monkeypatch.setattr("rayfleet.work.time.monotonic", lambda: next(clock))
    monkeypatch.setattr("rayfleet.work.time.sleep", lambda s: None)
    FakeWork.readings = [TRAINING]
    out = run(ray_node, {**args, "num_cpus": 8, "running_work": "wait", "running_work_timeout": 300})
    assert out.failed and "It was still running after 300 s." in out.result["msg"]


def test_a_worker_reads_only_its_own_node_and_check_mode_warns(node_env, tmp_path, monkeypatch):
    args = _worker(tmp_path, monkeypatch, lambda: True)
    assert not run(ray_node, args).failed
    FakeWork.calls.clear()
    FakeWork.readings = [Work(node_ip="10.0.0.11", held={"CPU": 2.0})]
    out = run(ray_node, {**args, "state": "restarted"}, check_mode=True)
    assert not out.failed and out.result["action"] == "restarted"
    assert FakeWork.calls == [("10.0.0.10:6379", "10.0.0.11")]
    assert FakeWork.warnings == ["restarting Ray on 10.0.0.11 would end running work: tasks holding 2 CPU on "
                                 "10.0.0.11"]
    out = run(ray_node, {**args, "state": "restarted"})
    assert out.failed and "not restarting Ray (state=restarted): it would end running work on this node" in out.result[
        "msg"]


def test_a_held_worker_is_not_restarted_and_says_why_it_would_have_been(node_env, tmp_path, monkeypatch):
    """A worker of a head that failed in this run (hold_restart) keeps running: a changed setting, or a raylet Ray
    no longer lists, is named with the hold and nothing changes; one with nothing to restart goes on."""
    alive = {"raylet": True}
    args = _worker(tmp_path, monkeypatch, lambda: alive["raylet"])
    assert not run(ray_node, args).failed
    FakeSystemd.actions.clear()
    hold = "the head h1 failed or refused its own restart in this run"
    assert not run(ray_node, {**args, "hold_restart": hold}).failed
    out = run(ray_node, {**args, "num_cpus": 3, "hold_restart": hold})
    assert out.failed and out.result["msg"] == (
        f"ray_node (worker) on 10.0.0.11: not restarting Ray (num_cpus changed) now: {hold}. Nothing on this node was "
        "changed.")
    alive["raylet"] = False
    out = run(ray_node, {**args, "hold_restart": hold})
    assert out.failed and "not restarting Ray (the unit was active but Ray did not list this node alive" in out.result[
        "msg"]
    assert FakeSystemd.actions == [] and FakeWork.calls == []
