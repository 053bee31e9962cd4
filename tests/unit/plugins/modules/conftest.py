# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a module's main() in-process: arguments through patch_module_args, exit/fail as an exception."""

import socket

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


@pytest.fixture
def server():
    """A listening TCP socket on loopback: a server whose NFS port answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port
