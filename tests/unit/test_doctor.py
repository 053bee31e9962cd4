# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor (playbooks/doctor.yml, rayfleet.cluster.doctor_report): each host judged from its probes, failures in
words; and the playbook on hosts that cannot be reached (the sandbox's ready hosts: tests/integration/test_6)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.doctor import (
    os_supported,
    parse_probe,
    ssh_reason,
    table,
    verdict,
)
from rayfleet.ssh_targets import known_hosts_from_args, targets_from_inventory

ROOT = Path(__file__).resolve().parents[2]
PROBE_OK = {"rc": 0, "stdout": "rayfleet-doctor python=3.11.2 os_id=debian os_version=12\r\n", "stderr": ""}
BECOME_OK = {"rc": 0, "stdout": "", "stderr": ""}


@pytest.mark.parametrize(
    ("os_id", "version", "ok"),
    [("debian", "12", True), ("ubuntu", "22.04", True), ("ubuntu", "24.04", True), ("ubuntu", "20.04", False),
     ("rocky", "9.4", True), ("rhel", "8.9", False), ("amzn", "2023", True), ("amzn", "2", False),
     ("debian", "11", False), ("arch", "", False)],
)
def test_supported_os(os_id, version, ok):
    assert os_supported(os_id, version) is ok


def test_parse_probe():
    assert parse_probe(PROBE_OK["stdout"]) == {"python": "3.11.2", "os_id": "debian", "os_version": "12"}
    assert parse_probe("motd\nrayfleet-doctor python= os_id=ubuntu os_version=24.04\n")["python"] == ""
    assert parse_probe("sh: not found") == {}


@pytest.mark.parametrize(("message", "words"), [
    ("Failed to connect to the host via ssh: ssh: connect to host 10.0.0.9 port 22: Connection timed out",
     "no SSH server answers"),
    ("Failed to connect to the host via ssh: No ED25519 host key is known for 10.0.0.9 and you have requested "
     "strict checking.\r\nHost key verification failed.", "never trusted on first use"),
    ("Failed to connect to the host via ssh: @@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key "
     "verification failed.", "CHANGED"),
    ("Failed to connect to the host via ssh: ops@10.0.0.9: Permission denied (publickey).", "refused the login"),
    ("Failed to connect to the host via ssh: ssh: Could not resolve hostname nope: Name or service not known",
     "does not resolve"),
])
def test_ssh_failures_are_put_in_words_with_what_ssh_said(message, words):
    reason = ssh_reason(message)
    assert words in reason
    assert "Failed to connect" not in reason and reason.endswith(")")


def test_a_ready_host_and_each_way_one_is_not():
    ready = verdict("h", "10.0.0.10", PROBE_OK, BECOME_OK)
    assert ready["ok"] and ready["python"] == "3.11.2" and ready["os"] == "debian 12" and not ready["problems"]
    gone = verdict("w1", "10.0.0.11", {"unreachable": True, "msg": "ssh: connect to host 10.0.0.11 port 22: No "
                                                                   "route to host"}, None)
    assert not gone["ok"] and not gone["ssh"] and "no SSH server answers" in gone["problems"][0]
    old = verdict("w2", "10.0.0.12", {"rc": 0, "stdout": "rayfleet-doctor python=3.6.8 os_id=rhel os_version=8.9"},
                  BECOME_OK)
    assert old["problems"] == ["python3 3.6.8 is older than 3.8", old["problems"][1]]
    assert old["problems"][1].startswith("OS rhel 8.9 is not one the roles support")
    no_sudo = verdict("w3", "10.0.0.13", PROBE_OK, {"failed": True, "msg": "Missing sudo password"})
    assert no_sudo["problems"] == ["privilege escalation failed (become, as site.yml uses it): Missing sudo "
                                   "password; expected passwordless sudo, or ansible_become_password"]
    lines = table([ready, gone, old, no_sudo])
    assert lines[0].split() == ["HOST", "ADDRESS", "SSH", "BECOME", "PYTHON", "OS"]
    assert lines[1].split() == ["h", "10.0.0.10", "ok", "ok", "3.11.2", "debian", "12"]
    assert lines[2].split() == ["w1", "10.0.0.11", "FAIL", "-", "-", "-"]
    assert lines[-1] == "1/4 hosts ready, 3 not ready"


@pytest.mark.parametrize(
    ("args", "path"),
    [("-o UserKnownHostsFile=/x/known -o StrictHostKeyChecking=yes", "/x/known"),
     ("-oUserKnownHostsFile=/y", "/y"), ("-o StrictHostKeyChecking=yes", None), ("", None)],
)
def test_known_hosts_from_ssh_args(args, path):
    assert known_hosts_from_args(args) == path


def test_targets_follow_the_group_contract_and_ansible_vars():
    inventory = {
        "_meta": {"hostvars": {
            "h": {"ansible_host": "10.0.0.10", "ansible_user": "ubuntu", "ansible_port": 2222,
                  "ansible_ssh_private_key_file": "/k/id", "ansible_ssh_common_args": "-o UserKnownHostsFile=/k/kh"},
            "w1": {"ansible_host": "10.0.0.11", "ansible_user": "ubuntu", "ansible_private_key_file": "/k/id2"},
            "other": {"ansible_host": "10.0.0.99"},
        }},
        "all": {"children": ["ray_head", "gpu", "misc"]},
        "ray_head": {"hosts": ["h"]},
        "ray_worker": {"children": ["gpu"]},
        "gpu": {"hosts": ["w1"]},
        "misc": {"hosts": ["other"]},
    }
    targets = targets_from_inventory(inventory)
    assert [t.name for t in targets] == ["h", "w1"]
    head, worker = targets
    assert (head.address, head.port, head.user, head.key_file, head.known_hosts) == (
        "10.0.0.10", 2222, "ubuntu", "/k/id", "/k/kh")
    assert (worker.port, worker.key_file, worker.known_hosts) == (22, "/k/id2", None)


def test_the_playbook_names_hosts_it_cannot_reach_in_one_table_without_a_traceback(tmp_path):
    """A port that answers but speaks no SSH, and a name that does not resolve: each host's line says why, the run
    fails (rc 2) after the table, and nothing but the table and Ansible's own lines is printed."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def talk_nonsense():
        while True:
            try:
                conn, _addr = listener.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.0 400 nope\r\n\r\n")
            conn.close()

    threading.Thread(target=talk_nonsense, daemon=True).start()
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"ansible_user": "ops"}, "children": {
        "ray_head": {"hosts": {"h0": {"ansible_host": "127.0.0.1", "ansible_port": port}}},
        "ray_worker": {"hosts": {"w1": {"ansible_host": "no-such-host.invalid"}}}}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_CALLBACKS_ENABLED="rayfleet.cluster.stage_items",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "playbooks/doctor.yml", "-i",
                           str(inventory), "-e", "rayfleet_doctor_timeout=5"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    listener.close()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    report = out["plays"][1]["tasks"][0]["hosts"]["localhost"]
    by_host = {row["host"]: row for row in report["hosts"]}
    assert not by_host["h0"]["ssh"] and not by_host["w1"]["ssh"]
    assert "does not resolve" in by_host["w1"]["problems"][0]
    assert by_host["h0"]["problems"] and by_host["h0"]["problems"][0].startswith(("Ansible cannot connect",
                                                                                 "no SSH server answers"))
    assert report["table"][-1] == "0/2 hosts ready, 2 not ready"
    assert report["not_ready"] == ["h0", "w1"]
