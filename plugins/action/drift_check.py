# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.drift_check: one module call reads the host's stage records and the state of their items,
gathers its facts and, on the head, takes the converge lock. The stages' inputs digests are compared with the
records' on the controller afterwards (rayfleet.cluster.stage_gate), once the cluster is planned from those facts."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.converge_lock import MODULE, Acquire, lock_options
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    NO_CALLBACK,
    callback_watching,
    record_dir,
    stages_of,
    upstream_views,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("directory", "lock", "gather_subset"))

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
        directory = self._task.args.get("directory") or record_dir(task_vars["hostvars"], host)
        # the items only: the inputs are compared on the controller once the cluster is planned
        names = [item.name for item in stages_of(task_vars.get("group_names") or [])]
        subset = list(self._task.args.get("gather_subset") or [])
        module_args = {"stages": names, "directory": directory, "views": upstream_views(), "gather_subset": subset}
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
                facts = found.get("ansible_facts")
                found = self._execute_module(module_name="rayfleet.cluster.drift_check",
                                             module_args=dict(module_args, gather_subset=[]), task_vars=task_vars)
                if facts is not None:
                    found["ansible_facts"] = facts
            found["lock"] = taken
        result.update(found)
        if subset and isinstance(result.get("ansible_facts"), dict):
            # as ansible.builtin.gather_facts: the facts are gathered, so a later play (gathering = smart) keeps them
            result["ansible_facts"]["_ansible_facts_gathered"] = True
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
