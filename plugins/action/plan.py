# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.plan: one role's variables checked and its plan worked out on the controller, nothing
sent to the host."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError, _json
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import (
    PLANS,
    Call,
    Variables,
    plan_variables,
    run_plan,
)


class ActionModule(ActionBase):
    """Every problem the plan finds, each naming the host and the variable, becomes the task's failure (msg, and
    the list in problems)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("role", "given"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        result["changed"] = False
        host = task_vars["inventory_hostname"]
        role, given = self._task.args.get("role"), self._task.args.get("given") or {}
        try:
            if role not in PLANS:
                raise PlanError(["plan on %s: role is %s; expected one of %s." % (host, _json(role), ", ".join(PLANS))])
            if not isinstance(given, Mapping):
                raise PlanError(["plan on %s: given is %s; expected a mapping." % (host, _json(given))])
            variables = Variables(plan_variables(role), task_vars, self._templar.template)
            call = Call(host, variables, given, task_vars, template=self._templar.template,
                        role_default=self._role_default, result=result)
            result.update(run_plan(role, call))
        except PlanError as exc:
            result.update(failed=True, msg=" ".join(exc.problems), problems=exc.problems)
        return result

    def _role_default(self, var):
        """The task's role's default of var, rendered in this host's context (None: the role gives none)."""
        role = getattr(self._task, "_role", None)
        default = role.get_default_vars().get(var) if role is not None else None
        return self._templar.template(default) if default is not None else None
