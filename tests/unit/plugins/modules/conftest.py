# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a module's main() in-process: arguments through patch_module_args, exit/fail as an exception."""

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class Exit(Exception):
    def __init__(self, failed, result):
        super().__init__(result.get("msg", ""))
        self.failed = failed
        self.result = result


@pytest.fixture(autouse=True)
def _capture_exit(monkeypatch):
    def exit_json(self, **kwargs):
        raise Exit(False, kwargs)

    def fail_json(self, msg, **kwargs):
        raise Exit(True, {"msg": msg, **kwargs})

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run_module(module, args, check_mode=False, diff=False):
    """main() of ``module`` with ``args``; returns the Exit (failed, result)."""
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises(Exit) as exc:
        module.main()
    return exc.value
