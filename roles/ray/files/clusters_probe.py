# SPDX-License-Identifier: GPL-3.0-or-later
"""Run by the ray role's validate step with the host's python: the Ray clusters this host already belongs to.

Reads every /etc/rayfleet/ray[-<name>]-<role>[-<instance>].json (the settings rayfleet.cluster.ray_node writes), the
requirements recorded in each one's venv and, for a node run in a container, what its container runs (engine,
image, GPU UUIDs: the ray role's ray[-<name>]-<role>.container.json); prints a JSON list. Only reads.
Usage: python clusters_probe.py [DIR]
"""

import glob
import json
import os
import re
import sys

# ray[-<cluster>]-<role>[-<instance>].json: an instance name has no '-' and is never head or worker, so the cluster
# name is the one the ray role wrote
NAME = re.compile(r"^ray(?:-(?P<name>[a-z0-9][a-z0-9-]*))?-(?P<role>head|worker)(?:-(?P<instance>[a-z0-9]+))?\.json$")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/etc/rayfleet"
    found = []
    for path in sorted(glob.glob(os.path.join(root, "ray*-*.json"))):
        match = NAME.match(os.path.basename(path))
        if not match:
            continue
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            found.append({"path": path, "name": match["name"] or "", "role": match["role"],
                          "instance": match["instance"] or "", "error": str(exc)})
            continue
        venv = os.path.dirname(os.path.dirname(data.get("ray_bin") or ""))
        try:
            with open(os.path.join(venv, ".rayfleet-requirements")) as f:
                requirements = f.read()
        except OSError:
            requirements = ""
        entry = {
            "path": path, "name": match["name"] or "", "role": match["role"], "instance": match["instance"] or "",
            "head_address": data.get("head_address") or "", "node_ip": data.get("node_ip") or "",
            "ports": data.get("ports") or {}, "temp_dir": data.get("temp_dir") or "", "venv": venv,
            "requirements": requirements,
        }
        try:
            with open(path[:-len(".json")] + ".container.json") as f:
                entry["container"] = json.load(f)
        except (OSError, ValueError):
            pass
        found.append(entry)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
