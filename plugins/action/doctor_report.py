# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.doctor_report: the doctor's table, from the probes playbooks/doctor.yml registered on
each host, on the controller."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.doctor import table, verdict

PROBE_VAR = "__rayfleet_doctor_probe"
BECOME_VAR = "__rayfleet_doctor_become"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("groups",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        inventory_groups = task_vars.get("groups", {})
        names = []
        for group in self._task.args.get("groups") or ("ray_head", "ray_worker"):
            names += [host for host in inventory_groups.get(group, []) if host not in names]
        hostvars = task_vars.get("hostvars", {})
        rows = []
        for host in names:
            hv = hostvars.get(host) or {}
            address = self._templar.template(hv.get("ansible_host") or host)
            rows.append(verdict(host, str(address), hv.get(PROBE_VAR), hv.get(BECOME_VAR)))
        not_ready = [row["host"] for row in rows if not row["ok"]]
        result.update(changed=False, hosts=rows, table=table(rows), not_ready=not_ready,
                      msg=("%d of %d hosts not ready: %s" % (len(not_ready), len(rows), ", ".join(not_ready))
                           if not_ready else "%d hosts ready" % len(rows)))
        return result
