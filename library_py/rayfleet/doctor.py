# SPDX-License-Identifier: GPL-3.0-or-later
"""SSH preflight of every inventory host, in parallel and in seconds, before the long playbook starts.

Reads the inventory through ``ansible-inventory --list`` and connects to every host at once (paramiko)
with the address, port, user, key and known_hosts file Ansible would use. Host keys are verified: a
host whose key is unknown or changed fails, it is never trusted on first use. Per host it reports:
reachable, auth ok, passwordless sudo ok, Python present (>= 3.8), OS supported.

Examples:
  python -m rayfleet.doctor -i inventories/aws                # table; exit 1 if any host fails
  python -m rayfleet.doctor -i inventories/sandbox --json
  make doctor INVENTORY=inventories/onprem
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

# OS ID -> supported VERSION_ID prefixes (first-class targets of the roles)
SUPPORTED_OS = {
    "debian": ("12",),
    "ubuntu": ("22.04", "24.04"),
    "rocky": ("9",),
    "rhel": ("9",),
    "almalinux": ("9",),
    "amzn": ("2023",),
}
MIN_PYTHON = (3, 8)
GROUPS = ("ray_head", "ray_worker")


@dataclass
class Target:
    name: str
    address: str
    port: int = 22
    user: str = ""
    key_file: str | None = None
    known_hosts: str | None = None


@dataclass
class Report:
    name: str
    address: str
    reachable: bool = False
    auth: bool = False
    sudo: bool = False
    python: str = ""
    os: str = ""
    os_supported: bool = False
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reachable and self.auth and self.sudo and bool(self.python) and self.os_supported

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def parse_os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = shlex.split(value)[0] if value.strip() else ""
    return out


def os_supported(info: Mapping[str, str]) -> bool:
    versions = SUPPORTED_OS.get(info.get("ID", ""), ())
    version = info.get("VERSION_ID", "")
    return any(version == v or version.startswith(v + ".") for v in versions)


def known_hosts_from_args(args: str) -> str | None:
    """The UserKnownHostsFile named in ansible_ssh_common_args / ansible_ssh_extra_args, if any."""
    words = shlex.split(args or "")
    for i, word in enumerate(words):
        option = word
        if word == "-o" and i + 1 < len(words):
            option = words[i + 1]
        elif word.startswith("-o"):
            option = word[2:]
        else:
            continue
        key, _sep, value = option.partition("=")
        if key.strip().lower() == "userknownhostsfile" and value.strip():
            return os.path.expanduser(value.strip().split()[0])
    return None


def targets_from_inventory(inventory: Mapping[str, Any], groups: tuple[str, ...] = GROUPS) -> list[Target]:
    """Targets for every host of ``groups`` in ``ansible-inventory --list`` output."""
    hostvars = inventory.get("_meta", {}).get("hostvars", {})
    names: list[str] = []

    def walk(group: str) -> None:
        data = inventory.get(group) or {}
        for host in data.get("hosts", []):
            if host not in names:
                names.append(host)
        for child in data.get("children", []):
            walk(child)

    for group in groups:
        walk(group)
    targets = []
    for name in names:
        hv = hostvars.get(name, {})
        ssh_args = " ".join(str(hv.get(k) or "") for k in ("ansible_ssh_common_args", "ansible_ssh_extra_args"))
        key = hv.get("ansible_ssh_private_key_file") or hv.get("ansible_private_key_file")
        targets.append(Target(
            name=name,
            address=str(hv.get("ansible_host") or hv.get("ansible_ssh_host") or name),
            port=int(hv.get("ansible_port") or hv.get("ansible_ssh_port") or 22),
            user=str(hv.get("ansible_user") or hv.get("ansible_ssh_user") or getpass.getuser()),
            key_file=os.path.expanduser(str(key)) if key else None,
            known_hosts=known_hosts_from_args(ssh_args),
        ))
    return targets


def load_inventory(sources: list[str]) -> dict[str, Any]:
    cmd = ["ansible-inventory", "--list"]
    for src in sources:
        cmd += ["-i", src]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"rayfleet.doctor: ansible-inventory failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def _run(client: Any, command: str, timeout: float) -> tuple[int, str]:
    _stdin, stdout, _stderr = client.exec_command(command, timeout=timeout)
    out = stdout.read().decode(errors="replace")
    return stdout.channel.recv_exit_status(), out


def check(target: Target, timeout: float = 5.0) -> Report:
    import paramiko

    report = Report(target.name, target.address)
    start = time.monotonic()
    client = paramiko.SSHClient()
    try:
        if target.known_hosts:
            if not os.path.isfile(target.known_hosts):
                report.problems.append(f"known_hosts file {target.known_hosts} does not exist")
                return report
            client.load_host_keys(target.known_hosts)
        else:
            client.load_system_host_keys()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            sock = socket.create_connection((target.address, target.port), timeout=timeout)
        except OSError as exc:
            report.problems.append(f"cannot reach {target.address}:{target.port}: {exc.strerror or exc}")
            return report
        report.reachable = True
        try:
            client.connect(target.address, port=target.port, username=target.user, key_filename=target.key_file,
                           sock=sock, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                           allow_agent=target.key_file is None, look_for_keys=target.key_file is None)
        except paramiko.BadHostKeyException:
            report.problems.append(f"host key of {target.address} CHANGED since it was recorded in "
                                   f"{target.known_hosts or '~/.ssh/known_hosts'}: possible impersonation")
            return report
        except paramiko.AuthenticationException as exc:
            report.problems.append(f"auth failed as {target.user!r} (key {target.key_file or 'agent/default'}): {exc}")
            return report
        except paramiko.SSHException as exc:
            text = str(exc)
            if "not found in known_hosts" in text:
                text = (f"host key of {target.address} unknown: not in {target.known_hosts or '~/.ssh/known_hosts'}"
                        " (add it after checking its fingerprint; it is never trusted on first use)")
            report.problems.append(text)
            return report
        report.auth = True
        rc, _out = _run(client, "sudo -n true", timeout)
        report.sudo = rc == 0
        if not report.sudo:
            report.problems.append(f"passwordless sudo failed for {target.user!r} (rc={rc})")
        rc, out = _run(client, "python3 -c 'import sys; print(\"%d.%d.%d\" % sys.version_info[:3])'", timeout)
        if rc == 0 and out.strip():
            version = tuple(int(p) for p in out.strip().split("."))
            report.python = out.strip()
            if version[:2] < MIN_PYTHON:
                report.problems.append(f"python3 {report.python} is older than {'.'.join(map(str, MIN_PYTHON))}")
                report.python = ""
        else:
            report.problems.append("no python3 on the host")
        rc, out = _run(client, "cat /etc/os-release", timeout)
        info = parse_os_release(out) if rc == 0 else {}
        report.os = f"{info.get('ID', '?')} {info.get('VERSION_ID', '?')}"
        report.os_supported = os_supported(info)
        if not report.os_supported:
            report.problems.append(f"OS {report.os} is not a supported target "
                                   f"({', '.join(f'{k} {v}' for k, vs in SUPPORTED_OS.items() for v in vs)})")
    except (OSError, EOFError) as exc:
        report.problems.append(f"connection error: {exc}")
    finally:
        client.close()
        report.seconds = round(time.monotonic() - start, 2)
    return report


def check_all(targets: list[Target], timeout: float = 5.0) -> list[Report]:
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(64, len(targets))) as pool:
        return list(pool.map(lambda t: check(t, timeout), targets))


def format_table(reports: list[Report]) -> str:
    mark = {True: "ok", False: "FAIL"}
    rows = [("HOST", "ADDRESS", "REACH", "AUTH", "SUDO", "PYTHON", "OS", "SECONDS")]
    for r in reports:
        auth_cols = (mark[r.auth], mark[r.sudo] if r.auth else "-", r.python or ("FAIL" if r.auth else "-"),
                     (r.os + ("" if r.os_supported else " FAIL")) if r.auth else "-")
        rows.append((r.name, r.address, mark[r.reachable], *(auth_cols if r.reachable else ("-",) * 4),
                     f"{r.seconds:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    for r in reports:
        lines += [f"  {r.name}: {p}" for p in r.problems]
    bad = sum(not r.ok for r in reports)
    lines.append(f"{len(reports) - bad}/{len(reports)} hosts ready" + (f", {bad} not ready" if bad else ""))
    return "\n".join(lines)


def quiet_paramiko() -> None:
    """paramiko logs each failed connection with its traceback (Python's last-resort handler prints it to stderr);
    the table names the reason already."""
    log = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
        log.addHandler(logging.NullHandler())
    log.propagate = False


def main(argv: list[str] | None = None) -> int:
    quiet_paramiko()
    parser = argparse.ArgumentParser(prog="python -m rayfleet.doctor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-i", "--inventory", action="append", required=True, help="inventory source (repeatable)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per connection step")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    targets = targets_from_inventory(load_inventory(args.inventory))
    if not targets:
        print("rayfleet.doctor: no hosts in ray_head/ray_worker", file=sys.stderr)
        return 2
    start = time.monotonic()
    reports = check_all(targets, args.timeout)
    if args.json:
        print(json.dumps({"hosts": [r.to_dict() for r in reports], "seconds": round(time.monotonic() - start, 2)},
                         indent=2))
    else:
        print(format_table(reports))
        print(f"checked in {time.monotonic() - start:.1f} s")
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
