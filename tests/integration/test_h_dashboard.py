# SPDX-License-Identifier: GPL-3.0-or-later
"""make dashboard: an SSH tunnel from the controller (host key verified) to the head's dashboard, which answers
Ray's version API with the cluster's token and refuses a wrong one."""

from __future__ import annotations

import json
import subprocess

from conftest import ROOT, SANDBOX, ansible_env

TOKEN = ROOT / ".sandbox" / SANDBOX / "ray_auth_token"


def dashboard(*args: str) -> subprocess.CompletedProcess:
    env = ansible_env(PYTHONPATH=str(ROOT / "library_py"))
    return subprocess.run(["python", "-m", "rayfleet.dashboard", "-i", "inventories/sandbox", "--local-port", "0",
                           "--check", "--json", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False, timeout=120)


def test_the_tunnel_reaches_rays_dashboard_with_the_token(request):
    proc = dashboard("--token-file", str(TOKEN))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = json.loads(proc.stdout)
    assert found["ok"] and found["http_status"] == 200 and found["ray_version"]
    assert found["head"] == f"{SANDBOX}-head" and found["url"].startswith("http://127.0.0.1:")
    assert "StrictHostKeyChecking=yes" in found["ssh"] and "UserKnownHostsFile=" in found["ssh"]


def test_a_wrong_token_is_refused_and_said_so(tmp_path):
    wrong = tmp_path / "token"
    wrong.write_text("0" * 64 + "\n")
    proc = dashboard("--token-file", str(wrong))
    assert proc.returncode == 1 and proc.stdout.strip(), proc.stdout + proc.stderr
    found = json.loads(proc.stdout)
    assert not found["ok"] and found["error"].startswith(f"the dashboard refused the token in {wrong} (HTTP 40")
