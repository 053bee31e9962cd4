# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Helpers shared by the rayfleet.cluster modules: importing the node-side library, systemd control."""

from __future__ import annotations

import os
import traceback

from ansible.module_utils.basic import missing_required_lib

RAYFLEET_IMPORT_ERROR = None
RAYFLEET_VERSION = None
try:
    import rayfleet  # installed into the Ray venv by the ray role

    RAYFLEET_VERSION = rayfleet.__version__
except ImportError:
    RAYFLEET_IMPORT_ERROR = traceback.format_exc()

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def require_rayfleet(module):
    """Fail with a clear message when the module does not run with the Ray venv's interpreter."""
    if RAYFLEET_IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib(
                "rayfleet",
                reason="run this module with the Ray venv's interpreter "
                "(ansible_python_interpreter: '{{ ray_venv_dir }}/bin/python'); the ray role installs it",
            ),
            exception=RAYFLEET_IMPORT_ERROR,
        )


def systemd_is_init():
    """True when systemd is PID 1 (the same test sd_booted() makes)."""
    return os.path.isdir("/run/systemd/system")


class Systemd:
    """Minimal systemctl wrapper: list-form commands, C locale, failures carry rc/stdout/stderr."""

    def __init__(self, module):
        self.module = module
        self.systemctl = module.get_bin_path("systemctl", required=True)

    def _run(self, *args):
        return self.module.run_command([self.systemctl, *args], environ_update=C_LOCALE)

    def is_active(self, unit):
        rc, out, _err = self._run("is-active", unit)
        return rc == 0 and out.strip() == "active"

    def action(self, verb, unit):
        rc, out, err = self._run(verb, unit)
        if rc != 0:
            _jrc, journal, _jerr = self.module.run_command(
                ["journalctl", "--no-pager", "-n", "30", "-u", unit], environ_update=C_LOCALE)
            self.module.fail_json(
                msg="systemctl %s %s failed (rc=%d). Last journal lines:\n%s" % (verb, unit, rc, journal),
                rc=rc, stdout=out, stderr=err)
