# SPDX-License-Identifier: GPL-3.0-or-later
"""amazon-efs-utils built from its source release (shared_storage_efs_utils_source) on Debian hosts, which do not
package it: built once, on the first host that needs it, kept on the controller, installed on every host at the
pinned version; a re-run builds and changes nothing; a release that is not the pinned one fails before anything is
installed, naming the variable and the host.

efs-utils' real source (GitHub) and its Rust crates (crates.io) cannot be reached from these machines, so the release
here is a stand-in the test makes: efs-utils' layout (a top directory efs-utils-<version>/ whose ./build-deb.sh leaves
build/amazon-efs-utils-<version>-1_<arch>.deb), with a package that installs one file. What this tests is the role's
path (checksum, unpack, build once, fetch, install, pin); not efs-utils' own build.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tarfile

import pytest
from conftest import ROOT, SANDBOX, ansible_env, converge_again
from testinfra import get_host

testinfra_hosts = [f"ansible://{SANDBOX}-head"]
VERSION = "9.9.9"
BUILDS = "/var/tmp/rayfleet-efs-standin-builds"  # each build appends its host's name
HOSTS = [f"{SANDBOX}-head", f"{SANDBOX}-worker1", f"{SANDBOX}-worker2"]
EFS_MOUNT = [{"path": "/mnt/efs", "type": "efs", "efs_id": "fs-0123456789abcdef0", "region": "us-east-1"}]

BUILD_DEB = f"""#!/bin/sh
# stand-in for efs-utils' build-deb.sh (rayfleet's test): one package, amazon-efs-utils {VERSION}-1
set -e
hostname >> {BUILDS}
arch=$(dpkg --print-architecture)
root=build/debian
mkdir -p "$root/DEBIAN" "$root/usr/share/doc/amazon-efs-utils"
{{ echo 'Package: amazon-efs-utils'; echo 'Version: {VERSION}-1'; echo "Architecture: $arch"
  echo 'Maintainer: rayfleet tests <tests@rayfleet.invalid>'; echo 'Description: stand-in for amazon-efs-utils'
}} > "$root/DEBIAN/control"
echo stand-in > "$root/usr/share/doc/amazon-efs-utils/STANDIN"
dpkg-deb --root-owner-group --build "$root" "build/amazon-efs-utils-{VERSION}-1_$arch.deb"
"""

PLAY = [{"hosts": "ray_head:ray_worker", "become": True, "gather_facts": True, "gather_subset": ["min"],
         "tasks": [{"name": "amazon-efs-utils from its source release",
                    "ansible.builtin.include_role": {"name": "rayfleet.cluster.shared_storage",
                                                     "tasks_from": "efs_utils_source.yml"}}]}]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The stand-in source release, its sha256, a play that runs the role's source path, and a controller cache."""
    tmp = tmp_path_factory.mktemp("efs-utils")
    top = tmp / f"efs-utils-{VERSION}"
    top.mkdir()
    (top / "build-deb.sh").write_text(BUILD_DEB)
    (top / "build-deb.sh").chmod(0o755)
    tarball = tmp / f"efs-utils-{VERSION}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    (tmp / "play.yml").write_text(json.dumps(PLAY))
    yield {"tarball": str(tarball), "sha256": hashlib.sha256(tarball.read_bytes()).hexdigest(),
           "play": str(tmp / "play.yml"), "cache": tmp / "cache"}
    for name in HOSTS:
        get_host(f"ansible://{name}", ansible_inventory=str(ROOT / "inventories/sandbox")).run(
            f"sudo dpkg --purge amazon-efs-utils; sudo rm -f {BUILDS} /var/cache/apt/archives/amazon-efs-utils_*.deb")
    # the plays above ran the storage stages with the stand-in release's variables, which their records keep
    converge_again()


def _hosts(request) -> dict:
    return {name: get_host(f"ansible://{name}", ansible_inventory=request.config.option.ansible_inventory)
            for name in HOSTS}


def _play(release, version: str = VERSION, **extra) -> subprocess.CompletedProcess:
    variables = {"shared_storage_efs_utils_source": release["tarball"],
                 "shared_storage_efs_utils_source_checksum": f"sha256:{release['sha256']}",
                 "shared_storage_efs_utils_version": version,
                 "shared_storage_efs_utils_build_packages": ["binutils"],
                 "shared_storage_efs_utils_cache_dir": str(release["cache"] / version), **extra}
    return subprocess.run(["ansible-playbook", release["play"], "-i", "inventories/sandbox", "-e",
                           json.dumps(variables)], cwd=ROOT, env=ansible_env(), capture_output=True, text=True,
                          check=False, timeout=300)


def _installed(hosts: dict) -> dict[str, str]:
    return {name: h.run("dpkg-query --show --showformat='${db:Status-Status} ${Version}' amazon-efs-utils").stdout
            for name, h in hosts.items()}


def _builds(hosts: dict) -> list[str]:
    return [line for h in hosts.values() for line in h.run(f"cat {BUILDS} 2>/dev/null").stdout.split()]


@pytest.mark.parametrize(("source", "checksum", "words"), [
    ("release", "sha256:" + "0" * 64, ["has sha256", "but shared_storage_efs_utils_source_checksum is sha256:000"]),
    ("https://example.invalid/efs-utils.tar.gz", "",
     ["expected efs-utils' source release as an https URL with its checksum"]),
    ("efs-utils.tar.gz", "", ["or as an absolute path of a file on the controller"]),
], ids=["wrong-checksum", "url-without-checksum", "relative-path"])
def test_a_release_not_the_pinned_one_fails_before_anything_changes(request, release, source, checksum, words):
    hosts = _hosts(request)
    variables = {"shared_storage_mounts": EFS_MOUNT,
                 "shared_storage_efs_utils_source": release["tarball"] if source == "release" else source,
                 "shared_storage_efs_utils_source_checksum": checksum}
    proc = subprocess.run(["ansible-playbook", "playbooks/storage.yml", "-i", "inventories/sandbox", "-e",
                           json.dumps(variables)], cwd=ROOT, env=ansible_env(), capture_output=True, text=True,
                          check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    for text in [f"shared_storage on {SANDBOX}-worker1: shared_storage_efs_utils_source", *words]:
        assert text in out, f"{text!r} not in:\n{out[-3000:]}"
    assert "changed=0" in out and "changed=1" not in out, out[-2000:]
    assert set(_installed(hosts).values()) == {""} and _builds(hosts) == []


def test_a_build_of_another_version_installs_nothing(request, release):
    """The release builds 9.9.9 where 9.9.8 is pinned: the builder says so, every other host says its package was
    not built, and no host gets a package."""
    hosts = _hosts(request)
    proc = _play(release, version="9.9.8")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "expected one package amazon-efs-utils at shared_storage_efs_utils_version 9.9.8" in out, out[-3000:]
    assert "amazon-efs-utils 9.9.8 for amd64 is not on the controller" in out, out[-3000:]
    assert len(_builds(hosts)) == 1 and set(_installed(hosts).values()) == {""}
    assert not (release["cache"] / "9.9.8").exists() or not list((release["cache"] / "9.9.8").iterdir())
    # the build directory is gone from the builder
    assert all(h.run("ls -d /tmp/rayfleet-efs-utils-* 2>/dev/null").stdout == "" for h in hosts.values())
    for h in hosts.values():
        h.run(f"sudo rm -f {BUILDS}")


def test_built_once_installed_everywhere_and_a_rerun_changes_nothing(request, release):
    hosts = _hosts(request)
    proc = _play(release)
    assert proc.returncode == 0, proc.stdout[-4000:]
    builds = _builds(hosts)
    assert len(builds) == 1, builds  # one build for the three hosts (one architecture)
    assert (release["cache"] / VERSION / f"amazon-efs-utils_{VERSION}_amd64.deb").is_file()
    assert _installed(hosts) == {name: f"installed {VERSION}-1" for name in HOSTS}
    assert all(h.file("/usr/share/doc/amazon-efs-utils/STANDIN").exists for h in hosts.values())
    rerun = _play(release)
    assert rerun.returncode == 0, rerun.stdout[-4000:]
    assert rerun.stdout.count("changed=0") == len(HOSTS), rerun.stdout[-3000:]
    assert len(_builds(hosts)) == 1


def test_a_host_at_another_version_gets_the_pinned_one(request, release):
    """A host without the pinned package (worker2's removed) gets it from the controller, without another build;
    the others change nothing."""
    hosts = _hosts(request)
    hosts[f"{SANDBOX}-worker2"].run("sudo dpkg --purge amazon-efs-utils")
    proc = _play(release)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _installed(hosts) == {name: f"installed {VERSION}-1" for name in HOSTS}
    assert len(_builds(hosts)) == 1
    changed = {m[0]: int(m[1]) for m in re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M)}
    assert changed[f"{SANDBOX}-head"] == changed[f"{SANDBOX}-worker1"] == 0 and changed[f"{SANDBOX}-worker2"] > 0
