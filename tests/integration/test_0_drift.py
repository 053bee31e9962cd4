# SPDX-License-Identifier: GPL-3.0-or-later
"""The drift check, for real: each kind of managed item is changed by hand on a sandbox host, then a plain site.yml
finds it, runs only the stages that manage it on the hosts where it changed, repairs it, and reports changed; Ray
restarts only where its own settings changed; and the run after that reports changed=0."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from conftest import (
    CONTAINERS_CONF,
    PYTHON_AS_RAY,
    RAY_DEFAULTS,
    ROOT,
    SANDBOX,
    ansible_env,
    container,
    drifted_stages,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    ray_nodes,
    run_site,
)

from sandbox import Sandbox

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
            found = re.match(r"TASK \[Record what the stage applied, for the next drift check: (\w+)\]", line)
            stage = found.group(1) if found else ""
            continue
        ok = re.match(r"ok: \[([^\]]+)\]", line)
        if stage and ok:
            runs.setdefault(stage, set()).add(ok.group(1))
    return runs


def task_results(proc: subprocess.CompletedProcess, task: str) -> dict[str, str]:
    """host -> how the task named went there (ok, changed, skipping, failed), from the run's output."""
    results: dict[str, str] = {}
    current = False
    for line in proc.stdout.splitlines():
        if line.startswith("TASK ["):
            current = line.startswith(f"TASK [{task}]")
            continue
        found = re.match(r"(ok|changed|skipping|failed|fatal): \[([^\]]+)\]", line)
        if current and found:
            results[found.group(2)] = found.group(1)
    return results


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
    # how long a run waits for Ray's nodes is no input: another wait runs no stage either
    proc = site_ok("-e", "ray_wait_timeout=5")
    assert gates(proc) == {}, f"stages ran for a new ray_wait_timeout: {gates(proc)}"


def test_a_stage_applied_again_that_changed_nothing_leaves_the_stages_reading_it_alone(head):
    """A Ray setting no task turns into a change on the nodes (how long a restart waits for running work) is an input
    of the ray stage alone: the stages that read the cluster plan (firewall, SSH trust, storage, monitoring) read keys
    of the plan it leaves as they were. The ray stage runs and changes nothing, and the ml stage, which reads what the
    ray stage manages (the Ray venv), does not run. A ray_ variable no role declares is no input: no stage runs."""
    hosts = {HEAD, WORKER1, WORKER2}
    before = ids(head)
    proc = site_ok("-e", "ray_site_note=rack-7")
    assert gates(proc) == {}, f"stages ran for a variable no role declares: {gates(proc)}"
    for args in (("-e", "ray_restart_wait_s=30"), ()):  # the new input, then the inventory's again
        proc = site_ok(*args)
        ran = gates(proc)
        assert set(changed(proc).values()) == {0}, proc.stdout[-3000:]
        assert ran == {"ray": hosts}, f"stages other than ray ran for a Ray setting the plan does not read: {ran}"
    assert ids(head) == before, "Ray restarted"


def test_a_ray_setting_that_changes_the_ray_stages_units_leaves_the_ml_stage_alone(head):
    """A Ray setting the ray stage applies without touching the Ray venv (the health timer's interval): the ray stage
    runs and changes the timer on every host, and the ml stage, which reads the venv's packages, does not run; nor
    does any other stage, and Ray is not restarted."""
    hosts = {HEAD, WORKER1, WORKER2}
    before = ids(head)
    for args in (("-e", "ray_health_interval_s=240"), ()):  # the new value, then the inventory's again
        proc = site_ok(*args)
        assert gates(proc) == {"ray": hosts}, gates(proc)
        assert all(count > 0 for count in changed(proc).values()), proc.stdout[-3000:]
    assert ids(head) == before, "Ray restarted"


def test_a_member_reinstalled_with_a_new_host_key_is_trusted_again_without_the_firewall_or_ray(head):
    """A member reinstalled under its name and address has a new SSH host key. The next site.yml runs SSH trust on
    every host, which then trusts the new key. Ray, the firewall, monitoring and the NFS server (whose exports read
    the plan's sources: the members' addresses) read nothing that changed: they do not run, and Ray keeps its
    nodes."""
    hosts = {HEAD, WORKER1, WORKER2}
    before = ids(head)
    sh(WORKER2, "rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub && "
                "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key && systemctl restart ssh")
    new_key = sh(WORKER2, "cat /etc/ssh/ssh_host_ed25519_key.pub").split()[1]
    # the controller trusts the new key as an operator would (the sandbox's known_hosts, read over podman's channel)
    Sandbox(SANDBOX).refresh()
    proc = site_ok()
    assert gates(proc) == {"ssh_trust": hosts}, gates(proc)
    for host in hosts:
        assert new_key in sh(host, f"cat {SSH_HOME}/known_hosts"), host
    assert ids(head) == before, "Ray restarted"
    proc = site_ok()
    assert gates(proc) == {} and set(changed(proc).values()) == {0}, gates(proc)


def test_a_release_that_changed_one_role_runs_that_roles_stage_alone(head, tmp_path):
    """A stage's inputs hold its own code: the collection with the firewall role edited (a comment: it applies the same)
    runs the firewall stage again on every host, and no other stage; it changes nothing. Then this checkout's
    collection again, the same."""
    copy = tmp_path / "ansible_collections" / "rayfleet" / "cluster"
    for name in ("galaxy.yml", "meta", "site.yml", "roles", "plugins", "playbooks", "library_py"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, copy / name)
    with open(copy / "roles" / "firewall" / "tasks" / "main.yml", "a") as handle:
        handle.write("# a comment a new release added\n")
    hosts = {HEAD, WORKER1, WORKER2}
    before = ids(head)
    # its own site.yml: a playbook's directory's collections/ (this checkout's) comes before the configured path
    released = subprocess.run(["ansible-playbook", str(copy / "site.yml"), "-i", "inventories/sandbox"], cwd=ROOT,
                              env=ansible_env(ANSIBLE_COLLECTIONS_PATH=f"{tmp_path}:{ROOT / 'collections'}"),
                              text=True, capture_output=True, check=False, timeout=300)
    assert released.returncode == 0, released.stdout[-4000:] + released.stderr[-2000:]
    for proc in (released, site_ok()):
        assert gates(proc) == {"firewall": hosts}, gates(proc)
        assert set(changed(proc).values()) == {0}, proc.stdout[-3000:]
        # the drift check found nftables installed: apt is not asked again, and the record still watches it
        assert task_results(proc, "rayfleet.cluster.firewall : Install nftables") == dict.fromkeys(hosts, "skipping")
        for host in hosts:
            record = json.loads(sh(host, "cat /var/lib/rayfleet/stages/default/firewall.json"))
            assert {"kind": "package", "name": "nftables"} in record["items"], record["items"]
            assert record["state"]["package:nftables"]["status"].startswith("ii"), record["state"]
    assert ids(head) == before, "Ray restarted"


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
    # the stages ran only where something they manage drifted
    assert ran.get("common") == {WORKER1, WORKER2}, ran
    assert ran.get("monitoring") == {WORKER1, HEAD}, ran
    assert ran.get("shared_storage") == {WORKER1}, ran
    assert ran.get("firewall") == {WORKER2, HEAD}, ran
    assert ran.get("ssh_trust") == {HEAD, WORKER2}, ran
    assert "ray" not in ran and "nccl" not in ran and "ml" not in ran, ran
    assert any(re.match(r"common: drifted: .*60-rayfleet.conf", why) for why in drifted_stages(proc.stdout)[WORKER1]), (
        proc.stdout[-3000:])

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


def test_c_an_edited_node_library_module_is_put_back_and_that_node_restarted(head, request):
    """The node library (copied to each node as one archive) is watched file by file: a module edited by hand on one
    worker is put back from the controller's copy and that node's Ray restarts on it (Ray's processes import the
    library); a module the library does not have is removed while the stage runs there."""
    ips = inventory_ips(request)
    before = ids(head)
    lib = "/opt/rayfleet/lib/rayfleet"
    original = sh(WORKER1, f"sha1sum {lib}/gpu.py")
    sh(WORKER1, f"echo '# edited by hand' >> {lib}/gpu.py && echo 'left = 1' > {lib}/left_behind.py")
    assert sh(WORKER1, f"sha1sum {lib}/gpu.py") != original

    proc = site_ok()
    assert gates(proc).get("ray") == {WORKER1}, gates(proc)
    assert changed(proc)[WORKER1] > 0 and changed(proc)[HEAD] == 0 and changed(proc)[WORKER2] == 0
    assert sh(WORKER1, f"sha1sum {lib}/gpu.py") == original
    assert rc(WORKER1, f"test -e {lib}/left_behind.py") == 1
    after = ids(head)
    assert after[ips[WORKER1]] != before[ips[WORKER1]], "worker1 kept its Ray node on the edited library"
    assert after[ips[HEAD]] == before[ips[HEAD]] and after[ips[WORKER2]] == before[ips[WORKER2]]

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
        report = drifted_stages(proc.stdout)
        assert list(report) == [WORKER1] and len(report[WORKER1]) == 1, report
        assert report[WORKER1][0].startswith("common: drifted: file:/etc/sysctl.d/60-rayfleet.conf"), report
        assert "# by hand" in sh(WORKER1, "cat /etc/sysctl.d/60-rayfleet.conf")
    finally:
        site_ok()
    assert "# by hand" not in sh(WORKER1, "cat /etc/sysctl.d/60-rayfleet.conf")


# A Ray job that keeps every CPU of every node busy: on each node as many spinning tasks as the node has cores, each
# pinned there (the node:<ip> resource) and stopping on its own after a deadline; the driver prints when all spin.
LOAD = """
import os, time, ray
ray.init(address="{gcs}")
@ray.remote(num_cpus=0, max_retries=0)
def spin(until):
    open("/tmp/rf-load-" + str(os.getpid()), "w").close()
    while time.time() < until:
        pass
    return os.uname().nodename
until = time.time() + {seconds}
ips = [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]]
refs = [spin.options(resources={{"node:" + ip: 0.001}}).remote(until) for ip in ips for _ in range(os.cpu_count())]
print("SPINNING", len(ips), len(refs), flush=True)
print("DONE", sorted(set(ray.get(refs))), flush=True)
"""


def busy_cpus(host: str) -> float:
    """The host's CPU load average over the last minute, per core (what the loaded host's sshd and sudo live with)."""
    load, cores = sh(host, "cut -d' ' -f1 /proc/loadavg; nproc").split()
    return float(load) / int(cores)


def test_e_a_rerun_while_a_job_saturates_every_cpu_succeeds_and_changes_nothing(head, request):
    """Hosts busy with a job still answer SSH and sudo in time: the connection and become timeouts are sized for
    saturated CPUs, and a clean re-run neither fails nor touches Ray."""
    before = ids(head)
    script = LOAD.format(gcs=f"{node_ip(head)}:{RAY_DEFAULTS['ray_gcs_port']}", seconds=240)
    driver = subprocess.Popen(["podman", "exec", container(HEAD), "sh", "-c",
                               f"echo {base64.b64encode(script.encode()).decode()} | base64 -d > /tmp/rf-load.py && "
                               f"chmod 0644 /tmp/rf-load.py && {PYTHON_AS_RAY} /tmp/rf-load.py"],
                              env=dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 90
        while not line.startswith("SPINNING"):
            if driver.poll() is not None or time.monotonic() > deadline:
                rest = driver.stdout.read() if driver.poll() is not None else ""
                pytest.fail(f"the load job did not start: {line}{rest[-2000:]}")
            line = driver.stdout.readline()
        assert int(line.split()[1]) == len(before), f"the load job does not reach every node: {line}"
        time.sleep(45)  # let the load average climb
        loads = {host: busy_cpus(host) for host in (HEAD, WORKER1, WORKER2)}
        assert all(load >= 1.0 for load in loads.values()), f"the job did not saturate every host: {loads}"
        proc = site_ok()
        assert set(changed(proc).values()) == {0}, proc.stdout[-3000:]
        assert driver.poll() is None, "the load job ended before the re-run did: the re-run was not under load"
    finally:
        driver.kill()
        sh(HEAD, "pkill -f '[r]f-load.py' || :")  # the driver gone, Ray stops its tasks
    print(f"\nload per core when the re-run started: {loads}")
    assert ids(head) == before, "the re-run under load restarted Ray"


def test_f_a_limited_full_run_on_a_fresh_controller_reads_the_other_members_facts(head, tmp_path):
    """`--limit` to one worker with an empty fact cache (a fresh controller): the drift play reads the other
    members' facts, so the stages that name every member (SSH trust's known_hosts, the firewall's sources) have
    them; the full run on the worker changes nothing and does not restart Ray, and records what the next plain run
    finds unchanged (the module's check after it)."""
    before = ids(head)
    cache = tmp_path / "facts"
    proc = subprocess.run(["ansible-playbook", "site.yml", "-i", "inventories/sandbox", "--limit", WORKER1,
                           "-e", "rayfleet_full=true"], cwd=ROOT,
                          env=ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache)), capture_output=True,
                          text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert changed(proc) == {WORKER1: 0}, proc.stdout[-3000:]
    assert {"ssh_trust", "firewall"} <= set(gates(proc)), f"the full run did not run every stage: {gates(proc)}"
    # ansible-core names the cache files <host>, or s1_<host> since 2.19
    assert sorted(p.name.removeprefix("s1_") for p in cache.iterdir()) == sorted([HEAD, WORKER1, WORKER2])
    assert ids(head) == before, "a limited full run restarted Ray"
