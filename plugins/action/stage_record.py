# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.stage_record: the items the stage's tasks reported on this host (collected by the
rayfleet.cluster.stage_items callback) and the stage's inputs digest, recorded on the host; or (state=aside) the
host's record of the stage set aside before the stage applies other inputs, and at the end of a partial run put back
or removed by whether the stage changed anything there."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    StageError,
    host_inputs,
    merge_items,
    partial_run,
    record_dir,
    renderer,
    spooled_changed,
    spooled_items,
    stage,
    upstream_views,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    # state: present, or aside (the module's other states are this action's choice at the end of a partial run)
    _VALID_ARGS = frozenset(("stage", "directory", "state", "image"))

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
        state = self._task.args.get("state", "present")
        if state not in ("present", "aside"):
            result.update(failed=True, msg="stage_record: state is %r; expected present or aside" % state)
            return result

        def settle(state):
            return self._execute_module(module_name="rayfleet.cluster.stage_record", task_vars=task_vars,
                                        module_args={"stage": this.name, "state": state, "directory": directory})

        if state == "aside":
            result.update(settle("aside"))
            return result
        items = spooled_items(host, this.name)
        partial = partial_run(task_vars.get("ansible_run_tags"), task_vars.get("ansible_skip_tags"))
        if items is None or partial:
            # no record written; a record this run set aside at the stage's start goes back only if the stage
            # changed nothing on the host
            settled = {}
            if (task_vars.get("__rayfleet_gate") or {}).get("supersede"):
                changed = spooled_changed(host, this.name)
                settled = settle("restored" if changed is False else "discarded")
                if settled.get("failed"):
                    result.update(settled)
                    return result
            why = ("%s may have left part of the stage out" % partial if partial else
                   "the rayfleet.cluster.stage_items callback is not enabled (callbacks_enabled in ansible.cfg) or "
                   "could not read one of the stage's results, so the next run cannot tell what the %s stage "
                   "applied and runs it again" % this.name)
            result.update(changed=False, written=False, skipped=True, state=settled.get("state"),
                          moved=settled.get("moved"), skip_reason="no record written: %s" % why)
            return result
        inputs = host_inputs(task_vars["hostvars"], host, task_vars.get("groups", {}), only=this.name,
                             template=renderer(self._templar))[this.name]
        module_args = {
            "stage": this.name,
            "inputs": inputs,
            "items": merge_items(items),
            "upstream": list(this.upstream),
            "views": upstream_views(this.name),
            "directory": directory,
            # the record of a stage playbooks/bake.yml applied, for the nodes booted from the builder's image
            "image": self._task.args.get("image", False),
        }
        result.update(self._execute_module(module_name="rayfleet.cluster.stage_record", module_args=module_args,
                                           task_vars=task_vars))
        return result
