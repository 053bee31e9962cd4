# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.drift_check: each stage's inputs digest computed on the controller, then one module
call compares the host with its stage records (on the head, taking the converge lock in the same call)."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.converge_lock import MODULE, Acquire, lock_options
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    NO_CALLBACK,
    callback_watching,
    host_inputs,
    record_dir,
    renderer,
    upstream_views,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("directory", "lock"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        host = task_vars["inventory_hostname"]
        try:
            lock = self._lock_options(task_vars)
        except ValueError as exc:
            result.update(failed=True, msg="drift_check on %s: %s" % (host, exc))
            return result
        inputs = host_inputs(task_vars["hostvars"], host, task_vars.get("groups", {}), template=renderer(self._templar))
        directory = self._task.args.get("directory") or record_dir(task_vars["hostvars"], host)
        module_args = {"stages": inputs, "directory": directory, "views": upstream_views()}
        acquire = None
        if lock:
            acquire = Acquire(lambda args: self._execute_module(module_name=MODULE, module_args=args,
                                                                task_vars=task_vars),
                              self._display, host, self._play_context.check_mode)
            module_args["lock_owner"] = acquire.owner
        found = self._execute_module(module_name="rayfleet.cluster.drift_check", module_args=module_args,
                                     task_vars=task_vars)
        if acquire and not found.get("failed"):
            first = found.pop("lock")
            taken = acquire(*lock, found=first)
            if taken.get("failed"):
                result.update(failed=True, msg=taken["msg"], lock=taken)
                return result
            if first.get("lock") == "busy":
                # another run held the lock while the records were read: read them again under this run's lock
                module_args.pop("lock_owner")
                found = self._execute_module(module_name="rayfleet.cluster.drift_check", module_args=module_args,
                                             task_vars=task_vars)
            found["lock"] = taken
        result.update(found)
        if not callback_watching():
            result.setdefault("warnings", []).append(NO_CALLBACK)
        return result

    def _lock_options(self, task_vars):
        """(wait, stale_after, break_lock) where this host takes the converge lock (the head, lock.take), else None."""
        lock = self._task.args.get("lock") or {}
        if not isinstance(lock, dict):
            raise ValueError("lock is a mapping (take, wait, stale_after, break_lock), got %r" % (lock,))
        try:
            take = boolean(lock.get("take", False), strict=True)
        except TypeError as exc:
            raise ValueError("lock.take (rayfleet_converge_lock) is true or false: %s" % exc) from exc
        heads = (task_vars.get("groups") or {}).get("ray_head") or []
        if not take or heads[:1] != [task_vars["inventory_hostname"]]:
            return None
        return lock_options(lock.get("wait", 0), lock.get("stale_after", 7200), lock.get("break_lock", False))
