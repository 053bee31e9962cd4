# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.converge_lock: who this run is (user, controller, its ansible-playbook process), whether
the run that holds the lock is still alive, and the waiting; the module takes or gives back the file on the host."""

from __future__ import annotations

import getpass
import os
import socket
import time
from datetime import datetime, timezone

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

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


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(("state", "path", "wait", "stale_after", "break_lock"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        owner = this_run()
        state = args.get("state", "present")
        try:
            wait = int(args.get("wait", 0) or 0)
            stale_after = int(args.get("stale_after", 7200))
            break_lock = boolean(args.get("break_lock", False), strict=True)
        except (TypeError, ValueError) as exc:
            result.update(failed=True, msg="converge_lock: wait and stale_after are whole seconds, break_lock true or "
                                           "false (rayfleet_lock_wait, rayfleet_lock_stale_after, "
                                           "rayfleet_lock_break): %s" % exc)
            return result
        base = {key: args[key] for key in ("path",) if key in args}
        base.update(state=state, owner=owner)
        if state == "absent":
            result.update(self._module(base, task_vars))
            return result

        started = time.monotonic()
        while True:
            found = self._module({**base, "wait": wait, "stale_after": stale_after}, task_vars)
            if found.get("failed") or found.get("lock") != "busy":
                break
            holder = found.get("owner") or {}
            reason = gone(holder, owner["controller"])
            if not reason and (holder.get("age_s") or 0) > stale_after:
                reason = "it is older than rayfleet_lock_stale_after (%d s)" % stale_after
            if not reason and holder.get("unreadable") is not None:
                reason = "the lock file names no run"
            if not reason and break_lock:
                reason = "rayfleet_lock_break is true"
            if reason and not self._play_context.check_mode:
                found = self._module({**base, "take_over": str(holder.get("run") or ""), "reason": reason}, task_vars)
                if found.get("lock") != "busy":
                    break
                continue
            if self._play_context.check_mode:
                found["msg"] = "Another run holds the converge lock: %s (a check-mode run takes no lock)." % (
                    describe(holder))
                self._display.warning(found["msg"])
                break
            remaining = wait - (time.monotonic() - started)
            if remaining <= 0:
                found.update(failed=True, msg=(
                    "Another run is converging this cluster: %s holds the converge lock (%s on %s). This run changed "
                    "nothing. Wait for it to end, or give -e rayfleet_lock_wait=SECONDS to wait for it. A run that "
                    "failed or died leaves its lock: the next run on its controller takes it over, another "
                    "controller after rayfleet_lock_stale_after (%d s); if you know that run is over, take it now "
                    "with -e rayfleet_lock_break=true."
                    % (describe(holder), args.get("path") or "/var/lib/rayfleet/converge.lock",
                       self._task.delegate_to or (task_vars or {}).get("inventory_hostname"), stale_after)))
                break
            time.sleep(min(POLL_S, remaining))
        found["waited"] = round(time.monotonic() - started, 1)
        if found.get("lock") == "taken_over":
            replaced = found.get("replaced") or {}
            reason = replaced.get("reason", "")
            self._display.warning("Took over the converge lock of %s: %s." % (describe(replaced), reason))
        result.update(found)
        return result

    def _module(self, module_args, task_vars):
        return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
