# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Jinja filter rayfleet.cluster.venv_installer: the command that installs packages into a venv."""

from __future__ import annotations

import posixpath

from ansible.errors import AnsibleFilterError


def venv_installer(venv, uv):
    """The argv that installs requirements into venv, before its arguments and requirements: the venv's uv (bytecode
    compiled, no cache left on the host) where uv is true, else the venv's pip. Both byte-compile what they install,
    as Ray's processes run as a user who cannot write the venv's caches."""
    if not isinstance(venv, str) or not venv.startswith("/"):
        raise AnsibleFilterError(f"venv_installer: the venv must be an absolute path, not {venv!r}")
    python = posixpath.join(venv, "bin", "python")
    if uv:
        return [posixpath.join(venv, "bin", "uv"), "pip", "install", "--compile-bytecode", "--no-cache",
                "--python", python]
    return [python, "-m", "pip", "install", "--disable-pip-version-check"]


class FilterModule:
    def filters(self):
        return {"venv_installer": venv_installer}
