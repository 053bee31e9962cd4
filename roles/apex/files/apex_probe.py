# SPDX-License-Identifier: GPL-3.0-or-later
"""Run by the apex role with the Ray venv's python: torch, its CUDA, this Python and the Apex build in place
(JSON on stdout, one round trip, nothing imported but torch's metadata and version module)."""

import importlib.util
import json
import platform
import sys
from importlib import metadata


def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


def main():
    marker_path = sys.argv[1]
    torch_cuda = None
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        # torch/version.py alone (importing torch would load all of it): its CUDA release, None for a CPU build
        path = spec.submodule_search_locations[0] + "/version.py"
        version_spec = importlib.util.spec_from_file_location("_rayfleet_torch_version", path)
        module = importlib.util.module_from_spec(version_spec)
        version_spec.loader.exec_module(module)
        torch_cuda = getattr(module, "cuda", None)
    try:
        with open(marker_path) as fh:
            marker = json.load(fh)
    except (OSError, ValueError):
        marker = {}
    print(json.dumps({
        "torch": version("torch"), "torch_cuda": torch_cuda, "apex": version("apex"),
        "python": f"cp{sys.version_info[0]}{sys.version_info[1]}", "machine": platform.machine(),
        "marker": marker,
    }))


if __name__ == "__main__":
    main()
