#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wheels that `make test-gpu` needs on a GPU machine with no network: Ray at the pinned version and ansible-core.

A GPU test machine usually has python3 with torch, nvidia-ml-py and pytest, but neither Ray nor Ansible, and no
network to fetch them. This downloads, for that machine's Python (default 3.12, x86_64 manylinux), Ray at the
`ray` role's pinned `ray_version` and ansible-core at requirements-dev.txt's pin, with the packages they need
that such an image lacks, into one folder to copy along with the checkout:

    tools/gpu_wheels.py                       # -> .cache/gpu-wheels (python 3.12)
    tools/gpu_wheels.py --python-version 3.11 --out /tmp/w

On the GPU host (no index, no network):

    python3 -m pip install --no-index --no-deps --target /tmp/site .cache/gpu-wheels/*.whl
    PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH make test-gpu

Ray's wheel (79 MB for 2.60) is slimmed to about 44 MB so the folder fits transfer limits such as 64 MiB: the
Java jar (ray/jars, for Java workers), RLlib (ray/rllib) and the dashboard's JavaScript source maps are left out,
and RECORD is rewritten to match. Nothing that `ray start`, the core API, placement groups or the state API use
is removed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a GPU image with torch + nvidia-ml-py + pytest lacks for Ray and ansible-core (the rest - click,
# filelock, msgpack, protobuf, pyyaml, requests, packaging, jinja2, attrs - comes with such images)
EXTRA = ("jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "referencing==0.37.0", "rpds-py==2026.9.1",
         "resolvelib==1.2.1", "cryptography==50.0.2", "cffi==2.1.1", "pycparser==3.12")
SLIM = ("ray/jars/", "ray/rllib/")
SLIM_SUFFIX = (".js.map",)
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64")


def pinned(path: Path, pattern: str, what: str) -> str:
    found = re.search(pattern, path.read_text(), re.M)
    if not found:
        raise SystemExit(f"gpu_wheels: cannot read {what} from {path}")
    return found.group(1)


def dropped(name: str) -> bool:
    return name.startswith(SLIM) or name.endswith(SLIM_SUFFIX)


def slim(wheel: Path) -> tuple[int, int]:
    """Rewrite the wheel in place without SLIM members; RECORD lists only what is left. (bytes before, after)."""
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if dropped(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not dropped(line.split(",", 1)[0])).encode()
            dst.writestr(info, data)
    tmp.replace(wheel)
    return before, wheel.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python-version", default="3.12", help="the GPU host's Python (default 3.12)")
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "gpu-wheels")
    args = parser.parse_args()
    ray = pinned(ROOT / "roles" / "ray" / "defaults" / "main.yml", r'^ray_version:\s*"?([0-9.]+)"?', "ray_version")
    core = pinned(ROOT / "requirements-dev.txt", r"^ansible-core==([0-9.]+)", "the ansible-core pin")
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [f"ray=={ray}", f"ansible-core=={core}", *EXTRA]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", args.python_version, "--implementation", "cp", "-d", str(args.out)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    for req in wanted:
        name, version = req.split("==")
        if not any(args.out.glob(f"{name.replace('-', '_')}-{version}-*.whl")):
            subprocess.run([*cmd, req], check=True)
    for wheel in args.out.glob(f"ray-{ray}-*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            fat = any(dropped(n) for n in zf.namelist())
        if fat:
            before, after = slim(wheel)
            print(f"{wheel.name}: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB (no jars, RLlib, source maps)")
    total = sum(w.stat().st_size for w in args.out.glob("*.whl"))
    print(f"{args.out}: {len(list(args.out.glob('*.whl')))} wheels, {total / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
