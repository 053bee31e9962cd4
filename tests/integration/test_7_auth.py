# SPDX-License-Identifier: GPL-3.0-or-later
"""Ray token authentication (on by default): without the cluster's token the dashboard/state API, the
Jobs API and Ray's CLI are refused; with it they work. The token is 0600 on every node and on the controller."""

from __future__ import annotations

import shlex

from conftest import DASHBOARD, RAY, RAY_NO_TOKEN, ROOT, SANDBOX, TOKEN_PATH, head_host, role_of, run_site

CONTROLLER_TOKEN = ROOT / ".sandbox" / SANDBOX / "ray_auth_token"


def _get(head, url: str, token: str | None = None) -> int:
    """HTTP status of a GET on the head (the dashboard listens on its loopback)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    script = ("import sys, urllib.error, urllib.request\n"
              f"req = urllib.request.Request({url!r}, headers={headers!r})\n"
              "try:\n    print(urllib.request.urlopen(req, timeout=10).status)\n"
              "except urllib.error.HTTPError as exc:\n    print(exc.code)\n")
    return int(head.check_output(f"python3 -c {shlex.quote(script)}"))


def test_token_files_are_private(host):
    assert oct(CONTROLLER_TOKEN.stat().st_mode & 0o777) == "0o600"
    with host.sudo():
        token = host.file(TOKEN_PATH)
        assert token.is_file and token.user == "rayfleet" and token.mode == 0o600
        assert token.content_string.strip() == CONTROLLER_TOKEN.read_text().strip()
    unit = host.file(f"/etc/systemd/system/ray-{role_of(host)}.service").content_string
    assert CONTROLLER_TOKEN.read_text().strip() not in unit, "the token must not be written into the unit"


def test_state_api_refuses_requests_without_the_token(request):
    host = head_host(request)
    url = f"{DASHBOARD}/api/v0/nodes"
    assert _get(host, url) in (401, 403), "the state API answered without a token"
    assert _get(host, url, "0" * 64) in (401, 403), "the state API accepted a wrong token"
    assert _get(host, url, CONTROLLER_TOKEN.read_text().strip()) == 200


def test_cli_and_jobs_refused_without_the_token(request):
    host = head_host(request)
    listed = host.run(f"cd /tmp && timeout 60 {RAY_NO_TOKEN} list nodes --address {DASHBOARD}")
    assert listed.rc != 0, f"ray list nodes worked without the token:\n{listed.stdout}"
    job = host.run(f"cd /tmp && timeout 60 {RAY_NO_TOKEN} job submit --no-wait --address {DASHBOARD} -- true")
    assert job.rc != 0, f"a job was accepted without the token:\n{job.stdout}"
    assert host.run(f"cd /tmp && timeout 60 {RAY} list nodes --address {DASHBOARD}").rc == 0


def test_token_never_appears_in_ansible_output():
    """A verbose, diffing re-run of the ray stage prints no token (no_log) and changes nothing."""
    proc = run_site("--tags", "ray", "-v", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert CONTROLLER_TOKEN.read_text().strip() not in proc.stdout + proc.stderr
    assert "changed=0" in proc.stdout and "changed=1" not in proc.stdout
