# SPDX-License-Identifier: GPL-3.0-or-later
"""The SSH targets of an inventory's hosts as Ansible connects to them: address, port, user, key and known_hosts
file, read from ``ansible-inventory --list`` (rayfleet.dashboard's tunnel to the head uses them)."""

from __future__ import annotations

import getpass
import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GROUPS = ("ray_head", "ray_worker")


@dataclass
class Target:
    name: str
    address: str
    port: int = 22
    user: str = ""
    key_file: str | None = None
    known_hosts: str | None = None


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
        raise SystemExit(f"rayfleet: ansible-inventory failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)
