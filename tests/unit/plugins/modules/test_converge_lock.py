# SPDX-License-Identifier: GPL-3.0-or-later
"""converge_lock: the module on a real lock file (taken, held, busy, taken over, released, check mode), and the
action's view of the holder - a real process of this machine that is alive, one that has ended, a pid used again."""

import json
import os
import socket
import subprocess
import sys

from ansible_collections.rayfleet.cluster.plugins.action import converge_lock as action
from ansible_collections.rayfleet.cluster.plugins.modules import converge_lock
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
