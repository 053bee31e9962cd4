# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.health with a fake cluster, fake NVML readings and real scripts: what passes, fails or does not apply,
when a node is drained (once, with the reason), when it is brought back (only what this check drained), and what
the state file and the textfile collector get."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from rayfleet import health
from rayfleet.gpu import Gpu, NvmlReport, XidEvent
from rayfleet.health import FAILED, NOT_APPLICABLE, OK, CheckResult, Environment, Node, Options
from rayfleet.raynode import RayNodeSettings

HEAD = "10.0.0.1"


def settings(ip="10.0.0.5", role="worker", **extra) -> RayNodeSettings:
    data = {"role": role, "node_ip": ip, "ray_bin": "/opt/rayfleet/venv/bin/ray", **extra}
    if role == "worker":
        data["head_address"] = HEAD
    return RayNodeSettings.from_mapping(data)


def node(ip="10.0.0.5", unit="ray-worker.service", config="/nonexistent/ray-worker.json", **extra) -> Node:
    return Node(config, unit, settings(ip, **extra))


def gpu(index=0, **extra) -> Gpu:
    return Gpu(index=index, uuid=f"GPU-{index}", name="NVIDIA H100 80GB HBM3", pci_bus_id=f"00000000:1{index}:00.0",
               pcie_width=16, pcie_max_width=16, ecc_enabled=True, ecc_uncorrected_volatile=0, **extra)


class FakeCluster:
    """A GCS node table that drains and restarts the way Ray 2.60 does for an idle node: a drained node leaves the
    cluster (DEAD, with the drain's message), and a restarted unit joins again with a new node id."""

    def __init__(self, *names: str):
        self.nodes: list[dict] = []
        self.drains: list[tuple[str, str]] = []
        self.restarts: list[str] = []
        self.units: dict[str, str] = {}  # unit -> node name
        self.active: set[str] = set()
        self.serial = 0
        for name in names:
            self.join(name)

    def join(self, name: str, gpus: float = 0.0, head: bool = False) -> str:
        self.serial += 1
        node_id = f"{self.serial:02d}" * 28
        self.nodes.append({"node_id": node_id, "node_name": name, "node_ip": name.partition("/")[0],
                           "state": "ALIVE", "is_head_node": head, "resources_total": {"CPU": 2.0, "GPU": gpus},
                           "start_time_ms": self.serial, "draining": False})
        return node_id

    def by_id(self, node_id: str) -> dict:
        return next(n for n in self.nodes if n["node_id"] == node_id)

    def alive_id(self, name: str) -> str | None:
        return next((n["node_id"] for n in self.nodes if n["node_name"] == name and n["state"] == "ALIVE"), None)

    def drain(self, _settings, node_id: str, message: str, busy: bool = False) -> tuple[bool, str]:
        self.drains.append((node_id, message))
        entry = self.by_id(node_id)
        if busy:
            entry["draining"] = True
        else:
            entry.update(state="DEAD", death_reason="AUTOSCALER_DRAIN_PREEMPTED", death_reason_message=message)
        return True, ""

    def restart(self, unit: str) -> tuple[bool, str]:
        self.restarts.append(unit)
        name = self.units[unit]
        for entry in self.nodes:
            if entry["node_name"] == name and entry["state"] == "ALIVE":
                entry["state"] = "DEAD"
        self.join(name)
        return True, ""

    def env(self, report=None, storage=None, xids=None, run_script=None) -> Environment:
        return Environment(
            read_gpus=lambda: ("nvidia", report or NvmlReport(False, "no NVIDIA driver on this host")),
            read_xids=lambda: (list(xids or []), ""),
            ray_nodes=lambda _s: [dict(n) for n in self.nodes],
            drain=self.drain, restart=self.restart,
            unit_active=lambda unit: unit in self.active,
            storage=lambda: storage or CheckResult("storage", NOT_APPLICABLE, "no shared storage"),
            run_script=run_script or health.run_script,
            boot_id=lambda: "boot-1", admission=lambda _s: None, now=lambda: 1_800_000_000.0)


@pytest.fixture()
def cluster():
    c = FakeCluster("10.0.0.5", "10.0.0.6")
    c.units = {"ray-worker.service": "10.0.0.5"}
    c.active = {"ray-worker.service"}
    return c


def opts(tmp_path: Path, **extra) -> Options:
    (tmp_path / "health.d").mkdir(exist_ok=True)
    return Options(health_dir=tmp_path / "health.d", script_timeout=extra.pop("script_timeout", 5.0), **extra)


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / "health.d" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def checks(state: dict, index: int = 0) -> dict[str, tuple[str, str]]:
    return {c["name"]: (c["state"], c["reason"]) for c in state["nodes"][index]["checks"]}


def test_a_healthy_cpu_node_passes_with_gpu_and_storage_not_applicable(tmp_path, cluster):
    state = health.run([node()], opts(tmp_path), cluster.env(), None)
    found = checks(state)
    assert found["gpu"] == (NOT_APPLICABLE, "no NVIDIA driver on this host")
    assert found["storage"][0] == NOT_APPLICABLE
    assert found["raylet"] == (OK, f"node {'01' * 6} alive")
    assert state["ok"] and state["nodes"][0]["ok"] and state["nodes"][0]["node_id"] == "01" * 28
    assert cluster.drains == [] and cluster.restarts == []


def test_no_nvml_where_ray_was_given_gpus_fails():
    report = NvmlReport(False, "the NVIDIA kernel module is not loaded")
    result = health.gpu_check(node(num_gpus=2), "nvidia", report, None, assigned=None, fresh_xids=[])
    assert result.state == FAILED and "Ray was given 2 GPU(s)" in result.reason and "not loaded" in result.reason


@pytest.mark.parametrize(("bad_gpu", "words"), [
    ({"ecc_uncorrected_volatile": 3}, "3 uncorrected ECC error(s)"),
    ({"remap_pending": True}, "row remapping pending"),
    ({"pcie_width": 8}, "PCIe link x8 of x16"),
])
def test_the_preflights_gpu_findings_fail_the_gpu_check(bad_gpu, words):
    report = NvmlReport(True, driver_version="570.1", gpus=[gpu(0), Gpu(**{**gpu(1).__dict__, **bad_gpu})])
    ray = health.RayNode("ab", "10.0.0.5", alive=True, gpus=2.0)
    result = health.gpu_check(node(), "nvidia", report, ray, assigned=None, fresh_xids=[])
    assert result.state == FAILED and words in result.reason and "GPU 1 (GPU-1" in result.reason


def test_ray_counting_other_gpus_than_nvml_fails_and_a_match_passes():
    report = NvmlReport(True, driver_version="570.1", gpus=[gpu(0), gpu(1)])
    one = health.gpu_check(node(), "nvidia", report, health.RayNode("ab", "n", True, gpus=1.0), assigned=None,
                           fresh_xids=[])
    assert one.state == FAILED and "Ray reports 1 GPU(s) on this node, NVML 2" in one.reason
    two = health.gpu_check(node(), "nvidia", report, health.RayNode("ab", "n", True, gpus=2.0), assigned=None,
                           fresh_xids=[])
    assert two.state == OK and two.reason == "nvidia 2 GPU(s), Ray 2"


def test_a_container_node_is_checked_on_its_own_gpus(tmp_path):
    config = tmp_path / "ray-worker-gpu1.json"
    (tmp_path / "ray-worker-gpu1.container.json").write_text(json.dumps({"gpus": ["GPU-1"]}))
    me = Node(str(config), "ray-worker-gpu1.service", settings(node_name="10.0.0.5/gpu1"))
    assert health.assigned_gpus(me) == ["GPU-1"]
    report = NvmlReport(True, gpus=[gpu(0, remap_pending=True), gpu(1)])
    ray = health.RayNode("ab", "10.0.0.5/gpu1", True, gpus=1.0)
    assert health.gpu_check(me, "nvidia", report, ray, assigned=["GPU-1"], fresh_xids=[]).state == OK
    lost = health.gpu_check(me, "nvidia", NvmlReport(True, gpus=[gpu(0)]), ray, assigned=["GPU-1"], fresh_xids=[])
    assert lost.state == FAILED and "GPU(s) GPU-1 given to this node are not listed by NVML" in lost.reason


def test_only_new_hardware_xids_fail_and_accepting_them_clears_the_check(tmp_path, cluster):
    report = NvmlReport(True, gpus=[gpu(0)])
    cluster.nodes[0]["resources_total"]["GPU"] = 1.0
    old = XidEvent("0000:10:00", 79, "GPU has fallen off the bus.")
    app = XidEvent("0000:10:00", 13, "Graphics Exception")
    first = health.run([node()], opts(tmp_path, drain=False), cluster.env(report, xids=[app]), None)
    assert checks(first)["gpu"][0] == OK, "an application Xid is no hardware fault"
    second = health.run([node()], opts(tmp_path, drain=False), cluster.env(report, xids=[app, old]), first)
    state, reason = checks(second)["gpu"]
    assert state == FAILED and "GPU 0 (GPU-0" in reason and "new Xid 79 (GPU has fallen off the bus)" in reason
    assert "--accept-xids" in reason
    still = health.run([node()], opts(tmp_path, drain=False), cluster.env(report, xids=[app, old]), second)
    assert checks(still)["gpu"][0] == FAILED, "a hardware Xid stays a failure until it is accepted"
    accepted = health.run([node()], opts(tmp_path, drain=False), cluster.env(report, xids=[app, old]), still,
                          accept_xids=True)
    assert checks(accepted)["gpu"][0] == OK and accepted["xids"] == {"boot_id": "boot-1", "known": {"0000:10:00|79": 1}}
    again = health.run([node()], opts(tmp_path, drain=False), cluster.env(report, xids=[app, old, old]), accepted)
    assert checks(again)["gpu"][0] == FAILED, "the same Xid once more is new"


def test_a_failing_check_drains_the_node_once_with_the_reason(tmp_path, cluster):
    script(tmp_path, "10-ib-port", "echo checking port 1\necho 'port 1: Down' >&2\nexit 3")
    first = health.run([node()], opts(tmp_path), cluster.env(), None)
    reason = "exit 3: checking port 1 | port 1: Down"
    assert checks(first)["script:10-ib-port"] == (FAILED, reason)
    node_id = "01" * 28
    assert cluster.drains == [(node_id, f"rayfleet health: script:10-ib-port: {reason}")]
    assert first["nodes"][0]["drained"]["node_id"] == node_id and not first["ok"]
    # Ray lets the idle drained node leave; the next runs see it gone and do not drain again
    second = health.run([node()], opts(tmp_path), cluster.env(), first)
    raylet = checks(second)["raylet"]
    assert raylet[0] == NOT_APPLICABLE and "after this check drained it" in raylet[1]
    assert checks(second)["script:10-ib-port"][0] == FAILED
    assert len(cluster.drains) == 1 and cluster.restarts == []
    assert second["nodes"][0]["drained"]["node_id"] == node_id and second["nodes"][0]["node_id"] is None


def test_a_busy_node_is_drained_once_and_restarted_only_after_its_work_is_done(tmp_path, cluster):
    script(tmp_path, "fail", "exit 1")
    env = cluster.env()
    env.drain = lambda s, i, m: cluster.drain(s, i, m, busy=True)
    first = health.run([node()], opts(tmp_path), env, None)
    second = health.run([node()], opts(tmp_path), env, first)
    assert len(cluster.drains) == 1
    assert checks(second)["raylet"] == (OK, f"node {'01' * 6} alive, draining (drained by this check)")
    (tmp_path / "health.d" / "fail").unlink()
    healthy = health.run([node()], opts(tmp_path), env, second)
    assert cluster.restarts == [] and "still runs the work it had" in healthy["nodes"][0]["action"]
    cluster.by_id("01" * 28)["state"] = "DEAD"  # its work done, it left
    back = health.run([node()], opts(tmp_path), env, healthy)
    assert cluster.restarts == ["ray-worker.service"] and back["nodes"][0]["drained"] is None


def test_recovery_restarts_only_the_unit_this_check_drained(tmp_path):
    cluster = FakeCluster("10.0.0.5/gpu0", "10.0.0.5/gpu1")
    cluster.units = {"ray-worker-gpu0.service": "10.0.0.5/gpu0", "ray-worker-gpu1.service": "10.0.0.5/gpu1"}
    cluster.active = set(cluster.units)
    mine = [Node(f"/nonexistent/ray-worker-{n}.json", f"ray-worker-{n}.service", settings(node_name=f"10.0.0.5/{n}"))
            for n in ("gpu0", "gpu1")]
    # gpu1 is drained by something else (the preemption watcher): it left the cluster
    cluster.drain(None, cluster.alive_id("10.0.0.5/gpu1"), "aws terminate notice")
    cluster.drains.clear()
    script(tmp_path, "fail", "exit 1")
    first = health.run(mine, opts(tmp_path), cluster.env(), None)
    assert [d[0] for d in cluster.drains] == ["01" * 28], "only the alive node is drained"
    assert checks(first, 1)["raylet"][0] == FAILED and "AUTOSCALER_DRAIN_PREEMPTED: aws terminate notice" in checks(
        first, 1)["raylet"][1]
    (tmp_path / "health.d" / "fail").unlink()
    second = health.run(mine, opts(tmp_path), cluster.env(), first)
    assert cluster.restarts == ["ray-worker-gpu0.service"]
    assert "restarted ray-worker-gpu0.service" in second["nodes"][0]["action"]
    assert second["nodes"][0]["restarted"]["drained_node_id"] == "01" * 28
    assert second["nodes"][0]["drained"] is None and second["nodes"][1]["action"] == ""
    third = health.run(mine, opts(tmp_path), cluster.env(), second)
    assert cluster.restarts == ["ray-worker-gpu0.service"], "restarted once"
    assert third["nodes"][0]["ok"] and third["nodes"][0]["node_id"] == cluster.alive_id("10.0.0.5/gpu0") != "01" * 28


def test_a_node_back_by_other_means_is_not_restarted_again(tmp_path, cluster):
    script(tmp_path, "fail", "exit 1")
    first = health.run([node()], opts(tmp_path), cluster.env(), None)
    cluster.join("10.0.0.5")  # site.yml restarted the unit meanwhile
    (tmp_path / "health.d" / "fail").unlink()
    second = health.run([node()], opts(tmp_path), cluster.env(), first)
    assert cluster.restarts == [] and second["nodes"][0]["drained"] is None
    assert "restarted by something else" in second["nodes"][0]["action"]


def test_the_head_and_stopped_units_are_never_drained_or_restarted(tmp_path, cluster):
    script(tmp_path, "fail", "exit 1")
    head = Node("/nonexistent/ray-head.json", "ray-head.service", settings(HEAD, role="head"))
    cluster.join(HEAD, head=True)
    cluster.active.add("ray-head.service")
    state = health.run([head], opts(tmp_path), cluster.env(), None)
    assert cluster.drains == [] and "the head is never drained" in state["nodes"][0]["action"]
    cluster.active.clear()
    stopped = health.run([node()], opts(tmp_path), cluster.env(), None)
    assert cluster.drains == [] and checks(stopped)["raylet"][0] == NOT_APPLICABLE
    assert "stopped on purpose" in checks(stopped)["raylet"][1]


def test_report_only_drains_nothing(tmp_path, cluster):
    script(tmp_path, "fail", "exit 1")
    state = health.run([node()], opts(tmp_path, drain=False), cluster.env(), None)
    assert cluster.drains == [] and "draining is off" in state["nodes"][0]["action"]


def test_a_cluster_that_cannot_be_read_fails_the_raylet_check_and_drains_nothing(tmp_path, cluster):
    env = cluster.env()

    def unreachable(_settings):
        raise OSError("connection refused")

    env.ray_nodes = unreachable
    state = health.run([node()], opts(tmp_path), env, None)
    assert checks(state)["raylet"] == (FAILED, f"cannot read the cluster's node table at {HEAD}:6379: connection "
                                               "refused")
    assert cluster.drains == []


def test_scripts_pass_fail_and_time_out(tmp_path):
    script(tmp_path, "a-ok", "echo fine")
    script(tmp_path, "b-slow", "echo started; sleep 30")
    script(tmp_path, "c-unsafe", "exit 0")
    script(tmp_path, ".hidden", "exit 1")
    script(tmp_path, "d.dpkg-old", "exit 1")
    (tmp_path / "health.d" / "e-not-executable").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "health.d" / "c-unsafe").chmod(0o777)
    found = {c.name: c for c in health.check_scripts(tmp_path / "health.d", 0.5, health.run_script)}
    assert sorted(found) == ["script:a-ok", "script:b-slow", "script:c-unsafe"]
    assert found["script:a-ok"] == CheckResult("script:a-ok", OK, "fine")
    assert found["script:b-slow"].state == FAILED
    assert found["script:b-slow"].reason == "no result in 0.5 s (killed): started"
    assert found["script:c-unsafe"].state == FAILED and "writable by its group or by others" in found[
        "script:c-unsafe"].reason


def test_scripts_run_side_by_side(tmp_path):
    for name in "abcd":
        script(tmp_path, name, "sleep 1")
    import time

    start = time.monotonic()
    results = health.check_scripts(tmp_path / "health.d", 10, health.run_script)
    assert [r.state for r in results] == [OK] * 4 and time.monotonic() - start < 3


def test_the_textfile_format(tmp_path, cluster):
    script(tmp_path, 'say "hi"', "exit 1")
    state = health.run([node()], opts(tmp_path, cluster="teamb"), cluster.env(), None)
    text = health.textfile(state)
    assert text.splitlines() == [
        "# HELP rayfleet_health_ok Whether a rayfleet health check passes on a Ray node (1: passed or not applicable "
        "here, 0: failed).",
        "# TYPE rayfleet_health_ok gauge",
        'rayfleet_health_ok{check="gpu",node="10.0.0.5",rayfleet_cluster="teamb"} 1',
        'rayfleet_health_ok{check="storage",node="10.0.0.5",rayfleet_cluster="teamb"} 1',
        'rayfleet_health_ok{check="raylet",node="10.0.0.5",rayfleet_cluster="teamb"} 1',
        'rayfleet_health_ok{check="script:say \\"hi\\"",node="10.0.0.5",rayfleet_cluster="teamb"} 0',
        "# HELP rayfleet_health_drained Whether the rayfleet health check has drained this Ray node (1) or not (0).",
        "# TYPE rayfleet_health_drained gauge",
        'rayfleet_health_drained{node="10.0.0.5",rayfleet_cluster="teamb"} 1',
        "# HELP rayfleet_health_last_run_timestamp_seconds When the rayfleet health check last ran (Unix time).",
        "# TYPE rayfleet_health_last_run_timestamp_seconds gauge",
        'rayfleet_health_last_run_timestamp_seconds{rayfleet_cluster="teamb"} 1800000000.0',
    ]


def test_main_writes_the_state_file_and_the_textfile_atomically(tmp_path, cluster, monkeypatch, capsys):
    config = tmp_path / "ray-worker.json"
    config.write_text(settings().to_json())
    script(tmp_path, "fail", "echo disk 97% full; exit 2")
    monkeypatch.setattr(health, "Environment", cluster.env)
    state_file, prom = tmp_path / "health.json", tmp_path / "prom"
    argv = ["--node", str(config), "ray-worker.service", "--dir", str(tmp_path / "health.d"), "--state",
            str(state_file), "--textfile-dir", str(prom), "--script-timeout", "5"]
    # without node exporter's textfile directory the checks still run and say so; no metric is written
    assert health.main(argv) == 1 and not prom.exists()
    assert f"no metrics written: {prom} (node exporter's textfile collector) does not exist" in capsys.readouterr().out
    prom.mkdir()
    assert health.main(argv) == 1
    state = json.loads(state_file.read_text())
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o644
    assert state["time"] == "2027-01-15T08:00:00Z" and state["ok"] is False and state["cluster"] == "default"
    entry = state["nodes"][0]
    assert (entry["name"], entry["unit"], entry["config"]) == ("10.0.0.5", "ray-worker.service", str(config))
    assert {"name": "script:fail", "ok": False, "state": FAILED, "reason": "exit 2: disk 97% full"} in entry["checks"]
    assert entry["drained"] == {"node_id": "01" * 28, "time": "2027-01-15T08:00:00Z",
                                "reason": "rayfleet health: script:fail: exit 2: disk 97% full"}
    assert sorted(os.listdir(prom)) == ["rayfleet-health.prom"], "no temporary file left behind"
    assert 'rayfleet_health_ok{check="script:fail",node="10.0.0.5",rayfleet_cluster="default"} 0' in (
        prom / "rayfleet-health.prom").read_text()
    assert "script:fail failed: exit 2: disk 97% full" in capsys.readouterr().out
    (tmp_path / "health.d" / "fail").unlink()
    assert health.main(argv) == 0 and cluster.restarts == ["ray-worker.service"]
    assert json.loads(state_file.read_text())["nodes"][0]["restarted"]["unit"] == "ray-worker.service"


def test_main_refuses_a_missing_settings_file(tmp_path):
    assert health.main(["--node", str(tmp_path / "none.json"), "ray-worker.service", "--state",
                        str(tmp_path / "h.json"), "--textfile-dir", ""]) == 2


def test_the_storage_check_reads_the_shared_storage_record(tmp_path, monkeypatch):
    from rayfleet import storage, storage_probe

    record = tmp_path / "shared-storage.json"
    monkeypatch.setattr(storage.load_config, "__defaults__", (str(record),))
    none = health.storage_check()
    assert none == CheckResult("storage", NOT_APPLICABLE, "no shared storage is configured on this host")
    record.write_text(json.dumps({"paths": ["/mnt/shared"]}))
    result = health.storage_check()
    assert result.state == NOT_APPLICABLE and "re-run the storage stage" in result.reason
    record.write_text(json.dumps({"paths": ["/mnt/x"], "mounts": [{"path": "/mnt/x", "server": "127.0.0.1"}],
                                  "timeout": 0.5, "kernel_client": True}))
    monkeypatch.setattr(storage, "read_mountinfo", dict)
    monkeypatch.setattr(storage_probe, "tcp_reachable", lambda *a: (False, "127.0.0.1:2049: refused"))
    assert health.storage_check() == CheckResult("storage", FAILED,
                                                 "/mnt/x: server unreachable (127.0.0.1:2049: refused)")
