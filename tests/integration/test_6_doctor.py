# SPDX-License-Identifier: GPL-3.0-or-later
"""`make doctor` (playbooks/doctor.yml): every sandbox host ready; an unreachable host, a host whose key is not
known, and a login with a key the host does not trust are each named with the reason, in one run."""

from __future__ import annotations

import json
import subprocess

from conftest import ROOT, SANDBOX, ansible_env, inventory_ips

testinfra_hosts = ["ansible://ray_head"]


def doctor(*inventories: str) -> tuple[int, dict]:
    """ansible-playbook playbooks/doctor.yml on inventories: its rc and the report (doctor_report's result)."""
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                      ANSIBLE_CALLBACKS_ENABLED="rayfleet.cluster.stage_items")
    args = [a for inv in inventories for a in ("-i", inv)]
    proc = subprocess.run(["ansible-playbook", "playbooks/doctor.yml", *args, "-e", "rayfleet_doctor_timeout=4"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180)
    assert proc.stdout, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    plays = json.loads(proc.stdout)["plays"]
    report = plays[-1]["tasks"][0]["hosts"]["localhost"]
    return proc.returncode, report


def test_every_sandbox_host_is_ready(host, request):
    rc, out = doctor("inventories/sandbox")
    assert rc == 0, out["table"]
    assert sorted(h["host"] for h in out["hosts"]) == sorted(inventory_ips(request))
    # the sandbox's OS (debian 12, or ubuntu 24.04 with RAYFLEET_SANDBOX_DISTRO), as the head's os-release says
    lines = host.file("/etc/os-release").content_string.splitlines()
    release = dict(line.split("=", 1) for line in lines if "=" in line)
    expected = f"{release['ID']} {release['VERSION_ID'].strip(chr(34))}"
    assert expected in ("debian 12", "ubuntu 24.04"), release
    for h in out["hosts"]:
        assert h["ok"] and h["ssh"] and h["become"] and h["python"].startswith("3.") and h["os"] == expected, h
    assert out["table"][-1] == f"{len(out['hosts'])}/{len(out['hosts'])} hosts ready"
    print("\n" + "\n".join(out["table"]))


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
    # a connection of their own: the real worker's SSH master (same address, user and port) is not reused
    own = {"ansible_ssh_args": "-o ControlMaster=no -o ControlPath=none -o PreferredAuthentications=publickey"}
    extra.write_text(json.dumps({"ray_worker": {"hosts": {
        "ghost": {"ansible_host": ghost},
        "stray-key": {**own, "ansible_host": worker, "ansible_ssh_private_key_file": str(stray_key),
                      "ansible_ssh_common_args": f"-o UserKnownHostsFile={sandbox_known} -o IdentitiesOnly=yes "
                                                 "-o StrictHostKeyChecking=yes"},
        "unknown-hostkey": {**own, "ansible_host": worker,
                            "ansible_ssh_common_args": f"-o UserKnownHostsFile={empty_known} "
                                                       "-o StrictHostKeyChecking=yes"},
    }}}))
    rc, out = doctor("inventories/sandbox", str(extra))
    assert rc == 2, out["table"]
    by_name = {h["host"]: h for h in out["hosts"]}
    assert all(by_name[name]["ok"] for name in ips), "the real hosts must still be ready"
    assert not by_name["ghost"]["ssh"] and "no SSH server answers" in by_name["ghost"]["problems"][0]
    assert not by_name["stray-key"]["ssh"] and "refused the login" in by_name["stray-key"]["problems"][0]
    assert not by_name["unknown-hostkey"]["ssh"]
    assert "never trusted on first use" in by_name["unknown-hostkey"]["problems"][0]
    assert sorted(out["not_ready"]) == ["ghost", "stray-key", "unknown-hostkey"]
    print("\n" + "\n".join(out["table"]))
