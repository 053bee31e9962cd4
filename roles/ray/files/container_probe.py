# SPDX-License-Identifier: GPL-3.0-or-later
"""Run by the ray role with the host's python for nodes with ray_runtime: container: what the host has, in one
round trip (JSON on stdout). Only reads.

Usage: python container_probe.py ENGINE IMAGE SERVICE_USER
Prints: memtotal_mb; cpus (this process may use); engine (its path, or "" when not installed) and version;
image_id (of IMAGE in the engine's store, "" when absent); uid/gid of SERVICE_USER (null when it does not
exist); cdi (NVIDIA CDI spec files); nvidia_runtime (docker: the nvidia runtime is configured).
"""

import glob
import json
import os
import pwd
import shutil
import subprocess
import sys


def run(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, "", str(exc)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def main():
    engine, image, user = sys.argv[1:4]
    out = {"memtotal_mb": 0, "cpus": len(os.sched_getaffinity(0)),
           "engine": shutil.which(engine) or "", "engine_version": "", "image_id": "",
           "uid": None, "gid": None, "cdi": [], "nvidia_runtime": False}
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                out["memtotal_mb"] = int(line.split()[1]) // 1024
    try:
        entry = pwd.getpwnam(user)
        out["uid"], out["gid"] = entry.pw_uid, entry.pw_gid
    except KeyError:
        pass
    out["cdi"] = sorted(p for d in ("/etc/cdi", "/var/run/cdi") for p in glob.glob(os.path.join(d, "nvidia*.y*ml")))
    if out["engine"]:
        rc, version, _err = run([engine, "version", "--format", "{{.Client.Version}}"])
        out["engine_version"] = version if rc == 0 else ""
        if image:
            rc, image_id, _err = run([engine, "image", "inspect", "--format", "{{.Id}}", image])
            out["image_id"] = image_id if rc == 0 else ""
        if engine == "docker":
            rc, runtimes, _err = run([engine, "info", "--format", "{{json .Runtimes}}"])
            out["nvidia_runtime"] = rc == 0 and '"nvidia"' in runtimes
    print(json.dumps(out))


if __name__ == "__main__":
    main()
