# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.admission with fake NVML readings and a fake head: what refuses a node before its Ray starts, what gives
no verdict yet (the head does not answer), what the admission file and the health metric get, and how
rayfleet.raynode exec acts on each exit status."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from rayfleet import admission, health, raynode
from rayfleet.admission import FAILED, NOT_APPLICABLE, OK, Check, Environment, HeadUnreachable
from rayfleet.gpu import Gpu, NvmlReport
from rayfleet.raynode import RayNodeSettings

MINE = {"ray": "2.60.0", "python": "3.11.2", "library": "a" * 64}


def settings(role="worker", tmp=None, **extra) -> RayNodeSettings:
    data = {"role": role, "node_ip": "10.0.0.5", "ray_bin": "/opt/rayfleet/venv/bin/ray", **extra}
    if tmp is not None:
        data["temp_dir"] = str(tmp)
    if role == "worker":
        data["head_address"] = "10.0.0.1:6379"
    return RayNodeSettings.from_mapping(data)


def gpu(index=0, **extra) -> Gpu:
    return Gpu(index=index, uuid=f"GPU-{index}", name="NVIDIA H100 80GB HBM3", pci_bus_id=f"00000000:1{index}:00.0",
               pcie_width=16, pcie_max_width=16, ecc_enabled=True, ecc_uncorrected_volatile=0, **extra)


def env(report=None, head=None, storage=None, link=None, slept=None) -> Environment:
    def head_versions(_settings):
        found = head.pop(0) if isinstance(head, list) else head
        if isinstance(found, Exception):
            raise found
        return found if found is not None else dict(MINE)

    return Environment(
        read_gpus=lambda: ("nvidia", report or NvmlReport(False, "NVML not available: no NVIDIA driver")),
        dcgm=lambda _vendor, _report: Check("dcgm", NOT_APPLICABLE, "DCGM is not installed on this host"),
        nccl=lambda _config, _vendor, _report: Check("nccl", NOT_APPLICABLE, "no NVIDIA GPU on this host"),
        storage=lambda: storage or Check("storage", NOT_APPLICABLE, "no shared storage is configured on this host"),
        versions=lambda: dict(MINE), head_versions=head_versions,
        link=link or (lambda _settings: (Check("link", NOT_APPLICABLE, "turned off (link_check: null)"), {})),
        now=lambda: 1_800_000_000.0, sleep=(slept if slept is not None else []).append)


def checks(record) -> dict[str, dict]:
    return {c["name"]: c for c in record["checks"]}


def test_a_cpu_node_matching_its_head_is_admitted():
    record = admission.admit("/etc/rayfleet/ray-worker.json", settings(), env())
    assert record["ok"] is True and record["node"] == "10.0.0.5" and record["role"] == "worker"
    found = checks(record)
    assert list(found) == ["gpu", "dcgm", "nccl", "storage", "versions", "link"]
    assert found["gpu"]["state"] == NOT_APPLICABLE
    assert found["versions"]["state"] == OK
    assert "Ray 2.60.0, Python 3.11.2 as on the head" in found["versions"]["reason"]
    assert record["time"] == "2027-01-15T08:00:00Z" and record["versions"] == MINE


def test_a_node_given_gpus_on_a_host_without_them_is_refused():
    record = admission.admit("/c", settings(num_gpus=1), env())
    assert record["ok"] is False
    gpu_check = checks(record)["gpu"]
    assert gpu_check["state"] == FAILED
    assert gpu_check["reason"] == "the node is given 1 GPU(s) (num_gpus), but NVML not available: no NVIDIA driver"
    assert admission.failures(record) == [f"gpu: {gpu_check['reason']}"]


def test_fewer_gpus_than_given_and_a_sick_gpu_are_named():
    report = NvmlReport(True, driver_version="570.1", gpus=[gpu(0), gpu(1, remap_pending=True)])
    found = admission.gpu_check(settings(num_gpus=4), "nvidia", report)
    assert found.state == FAILED
    assert found.reason.startswith("nvidia sees 2 GPU(s), the node is given 4 (num_gpus); ")
    assert "GPU 1 (GPU-1, 00000000:11:00.0): row remapping pending" in found.reason
    # a node instance given some of the host's GPUs: more on the host is fine
    assert admission.gpu_check(settings(num_gpus=1), "nvidia", NvmlReport(True, gpus=[gpu(0), gpu(1)])).state == OK


def test_a_worker_with_another_ray_or_library_than_the_head_is_refused():
    head = {"ray": "2.59.0", "python": "3.11.2", "library": "b" * 64}
    found = checks(admission.admit("/c", settings(), env(head=head)))["versions"]
    assert found["state"] == FAILED
    assert found["reason"].startswith("Ray 2.60.0 here, 2.59.0 on the head; node library aaaaaaaaaaaa here, "
                                      "bbbbbbbbbbbb on the head")


def test_a_head_that_published_no_library_digest_checks_ray_and_python_only():
    slept = []
    found = checks(admission.admit("/c", settings(), env(head={"ray": "2.60.0", "python": "3.11.2",
                                                               "library": None}, slept=slept)))["versions"]
    assert found["state"] == OK and found["reason"].endswith("the head published no node library digest")
    # it asked again, once a second, before it gave up on the digest
    assert slept == [1.0] * admission.LIBRARY_WAIT_TRIES


def test_a_worker_starting_with_its_head_waits_for_the_head_to_publish_its_library():
    unpublished = {"ray": "2.60.0", "python": "3.11.2", "library": None}
    slept = []
    found = checks(admission.admit("/c", settings(), env(head=[unpublished, unpublished, {
        "ray": "2.60.0", "python": "3.11.2", "library": "b" * 64}], slept=slept)))["versions"]
    assert slept == [1.0, 1.0]
    assert found["state"] == FAILED and "bbbbbbbbbbbb on the head" in found["reason"]


def test_the_head_is_its_own_reference_and_needs_no_gcs():
    record = admission.admit("/c", settings(role="head"), env(head=HeadUnreachable("no head")))
    assert record["ok"] and checks(record)["versions"]["state"] == NOT_APPLICABLE


def test_a_head_that_does_not_answer_gives_no_verdict():
    with pytest.raises(HeadUnreachable):
        admission.admit("/c", settings(), env(head=HeadUnreachable("the head's GCS at 10.0.0.1:6379 does not answer")))


def test_a_storage_server_that_does_not_answer_is_the_clusters_fault_not_the_nodes(monkeypatch):
    from rayfleet import storage

    config = storage.StorageConfig(mounts=(storage.Mount("/mnt/shared", "10.0.0.1", "/srv/shared", "nfs"),),
                                   user="rayfleet", timeout=1.0, port=2049, kernel_client=True)
    monkeypatch.setattr(storage, "load_config", lambda: config)
    monkeypatch.setattr(storage, "tcp_reachable", lambda server, port, timeout: (False, f"{server}:{port}: refused"))
    found = admission.storage_check()
    assert found.state == NOT_APPLICABLE
    assert found.reason.startswith("/mnt/shared: the shared storage's server does not answer (10.0.0.1:2049: "
                                   "refused): the cluster's storage is down, not this node")


def test_storage_failure_refuses_the_node():
    bad = Check("storage", FAILED, "/mnt/shared: not writable by rayfleet: Permission denied")
    record = admission.admit("/c", settings(), env(storage=bad))
    assert record["ok"] is False and admission.failures(record) == [f"storage: {bad.reason}"]


def test_the_library_digest_follows_the_files(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    first = admission.library_digest(tmp_path)
    (tmp_path / "notes.txt").write_text("not code")
    assert admission.library_digest(tmp_path) == first
    (tmp_path / "a.py").write_text("x = 2\n")
    assert admission.library_digest(tmp_path) != first
    assert len(admission.library_digest()) == 64


def test_main_records_the_verdict_and_exits_refused(tmp_path, monkeypatch, capsys):
    config = tmp_path / "ray-worker.json"
    config.write_text(settings(tmp=tmp_path / "ray", num_gpus=2).to_json())
    monkeypatch.setattr(admission, "Environment", env)
    assert admission.main(["--config", str(config)]) == admission.REFUSED
    record = json.loads((tmp_path / "ray" / admission.RECORD_NAME).read_text())
    assert record["ok"] is False and record["config"] == str(config)
    out, err = capsys.readouterr()
    assert "10.0.0.5 (worker): REFUSED" in out and "  gpu: failed - the node is given 2 GPU(s)" in out
    assert "rayfleet.admission: 10.0.0.5 refused: gpu: the node is given 2 GPU(s)" in err
    assert stat.S_IMODE((tmp_path / "ray" / admission.RECORD_NAME).stat().st_mode) == 0o644


def test_main_without_an_answer_from_the_head_exits_unreachable_and_records_nothing(tmp_path, monkeypatch, capsys):
    config = tmp_path / "ray-worker.json"
    config.write_text(settings(tmp=tmp_path / "ray").to_json())
    monkeypatch.setattr(admission, "Environment", lambda: env(head=HeadUnreachable("the head's GCS does not answer")))
    assert admission.main(["--config", str(config)]) == admission.UNREACHABLE
    assert not (tmp_path / "ray" / admission.RECORD_NAME).exists()
    assert "no verdict yet, the unit tries again" in capsys.readouterr().err


def test_publish_is_the_heads_and_gives_up_unreachable(monkeypatch):
    with pytest.raises(admission.RayfleetError, match="only the head publishes"):
        admission.publish(settings())

    def unreachable(_settings):
        raise HeadUnreachable("no GCS yet")

    monkeypatch.setattr(admission, "_gcs_client", unreachable)
    with pytest.raises(HeadUnreachable, match=r"could not publish the node library at 10\.0\.0\.5:6379 in 0 s"):
        admission.publish(settings(role="head"), wait_s=0, sleep=lambda _s: None)

    class Client:
        def __init__(self):
            self.puts = []

        def internal_kv_put(self, key, value, overwrite, namespace, timeout):
            self.puts.append((key, json.loads(value)["digest"], overwrite, namespace))

    client = Client()
    monkeypatch.setattr(admission, "_gcs_client", lambda _s: client)
    assert admission.publish(settings(role="head"), wait_s=0).startswith("published the node library digest")
    assert client.puts == [(b"node_library", admission.library_digest(), True, b"rayfleet")]


def _stub_python(tmp_path: Path, code: int) -> str:
    stub = tmp_path / f"python-{code}"
    stub.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\nexit {code}\n")
    stub.chmod(0o755)
    return str(stub)


@pytest.mark.parametrize(("code", "want"), [(0, None), (3, 3), (75, 1), (2, 1)])
def test_raynode_exec_starts_ray_only_after_admission_passed(tmp_path, code, want):
    assert raynode.admit("/etc/rayfleet/ray-worker.json", python=_stub_python(tmp_path, code)) == want
    assert (tmp_path / "args").read_text().split() == ["-m", "rayfleet.admission", "--config",
                                                       "/etc/rayfleet/ray-worker.json"]


def test_the_health_metric_carries_the_admission_record(tmp_path):
    me = settings(tmp=tmp_path)
    admission.write_record(tmp_path / admission.RECORD_NAME,
                           admission.admit("/c", me, env(storage=Check("storage", FAILED, "not mounted"))))
    short = health.read_admission(me)
    assert short["ok"] is False and short["timestamp"] == 1_800_000_000.0
    state = {"cluster": "default", "timestamp": 1.0,
             "nodes": [{"name": "10.0.0.5", "checks": [], "drained": None, "admission": short}]}
    text = health.textfile(state)
    assert 'rayfleet_admission_ok{check="storage",node="10.0.0.5",rayfleet_cluster="default"} 0' in text
    assert 'rayfleet_admission_ok{check="gpu",node="10.0.0.5",rayfleet_cluster="default"} 1' in text
    assert 'rayfleet_admission_timestamp_seconds{node="10.0.0.5",rayfleet_cluster="default"} 1800000000.0' in text
    assert health.read_admission(settings(tmp=tmp_path / "none")) is None


@pytest.mark.parametrize(("extra", "admit_code", "want_code", "label"), [
    ([], None, 0, True), ([], 3, 3, None), (["--no-admission"], 3, 0, False)])
def test_raynode_exec_labels_an_admitted_node_and_starts_none_refused(tmp_path, monkeypatch, extra, admit_code,
                                                                      want_code, label):
    config = tmp_path / "ray-worker.json"
    config.write_text(settings(tmp=tmp_path / "ray").to_json())
    started = []
    monkeypatch.setattr(raynode, "admit", lambda _config: admit_code)
    monkeypatch.setattr(raynode, "run_supervised", lambda argv, env, after_start=None: started.append(argv) or 0)
    assert raynode.main(["exec", "--config", str(config), *extra]) == want_code
    if label is None:
        assert started == []
    else:
        assert ("--labels=rayfleet.io/admission=passed" in started[0]) is label


def test_a_worker_whose_link_check_fails_is_refused_and_its_figures_are_recorded():
    figures = {"peer": "10.0.0.7", "busbw_gbps": 0.01, "reference_gbps": 1.2, "floor_gbps": 0.36}

    def failing(_settings):
        return Check("link", FAILED, "all-reduce with 10.0.0.7 at 4 MiB: 0.010 GB/s"), figures

    record = admission.admit("/c", settings(), env(link=failing))
    assert record["ok"] is False and record["link"] == figures
    assert admission.failures(record) == ["link: all-reduce with 10.0.0.7 at 4 MiB: 0.010 GB/s"]


def test_the_link_is_not_tested_on_a_node_refused_on_its_other_checks():
    def never(_settings):
        raise AssertionError("the link check ran on a refused node")

    record = admission.admit("/c", settings(num_gpus=1), env(link=never))
    assert record["ok"] is False
    assert checks(record)["link"] == {"name": "link", "ok": True, "state": NOT_APPLICABLE,
                                      "reason": "not run: the node is refused on the checks above"}


def test_a_client_server_that_does_not_answer_gives_no_verdict(monkeypatch):
    from rayfleet import link

    def unreachable(_settings):
        raise link.Unreachable("the cluster's Ray client server at ray://10.0.0.1:10001 does not answer")

    monkeypatch.setattr(link, "check", unreachable)
    with pytest.raises(HeadUnreachable, match="client server"):
        admission.link_check(settings())
