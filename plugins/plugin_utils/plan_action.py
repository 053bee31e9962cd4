# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The base of the plan actions (cluster_plan, firewall_plan, storage_plan, nfs_server_plan, monitoring_plan,
nccl_plan, checkpoint_store_plan, submit_host_plan, ssh_trust_plan, pytorch_plan, apex_plan, nvidia_driver_plan,
cuda_plan, rocm_plan) and of settings_check: a role's variables checked and its plan computed on the controller,
nothing sent to the host."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError


class PlanAction(ActionBase):
    """An action whose plan() returns the values of its result, or raises PlanError: every problem found, each
    naming the host and the variable, becomes the task's failure (msg, and the list in problems)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def plan(self, host, args, task_vars, result):
        """The plan of host from the task's arguments and variables (result: the task's result, for values to
        report even when the plan fails)."""
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        result["changed"] = False
        try:
            result.update(self.plan(task_vars["inventory_hostname"], self._task.args, task_vars, result))
        except PlanError as exc:
            result.update(failed=True, msg=" ".join(exc.problems), problems=exc.problems)
        return result
