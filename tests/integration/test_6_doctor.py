# SPDX-License-Identifier: GPL-3.0-or-later
"""`make doctor` (rayfleet.doctor): every sandbox host ready; an unreachable host, a host whose key is not
known, and a login with a key the host does not trust are each named with the reason, in one run."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, SANDBOX, ansible_env, inventory_ips

testinfra_hosts = ["ansible://ray_head"]


def doctor(*inventories: str) -> tuple[int, dict]:
    env = ansible_env(PYTHONPATH=str(ROOT / "library_py"))
    args = [a for inv in inventories for a in ("-i", inv)]
    proc = subprocess.run([sys.executable, "-m", "rayfleet.doctor", *args, "--json", "--timeout", "4"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False, timeout=120)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_every_sandbox_host_is_ready(host, request):
    rc, out = doctor("inventories/sandbox")
    assert rc == 0, out
    assert sorted(h["name"] for h in out["hosts"]) == sorted(inventory_ips(request))
    # the sandbox's OS (debian 12, or ubuntu 24.04 with RAYFLEET_SANDBOX_DISTRO), as the head's os-release says
    lines = host.file("/etc/os-release").content_string.splitlines()
    release = dict(line.split("=", 1) for line in lines if "=" in line)
    expected = f"{release['ID']} {release['VERSION_ID'].strip(chr(34))}"
    assert expected in ("debian 12", "ubuntu 24.04"), release
    for h in out["hosts"]:
        assert h["ok"] and h["sudo"] and h["python"].startswith("3.") and h["os"] == expected, h
    print(f"\ndoctor: {len(out['hosts'])} hosts checked in {out['seconds']} s")


def test_bad_hosts_are_named_with_the_reason(request, tmp_path):
    ips = inventory_ips(request)
    worker = next(ip for name, ip in ips.items() if not name.endswith("head"))
    ghost = worker.rsplit(".", 1)[0] + ".251"
    stray_key = tmp_path / "stray"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stray_key)], check=True)
    empty_known = tmp_path / "known_hosts"
    empty_known.write_text("")
    sandbox_known = ROOT / ".sandbox" / SANDBOX / "known_hosts"
    extra = tmp_path / "extra.yml"
    extra.write_text(json.dumps({"ray_worker": {"hosts": {
        "ghost": {"ansible_host": ghost},
        "stray-key": {"ansible_host": worker, "ansible_ssh_private_key_file": str(stray_key),
                      "ansible_ssh_common_args": f"-o UserKnownHostsFile={sandbox_known}"},
        "unknown-hostkey": {"ansible_host": worker,
                            "ansible_ssh_common_args": f"-o UserKnownHostsFile={empty_known}"},
    }}}))
    rc, out = doctor("inventories/sandbox", str(extra))
    assert rc == 1
    by_name = {h["name"]: h for h in out["hosts"]}
    assert all(by_name[name]["ok"] for name in ips), "the real hosts must still be ready"
    assert not by_name["ghost"]["reachable"] and "cannot reach" in by_name["ghost"]["problems"][0]
    assert by_name["stray-key"]["reachable"] and not by_name["stray-key"]["auth"]
    assert "auth failed" in by_name["stray-key"]["problems"][0]
    assert by_name["unknown-hostkey"]["reachable"] and not by_name["unknown-hostkey"]["auth"]
    assert "unknown" in by_name["unknown-hostkey"]["problems"][0]
    assert "never trusted on first use" in by_name["unknown-hostkey"]["problems"][0]
