# SPDX-License-Identifier: GPL-3.0-or-later
"""converge_lock: the module on a real lock file (taken, held, busy, taken over, released, check mode), and the
action's view of the holder - a real process of this machine that is alive, one that has ended, a pid used again -
and the lock taken in the drift check's round trip on the head, with the waiting and the take-over after it."""

import json
import os
import socket
import subprocess
import sys

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import converge_lock, drift_check
from ansible_collections.rayfleet.cluster.plugins.plugin_utils import converge_lock as action
from conftest import run_module as run


def owner(run_id, **extra):
    return {"run": run_id, "user": "ops", "controller": "ctl", "pid": 1, "started": "2026-12-06T12:00:00Z", **extra}


def test_a_free_lock_is_taken_and_names_its_owner(tmp_path):
    path = tmp_path / "lock" / "converge.lock"
    out = run(converge_lock, {"path": str(path), "owner": owner("a")})
    assert not out.failed and out.result["lock"] == "taken" and not out.result["changed"]
    assert json.loads(path.read_text())["run"] == "a" and json.loads(path.read_text())["user"] == "ops"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    again = run(converge_lock, {"path": str(path), "owner": owner("a")})
    assert again.result["lock"] == "held" and not again.result["changed"]


def test_a_held_lock_is_busy_for_another_run_and_names_the_holder(tmp_path):
    path = tmp_path / "converge.lock"
    run(converge_lock, {"path": str(path), "owner": owner("a")})
    out = run(converge_lock, {"path": str(path), "owner": owner("b")})
    assert out.result["lock"] == "busy" and not out.result["changed"]
    assert out.result["owner"]["run"] == "a" and out.result["owner"]["age_s"] >= 0
    assert json.loads(path.read_text())["run"] == "a"


def test_take_over_replaces_only_the_run_it_names(tmp_path):
    path = tmp_path / "converge.lock"
    run(converge_lock, {"path": str(path), "owner": owner("a")})
    wrong = run(converge_lock, {"path": str(path), "owner": owner("b"), "take_over": "z"})
    assert wrong.result["lock"] == "busy" and json.loads(path.read_text())["run"] == "a"
    out = run(converge_lock, {"path": str(path), "owner": owner("b"), "take_over": "a", "reason": "it died"})
    assert out.result["lock"] == "taken_over" and not out.result["changed"]
    assert out.result["replaced"]["run"] == "a" and out.result["replaced"]["reason"] == "it died"
    assert json.loads(path.read_text())["run"] == "b"
    assert not list(tmp_path.glob("*.tmp"))


def test_release_gives_back_only_this_runs_lock(tmp_path):
    path = tmp_path / "converge.lock"
    run(converge_lock, {"path": str(path), "owner": owner("a")})
    other = run(converge_lock, {"path": str(path), "owner": owner("b"), "state": "absent"})
    assert other.result["lock"] == "not_held" and not other.result["changed"] and path.exists()
    mine = run(converge_lock, {"path": str(path), "owner": owner("a"), "state": "absent"})
    assert mine.result["lock"] == "released" and not mine.result["changed"] and not path.exists()
    gone = run(converge_lock, {"path": str(path), "owner": owner("a"), "state": "absent"})
    assert gone.result["lock"] == "not_held" and not gone.result["changed"]


def test_check_mode_writes_nothing(tmp_path):
    path = tmp_path / "converge.lock"
    out = run(converge_lock, {"path": str(path), "owner": owner("a")}, check_mode=True)
    assert out.result["lock"] == "taken" and not path.exists()
    run(converge_lock, {"path": str(path), "owner": owner("a")})
    kept = run(converge_lock, {"path": str(path), "owner": owner("a"), "state": "absent"}, check_mode=True)
    assert kept.result["lock"] == "released" and path.exists()


def test_a_file_that_is_no_lock_names_no_run(tmp_path):
    path = tmp_path / "converge.lock"
    path.write_text("garbage")
    out = run(converge_lock, {"path": str(path), "owner": owner("a")})
    assert out.result["lock"] == "busy" and out.result["owner"]["unreadable"] == "garbage"
    taken = run(converge_lock, {"path": str(path), "owner": owner("a"), "take_over": ""})
    assert taken.result["lock"] == "taken_over"


def test_an_owner_without_a_run_is_refused(tmp_path):
    out = run(converge_lock, {"path": str(tmp_path / "l"), "owner": {"user": "ops"}})
    assert out.failed and "owner.run is empty" in out.result["msg"]


def test_this_run_names_the_ansible_playbook_process():
    me = action.this_run()
    assert me["pid"] == os.getppid() and me["controller"] == socket.gethostname()
    assert me["run"] == f"{me['controller']}:{me['pid']}:{action.process_start(me['pid'])}"
    assert me["run"].split(":")[2], "the process's start time is read from /proc"


def test_a_holder_on_this_controller_is_gone_only_when_its_process_is():
    controller = socket.gethostname()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        alive = {"controller": controller, "pid": child.pid,
                 "run": f"{controller}:{child.pid}:{action.process_start(child.pid)}"}
        assert action.gone(alive, controller) == ""
        # the same pid, another start time: a newer process took the pid
        assert "newer process" in action.gone({**alive, "run": alive["run"] + "0"}, controller)
        # on another controller its process cannot be seen: never judged gone here
        assert action.gone(alive, controller + "-other") == ""
    finally:
        child.kill()
        child.wait()
    assert "is gone" in action.gone(alive, controller)


def test_the_drift_check_takes_the_lock_in_its_own_round_trip(tmp_path):
    path = tmp_path / "converge.lock"
    args = {"stages": ["ray"], "directory": str(tmp_path / "records"), "image_directory": str(tmp_path / "i"),
            "lock_path": str(path)}
    out = run(drift_check, {**args, "lock_owner": owner("a")})
    assert not out.failed and out.result["lock"]["lock"] == "taken" and json.loads(path.read_text())["run"] == "a"
    assert out.result["stages"]["ray"]["recorded"] is False, "the comparison ran in the same call"
    busy = run(drift_check, {**args, "lock_owner": owner("b")})
    assert busy.result["lock"]["lock"] == "busy" and busy.result["lock"]["owner"]["run"] == "a"
    assert json.loads(path.read_text())["run"] == "a"
    plain = run(drift_check, args)
    assert "lock" not in plain.result, "no lock is asked for where lock_owner is not given (the workers)"


class FakeHead:
    """The converge_lock module on a real file, as the action runs it on the head."""

    def __init__(self, path):
        self.path = path
        self.calls = []

    def __call__(self, module_args):
        self.calls.append(dict(module_args))
        args = {key: value for key, value in module_args.items() if key not in ("wait", "stale_after")}
        out = run(converge_lock, args | {"path": str(self.path)})
        return dict(out.result)


class Warnings(list):
    def warning(self, msg):
        self.append(msg)


def test_acquire_takes_over_a_dead_runs_lock_named_by_the_first_attempt(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    controller = socket.gethostname()
    path = tmp_path / "converge.lock"
    stale = {"run": f"{controller}:{dead.pid}:1", "user": "ops", "controller": controller, "pid": dead.pid,
             "started": "2026-12-06T00:00:00Z"}
    path.write_text(json.dumps(stale))
    head, shown = FakeHead(path), Warnings()
    acquire = action.Acquire(head, shown, "head")
    first = run(drift_check, {"stages": [], "directory": str(tmp_path / "r"), "lock_path": str(path),
                              "lock_owner": acquire.owner}).result["lock"]
    assert first["lock"] == "busy"
    taken = acquire(found=first)
    assert taken["lock"] == "taken_over" and json.loads(path.read_text())["run"] == acquire.owner["run"]
    assert len(head.calls) == 1 and head.calls[0]["take_over"] == stale["run"], "the first attempt was not repeated"
    assert any("Took over the converge lock of ops on" in msg and "is gone" in msg for msg in shown), shown


def test_acquire_refuses_a_live_holder_naming_it_and_waits_when_told(tmp_path, monkeypatch):
    path = tmp_path / "converge.lock"
    other = {"run": "elsewhere:42:7", "user": "alice", "controller": "ctl-elsewhere", "pid": 42,
             "started": "2026-12-06T00:00:00Z"}
    path.write_text(json.dumps(other))
    head = FakeHead(path)
    refused = action.Acquire(head, Warnings(), "head")(wait=0)
    assert refused["failed"] and "alice on ctl-elsewhere (ansible-playbook pid 42" in refused["msg"]
    assert "rayfleet_lock_wait" in refused["msg"] and json.loads(path.read_text())["run"] == other["run"]
    # told to wait: the holder gives the lock back while this run sleeps between two asks
    monkeypatch.setattr(action.time, "sleep", lambda seconds: path.unlink())
    acquire = action.Acquire(head, Warnings(), "head")
    taken = acquire(wait=60)
    assert taken["lock"] == "taken" and json.loads(path.read_text())["run"] == acquire.owner["run"]
    path.write_text(json.dumps(other))
    broken = action.Acquire(head, Warnings(), "head")(break_lock=True)
    assert broken["lock"] == "taken_over" and broken["replaced"]["reason"] == "rayfleet_lock_break is true"


def test_lock_options_name_the_variables():
    assert action.lock_options("30", "600", "yes") == (30, 600, True)
    with pytest.raises(ValueError, match="rayfleet_lock_wait"):
        action.lock_options("soon", 600, False)
