# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.drift_check: each stage's inputs digest computed on the controller, then one module
call compares the host with its stage records."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    NO_CALLBACK,
    callback_watching,
    drift_summary,
    host_inputs,
    record_dir,
    renderer,
    upstream_views,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("directory",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        host = task_vars["inventory_hostname"]
        inputs = host_inputs(task_vars["hostvars"], host, task_vars.get("groups", {}), template=renderer(self._templar))
        directory = self._task.args.get("directory") or record_dir(task_vars["hostvars"], host)
        module_args = {"stages": inputs, "directory": directory, "views": upstream_views()}
        result.update(self._execute_module(module_name="rayfleet.cluster.drift_check", module_args=module_args,
                                           task_vars=task_vars))
        if not result.get("failed"):
            result["summary"] = drift_summary(result)
        if not callback_watching():
            result.setdefault("warnings", []).append(NO_CALLBACK)
        return result
