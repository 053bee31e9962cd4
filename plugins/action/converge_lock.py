# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.converge_lock: who this run is, whether the run that holds the lock is still alive, and
the waiting, on the controller (plugin_utils/converge_lock.py); the module takes or gives back the file on the host."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.converge_lock import MODULE, Acquire, lock_options


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(("state", "path", "wait", "stale_after", "break_lock"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        where = self._task.delegate_to or (task_vars or {}).get("inventory_hostname")
        acquire = Acquire(lambda module_args: self._execute_module(
            module_name=MODULE, module_args=module_args, task_vars=task_vars),
            self._display, where, self._play_context.check_mode, args.get("path"))
        if args.get("state", "present") == "absent":
            result.update(acquire.execute({**acquire.base, "state": "absent"}))
            return result
        try:
            wait, stale_after, break_lock = lock_options(args.get("wait", 0), args.get("stale_after", 7200),
                                                         args.get("break_lock", False))
        except ValueError as exc:
            result.update(failed=True, msg="converge_lock: %s" % exc)
            return result
        result.update(acquire(wait, stale_after, break_lock))
        return result
