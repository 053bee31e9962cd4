# SPDX-License-Identifier: GPL-3.0-or-later
"""Ray token authentication (on by default): without the cluster's token the dashboard/state API, the
Jobs API and Ray's CLI are refused; with it they work. The token is 0600 on every node and on the controller."""

from __future__ import annotations

import urllib.error
import urllib.request

from conftest import RAY, RAY_NO_TOKEN, ROOT, SANDBOX, TOKEN_PATH, head_host, node_ip, role_of, run_site

CONTROLLER_TOKEN = ROOT / ".sandbox" / SANDBOX / "ray_auth_token"


def _get(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


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
    url = f"http://{node_ip(host)}:8265/api/v0/nodes"
    assert _get(url) in (401, 403), "the state API answered without a token"
    assert _get(url, "0" * 64) in (401, 403), "the state API accepted a wrong token"
    assert _get(url, CONTROLLER_TOKEN.read_text().strip()) == 200


def test_cli_and_jobs_refused_without_the_token(request):
    host = head_host(request)
    ip = node_ip(host)
    listed = host.run(f"cd /tmp && timeout 60 {RAY_NO_TOKEN} list nodes --address http://{ip}:8265")
    assert listed.rc != 0, f"ray list nodes worked without the token:\n{listed.stdout}"
    job = host.run(f"cd /tmp && timeout 60 {RAY_NO_TOKEN} job submit --no-wait --address http://{ip}:8265 -- true")
    assert job.rc != 0, f"a job was accepted without the token:\n{job.stdout}"
    assert host.run(f"cd /tmp && timeout 60 {RAY} list nodes --address http://{ip}:8265").rc == 0


def test_token_never_appears_in_ansible_output():
    """A verbose, diffing re-run of the ray stage prints no token (no_log) and changes nothing."""
    proc = run_site("--tags", "ray", "-v", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert CONTROLLER_TOKEN.read_text().strip() not in proc.stdout + proc.stderr
    assert "changed=0" in proc.stdout and "changed=1" not in proc.stdout
