# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.stage_items: items a role manages through commands (an nftables table loaded by a
unit), declared so that the stage's record covers them."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.module_utils.stage_state import KINDS, item_key


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("items",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        items = self._task.args.get("items") or []
        for item in items:
            try:
                if item.get("kind") not in KINDS:
                    raise KeyError("kind (one of %s)" % ", ".join(sorted(KINDS)))
                item_key(item)
            except (AttributeError, KeyError) as exc:
                result.update(failed=True, msg="stage_items: item %r needs %s" % (item, exc))
                return result
        result.update(changed=False, rayfleet_managed=[dict(item) for item in items])
        return result
