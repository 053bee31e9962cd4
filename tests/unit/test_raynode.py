# SPDX-License-Identifier: GPL-3.0-or-later
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rayfleet.errors import SettingsError
from rayfleet.raynode import (
    RayNodeSettings,
    RayPorts,
    _children,
    load_settings,
    main,
    settings_diff,
    split_address,
)

LIB = Path(__file__).resolve().parents[2] / "library_py"

HEAD = {"role": "head", "node_ip": "10.0.0.10", "ray_bin": "/opt/ray/bin/ray"}
WORKER = {"role": "worker", "node_ip": "10.0.0.11", "ray_bin": "/opt/ray/bin/ray", "head_address": "10.0.0.10"}


def test_head_start_args_pin_every_port():
    args = RayNodeSettings.from_mapping({**HEAD, "num_cpus": 8, "resources": {"accel": 2}}).start_args()
    assert args[:3] == ["/opt/ray/bin/ray", "start", "--head"]
    for flag in ("--port=6379", "--ray-client-server-port=10001", "--dashboard-port=8265",
                 "--dashboard-host=10.0.0.10", "--object-manager-port=8076", "--node-manager-port=8077",
                 "--dashboard-agent-grpc-port=8078", "--dashboard-agent-listen-port=52365",
                 "--runtime-env-agent-port=8079", "--metrics-export-port=8080", "--min-worker-port=10002",
                 "--max-worker-port=11999", "--node-ip-address=10.0.0.10", "--disable-usage-stats",
                 "--num-cpus=8", '--resources={"accel":2}'):
        assert flag in args
    assert args[-1] == "--block"


def test_worker_gets_default_gcs_port_and_no_head_flags():
    settings = RayNodeSettings.from_mapping(WORKER)
    assert settings.head_address == "10.0.0.10:6379"
    args = settings.start_args(block=False)
    assert "--address=10.0.0.10:6379" in args
    assert "--head" not in args and "--block" not in args
    assert settings.dashboard_url == "http://10.0.0.10:8265"
    assert settings.gcs_address == "10.0.0.10:6379"  # what its membership checks read: no dashboard needed


def test_ipv6_head_address():
    host, port = split_address("[fd00::1]:7000", 6379)
    assert (host, port) == ("fd00::1", 7000)
    settings = RayNodeSettings.from_mapping({**WORKER, "node_ip": "fd00::2", "head_address": "[fd00::1]"})
    assert settings.dashboard_url == "http://[fd00::1]:8265"
    assert settings.gcs_address == "[fd00::1]:6379"
    head = RayNodeSettings.from_mapping({k: v for k, v in {**WORKER, "role": "head", "node_ip": "fd00::1"}.items()
                                         if k != "head_address"})
    assert head.gcs_address == "[fd00::1]:6379"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"role": "boss"}, "role: expected one of ['head', 'worker'], got 'boss'"),
        ({"node_ip": "not-an-ip"}, "node_ip: expected this node's IP address, got 'not-an-ip'"),
        ({"ray_bin": "ray"}, "ray_bin: expected an absolute path"),
        ({"ports": {"gcs": "sixty"}}, "ports.gcs: expected an integer port 1-65535, got 'sixty'"),
        ({"ports": {"gcs": 70000}}, "ports.gcs: expected a port 1-65535, got 70000"),
        ({"ports": {"dashboard": 6379}}, "ports.dashboard and ports.gcs are both 6379"),
        ({"ports": {"gcs": 10500}}, "ports.gcs (10500) lies inside the worker port range 10002-11999"),
        ({"ports": {"min_worker": 12000, "max_worker": 11000}}, "must not exceed ports.max_worker"),
        ({"ports": {"gcs_port": 1}}, "ports: unknown key(s) ['gcs_port']"),
        ({"num_cpus": "lots"}, "num_cpus: expected an integer, got 'lots'"),
        ({"num_gpus": -1}, "num_gpus: expected >= 0"),
        ({"object_store_memory": 1024}, "object_store_memory: Ray needs at least 78643200 bytes"),
        ({"resources": {"GPU": 1}}, "resources.GPU: set num_cpus/num_gpus/object_store_memory instead"),
        ({"resources": ["a"]}, "resources: expected a mapping"),
        ({"labels": ["spot"]}, "labels: expected a mapping of label key to value"),
        ({"labels": {"-market": "spot"}}, "labels.-market: expected a label key, [prefix/]name"),
        ({"labels": {"Example.com/pool": "a"}}, "labels.Example.com/pool: expected a label key"),
        ({"labels": {"x" * 64: "a"}}, "expected a label key"),
        ({"labels": {"ray.io/node-id": "n1"}}, "labels.ray.io/node-id: the prefixes ray.io/, rayfleet.io/ are "
                                               "reserved"),
        ({"labels": {"rayfleet.io/admission": "passed"}}, "labels.rayfleet.io/admission: the prefixes"),
        ({"labels": {"market": "on demand"}}, "labels.market: expected a value of at most 63 characters"),
        ({"labels": {"market": True}}, "labels.market: expected a text value, got True"),
        ({"temp_dir": "ray-tmp"}, "temp_dir: expected an absolute path"),
        ({"head_address": "10.0.0.10"}, "head_address: only workers take a head address"),
    ],
)
def test_bad_head_settings_name_the_setting(change, message):
    with pytest.raises(SettingsError) as err:
        RayNodeSettings.from_mapping({**HEAD, **change})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("address", "message"),
    [(None, "a worker needs the head's address"), ("", "a worker needs the head's address"),
     ("10.0.0.10:http", "port 'http'"), ("10.0.0.10:0", "port '0'")],
)
def test_bad_worker_head_address(address, message):
    with pytest.raises(SettingsError, match="head_address") as err:
        RayNodeSettings.from_mapping({**WORKER, "head_address": address})
    assert message in str(err.value)


def test_settings_round_trip_through_file(tmp_path):
    settings = RayNodeSettings.from_mapping({**WORKER, "env": {"NCCL_DEBUG": "WARN"}, "num_gpus": 1})
    path = tmp_path / "ray-worker.json"
    path.write_text(settings.to_json())
    assert load_settings(path) == settings
    assert json.loads(path.read_text())["version"] == 1


def test_load_settings_errors_name_the_file(tmp_path):
    with pytest.raises(SettingsError, match="settings file missing"):
        load_settings(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(SettingsError, match=r"bad.json: not valid JSON"):
        load_settings(bad)


def test_settings_diff_reports_nested_keys():
    before = RayNodeSettings.from_mapping(HEAD).to_dict()
    after = RayNodeSettings.from_mapping({**HEAD, "ports": {"dashboard": 9265}, "num_cpus": 4}).to_dict()
    assert settings_diff(before, after) == {"num_cpus": (None, 4), "ports.dashboard": (8265, 9265)}
    assert settings_diff(after, after) == {}
    assert "role" in settings_diff(None, after)


def test_json_is_canonical_so_reordering_input_changes_nothing():
    a = RayNodeSettings.from_mapping({**HEAD, "resources": {"b": 1, "a": 2}, "env": {"Y": "1", "X": "2"}})
    b = RayNodeSettings.from_mapping({**HEAD, "env": {"X": "2", "Y": "1"}, "resources": {"a": 2, "b": 1}})
    assert a.to_json() == b.to_json()


def test_expected_resources_and_env():
    settings = RayNodeSettings.from_mapping({**HEAD, "num_cpus": 2, "num_gpus": 1, "resources": {"x": 0.5},
                                             "env": {"RAY_USAGE_STATS_ENABLED": "1", "A": 1}})
    assert settings.expected_resources() == {"CPU": 2.0, "GPU": 1.0, "x": 0.5}
    env = settings.process_env({"PATH": "/bin"})
    assert env == {"PATH": "/bin", "RAY_USAGE_STATS_ENABLED": "1", "A": "1"}


def test_default_ports_are_valid_and_distinct():
    RayPorts().validate()


def test_cli_args_and_bad_config(tmp_path, capsys):
    path = tmp_path / "ray-head.json"
    path.write_text(RayNodeSettings.from_mapping(HEAD).to_json())
    assert main(["args", "--config", str(path)]) == 0
    assert capsys.readouterr().out.startswith("/opt/ray/bin/ray start --head --port=6379")
    assert main(["args", "--config", str(tmp_path / "none.json")]) == 2
    assert "settings file missing" in capsys.readouterr().err


def test_token_auth_env_and_its_validation():
    settings = RayNodeSettings.from_mapping({**WORKER, "auth_token_path": "/etc/rayfleet/auth-token"})
    env = settings.process_env({})
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == "/etc/rayfleet/auth-token"
    assert "RAY_AUTH_MODE" not in RayNodeSettings.from_mapping(WORKER).process_env({})
    assert "auth-token" in settings.to_json() and settings.to_dict()["auth_token_path"] == "/etc/rayfleet/auth-token"
    with pytest.raises(SettingsError, match="auth_token_path: expected an absolute path"):
        RayNodeSettings.from_mapping({**WORKER, "auth_token_path": "token.txt"})
    with pytest.raises(SettingsError, match=r"env.RAY_AUTH_TOKEN: set auth_token_path instead"):
        RayNodeSettings.from_mapping({**WORKER, "env": {"RAY_AUTH_TOKEN": "secret"}})


def test_a_container_runs_the_images_ray_found_on_path(tmp_path, capsys, monkeypatch):
    path = tmp_path / "ray-head.json"
    path.write_text(json.dumps(HEAD))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ray").write_text("#!/bin/sh\n")
    (bindir / "ray").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    assert main(["args", "--config", str(path), "--ray-bin", "ray"]) == 0
    assert capsys.readouterr().out.startswith(f"{bindir}/ray start --head")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["args", "--config", str(path), "--ray-bin", "ray"]) == 2
    assert "--ray-bin ray: not found on PATH" in capsys.readouterr().err


# The unit's main process: Ray as a child of a subreaper (python -m rayfleet.raynode exec), tried on a fake Ray 2.60:
# "ray start" drains on SIGTERM (it stops its raylet, which takes 1 s, then exits 1), and the raylet has an "agent"
# that ignores SIGTERM, as Ray's dashboard agent was seen to once its raylet was gone.
FAKE_RAY = r"""
import ctypes, os, signal, sys, time
def name(n):
    ctypes.CDLL(None).prctl(15, n.encode(), 0, 0, 0)  # PR_SET_NAME: what /proc/<pid>/stat shows
raylet = os.fork()
if raylet == 0:
    name("raylet")
    agent = os.fork()
    if agent == 0:
        name("agent")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(sys.argv[1], "w").write(str(os.getpid()))
        time.sleep(60)
        os._exit(0)
    def drain(*_):
        time.sleep(1)  # the running task finishes
        open(sys.argv[1] + ".drained", "w").close()
        os._exit(0)
    signal.signal(signal.SIGTERM, drain)
    time.sleep(60)
    os._exit(0)
def stop(*_):
    if os.path.exists(sys.argv[1] + ".stop-signals"):  # a second stop signal: the drain is not started twice
        open(sys.argv[1] + ".stop-signals", "a").write("again\n")
        return
    open(sys.argv[1] + ".stop-signals", "w").write("once\n")
    os.kill(raylet, signal.SIGTERM)
    os.waitpid(raylet, 0)
    os._exit(1)  # Ray's status after its SIGTERM shutdown
signal.signal(signal.SIGTERM, stop)
if sys.argv[2] == "die":
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    os.kill(raylet, signal.SIGKILL)  # as `ray start --block` does when its raylet exited, then exits 1
    os.waitpid(raylet, 0)
    os._exit(1)
while True:
    time.sleep(60)
"""


def _supervised(tmp_path, mode: str, wrap: tuple[str, ...] = ()) -> tuple[subprocess.Popen, int]:
    script = tmp_path / "fake_ray.py"
    script.write_text(FAKE_RAY)
    pidfile = tmp_path / "agent.pid"
    code = ("import sys; from rayfleet.raynode import run_supervised; sys.exit(run_supervised("
            f"[sys.executable, {str(script)!r}, {str(pidfile)!r}, {mode!r}], {{}}, stop_grace_s=0.5))")
    with (tmp_path / "out.log").open("w") as out:  # a file: a process left running would hold a pipe open
        proc = subprocess.Popen([*wrap, sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(LIB)},
                                stdout=out, start_new_session=True)
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, int(pidfile.read_text())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux only")


@linux_only
def test_ray_exiting_by_itself_takes_what_it_left_behind(tmp_path):
    proc, agent = _supervised(tmp_path, "die")
    try:
        proc.wait(timeout=15)
        out = (tmp_path / "out.log").read_text()
        assert proc.returncode == 1  # Ray's own status (the unit's SuccessExitStatus=1), not the supervisor's
        assert not _alive(agent), "the agent the raylet left behind is still running"
        assert f"Ray exited by itself; killed what was left: agent ({agent})" in out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _stop_drains(tmp_path, proc: subprocess.Popen, main_pid: int) -> None:
    start = time.monotonic()
    os.kill(main_pid, signal.SIGTERM)  # the main process only: KillMode=mixed, or `podman stop` to PID 1
    proc.wait(timeout=15)
    took = time.monotonic() - start
    out = (tmp_path / "out.log").read_text()
    assert (tmp_path / "agent.pid.drained").exists(), "the raylet did not drain"
    assert (tmp_path / "agent.pid.stop-signals").read_text() == "once\n", "Ray got the stop signal twice"
    assert proc.returncode == 1, out  # Ray's status after its SIGTERM shutdown: a stop (SuccessExitStatus=1)
    assert took >= 1.4, f"returned after {took:.2f} s: before the raylet's 1 s drain + 0.5 s grace"
    assert "outlived the raylet by 0.5 s; killed what was left: agent" in out


@linux_only
def test_a_stop_goes_to_ray_which_drains_then_what_outlives_the_raylet_ends(tmp_path):
    proc, agent = _supervised(tmp_path, "run")
    try:
        _stop_drains(tmp_path, proc, proc.pid)
        assert not _alive(agent)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@linux_only
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a PID namespace needs root and unshare")
def test_as_pid_1_of_a_container_a_stop_drains_too(tmp_path):
    """`podman stop` signals the container's PID 1 (a process that ignores signals it has no handler for)."""
    proc, _agent = _supervised(tmp_path, "run", ("unshare", "--pid", "--fork", "--mount-proc"))
    try:
        (supervisor, _name), = _children(proc.pid)  # PID 1 in the new namespace
        _stop_drains(tmp_path, proc, supervisor)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_children_are_read_from_proc_stat(tmp_path):
    for pid, text in {"10": "10 (ray::Dashboard Agent) S 7 10 10", "11": "11 (odd) name)) R 7 1 1",
                      "12": "12 (raylet) S 3 12 12", "self": "x"}.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "stat").write_text(text)
    assert _children(7, tmp_path) == [(10, "ray::Dashboard Agent"), (11, "odd) name)")]


def test_labels_are_text_sorted_and_a_change_restarts_the_node():
    """Ray's node labels: numbers are taken as text, an empty value is allowed, the file and --labels are sorted;
    a label is part of the settings, so a change is a difference that restarts the node."""
    a = RayNodeSettings.from_mapping({**HEAD, "labels": {"zone": "b", "gen": 3, "example.com/spare": ""}})
    assert a.labels == {"example.com/spare": "", "gen": "3", "zone": "b"}
    assert "--labels=example.com/spare=,gen=3,zone=b" in a.start_args()
    b = RayNodeSettings.from_mapping({**HEAD, "labels": {"zone": "c", "gen": "3", "example.com/spare": ""}})
    assert settings_diff(a.to_dict(), b.to_dict()) == {"labels.zone": ("b", "c")}
