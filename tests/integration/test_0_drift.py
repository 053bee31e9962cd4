# SPDX-License-Identifier: GPL-3.0-or-later
"""The drift check, for real: each kind of managed item is changed by hand on a sandbox host, then a plain site.yml
finds it, runs only the stages that manage it on the hosts where it changed, repairs it, and reports changed; Ray
restarts only where its own settings changed; and the run after that reports changed=0."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import ROOT, SANDBOX, ansible_env, container, head_host, inventory_ips, podman, ray_nodes, run_site

HEAD, WORKER1, WORKER2 = f"{SANDBOX}-head", f"{SANDBOX}-worker1", f"{SANDBOX}-worker2"
SSH_HOME = "/var/lib/rayfleet/.ssh"


def sh(host: str, script: str) -> str:
    """Run a shell script as root on a sandbox host (the way an operator's hand would change it)."""
    return podman("exec", container(host), "sh", "-ec", script)


def rc(host: str, script: str) -> int:
    try:
        sh(host, script)
    except subprocess.CalledProcessError as exc:
        return exc.returncode
    return 0


def changed(proc: subprocess.CompletedProcess) -> dict[str, int]:
    return {h: int(n) for h, n in re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M)}


def gates(proc: subprocess.CompletedProcess) -> dict[str, set[str]]:
    """stage -> the hosts where it ran (those that reached its record task at the end)."""
    runs: dict[str, set[str]] = {}
    stage = ""
    for line in proc.stdout.splitlines():
        if line.startswith("TASK ["):
            found = re.match(r"TASK \[Record what the (\w+) stage applied", line)
            stage = found.group(1) if found else ""
            continue
        ok = re.match(r"ok: \[([^\]]+)\]", line)
        if stage and ok:
            runs.setdefault(stage, set()).add(ok.group(1))
    return runs


def ids(head) -> dict[str, str]:
    return {n["node_ip"]: n["node_id"] for n in ray_nodes(head, "") if n["state"] == "ALIVE"}


@pytest.fixture(scope="module")
def head(request):
    """The head, once a plain site.yml has converged the sandbox (whatever ran before this module)."""
    site_ok()
    return head_host(request)


def site_ok(*args: str) -> subprocess.CompletedProcess:
    proc = run_site(*args)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def test_a_clean_rerun_runs_no_stage_and_changes_nothing(head, request):
    before = ids(head)
    proc = site_ok()
    assert set(changed(proc).values()) == {0}, proc.stdout[-3000:]
    assert gates(proc) == {}, f"stages ran on a clean re-run: {gates(proc)}"
    assert ids(head) == before, "a clean re-run restarted Ray"
    assert set(inventory_ips(request).values()) <= set(before)


def test_b_every_kind_of_drift_is_found_and_repaired_without_restarting_ray(head):
    before = ids(head)
    drift = {
        # a config file edited, and one removed; a unit stopped; the fstab line removed
        WORKER1: [
            "echo 'vm.swappiness = 77' >> /etc/sysctl.d/60-rayfleet.conf",
            "rm /etc/security/limits.d/60-rayfleet.conf",
            "systemctl stop prometheus-node-exporter.service",
            "sed -i '\\# /mnt/shared #d' /etc/fstab",
        ],
        # a unit disabled; a package removed; authorized_keys edited
        WORKER2: [
            "systemctl disable --quiet rayfleet-firewall.service",
            "dpkg -r rsync >/dev/null",
            "echo 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHandEditedKeyxxxxxxxxxxxxxxxxxxxxxxxxxxxxx x@y' >> "
            f"{SSH_HOME}/authorized_keys",
        ],
        # the nftables table flushed; the sshd drop-in removed; Prometheus's config edited
        HEAD: [
            "nft flush table inet rayfleet",
            "rm /etc/ssh/sshd_config.d/00-rayfleet.conf",
            "echo '# edited by hand' >> /etc/prometheus/prometheus.yml",
        ],
    }
    for host, scripts in drift.items():
        for script in scripts:
            sh(host, script)

    proc = site_ok()
    counts = changed(proc)
    assert all(counts[host] > 0 for host in drift), (counts, proc.stdout[-3000:])
    ran = gates(proc)
    # the stages ran only where something they manage drifted (the SSH trust stage runs on every node together)
    assert ran.get("common") == {WORKER1, WORKER2}, ran
    assert ran.get("monitoring") == {WORKER1, HEAD}, ran
    assert ran.get("shared_storage") == {WORKER1}, ran
    assert ran.get("firewall") == {WORKER2, HEAD}, ran
    assert ran.get("ssh_trust") == {HEAD, WORKER1, WORKER2}, ran
    assert "ray" not in ran and "nccl" not in ran and "ml" not in ran, ran
    assert re.search(r"common\s+run\s+drifted: .*60-rayfleet.conf", proc.stdout), proc.stdout[-3000:]

    # each item is back
    assert "77" not in sh(WORKER1, "cat /etc/sysctl.d/60-rayfleet.conf")
    assert rc(WORKER1, "test -f /etc/security/limits.d/60-rayfleet.conf") == 0
    assert rc(WORKER1, "systemctl is-active --quiet prometheus-node-exporter.service") == 0
    assert rc(WORKER1, "grep -q ' /mnt/shared ' /etc/fstab") == 0
    assert rc(WORKER2, "systemctl is-enabled --quiet rayfleet-firewall.service") == 0
    assert rc(WORKER2, "dpkg-query -W -f '${db:Status-Abbrev}' rsync | grep -q ii") == 0
    assert "HandEdited" not in sh(WORKER2, f"cat {SSH_HOME}/authorized_keys")
    assert "dport" in sh(HEAD, "nft -s list table inet rayfleet")
    assert rc(HEAD, "test -f /etc/ssh/sshd_config.d/00-rayfleet.conf") == 0
    assert "edited by hand" not in sh(HEAD, "cat /etc/prometheus/prometheus.yml")
    # none of it was Ray's: no node restarted
    assert ids(head) == before

    again = site_ok()
    assert set(changed(again).values()) == {0}, again.stdout[-3000:]


def test_c_an_edited_ray_settings_file_restarts_that_node_only(head, request):
    ips = inventory_ips(request)
    before = ids(head)
    settings = "/etc/rayfleet/ray-worker.json"
    original = sh(WORKER2, f"cat {settings}")
    sh(WORKER2, f"sed -i 's/\"num_cpus\": [0-9a-z]*/\"num_cpus\": 7/' {settings}")
    assert sh(WORKER2, f"cat {settings}") != original, "the edit did not change the settings file"

    proc = site_ok()
    assert gates(proc).get("ray") == {WORKER2}, gates(proc)
    assert changed(proc)[WORKER2] > 0 and changed(proc)[HEAD] == 0 and changed(proc)[WORKER1] == 0
    assert sh(WORKER2, f"cat {settings}") == original
    after = ids(head)
    assert after[ips[WORKER2]] != before[ips[WORKER2]], "worker2 kept its Ray node: its settings were not applied"
    assert after[ips[HEAD]] == before[ips[HEAD]] and after[ips[WORKER1]] == before[ips[WORKER1]]

    again = site_ok()
    assert set(changed(again).values()) == {0}, again.stdout[-3000:]


def test_d_drift_yml_reports_without_changing_anything(head):
    sh(WORKER1, "echo '# by hand' >> /etc/sysctl.d/60-rayfleet.conf")
    try:
        proc = subprocess.run(["ansible-playbook", "playbooks/drift.yml", "-i", "inventories/sandbox"],
                              cwd=ROOT, env=ansible_env(),
                              capture_output=True, text=True, check=False, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert set(changed(proc).values()) == {0}
        assert re.search(r"common\s+run\s+drifted: file:/etc/sysctl.d/60-rayfleet.conf", proc.stdout), proc.stdout
        assert "# by hand" in sh(WORKER1, "cat /etc/sysctl.d/60-rayfleet.conf")
    finally:
        site_ok()
    assert "# by hand" not in sh(WORKER1, "cat /etc/sysctl.d/60-rayfleet.conf")
