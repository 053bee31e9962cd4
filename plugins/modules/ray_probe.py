#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_probe
short_description: What the ray role needs to know of a node before it applies anything, in one round trip
version_added: "0.1.0"
description:
  - Reads the Ray venv (its Ray version, site-packages, the requirements the ray role recorded in it, the
    C(rayfleet.pth) that puts the node library on its path) and the sha1 of each module of the node library.
  - Also returns the text of the files in O(read), the sha256 of the files in O(checksum) (never their content,
    which may hold secrets) and whether each path in O(exists) exists.
  - One module run instead of one per file, so that a node where the ray stage runs pays one round trip for
    everything it compares.
  - Works on a host without the venv (the first converge); the venv's fields are then empty.
author:
  - rayfleet authors (@rayfleet)
options:
  venv:
    description: The Ray venv. Its own python is asked for its site-packages and Ray's version.
    type: path
    required: true
  lib_dir:
    description: Where the node library is installed (its modules are under C(rayfleet/) in it).
    type: path
    required: true
  read:
    description: Files whose text is returned in RV(files) (C(null) for a file that is absent).
    type: list
    elements: path
    default: []
  checksum:
    description: Files whose sha256 is returned in RV(sha256) (C(null) for a file that is absent).
    type: list
    elements: path
    default: []
  exists:
    description: Paths returned in RV(exists) with whether they exist.
    type: list
    elements: path
    default: []
extends_documentation_fragment:
  - rayfleet.cluster.attributes.info_module
seealso:
  - module: rayfleet.cluster.ray_node
  - module: rayfleet.cluster.ray_host_clusters
"""

EXAMPLES = r"""
- name: Read the venv, the node library and the files Ray's settings depend on
  rayfleet.cluster.ray_probe:
    venv: /opt/rayfleet/venv
    lib_dir: /opt/rayfleet/lib
    read: [/etc/rayfleet/nccl.json]
    checksum: [/etc/rayfleet/checkpoint.env]
    exists: [/etc/systemd/system/ray-worker.service]
  register: probe
"""

RETURN = r"""
venv:
  description: What the venv holds; empty strings and C(null) where there is no venv yet.
  returned: always
  type: dict
  contains:
    python:
      description: Whether the venv's python exists.
      type: bool
    purelib:
      description: The venv's site-packages (empty without a venv, or when its python does not run).
      type: str
    ray_version:
      description: The Ray distribution's version in the venv (empty when Ray is not installed).
      type: str
    uv_version:
      description: The version of uv in the venv (empty when it has none).
      type: str
    requirements:
      description: The text of C(.rayfleet-requirements) in the venv (what the ray role installed), or C(null).
      type: str
    pth:
      description: The text of C(rayfleet.pth) in the venv's site-packages, or C(null).
      type: str
lib_sha1:
  description: The sha1 of each module of the node library, by file name (empty when none is installed).
  returned: always
  type: dict
files:
  description: The text of each file of O(read), by path; C(null) for one that is absent.
  returned: always
  type: dict
sha256:
  description: The sha256 of each file of O(checksum), by path; C(null) for one that is absent.
  returned: always
  type: dict
exists:
  description: Whether each path of O(exists) exists, by path.
  returned: always
  type: dict
"""

import glob
import hashlib
import json
import os
import subprocess

from ansible.module_utils.basic import AnsibleModule

# Run with the venv's own python: its site-packages and the versions of Ray and uv as that python sees them
VENV_SCRIPT = (
    "import json, sysconfig, importlib.metadata as m\n"
    "def version(name):\n    try:\n        return m.version(name)\n    except m.PackageNotFoundError:\n"
    "        return ''\n"
    "print(json.dumps({'purelib': sysconfig.get_paths()['purelib'], 'ray_version': version('ray'),"
    " 'uv_version': version('uv')}))\n"
)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _text(path):
    data = _read(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def venv_info(venv):
    """The venv's python, site-packages, Ray and uv versions, recorded requirements and rayfleet.pth."""
    python = os.path.join(venv, "bin", "python")
    info = {"python": os.path.exists(python), "purelib": "", "ray_version": "", "uv_version": "",
            "requirements": _text(os.path.join(venv, ".rayfleet-requirements")), "pth": None}
    if info["python"]:
        try:
            out = subprocess.run([python, "-c", VENV_SCRIPT], capture_output=True, text=True, timeout=60,
                                 check=True).stdout
            info.update(json.loads(out))
        except (OSError, subprocess.SubprocessError, ValueError):
            pass  # a venv whose python does not run: pip recreates it
    if info["purelib"]:
        info["pth"] = _text(os.path.join(info["purelib"], "rayfleet.pth"))
    return info


def lib_sha1(lib_dir):
    """The sha1 of each module of the node library under lib_dir/rayfleet, by file name."""
    out = {}
    for path in sorted(glob.glob(os.path.join(lib_dir, "rayfleet", "*.py"))):
        data = _read(path)
        if data is not None:
            out[os.path.basename(path)] = hashlib.sha1(data).hexdigest()
    return out


def sha256(path):
    data = _read(path)
    return None if data is None else hashlib.sha256(data).hexdigest()


def probe(venv, lib_dir, read=(), checksum=(), exists=()):
    return {
        "venv": venv_info(venv),
        "lib_sha1": lib_sha1(lib_dir),
        "files": {path: _text(path) for path in read},
        "sha256": {path: sha256(path) for path in checksum},
        "exists": {path: os.path.lexists(path) for path in exists},
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            lib_dir=dict(type="path", required=True),
            read=dict(type="list", elements="path", default=[]),
            checksum=dict(type="list", elements="path", default=[]),
            exists=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = probe(p["venv"], p["lib_dir"], p["read"], p["checksum"], p["exists"])
    except OSError as exc:
        module.fail_json(msg="ray_probe: %s" % exc)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
