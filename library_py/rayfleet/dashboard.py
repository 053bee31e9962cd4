"""The head's Ray dashboard (and Jobs API) at hand: an SSH tunnel from this machine, with the host key verified.

The dashboard listens on the head's cluster address only (never 0.0.0.0) and the firewall admits only the cluster
(and firewall_ray_allowed_sources); from anywhere else it is reached through SSH, as Ansible reaches the head:
same address, port, user, key and UserKnownHostsFile, StrictHostKeyChecking=yes.

Examples:
  make dashboard INVENTORY=inventories/aws          # open the tunnel, print the URL; Ctrl-C closes it
  python -m rayfleet.dashboard -i inventories/sandbox --print    # only print the ssh command
  python -m rayfleet.dashboard -i inventories/sandbox --check --json   # open, check it answers, close
"""

from __future__ import annotations

import argparse
import http.client
import json
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rayfleet.ssh_targets import Target, load_inventory, targets_from_inventory

DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_DASHBOARD_HOST = "127.0.0.1"  # the ray role's ray_dashboard_host


def head_of(inventory: Mapping[str, Any]) -> tuple[Target, str, int]:
    """The head's SSH target, and where its dashboard listens (host, port) as the ray role configures it."""
    targets = targets_from_inventory(inventory, groups=("ray_head",))
    if len(targets) != 1:
        raise SystemExit(f"rayfleet.dashboard: the inventory must have exactly one host in ray_head, found "
                         f"{[t.name for t in targets]}")
    head = targets[0]
    hv = inventory.get("_meta", {}).get("hostvars", {}).get(head.name, {})
    # the ray role's default: the head's loopback; "" means its cluster address
    host = str(hv.get("ray_dashboard_host", DEFAULT_DASHBOARD_HOST) or hv.get("ray_node_ip") or head.address)
    port = int(hv.get("ray_dashboard_port") or DEFAULT_DASHBOARD_PORT)
    return head, host, port


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grafana_of(inventory: Mapping[str, Any], head: Target) -> tuple[str, int] | None:
    """Where the monitoring role's Grafana listens on the head (host, port), or None when it runs none there."""
    hv = inventory.get("_meta", {}).get("hostvars", {}).get(head.name, {})
    on = hv.get("monitoring_enabled", True) and hv.get("monitoring_grafana", False)
    if not on or hv.get("monitoring_host", head.name) != head.name:
        return None
    host, _sep, port = str(hv.get("monitoring_grafana_listen") or "127.0.0.1:3000").rpartition(":")
    return host.strip("[]"), int(port)


def ssh_command(head: Target, dashboard_host: str, dashboard_port: int, local_port: int,
                grafana: tuple[str, int, int] | None = None) -> list[str]:
    """The tunnel; grafana (host, port, local port) adds Grafana's forward, for the dashboard's Metrics tab."""
    cmd = ["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-o", "StrictHostKeyChecking=yes",
           "-o", "BatchMode=yes", "-o", "ServerAliveInterval=15", "-p", str(head.port),
           "-L", f"127.0.0.1:{local_port}:{dashboard_host}:{dashboard_port}"]
    if grafana:
        cmd += ["-L", f"127.0.0.1:{grafana[2]}:{grafana[0]}:{grafana[1]}"]
    if head.known_hosts:
        cmd += ["-o", f"UserKnownHostsFile={head.known_hosts}"]
    if head.key_file:
        cmd += ["-i", head.key_file, "-o", "IdentitiesOnly=yes"]
    cmd.append(f"{head.user}@{head.address}" if head.user else head.address)
    return cmd


def probe(url: str, token: str | None = None, timeout: float = 2.0) -> tuple[int | None, dict[str, Any]]:
    """(HTTP status, body) of Ray's /api/version through the tunnel: 401 means up but the token is needed;
    (None, {}) no answer."""
    request = urllib.request.Request(f"{url}/api/version")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            try:
                return resp.status, json.loads(resp.read())
            except ValueError:
                return resp.status, {}
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except (OSError, http.client.HTTPException):  # the tunnel still coming up: accepted, then dropped
        return None, {}


def open_tunnel(cmd: list[str], url: str, wait_s: float,
                token: str | None = None) -> tuple[subprocess.Popen, int | None, dict[str, Any]]:
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + wait_s
    status, body = None, {}
    while time.monotonic() < deadline and proc.poll() is None:
        status, body = probe(url, token)
        if status is not None:
            break
        time.sleep(0.3)
    return proc, status, body


def stop(proc: subprocess.Popen) -> str:
    """End the tunnel: SIGTERM, then SIGKILL after 3 s (ssh can linger on an open forwarded channel); its stderr."""
    proc.terminate()
    try:
        _out, err = proc.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
    return err or ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.dashboard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-i", "--inventory", action="append", required=True, help="inventory source (repeatable)")
    parser.add_argument("--local-port", type=int, default=DEFAULT_DASHBOARD_PORT,
                        help="port on this machine's loopback (0: any free one)")
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the ssh command and exit")
    parser.add_argument("--check", action="store_true", help="open the tunnel, check the dashboard answers, close")
    parser.add_argument("--wait", type=float, default=20.0, help="seconds to wait for the dashboard to answer")
    parser.add_argument("--token-file", type=Path,
                        help="the cluster's Ray token (default: <inventory>/credentials/ray_auth_token, or "
                             "ray_auth_token-<name> for a cluster with a ray_cluster_name, if present)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    inventory = load_inventory(args.inventory)
    head, host, port = head_of(inventory)
    name = str(inventory.get("_meta", {}).get("hostvars", {}).get(head.name, {}).get("ray_cluster_name") or "")
    token_file = args.token_file or Path(args.inventory[0]) / "credentials" / (
        "ray_auth_token" + (f"-{name}" if name else ""))
    token = token_file.read_text().strip() if token_file.is_file() else None
    local = args.local_port or free_port()
    url = f"http://127.0.0.1:{local}"
    grafana = grafana_of(inventory, head)
    # The dashboard's Metrics tab loads Grafana's panels from the address the ray role gave it (by default
    # http://127.0.0.1:<Grafana's port>), so Grafana is forwarded to the same port here.
    cmd = ssh_command(head, host, port, local, (*grafana, grafana[1]) if grafana else None)
    if args.print_only:
        print(shlex.join(cmd))
        return 0
    proc, status, body = open_tunnel(cmd, url, args.wait, token)
    result = {"head": head.name, "dashboard": f"{host}:{port}", "url": url, "http_status": status,
              "ray_version": body.get("ray_version", ""), "ssh": shlex.join(cmd),
              "ok": status == 200 or (status == 401 and not token)}
    if not result["ok"]:
        err = stop(proc)
        result["error"] = (
            f"the dashboard refused the token in {token_file} (HTTP {status})" if status in (401, 403) else
            f"the dashboard answered HTTP {status}" if status is not None else
            (err or "").strip()[-500:] or f"no answer from the dashboard within {args.wait:g} s")
    out = json.dumps(result, indent=2) if args.json else (
        f"Ray {result['ray_version'] or '(version: pass the token)'} dashboard of {head.name} ({host}:{port}): {url}"
        if result["ok"] else
        f"rayfleet.dashboard: no tunnel to {head.name}'s dashboard ({host}:{port}): {result['error']}")
    print(out)
    if not result["ok"]:
        return 1
    if args.check:
        stop(proc)
        return 0
    if not args.json:
        print(f"Jobs API: RAY_ADDRESS={url} ray job submit ...", end="")
        print(f" (with RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={token_file})" if token else "")
        if grafana:
            print(f"Grafana (the dashboard's Metrics tab): http://127.0.0.1:{grafana[1]}")
        print("Ctrl-C closes the tunnel.")
    try:
        return proc.wait()
    except KeyboardInterrupt:
        stop(proc)
        return 0


if __name__ == "__main__":
    sys.exit(main())
