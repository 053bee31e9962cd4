#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write docs/support.md: which operating systems, ansible-core, Ray and GPU stacks rayfleet supports, and for each
whether a test runs it, or whether it is written and untested.

The facts come from where they are decided: the roles' declared platforms (meta/main.yml), the sandbox's host
images (tools/sandbox.py's DISTROS) and which make target runs them, the ansible-core floor (meta/runtime.yml, which
playbooks/boilerplate.yml checks) and the pin the tests run (requirements-dev.txt), and Ray's version (the ray role's
default). The GPU stack's rows name the test module that runs each source; the unit test checks that every named
test exists and that docs/support.md is what this writes.

Examples: tools/support_matrix.py            (rewrite docs/support.md)
          tools/support_matrix.py --check    (exit 1 when docs/support.md is not current)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "support.md"
# The sandbox's host images (tools/sandbox.py DISTROS: their suite) and the make target whose Molecule scenario runs
# the whole verify suite on them
SANDBOX_TARGETS = {"bookworm": "`make test` (CI)", "noble": "`make test-ubuntu` (`make test-full`, not CI)"}
RELEASES = {("Debian", "bookworm"): "Debian 12", ("Ubuntu", "jammy"): "Ubuntu 22.04 LTS",
            ("Ubuntu", "noble"): "Ubuntu 24.04 LTS", ("EL", "9"): "RHEL 9 family (Rocky, Alma)",
            ("Amazon", "all"): "Amazon Linux"}
# The GPU stack: (component, source, status, the test module that runs it or None, what it shows or why none does)
TESTED, NO_GPU, GPU_HOST, UNTESTED = ("tested", "tested on a host without a GPU", "on a real GPU host",
                                      "written, untested")
OFFLINE = "the repository is not reachable from the test machines"
GPU_STACK = [
    ("NVIDIA driver", "Debian 12 non-free (535), `nvidia_driver_source: distribution`", NO_GPU,
     "tests/gpu_stack/test_nvidia_driver.py",
     "installed compute-only, held, nouveau blacklisted, DKMS without a build, NVML read through the real library "
     "(`make gpu-stack`, in CI)"),
    ("NVIDIA driver", "NVIDIA's CUDA repository (branch 580, key pinned by fingerprint)", UNTESTED, None,
     OFFLINE),
    ("CUDA toolkit", "Debian 12 non-free (11.8)", TESTED, "tests/gpu_stack/test_cuda.py",
     "`nvcc` builds an sm_90 kernel (`make gpu-stack`, in CI)"),
    ("CUDA toolkit", "NVIDIA's CUDA repository", UNTESTED, None, OFFLINE),
    ("ROCm", "Debian 12 (5.2), `rocm_force`", NO_GPU, "tests/gpu_stack/test_rocm.py",
     "packages held, the Ray user in `render` and `video`, `rocm-smi` runs (`make gpu-stack`, in CI)"),
    ("ROCm", "AMD's repository (6.4.1)", UNTESTED, None, OFFLINE),
    ("DCGM exporter", "NVIDIA's repository", UNTESTED, "tests/gpu_stack/test_dcgm.py",
     "the install needs a GPU and NVIDIA's repository; the test shows it skipped, saying why, on GPU-group hosts "
     "without a GPU"),
    ("NVML checks, NCCL, all-reduce", "NVIDIA H100 / H200, one GPU", GPU_HOST, "tests/gpu/test_gpu_host.py",
     "`make test-gpu` (not in CI); one GPU shows no NVLink or cross-node figure"),
    ("EFA", "AWS's EFA installer", UNTESTED, None, "the installer is not reachable from the test machines"),
]


def declared_platforms(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(platform, version) -> the roles that declare it (their meta/main.yml galaxy_info.platforms)."""
    out: dict[tuple[str, str], list[str]] = {}
    for meta in sorted((root / "roles").glob("*/meta/main.yml")):
        info = (yaml.safe_load(meta.read_text()) or {}).get("galaxy_info") or {}
        for platform in info.get("platforms") or []:
            for version in platform.get("versions") or []:
                out.setdefault((platform["name"], str(version)), []).append(meta.parent.parent.name)
    return out


def sandbox_suites(root: Path = ROOT) -> set[str]:
    """The suites of the sandbox's host images (tools/sandbox.py's DISTROS)."""
    sys.path.insert(0, str(root / "tools"))
    from sandbox import DISTROS

    return {d["suite"] for d in DISTROS.values()}


def ansible_floor(root: Path = ROOT) -> str:
    return str(yaml.safe_load((root / "meta" / "runtime.yml").read_text())["requires_ansible"]).lstrip(">=")


def pinned(root: Path, package: str) -> str:
    found = re.search(rf"^{re.escape(package)}==(\S+)", (root / "requirements-dev.txt").read_text(), re.M)
    return found.group(1) if found else "?"


def ray_version(root: Path = ROOT) -> str:
    return str(yaml.safe_load((root / "roles" / "ray" / "defaults" / "main.yml").read_text())["ray_version"])


def render(root: Path = ROOT) -> str:
    platforms = declared_platforms(root)
    suites = sandbox_suites(root)
    all_roles = sorted(p.parent.parent.name for p in (root / "roles").glob("*/meta/main.yml"))
    lines = [
        "# Support matrix",
        "",
        "What rayfleet supports, and for each cell whether a test runs it (which one), or whether it is written and",
        "untested. Written by `tools/support_matrix.py` from the roles' declared platforms, the sandbox's host images,",
        "`meta/runtime.yml`, `requirements-dev.txt` and the ray role's defaults; do not edit it by hand.",
        "",
        "## Operating systems",
        "",
        "| release | status | declared by |",
        "|---|---|---|",
    ]
    for (name, version), roles in sorted(platforms.items(), key=lambda kv: (kv[0][0] != "Debian", kv[0])):
        release = RELEASES.get((name, version), f"{name} {version}")
        status = (f"tested: the whole verify suite on 3 sandbox hosts, {SANDBOX_TARGETS[version]}"
                  if version in suites and version in SANDBOX_TARGETS else "written, untested")
        who = "every role" if sorted(roles) == all_roles else ", ".join(sorted(roles))
        lines.append(f"| {release} | {status} | {who} |")
    floor, core = ansible_floor(root), pinned(root, "ansible-core")
    lines += [
        "",
        "## Controller",
        "",
        "| component | status |",
        "|---|---|",
        f"| ansible-core {core} (the `ansible` {pinned(root, 'ansible')} package's collections) | tested: every test "
        "target runs it |",
        f"| ansible-core {floor} to {core} | written, untested; below {floor} every playbook stops at its first task "
        "(`playbooks/boilerplate.yml`, `meta/runtime.yml`) |",
        "| Python on the controller | the venv's (`make venv`); the Ray hosts' own Python runs the node library |",
        "",
        "## Ray",
        "",
        "| component | status |",
        "|---|---|",
        f"| Ray {ray_version(root)} (`ray_version`'s default) | tested: every sandbox test target |",
        "| another `ray_version` | written, untested: the role installs and pins what it is given; every node of a "
        "cluster must run the same (admission refuses a worker whose Ray is not the head's) |",
        "",
        "## GPU stack",
        "",
        "| component | source | status |",
        "|---|---|---|",
    ]
    for component, source, kind, test, note in GPU_STACK:
        status = f"{kind}: `{test}` - {note}" if test else f"{kind}: {note}"
        lines.append(f"| {component} | {source} | {status} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/support.md is not current")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is not current: run tools/support_matrix.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"written: {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
