# SPDX-License-Identifier: GPL-3.0-or-later
"""Image hygiene: is this filesystem safe and clean to snapshot into an image many nodes boot from?

In the spirit of image-builder's goss checks. Each check reads files only (under --root), so it runs on the
builder before the snapshot and in unit tests against a fake tree. Prints JSON; exits 1 when any check fails.

  python3 image_hygiene.py --root / --hold 'nvidia-*' --hold 'cuda-*' --max-log-bytes 1048576
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from pathlib import Path

# Node-specific or secret files a baked image must not carry (globs, relative to the root): those of every cluster
# the builder may have belonged to, named (ray_cluster_name: auth-token-<name>, ray-<name>-head.json) or not.
SECRET_GLOBS = [
    "etc/rayfleet/auth-token*",  # a cluster's Ray token
    "etc/rayfleet/launch.json",  # one node's launch (role, head address)
    "etc/rayfleet/ray-*.json",  # one node's settings (its IP) and its container record
    "etc/rayfleet/preflight*.json",  # one cluster's verdict
    "etc/rayfleet/checkpoint.env",  # the checkpoint store's S3 credentials
    "etc/rayfleet/firewall.d/*",  # a cluster's hosts, admitted by the shared firewall table
    "etc/rayfleet/monitoring*.json",  # a cluster's scrape targets
    "etc/rayfleet/health*.json",  # one node's health record (its node ids, what it drained)
    "etc/nftables.rayfleet*.nft",  # a cluster's firewall rules (its hosts' addresses)
    "etc/grafana/rayfleet-admin.env",  # Grafana's admin password
    "var/lib/grafana/grafana.db",  # Grafana's users and sessions
    "root/.aws/credentials",
    "root/.docker/config.json",
]
# The units of one cluster's node, of any cluster: Ray (ray[-<name>]-head/worker.service), its firewall
# (rayfleet-firewall[-<name>|-ephemeral].service), its spot-notice watcher (rayfleet-preemption[-<name>].service) and
# its health checks (rayfleet-health[-<name>].timer)
NODE_UNIT = re.compile(r"^((ray(-[a-z0-9][a-z0-9-]*)?-(head|worker)"
                       r"|rayfleet-(firewall|preemption)(-[a-z0-9][a-z0-9-]*)?)\.service"
                       r"|rayfleet-health(-[a-z0-9][a-z0-9-]*)?\.timer)$")
# System users' homes that hold keys too (the Ray user's /var/lib/rayfleet: the cluster's SSH key)
SYSTEM_HOMES = re.compile(r"^/(var/lib|opt|srv)/[^/]+")
SSH_PRIVATE = ["id_rsa", "id_ecdsa", "id_ed25519", "id_dsa", "id_ecdsa_sk", "id_ed25519_sk"]
HISTORIES = [".bash_history", ".python_history", ".lesshst", ".viminfo", ".wget-hsts", ".sudo_as_admin_successful"]
CLOUD_INIT_STATE = ["var/lib/cloud/instance", "var/lib/cloud/instances", "var/lib/cloud/data/instance-id"]
# Runtime entries of running services (gone at the next boot), not leftovers
RUNTIME_TEMP = (".X11-unix", ".ICE-unix", ".font-unix", ".XIM-unix", ".Test-unix", "systemd-private-")
DRIFT_TIMERS = ["apt-daily.timer", "apt-daily-upgrade.timer", "dnf-makecache.timer", "dnf-automatic.timer"]


def homes(root: Path) -> list[Path]:
    """/root, every /home/*, and the homes /etc/passwd gives system users under /var/lib, /opt or /srv."""
    found = [root / "root"]
    if (root / "home").is_dir():
        found += sorted(p for p in (root / "home").iterdir() if p.is_dir())
    passwd = root / "etc/passwd"
    if passwd.exists():
        for line in passwd.read_text(errors="replace").splitlines():
            fields = line.split(":")
            if len(fields) > 5 and SYSTEM_HOMES.match(fields[5]) and (root / fields[5].lstrip("/")).is_dir():
                found.append(root / fields[5].lstrip("/"))
    return list(dict.fromkeys(found))


def rel(root: Path, path: Path) -> str:
    return "/" + str(path.relative_to(root))


def check_ssh_host_keys(root: Path, _args) -> list[str]:
    return [rel(root, p) for p in sorted((root / "etc/ssh").glob("ssh_host_*"))]


def check_machine_id(root: Path, _args) -> list[str]:
    bad = []
    mid = root / "etc/machine-id"
    if mid.exists() and mid.read_text().strip():
        bad.append("/etc/machine-id is not empty (every node booted from the image would share it)")
    dbus = root / "var/lib/dbus/machine-id"
    if dbus.exists() and not dbus.is_symlink() and dbus.read_text().strip():
        bad.append("/var/lib/dbus/machine-id holds an id")
    return bad


def check_cloud_init(root: Path, _args) -> list[str]:
    bad = [f"/{p}" for p in CLOUD_INIT_STATE if (root / p).exists() or (root / p).is_symlink()]
    bad += [rel(root, p) for p in sorted((root / "var/log").glob("cloud-init*.log")) if p.stat().st_size]
    return bad


def check_secrets(root: Path, args) -> list[str]:
    bad = [rel(root, p) for pattern in SECRET_GLOBS for p in root.glob(pattern) if p.exists() or p.is_symlink()]
    for home in homes(root):
        ssh = home / ".ssh"
        bad += [rel(root, ssh / name) for name in SSH_PRIVATE if (ssh / name).exists()]
        if not args.allow_authorized_keys and (ssh / "authorized_keys").exists():
            bad.append(rel(root, ssh / "authorized_keys"))
        if (home / ".aws/credentials").exists():
            bad.append(rel(root, home / ".aws/credentials"))
    return sorted(set(bad))


def check_histories(root: Path, _args) -> list[str]:
    return [rel(root, h / name) for h in homes(root) for name in HISTORIES if (h / name).exists()]


def check_logs(root: Path, args) -> list[str]:
    logs = root / "var/log"
    if not logs.is_dir():
        return []
    # journald's active files are preallocated (8 MiB chunks) and rotated by the cleanup: not counted
    files = [p for p in logs.rglob("*") if p.is_file() and not p.is_symlink() and "journal" not in p.parts]
    total = sum(p.stat().st_size for p in files)
    if total <= args.max_log_bytes:
        return []
    biggest = sorted(files, key=lambda p: p.stat().st_size, reverse=True)[:3]
    return [f"/var/log holds {total} bytes (limit {args.max_log_bytes}); largest: "
            + ", ".join(f"{rel(root, p)} ({p.stat().st_size})" for p in biggest)]


def check_temp(root: Path, args) -> list[str]:
    bad = []
    for tmp in ["tmp", "var/tmp", *[t.lstrip("/") for t in args.ray_temp_dir]]:
        d = root / tmp
        if d.is_dir():
            bad += [rel(root, p) for p in sorted(d.iterdir()) if not p.name.startswith(RUNTIME_TEMP)]
    return sorted(set(bad))


def check_package_caches(root: Path, _args) -> list[str]:
    bad = [rel(root, p) for p in sorted((root / "var/cache/apt/archives").glob("*.deb"))]
    bad += [rel(root, h / ".cache/pip") for h in homes(root) if (h / ".cache/pip").exists()]
    return bad


def check_drift(root: Path, _args) -> list[str]:
    """Nodes booted from the image must not upgrade themselves away from the baked versions."""
    bad = []
    wants = root / "etc/systemd/system/timers.target.wants"
    for timer in DRIFT_TIMERS:
        masked = root / "etc/systemd/system" / timer
        if (wants / timer).exists() and not (masked.is_symlink() and str(masked.readlink()) == "/dev/null"):
            bad.append(f"{timer} is enabled (mask it)")
    auto = root / "etc/apt/apt.conf.d/20auto-upgrades"
    if auto.exists() and 'Unattended-Upgrade "1"' in auto.read_text():
        bad.append("/etc/apt/apt.conf.d/20auto-upgrades turns unattended upgrades on")
    return bad


def check_node_units(root: Path, _args) -> list[str]:
    """No unit of a cluster's node may start at boot by itself: rayfleet-launch.service enables the Ray unit the
    launch file names, site.yml the rest. One enabled in the image would start a node of the builder's cluster, or
    load its firewall rules, with settings that are not there (or name another cluster's hosts)."""
    system = root / "etc/systemd/system"
    if not system.is_dir():
        return []
    return [f"{rel(root, link)} is enabled (disable it: launch and site.yml enable what a node needs)"
            for wants in sorted(system.glob("*.wants")) for link in sorted(wants.iterdir())
            if NODE_UNIT.match(link.name)]


def dpkg_status(root: Path) -> dict[str, str]:
    """Installed package -> its selection (install/hold), from dpkg's status file."""
    status = root / "var/lib/dpkg/status"
    found: dict[str, str] = {}
    if not status.exists():
        return found
    for stanza in status.read_text(errors="replace").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        state = fields.get("Status", "").split()
        if "Package" in fields and len(state) == 3 and state[2] == "installed":
            found[fields["Package"]] = state[0]
    return found


def check_holds(root: Path, args) -> list[str]:
    installed = dpkg_status(root)
    return [f"{name} is installed but not held (apt upgrade would move it)"
            for name, selection in sorted(installed.items())
            if selection != "hold" and any(fnmatch.fnmatch(name, pattern) for pattern in args.hold)]


CHECKS = {
    "ssh_host_keys_removed": check_ssh_host_keys,
    "machine_id_empty": check_machine_id,
    "cloud_init_clean": check_cloud_init,
    "no_secrets": check_secrets,
    "no_shell_history": check_histories,
    "logs_small": check_logs,
    "temp_dirs_empty": check_temp,
    "package_caches_empty": check_package_caches,
    "no_self_upgrades": check_drift,
    "no_cluster_units_enabled": check_node_units,
    "gpu_packages_held": check_holds,
}


def run(root: Path, args) -> dict:
    results = []
    for name, check in CHECKS.items():
        problems = check(root, args)
        results.append({"name": name, "ok": not problems, "problems": problems})
    return {"ok": all(r["ok"] for r in results), "root": str(root), "checks": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("/"))
    parser.add_argument("--hold", action="append", default=[], metavar="GLOB",
                        help="installed packages matching this must be held (repeatable)")
    parser.add_argument("--max-log-bytes", type=int, default=1 << 20)
    parser.add_argument("--ray-temp-dir", action="append", default=[], help="Ray temp dirs that must be empty")
    parser.add_argument("--allow-authorized-keys", action="store_true",
                        help="keep login users' authorized_keys (images for launchers that inject no key)")
    args = parser.parse_args(argv)
    report = run(args.root.resolve(), args)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
