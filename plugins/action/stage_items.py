# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.stage_items: items a role manages through commands (an nftables table loaded by a
unit), or through tasks skipped where the host already holds their result (pip, packages), declared so that the
stage's record covers them."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.module_utils.stage_state import KINDS, item_key
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import package_items, pip_items, unit_name


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("items", "pip", "files", "packages"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        items = [dict(item, name=unit_name(item["name"])) if isinstance(item, dict) and item.get("kind") == "unit"
                 and isinstance(item.get("name"), str) else item for item in self._task.args.get("items") or []]
        files = self._task.args.get("files") or []
        if not (isinstance(files, list) and all(isinstance(path, str) and path.startswith("/") for path in files)):
            result.update(failed=True, msg="stage_items: files needs a list of absolute paths, got %r" % (files,))
            return result
        items.extend({"kind": "file", "path": path} for path in files)
        packages = self._task.args.get("packages") or []
        if not (isinstance(packages, list) and all(isinstance(name, str) for name in packages)):
            result.update(failed=True, msg="stage_items: packages needs a list of package names, got %r" % (packages,))
            return result
        declared = package_items(packages)
        if len(declared) != len(packages):
            result.update(failed=True, msg="stage_items: packages names a package by name (name, name=version), got "
                                           "%r" % (packages,))
            return result
        items.extend(declared)
        pip = self._task.args.get("pip")
        if pip is not None:
            if not (isinstance(pip, dict) and isinstance(pip.get("venv"), str) and pip["venv"].startswith("/")
                    and isinstance(pip.get("requirements"), list)):
                result.update(failed=True, msg="stage_items: pip needs venv (an absolute path) and requirements (a "
                                               "list), got %r" % (pip,))
                return result
            items.extend(pip_items(pip["venv"], pip["requirements"]))
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
