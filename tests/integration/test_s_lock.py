# SPDX-License-Identifier: GPL-3.0-or-later
"""One converge at a time: a site.yml started while another runs stops before it changes anything, naming the run
that holds the head's converge lock (user, controller, process); with rayfleet_lock_wait it waits for it instead.
Both leave the cluster converged: the run after them changes nothing, and no lock is left. A lock left by a run
that died is taken over - at once when its process on this controller is gone, after rayfleet_lock_stale_after
from another controller, at once with rayfleet_lock_break - and the run names the owner it replaced."""

from __future__ import annotations

import getpass
import json
import re
import socket
import subprocess
import sys
import time

from conftest import ROOT, SANDBOX, ansible_env, container, podman

testinfra_hosts = [f"ansible://{SANDBOX}-head"]
HEAD = f"{SANDBOX}-head"
LOCK = "/var/lib/rayfleet/converge.lock"
DRIFTED = "/etc/sysctl.d/60-rayfleet.conf"
BUSY = "Another run is converging this cluster"
LOCK_TASK = "Reach every host, and compare it with its stage records (facts, records, the head's converge lock)"


def start_site(*args: str) -> subprocess.Popen:
    return subprocess.Popen(["ansible-playbook", "site.yml", "-i", "inventories/sandbox", *args], cwd=ROOT,
                            env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    out = proc.communicate(timeout=300)[0]
    return proc.returncode, out


def lock_on_head() -> dict | None:
    text = podman("exec", container(HEAD), "sh", "-c", f"cat {LOCK} 2>/dev/null || :").strip()
    return json.loads(text) if text else None


def wait_for_lock(proc: subprocess.Popen) -> dict:
    """The head's lock once the run proc took it (the run must still be going)."""
    deadline = time.monotonic() + 120
    while (found := lock_on_head()) is None:
        assert proc.poll() is None, f"the first run ended before its lock was seen:\n{proc.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, "no converge lock on the head within 120 s"
        time.sleep(0.2)
    return found


def changed_counts(out: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", out, re.M)}


def put_lock(owner: dict, age_s: int = 0) -> None:
    text = json.dumps(owner)
    podman("exec", container(HEAD), "sh", "-c", f"mkdir -p /var/lib/rayfleet && printf '%s' '{text}' > {LOCK} && "
                                                f"touch -d '-{age_s} seconds' {LOCK}")


def plain_run_changes_nothing() -> None:
    rc, out = finish(start_site())
    assert rc == 0, out[-3000:]
    assert set(changed_counts(out).values()) == {0}, out[-3000:]
    assert lock_on_head() is None, "a run left its lock behind"


def test_a_second_run_stops_naming_the_first_and_the_cluster_stays_converged():
    # a file drifted on the head: the first run repairs it, so it holds the lock for a stage's run (seconds), not
    # only for the few of a run that changes nothing
    podman("exec", container(HEAD), "sh", "-c", f"echo '# edited by hand' >> {DRIFTED}")
    first = start_site()
    try:
        held = wait_for_lock(first)
        assert held["user"] == getpass.getuser() and held["controller"] == socket.gethostname(), held
        second_rc, second = finish(start_site())
    finally:
        first_rc, first_out = finish(first)
    assert first_rc == 0, first_out[-3000:]
    assert second_rc != 0, second[-3000:]
    assert BUSY in second, second[-3000:]
    assert f"{held['user']} on {held['controller']} (ansible-playbook pid {held['pid']}" in second, second[-3000:]
    # it stopped at the lock, in the drift check's round trip on the head: no play after it ran
    assert re.search(r"^fatal: \[[^]]*head\]", second, re.M), second[-3000:]
    assert "PLAY [Check every node's variables" not in second, second[-3000:]
    plain_run_changes_nothing()


def test_a_run_told_to_wait_takes_the_lock_when_the_holder_gives_it_back():
    # the holder: a live process of this controller (its run is not over), whose lock is given back after 8 s
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        controller = socket.gethostname()
        with open(f"/proc/{holder.pid}/stat", encoding="ascii") as handle:
            started = handle.read().rsplit(")", 1)[1].split()[19]
        put_lock({"run": f"{controller}:{holder.pid}:{started}", "user": "ops", "controller": controller,
                  "pid": holder.pid, "started": "2026-12-06T00:00:00Z"})
        waiter = start_site("-e", "rayfleet_lock_wait=240")
        time.sleep(8)
        assert waiter.poll() is None, f"the run did not wait for a live holder:\n{waiter.stdout.read()[-3000:]}"
        podman("exec", container(HEAD), "rm", "-f", LOCK)
        rc, out = finish(waiter)
    finally:
        holder.kill()
        holder.wait()
        podman("exec", container(HEAD), "rm", "-f", LOCK)
    assert rc == 0 and BUSY not in out, out[-3000:]
    assert set(changed_counts(out).values()) == {0}, out[-3000:]
    # the lock task's own time (profile_tasks): the drift check took the lock on the head, after waiting for the holder
    took = float(re.search(rf"^{re.escape(LOCK_TASK)} -+ ([0-9.]+)s", out, re.M).group(1))
    assert took >= 5, out[-3000:]
    assert lock_on_head() is None


def test_a_lock_left_by_a_run_that_died_is_taken_over_and_named():
    # a run of this controller whose ansible-playbook process has ended
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    controller = socket.gethostname()
    put_lock({"run": f"{controller}:{dead.pid}:1", "user": "ops", "controller": controller, "pid": dead.pid,
              "started": "2026-12-06T00:00:00Z"})
    rc, out = finish(start_site())
    assert rc == 0, out[-3000:]
    assert "Took over the converge lock of ops on" in out and "is gone" in out, out[-3000:]
    assert lock_on_head() is None


def test_another_controllers_lock_holds_until_it_is_stale_or_broken():
    other = {"run": "ctl-elsewhere:4242:77", "user": "alice", "controller": "ctl-elsewhere", "pid": 4242,
             "started": "2026-12-06T00:00:00Z"}
    try:
        put_lock(other)
        rc, out = finish(start_site())
        assert rc != 0 and BUSY in out and "alice on ctl-elsewhere (ansible-playbook pid 4242" in out, out[-3000:]
        assert lock_on_head()["run"] == other["run"], "a refused run touched the lock"
        # older than rayfleet_lock_stale_after: taken over
        put_lock(other, age_s=120)
        rc, out = finish(start_site("-e", "rayfleet_lock_stale_after=60"))
        assert rc == 0, out[-3000:]
        assert "Took over the converge lock of alice on ctl-elsewhere" in out and "older than" in out, out[-3000:]
        # rayfleet_lock_break: taken over at once
        put_lock(other)
        rc, out = finish(start_site("-e", "rayfleet_lock_break=true"))
        assert rc == 0, out[-3000:]
        assert "rayfleet_lock_break is true" in out, out[-3000:]
        assert lock_on_head() is None
    finally:
        podman("exec", container(HEAD), "rm", "-f", LOCK)
    # the lock's variables are run options: giving them ran no stage
    plain_run_changes_nothing()
