# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The converge lock on the controller: who this run is (user, controller, its ansible-playbook process), whether the
run that holds the lock is still alive, and the waiting and taking over. The file on the head is the module's
(rayfleet.cluster.converge_lock); rayfleet.cluster.drift_check takes it in its own round trip on the head and comes
here only when another run holds it."""

from __future__ import annotations

import getpass
import os
import socket
import time
from datetime import datetime, timezone

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.rayfleet.cluster.plugins.module_utils.converge_lock import LOCK_PATH

MODULE = "rayfleet.cluster.converge_lock"
POLL_S = 5


def process_start(pid):
    """A process's start time in clock ticks since boot (/proc/<pid>/stat), "" where it cannot be read: with the pid,
    it names one process even after the pid is used again."""
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def this_run():
    """This run's owner record: the ansible-playbook process is the parent of the worker that runs an action."""
    pid = os.getppid()
    controller = socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"run": "%s:%d:%s" % (controller, pid, process_start(pid)), "user": user, "controller": controller,
            "pid": pid, "started": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def gone(holder, controller):
    """Why the run that holds the lock is known to be over ("" when it may still run): it ran on this controller and
    its process is gone, or a process with its pid started later."""
    if holder.get("controller") != controller or not isinstance(holder.get("pid"), int):
        return ""
    pid = holder["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "its ansible-playbook process (pid %d) on %s is gone" % (pid, controller)
    except PermissionError:
        pass  # another user's live process
    run = str(holder.get("run") or "")
    if run != "%s:%d:%s" % (controller, pid, process_start(pid)):
        return "its ansible-playbook process (pid %d) on %s is gone (the pid belongs to a newer process)" % (
            pid, controller)
    return ""


def describe(holder):
    if holder.get("unreadable") is not None:
        return "a lock file that names no run (%r)" % holder["unreadable"]
    return "%s on %s (ansible-playbook pid %s, since %s, %ss ago)" % (
        holder.get("user", "?"), holder.get("controller", "?"), holder.get("pid", "?"), holder.get("started", "?"),
        holder.get("age_s", "?"))


def lock_options(wait, stale_after, break_lock):
    """(wait, stale_after, break_lock) checked; ValueError names the variables that set them."""
    try:
        return int(wait or 0), int(stale_after), boolean(break_lock, strict=True)
    except (TypeError, ValueError) as exc:
        raise ValueError("the converge lock's wait and stale_after are whole seconds, break_lock true or false "
                         "(rayfleet_lock_wait, rayfleet_lock_stale_after, rayfleet_lock_break): %s" % exc) from exc


class Acquire:
    """Takes the converge lock for this run. execute(module_args) runs the converge_lock module on the head; found,
    when given, is what a first attempt already found (drift_check's). Returns the module's last result, with
    `waited`; `failed` and `msg` when another run holds the lock past the wait."""

    def __init__(self, execute, display, where, check_mode=False, path=None):
        self.execute = execute
        self.display = display
        self.where = where
        self.check_mode = check_mode
        self.base = {"state": "present", "owner": this_run()}
        if path:
            self.base["path"] = path

    @property
    def owner(self):
        return self.base["owner"]

    def __call__(self, wait=0, stale_after=7200, break_lock=False, found=None):
        started = time.monotonic()
        while True:
            if found is None:
                found = self.execute({**self.base, "wait": wait, "stale_after": stale_after})
            if found.get("failed") or found.get("lock") != "busy":
                break
            holder = found.get("owner") or {}
            reason = self._over(holder, stale_after, break_lock)
            if reason and not self.check_mode:
                found = self.execute({**self.base, "take_over": str(holder.get("run") or ""), "reason": reason})
                if found.get("lock") != "busy":
                    break
                found = None
                continue
            if self.check_mode:
                found["msg"] = "Another run holds the converge lock: %s (a check-mode run takes no lock)." % (
                    describe(holder))
                self.display.warning(found["msg"])
                break
            remaining = wait - (time.monotonic() - started)
            if remaining <= 0:
                found.update(failed=True, msg=(
                    "Another run is converging this cluster: %s holds the converge lock (%s on %s). This run changed "
                    "nothing. Wait for it to end, or give -e rayfleet_lock_wait=SECONDS to wait for it. A run that "
                    "failed or died leaves its lock: the next run on its controller takes it over, another "
                    "controller after rayfleet_lock_stale_after (%d s); if you know that run is over, take it now "
                    "with -e rayfleet_lock_break=true."
                    % (describe(holder), self.base.get("path") or LOCK_PATH, self.where,
                       stale_after)))
                break
            time.sleep(min(POLL_S, remaining))
            found = None
        found["waited"] = round(time.monotonic() - started, 1)
        if found.get("lock") == "taken_over":
            replaced = found.get("replaced") or {}
            self.display.warning("Took over the converge lock of %s: %s." % (describe(replaced),
                                                                             replaced.get("reason", "")))
        return found

    def _over(self, holder, stale_after, break_lock):
        """Why the holder's lock may be taken over now ("" when it may not)."""
        reason = gone(holder, self.owner["controller"])
        if not reason and (holder.get("age_s") or 0) > stale_after:
            reason = "it is older than rayfleet_lock_stale_after (%d s)" % stale_after
        if not reason and holder.get("unreadable") is not None:
            reason = "the lock file names no run"
        if not reason and break_lock:
            reason = "rayfleet_lock_break is true"
        return reason
