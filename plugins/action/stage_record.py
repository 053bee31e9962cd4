# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.stage_record: the items the stage's tasks reported on this host (collected by the
rayfleet.cluster.stage_items callback) and the stage's inputs digest, recorded on the host; or (state=absent) the
host's record of the stage set aside."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    StageError,
    collection_root,
    host_inputs,
    merge_items,
    partial_run,
    record_dir,
    spooled_items,
    stage,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("stage", "directory", "state"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        host = task_vars["inventory_hostname"]
        try:
            this = stage(self._task.args.get("stage"))
        except StageError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        directory = self._task.args.get("directory") or record_dir(task_vars["hostvars"], host)
        if self._task.args.get("state", "present") == "absent":
            result.update(self._execute_module(
                module_name="rayfleet.cluster.stage_record", task_vars=task_vars,
                module_args={"stage": this.name, "state": "absent", "directory": directory}))
            return result
        items = spooled_items(host, this.name)
        if items is None:
            result.update(
                changed=False, written=False, skipped=True,
                skip_reason=(
                    "no record written: the rayfleet.cluster.stage_items callback is not enabled (callbacks_enabled "
                    "in ansible.cfg) or could not read one of the stage's results, so the next run cannot tell what "
                    "the %s stage applied and runs it again"
                    % this.name
                ),
            )
            return result
        partial = partial_run(task_vars.get("ansible_run_tags"), task_vars.get("ansible_skip_tags"),
                              collection_root())
        if partial:
            result.update(changed=False, written=False, skipped=True,
                          skip_reason="no record written: %s may have left part of the stage out" % partial)
            return result
        inputs = host_inputs(task_vars["hostvars"], host, task_vars.get("groups", {}))[this.name]
        module_args = {
            "stage": this.name,
            "inputs": inputs,
            "items": merge_items(items),
            "upstream": list(this.upstream),
            "directory": directory,
        }
        result.update(self._execute_module(module_name="rayfleet.cluster.stage_record", module_args=module_args,
                                           task_vars=task_vars))
        return result
