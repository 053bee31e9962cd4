# SPDX-License-Identifier: GPL-3.0-or-later
"""Run by the ray role with the venv's python: what is installed, in one round trip (JSON on stdout).

Lets a re-run skip pip and the library copy when nothing differs. Usage: python venv_probe.py LIB_DIR
"""

import glob
import hashlib
import importlib.metadata
import json
import os
import sys
import sysconfig


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def main():
    lib_dir = sys.argv[1]
    purelib = sysconfig.get_paths()["purelib"]
    try:
        ray_version = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        ray_version = ""
    marker = read(os.path.join(sys.prefix, ".rayfleet-requirements"))
    pth = read(os.path.join(purelib, "rayfleet.pth"))
    print(json.dumps({
        "purelib": purelib,
        "ray_version": ray_version,
        "requirements": marker.decode() if marker is not None else None,
        "pth": pth.decode() if pth is not None else None,
        "lib_sha1": {os.path.basename(p): hashlib.sha1(read(p)).hexdigest()
                     for p in sorted(glob.glob(os.path.join(lib_dir, "rayfleet", "*.py")))},
    }))


if __name__ == "__main__":
    main()
