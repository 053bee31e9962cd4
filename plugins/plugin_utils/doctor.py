# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The doctor's verdict on each host (playbooks/doctor.yml): whether Ansible reaches it and logs in as it will for
site.yml (its own connection settings, host keys verified), whether privilege escalation works, and whether the host
has a Python and an OS the roles support - each failure in words, one table.

Pure Python (the doctor_report action reads the probes' results from the hosts' variables); unit-tested as
functions.
"""

from __future__ import annotations

import re
import shlex

# OS ID -> the VERSION_IDs the roles support (a point release of one counts)
SUPPORTED_OS = {
    "debian": ("12",),
    "ubuntu": ("22.04", "24.04"),
    "rocky": ("9",),
    "rhel": ("9",),
    "almalinux": ("9",),
    "amzn": ("2023",),
}
MIN_PYTHON = (3, 8)

# The line playbooks/doctor.yml's probe prints (ansible.builtin.raw: no Python needed on the host)
PROBE_LINE = re.compile(r"rayfleet-doctor (.*)$", re.M)

# What ssh says, in words (the first pattern that matches an unreachable host's message)
SSH_REASONS = (
    (re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED", re.I),
     "its host key CHANGED since it was recorded in known_hosts: a reinstalled host or an impersonation; check the "
     "fingerprint, then replace the entry"),
    (re.compile(r"host key is known|Host key verification failed|No \S+ host key is known", re.I),
     "its host key is not in known_hosts (it is never trusted on first use): add it after checking its fingerprint "
     "(ssh-keyscan, then compare with the provider's console)"),
    (re.compile(r"Permission denied|Authentication failed|Too many authentication failures", re.I),
     "it refused the login: check ansible_user and the key (ansible_ssh_private_key_file or the agent)"),
    (re.compile(r"Could not resolve hostname|Name or service not known|nodename nor servname", re.I),
     "its name does not resolve: check ansible_host"),
    (re.compile(r"timed out|No route to host|Connection refused|Network is unreachable|Connection reset", re.I),
     "no SSH server answers at its address: check ansible_host, ansible_port, the host's state and the network "
     "between"),
)


def os_supported(os_id, version):
    """Whether the roles support OS os_id at VERSION_ID version."""
    return any(version == v or version.startswith(v + ".") for v in SUPPORTED_OS.get(os_id, ()))


def supported_text():
    return ", ".join("%s %s" % (os_id, version) for os_id, versions in SUPPORTED_OS.items() for version in versions)


def parse_probe(stdout):
    """The probe's key=value words ({} when its line is missing)."""
    found = PROBE_LINE.search(stdout or "")
    if not found:
        return {}
    words = shlex.split(found.group(1))
    return dict(word.split("=", 1) for word in words if "=" in word)


def ssh_reason(message):
    """An unreachable host's reason in words, with the last line ssh printed."""
    text = str(message or "").replace("\r", "")
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    # Ansible's own words around ssh's
    for prefix in ("Task failed: ", "Failed to connect to the host via ssh: ", "ssh: "):
        last = last[len(prefix):] if last.startswith(prefix) else last
    for pattern, reason in SSH_REASONS:
        if pattern.search(text):
            return "%s (%s)" % (reason, last) if last else reason
    return "Ansible cannot connect: %s" % (last or "no reason given")


def verdict(host, address, probe, become):
    """One host's row: probe and become, the registered results of the doctor's two raw tasks (None when the task
    did not run there). Returns {host, address, ssh, become, python, os, ok, problems}."""
    row = {"host": host, "address": address, "ssh": False, "become": False, "python": "", "os": "", "ok": False,
           "problems": []}
    problems = row["problems"]
    if not isinstance(probe, dict) or probe.get("unreachable"):
        problems.append(ssh_reason((probe or {}).get("msg")) if isinstance(probe, dict)
                        else "the probe did not run (the host is in no group the doctor reads)")
        return row
    row["ssh"] = True
    info = parse_probe(probe.get("stdout"))
    if probe.get("rc") not in (0, None) or not info:
        said = (probe.get("stderr") or probe.get("msg") or "").strip()[-300:]
        problems.append("the probe failed (rc=%s): %s" % (probe.get("rc"), said))
        return row
    python = info.get("python", "")
    if not python:
        problems.append("no python3 on the host (the roles' modules need it)")
    elif tuple(int(part) for part in python.split(".")[:2]) < MIN_PYTHON:
        problems.append("python3 %s is older than %d.%d" % (python, *MIN_PYTHON))
    else:
        row["python"] = python
    os_id, version = info.get("os_id", ""), info.get("os_version", "")
    row["os"] = ("%s %s" % (os_id, version)).strip() or "unknown"
    if not os_supported(os_id, version):
        problems.append("OS %s is not one the roles support (%s)" % (row["os"], supported_text()))
    row["os_supported"] = os_supported(os_id, version)
    if isinstance(become, dict) and not become.get("unreachable") and become.get("rc") == 0 \
            and not become.get("failed"):
        row["become"] = True
    else:
        detail = ((become or {}).get("msg") or (become or {}).get("stderr") or "").strip().splitlines()
        problems.append("privilege escalation failed (become, as site.yml uses it): %s; expected passwordless sudo, "
                        "or ansible_become_password" % (detail[-1] if detail else "no result"))
    row["ok"] = not problems
    return row


def table(rows):
    """The doctor's table: one line per host, then each problem, then the count of hosts ready."""
    mark = {True: "ok", False: "FAIL"}
    lines = [("HOST", "ADDRESS", "SSH", "BECOME", "PYTHON", "OS")]
    for row in rows:
        reached = row["ssh"]
        lines.append((row["host"], row["address"], mark[reached],
                      mark[row["become"]] if reached else "-",
                      (row["python"] or "FAIL") if reached else "-",
                      ((row["os"] + ("" if row.get("os_supported") else " FAIL")) if row["os"] else "FAIL")
                      if reached else "-"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
    out += ["  %s: %s" % (row["host"], problem) for row in rows for problem in row["problems"]]
    bad = sum(not row["ok"] for row in rows)
    out.append("%d/%d hosts ready%s" % (len(rows) - bad, len(rows), ", %d not ready" % bad if bad else ""))
    return out
