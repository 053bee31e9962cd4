# SPDX-License-Identifier: GPL-3.0-or-later
"""A submit host on the sandbox: a fourth container (group ray_submit, not a Ray node, like a user's laptop) made
ready by playbooks/submit_host.yml. Its user submits through an SSH tunnel whose key can only forward to the
dashboard; the Ray ports stay closed to it (the firewall); playbooks/submit.yml runs there, gated on the head's
verdict; a killed tunnel comes back; a second cluster's client sits beside the first and is removed alone."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from conftest import (
    RAY_DEFAULTS,
    ROOT,
    SANDBOX,
    VENV,
    ansible_env,
    container,
    head_host,
    inventory_ips,
)

# Not in make test, to keep it short (make test-full runs it):
# a fourth host made a submit host, with its own Ray venv (about 3.5 min).
pytestmark = pytest.mark.extended

SUBMIT = container(f"{SANDBOX}-submit")
USER = "debian"
HOME = f"/home/{USER}"
CONF = f"{HOME}/.config/rayfleet/rayfleet"
BIN = f"{HOME}/.local/bin"
UNIT = "rayfleet-tunnel-rayfleet.service"
PORT = RAY_DEFAULTS["ray_dashboard_port"]


def on_submit(cmd: str | list[str], user: str = USER, timeout: float = 300) -> subprocess.CompletedProcess:
    """A shell command (or an argv) on the submit host, as its user, from their home."""
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else cmd
    return subprocess.run(["podman", "exec", "--user", user, "-w", HOME if user == USER else "/", SUBMIT, *argv],
                          env=ansible_env(CONTAINERS_CONF=str(ROOT / "sandbox/containers.conf")),
                          capture_output=True, text=True, check=False, timeout=timeout)


def submit_host_play(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "playbooks/submit_host.yml", "-i", "inventories/sandbox", *extra],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)


def recap(proc: subprocess.CompletedProcess) -> dict[str, int]:
    line = re.search(r"-submit\s+:\s+(.*)", proc.stdout).group(1)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


PROBE = ("import json, sys, urllib.request as u\n"
         "r = u.Request(sys.argv[1])\n"
         "if len(sys.argv) > 2: r.add_header('Authorization', 'Bearer ' + open(sys.argv[2]).read().strip())\n"
         "try:\n"
         "    print(json.dumps({'status': u.urlopen(r, timeout=3).status}))\n"
         "except u.HTTPError as e:\n"
         "    print(json.dumps({'status': e.code}))\n"
         "except OSError as e:\n"
         "    print(json.dumps({'error': type(e).__name__}))\n")


def http_status(url: str, token: bool = True) -> dict:
    proc = on_submit(["python3", "-c", PROBE, url, *([f"{CONF}/token"] if token else [])])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def submit_host(request):
    """The submit host, made ready once; removed (and its keys revoked on the head) at the end."""
    workers = len(inventory_ips(request)) - 1
    subprocess.run([str(ROOT / "tools/sandbox.py"), "up", "--name", SANDBOX, "--workers", str(workers), "--submit"],
                   env=ansible_env(CONTAINERS_CONF=str(ROOT / "sandbox/containers.conf")), check=True,
                   capture_output=True, timeout=300)
    first = submit_host_play()
    assert first.returncode == 0, first.stdout[-4000:]
    yield first
    gone = submit_host_play("-e", "submit_host_state=absent")
    subprocess.run([str(ROOT / "tools/sandbox.py"), "rm", "--name", SANDBOX, "--host", "submit"],
                   env=ansible_env(CONTAINERS_CONF=str(ROOT / "sandbox/containers.conf")), check=True, timeout=120)
    assert gone.returncode == 0, gone.stdout[-3000:]


def test_ready_then_a_rerun_changes_nothing(submit_host):
    assert "submits to cluster rayfleet (Ray " in submit_host.stdout
    again = submit_host_play()
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-3000:]


def test_client_files_token_and_ray_version(submit_host, request):
    head = head_host(request)
    files = on_submit(f"stat -c '%n %U %a' {CONF} {CONF}/token {CONF}/tunnel_ed25519 && cat {CONF}/env "
                      f"&& cat {CONF}/known_hosts && sha256sum < {CONF}/token")
    assert files.returncode == 0, files.stderr
    out = files.stdout.splitlines()
    assert out[:3] == [f"{CONF} {USER} 700", f"{CONF}/token {USER} 600", f"{CONF}/tunnel_ed25519 {USER} 600"]
    assert f"RAY_ADDRESS=http://127.0.0.1:{PORT}" in out and f"RAY_AUTH_TOKEN_PATH={CONF}/token" in out
    head_ip = inventory_ips(request)[f"{SANDBOX}-head"]
    known = [line for line in out if line.startswith(head_ip)]
    assert known == [f"{head_ip} {' '.join(head.file('/etc/ssh/ssh_host_ed25519_key.pub').content_string.split()[:2])}"]
    assert out[-1].split()[0] == head.check_output("sudo sha256sum /etc/rayfleet/auth-token").split()[0]
    version = on_submit(f"{BIN}/ray-rayfleet --version")
    head_version = head.check_output(f"{VENV}/bin/python -c 'import ray; print(ray.__version__)'")
    assert version.returncode == 0 and version.stdout.strip().endswith(f"version {head_version}"), version


def test_dashboard_only_through_the_tunnel_and_only_with_the_token(submit_host, request):
    head_ip = inventory_ips(request)[f"{SANDBOX}-head"]
    assert "error" in http_status(f"http://{head_ip}:{PORT}/api/version"), "the dashboard is open to the submit host"
    assert http_status(f"http://127.0.0.1:{PORT}/api/version") == {"status": 200}
    assert http_status(f"http://127.0.0.1:{PORT}/api/version", token=False)["status"] in (401, 403)


def test_forwarding_key_opens_nothing_else(submit_host, request):
    head_ip = inventory_ips(request)[f"{SANDBOX}-head"]
    ssh = (f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={CONF}/known_hosts "
           f"-o IdentitiesOnly=yes -i {CONF}/tunnel_ed25519 rayfleet-tunnel@{head_ip}")
    shell = on_submit(f"{ssh} id", timeout=30)
    assert shell.returncode != 0 and "uid=" not in shell.stdout, shell
    other = on_submit(f"{ssh} -W {head_ip}:{RAY_DEFAULTS['ray_gcs_port']} < /dev/null", timeout=30)
    assert other.returncode != 0 and "prohibited" in other.stderr, other
    keys = head_host(request).check_output("sudo cat /var/lib/rayfleet-tunnel/.ssh/authorized_keys")
    # the forward goes to the dashboard on the head's loopback, and nowhere else
    dashboard = f"{RAY_DEFAULTS['ray_dashboard_host']}:{PORT}"
    assert f'restrict,port-forwarding,permitopen="{dashboard}",command="/usr/sbin/nologin" ssh-ed25519' in keys


def test_ray_cli_submits_from_the_submit_host(submit_host):
    job = on_submit(f"{BIN}/ray-rayfleet job submit -- python -c "
                    "\"import ray; ray.init(); print('cluster CPUs', ray.cluster_resources()['CPU'])\"")
    assert job.returncode == 0 and "cluster CPUs" in job.stdout and "succeeded" in job.stdout, job.stdout[-2000:]


def _preflight(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "playbooks/preflight.yml", "-i", "inventories/sandbox", *extra],
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False, timeout=600)


def test_submit_playbook_runs_there_gated_on_the_heads_verdict(submit_host):
    # a verdict that measured no bandwidth passes the preflight but shuts the gate
    unmeasured = _preflight("-e", "preflight_collective=false")
    assert unmeasured.returncode == 0, unmeasured.stdout[-3000:]
    assert "bandwidth NOT measured (preflight_collective is false)" in unmeasured.stdout, unmeasured.stdout[-3000:]
    refused = on_submit(f"{BIN}/rayfleet-submit-rayfleet -- python train.py")
    assert refused.returncode != 0 and ("passed without measuring the all-reduce bandwidth (preflight_collective is "
                                        "false)") in refused.stdout, refused.stdout[-2000:]
    preflight = _preflight()
    assert preflight.returncode == 0, preflight.stdout[-3000:]
    assert on_submit("mkdir -p proj && echo 'import socket, sys; print(\"trained on\", socket.gethostname(), "
                     "sys.argv[1:])' > proj/train.py").returncode == 0
    ok = on_submit(f"{BIN}/rayfleet-submit-rayfleet -e submit_working_dir=proj -e submit_id=laptop-1 "
                   "-- python train.py --lr '3e-4 x'")
    assert ok.returncode == 0 and "passed (" in ok.stdout, ok.stdout[-3000:]
    log = on_submit("cat artifacts/jobs/laptop-1.log")
    assert f"trained on {container(SANDBOX + '-head')} ['--lr', '3e-4 x']" in log.stdout, log.stdout
    stale = on_submit(f"{BIN}/rayfleet-submit-rayfleet -e submit_preflight_max_age_s=0 -- python train.py")
    assert stale.returncode != 0 and "Not submitting: the preflight is" in stale.stdout, stale.stdout[-2000:]
    run = on_submit(f"{BIN}/rayfleet-submit-rayfleet -e submit_preflight=run -- python train.py")
    assert run.returncode != 0 and "From a submit host the preflight cannot run" in run.stdout, run.stdout[-2000:]


def test_a_killed_tunnel_comes_back(submit_host):
    before = on_submit(f"systemctl show -p MainPID --value {UNIT}").stdout.strip()
    assert on_submit(f"systemctl kill -s KILL {UNIT}", user="root").returncode == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        after = on_submit(f"systemctl show -p MainPID --value {UNIT}").stdout.strip()
        if after not in ("0", before) and http_status(f"http://127.0.0.1:{PORT}/api/version").get("status") == 200:
            return
        time.sleep(1)
    pytest.fail(f"the tunnel did not come back in 30 s: {on_submit(f'journalctl -u {UNIT} -n 10', user='root')}")


def test_bad_input_fails_before_anything_changes(submit_host):
    for extra, words in [
        ({"submit_host_user": "nobody-here"}, 'submit_host_user "nobody-here" has no account here'),
        ({"submit_host_cluster_name": "Team_A"}, 'submit_host_cluster_name is "Team_A"; expected lowercase letters'),
    ]:
        proc = submit_host_play("-e", json.dumps(extra))
        assert proc.returncode != 0 and words in proc.stdout and f"{SANDBOX}-submit" in proc.stdout, proc.stdout[-2000:]
        assert recap(proc)["changed"] == 0


def test_second_cluster_beside_the_first_is_removed_alone(submit_host, request):
    other = {"submit_host_cluster_name": "team-b", "submit_host_local_port": 8266, "submit_host_ansible": False}
    added = submit_host_play("-e", json.dumps(other))
    assert added.returncode == 0, added.stdout[-3000:]
    assert http_status("http://127.0.0.1:8266/api/version") == {"status": 200}
    keys = "/var/lib/rayfleet-tunnel/.ssh/authorized_keys"
    head = head_host(request)
    assert "rayfleet-tunnel team-b" in head.check_output(f"sudo cat {keys}")
    removed = submit_host_play("-e", json.dumps(dict(other, submit_host_state="absent")))
    assert removed.returncode == 0, removed.stdout[-3000:]
    left = on_submit(f"ls {HOME}/.config/rayfleet; ls {BIN}; systemctl is-active {UNIT} rayfleet-tunnel-team-b.service")
    assert left.stdout.split() == ["rayfleet", "ray-rayfleet", "rayfleet-submit-rayfleet", "rayfleet-tunnel-rayfleet",
                                   "active", "inactive"], left.stdout
    assert "rayfleet-tunnel team-b" not in head.check_output(f"sudo cat {keys}")
    assert "rayfleet-tunnel rayfleet" in head.check_output(f"sudo cat {keys}")
    assert http_status(f"http://127.0.0.1:{PORT}/api/version") == {"status": 200}
