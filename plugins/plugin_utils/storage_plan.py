# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The storage plan: a host's shared-storage mounts, checked and resolved from the shared_storage role's variables.

Pure Python on the controller (the ``rayfleet.cluster.plan`` action calls it); the shared_storage role reads
the result instead of computing its mounts with Jinja. Every problem is collected, each naming the host, the variable
(``shared_storage_mounts[<i>]`` and the field for a mount) and the bad value, and saying what was expected: the action
fails before anything changes.

Each mount resolves to: path, type, server (the address the client mounts: the given ``server``, the ``ansible_host``
of ``server_host``, or EFS's DNS name ``<efs_id>.efs.<region>.amazonaws.com``), export, server_host, fstype (``efs``
for EFS through amazon-efs-utils' TLS helper, else ``nfs4``), src (fstab's source: ``<efs_id>:/``, or
``<server>:<export>`` with an IPv6 server in brackets), opts (the mount's options, else the provider's, plus the boot
options), owner, group, mode and state.

Given the host's OS family, the plan also checks where an efs mount with TLS gets amazon-efs-utils from: the
RedHat family's package; on Debian/Ubuntu, which do not package it, a .deb (``shared_storage_efs_utils_deb``, a URL
with its sha256) or efs-utils' source release (``shared_storage_efs_utils_source``: an https URL with its sha256, or
a file on the controller, compared with its sha256 when one is given), at ``shared_storage_efs_utils_version``.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    account,
    boolean,
    check_hostname,
    check_ip,
    check_ownership,
    path_problem,
)

# The keys a mount may have (the role's defaults/main.yml and meta/argument_specs.yml document them)
MOUNT_KEYS = ("path", "type", "server", "server_host", "export", "efs_id", "region", "tls", "options", "owner", "group",
              "mode", "state")
TYPES = ("nfs", "efs")
STATES = ("mounted", "absent")
ON_DEGRADED = ("warn", "fail")
DEFAULT_MODE = "0775"
DEFAULT_USER = "rayfleet"
# An absolute mount point: no blanks, no trailing slash (and not / itself)
MOUNT_PATH = re.compile(r"^/\S*[^/\s]$")
EFS_ID = re.compile(r"^fs-[0-9a-f]{8,17}$")
# An AWS region (us-east-1, eu-central-2, us-gov-west-1, cn-northwest-1)
AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+$")
# Mount options as fstab takes them: comma-separated, no blanks
MOUNT_OPTIONS = re.compile(r"^[^\s,]+(,[^\s,]+)*$")
# amazon-efs-utils on Debian/Ubuntu: a URL (downloaded, checked against its sha256) or a path on the host
URL_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
HTTPS_SOURCE = re.compile(r"^https://[^/ ]+/")
EFS_UTILS_VERSION = re.compile(r"^[0-9]+([.][0-9]+)*$")
EFS_UTILS_VARS = ("shared_storage_efs_utils_deb", "shared_storage_efs_utils_deb_checksum",
                  "shared_storage_efs_utils_source", "shared_storage_efs_utils_source_checksum",
                  "shared_storage_efs_utils_version")
SOURCE_EXPECTED = ("efs-utils' source release as an https URL with its checksum (sha256:<64 hex digits>), or as an "
                   "absolute path of a file on the controller")
MOUNT_EXPECTED = ("Each mount of shared_storage_mounts is a dict of %s; see the shared_storage role's "
                  "defaults/main.yml." % ", ".join(MOUNT_KEYS))


def _seconds(value):
    """value as a number of seconds > 0 (an int, a float or their text), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if number > 0 else None


def _server(value):
    """value when it is an IP address or a DNS name as written (no blanks around it), else None."""
    if not isinstance(value, str) or value != value.strip():
        return None
    return value if check_ip(value) or check_hostname(value) else None


def _text(value):
    """value when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


class _Mount:
    """One entry of shared_storage_mounts being checked: its problems say where they are."""

    def __init__(self, host, index, item, problems):
        self.host, self.index, self.item, self.problems = host, index, item, problems
        path = item.get("path")
        self.label = " (%s)" % path if isinstance(path, str) and MOUNT_PATH.match(path) else ""

    def problem(self, text):
        self.problems.append("shared_storage on %s: shared_storage_mounts[%d]%s: %s"
                             % (self.host, self.index, self.label, text))

    def bad(self, key, expected):
        shown = "is %s" % _json(self.item[key]) if key in self.item else "is not set"
        self.problem("%s %s; expected %s." % (key, shown, expected))


def _check_globals(host, v, problems):
    """The problems of the role's variables besides the mounts (each one sentence, with the host)."""
    bad = Problems("shared_storage", host, v, problems).bad

    if v.get("shared_storage_on_degraded") not in ON_DEGRADED:
        bad("shared_storage_on_degraded", "warn or fail")
    if _seconds(v.get("shared_storage_probe_timeout")) is None:
        bad("shared_storage_probe_timeout", "seconds, a number > 0")
    if boolean(v.get("shared_storage_efs_tls")) is None:
        bad("shared_storage_efs_tls", "true or false")
    if not isinstance(v.get("shared_storage_nfs_options"), str) or not MOUNT_OPTIONS.match(
            v["shared_storage_nfs_options"]):
        bad("shared_storage_nfs_options", "mount options, comma-separated, without blanks")
    boot = v.get("shared_storage_boot_options")
    if not isinstance(boot, str) or (boot and not MOUNT_OPTIONS.match(boot)):
        bad("shared_storage_boot_options", "mount options, comma-separated, without blanks (or empty)")
    region = v.get("shared_storage_efs_region")
    if region is not None and not isinstance(region, str):
        bad("shared_storage_efs_region", "an AWS region such as us-east-1, or empty")
    for var in ("common_user", "common_group"):
        value = v.get(var, DEFAULT_USER)
        if account(value) is None:
            bad(var, "a user or group name (the default owner and group of the mount points)")


def _check_mount(mount, v, nfs_servers):
    """Check one mount's fields (mount.problem for each problem found)."""
    item = mount.item
    for key in sorted(set(item) - set(MOUNT_KEYS), key=str):
        close = difflib.get_close_matches(str(key), MOUNT_KEYS, n=1)
        mount.problem("unknown key %s%s; expected only %s." % (
            _json(key), " (did you mean %s?)" % close[0] if close else "", ", ".join(MOUNT_KEYS)))
    mount_type = item.get("type", "nfs")
    if mount_type not in TYPES:
        mount.bad("type", "nfs or efs")
    if item.get("state", "mounted") not in STATES:
        mount.bad("state", "mounted or absent")
    if "options" in item and not (isinstance(item["options"], str) and MOUNT_OPTIONS.match(item["options"])):
        mount.bad("options", "mount options, comma-separated, without blanks (they replace the recommended ones)")
    check_ownership(mount, item, "the mount point", "0775")
    if "tls" in item and boolean(item["tls"]) is None:
        mount.bad("tls", "true or false")
    if mount_type == "efs":
        if not (isinstance(item.get("efs_id"), str) and EFS_ID.match(item["efs_id"])):
            mount.bad("efs_id", "an EFS file system id, fs- and 8 to 17 lowercase hex digits (fs-0123456789abcdef0)")
        region = item.get("region", v.get("shared_storage_efs_region"))
        if not (isinstance(region, str) and AWS_REGION.match(region)):
            if "region" in item:
                mount.bad("region", "an AWS region such as us-east-1")
            else:
                mount.problem("an efs mount needs a region; region is not set and shared_storage_efs_region is %s. "
                              "Expected an AWS region such as us-east-1 on the mount (region), in "
                              "shared_storage_efs_region, aws_region or $AWS_REGION on the controller."
                              % _json(region))
    elif mount_type == "nfs":
        if "server_host" in item and "server" in item:
            mount.problem("server %s and server_host %s are both given; expected one of them (server: an address or "
                          "DNS name; server_host: a host of group nfs_server)."
                          % (_json(item["server"]), _json(item["server_host"])))
        elif "server_host" in item:
            if not _text(item["server_host"]) or item["server_host"] not in nfs_servers:
                mount.bad("server_host", "a host of group nfs_server (now %s)" % _json(list(nfs_servers)))
        elif "server" not in item or item["server"] in ("", None):
            mount.problem("an nfs mount needs server (an IP address or DNS name) or server_host (a host of group "
                          "nfs_server, now %s); neither is given." % _json(list(nfs_servers)))
        elif not _server(item["server"]):
            mount.bad("server", "the NFS server's IP address or DNS name (no scheme, port, path or blanks; an IPv6 "
                      "address without brackets)")
        export = item.get("export", "/")
        if not (isinstance(export, str) and export.startswith("/")):
            mount.bad("export", "the absolute path the server exports (default /)")


def _resolve(item, v, address_of):
    """One mount resolved (the fields the shared_storage role reads); item and v are checked already."""
    efs = item.get("type", "nfs") == "efs"
    tls = efs and boolean(item.get("tls", v.get("shared_storage_efs_tls")))
    efs_id = item.get("efs_id", "")
    if efs:
        server = "%s.efs.%s.amazonaws.com" % (efs_id, item.get("region", v.get("shared_storage_efs_region")))
        export = "/"
    elif "server_host" in item:
        server = str(address_of(item["server_host"]))
        export = item.get("export", "/")
    else:
        server = item.get("server", "")
        export = item.get("export", "/")
    opts = item.get("options", "tls" if tls else v["shared_storage_nfs_options"])
    return {
        "path": item["path"],
        "type": item.get("type", "nfs"),
        "server": server,
        "export": export,
        "server_host": item.get("server_host", ""),
        "fstype": "efs" if tls else "nfs4",
        "src": "%s:/" % efs_id if tls else "%s:%s" % ("[%s]" % server if ":" in server else server, export),
        "opts": "%s,%s" % (opts, v["shared_storage_boot_options"]),
        "owner": item.get("owner", v.get("common_user", DEFAULT_USER)),
        "group": item.get("group", v.get("common_group", DEFAULT_USER)),
        "mode": item.get("mode", DEFAULT_MODE),
        "state": item.get("state", "mounted"),
    }


def file_sha256(path):
    """The sha256 (hex) of a file on the controller."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def _text_or_empty(value):
    """value when it is a string, "" when it is null, else None."""
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def _check_efs_utils(host, v, wanted, problems, *, os_family, distribution, is_file, sha256_of):
    """The problems of where amazon-efs-utils comes from (each one sentence, with the host), on a host of os_family;
    wanted: the resolved mounts with state mounted."""
    bad = Problems("shared_storage", host, v, problems).bad

    deb = _text_or_empty(v.get("shared_storage_efs_utils_deb"))
    source = _text_or_empty(v.get("shared_storage_efs_utils_source"))
    for var, value in (("shared_storage_efs_utils_deb", deb), ("shared_storage_efs_utils_source", source)):
        if value is None:
            bad(var, "empty, a path or a URL")
    if deb is None or source is None:
        return
    tls = [m["path"] for m in wanted if m["fstype"] == "efs"]
    if tls and os_family != "RedHat" and not deb and not source:
        problems.append(
            "shared_storage on %s: shared_storage_mounts has an efs mount with tls (%s), which needs amazon-efs-utils, "
            "which %s does not package; expected shared_storage_efs_utils_deb, a .deb built with efs-utils' "
            "./build-deb.sh, or shared_storage_efs_utils_source (with shared_storage_efs_utils_source_checksum), "
            "efs-utils' source release to build it here, or tls=false on the mount (the NFS client with AWS's "
            "recommended options)." % (host, ", ".join(tls), distribution or os_family))
    deb_checksum = v.get("shared_storage_efs_utils_deb_checksum")
    deb_pinned = isinstance(deb_checksum, str) and SHA256.match(deb_checksum)
    if os_family == "Debian" and URL_SCHEME.match(deb) and not deb_pinned:
        problems.append(
            "shared_storage on %s: shared_storage_efs_utils_deb_checksum is %s, but shared_storage_efs_utils_deb is "
            "the URL %s; expected its sha256 (\"sha256:<64 hex digits>\", sha256sum of the .deb you built), or the "
            ".deb as a path on the host." % (host, _json(deb_checksum), deb))
    if not (tls and os_family == "Debian" and not deb and source):
        return
    _check_efs_source(host, v, source, problems, is_file=is_file, sha256_of=sha256_of)


def _check_efs_source(host, v, source, problems, *, is_file, sha256_of):
    """The problems of efs-utils' source release, built on this host."""
    bad = Problems("shared_storage", host, v, problems).bad

    version = v.get("shared_storage_efs_utils_version")
    if isinstance(version, bool) or not EFS_UTILS_VERSION.match(str(version)):
        bad("shared_storage_efs_utils_version", "efs-utils' release, like 2.3.1")
    checksum = _text_or_empty(v.get("shared_storage_efs_utils_source_checksum"))
    if checksum is None or (checksum and not SHA256.match(checksum)):
        bad("shared_storage_efs_utils_source_checksum", "empty, or the release's sha256: sha256:<64 lower-case hex "
            "digits>")
        checksum = None
    if URL_SCHEME.match(source):
        if not HTTPS_SOURCE.match(source):
            bad("shared_storage_efs_utils_source", SOURCE_EXPECTED)
        elif checksum == "":
            problems.append("shared_storage on %s: shared_storage_efs_utils_source is %s and "
                            "shared_storage_efs_utils_source_checksum is \"\"; expected %s."
                            % (host, _json(source), SOURCE_EXPECTED))
        return
    if not (source.startswith("/") and is_file(source)):
        bad("shared_storage_efs_utils_source", SOURCE_EXPECTED)
        return
    if checksum:
        found = sha256_of(source)
        if found != checksum[len("sha256:"):]:
            problems.append("shared_storage on %s: shared_storage_efs_utils_source %s has sha256 %s, but "
                            "shared_storage_efs_utils_source_checksum is %s; expected the release that checksum "
                            "pins." % (host, source, found, checksum))


def storage_plan(host, v, nfs_servers=(), address_of=None, *, os_family=None, distribution=None,
                 is_file=os.path.isfile, sha256_of=file_sha256):
    """The host's shared-storage mounts from the shared_storage role's variables (v), checked; raises PlanError
    naming every problem.

    nfs_servers: the hosts of group nfs_server (the hosts a mount's server_host may name). address_of(name) -> the
    address of such a host (its ansible_host, else its name). Returns {'mounts': every mount resolved, 'wanted': those
    with state mounted}.
    os_family, distribution: the host's (its facts); with os_family, where amazon-efs-utils comes from is checked
    too (EFS_UTILS_VARS), reading efs-utils' source release on the controller through is_file(path) and
    sha256_of(path)."""
    address_of = address_of or str
    problems = []
    _check_globals(host, v, problems)
    mounts = v.get("shared_storage_mounts")
    if mounts is None or isinstance(mounts, (str, bytes, dict)) or not isinstance(mounts, (list, tuple)):
        problems.append("shared_storage on %s: shared_storage_mounts is %s; expected a list of mounts. %s"
                        % (host, _json(mounts), MOUNT_EXPECTED))
        raise PlanError(problems)
    # every path given, shown with a path's problem
    every = _json([m.get("path", "<no path>") if isinstance(m, dict) else "<not a dict>" for m in mounts])
    seen = {}
    for index, item in enumerate(mounts):
        if not isinstance(item, dict):
            problems.append("shared_storage on %s: shared_storage_mounts[%d] is %s; expected a dict. %s"
                            % (host, index, _json(item), MOUNT_EXPECTED))
            continue
        mount = _Mount(host, index, item, problems)
        wrong = path_problem(item, index, seen, pattern=MOUNT_PATH, what="the mount point",
                             shape="without blanks or a trailing slash", list_name="shared_storage_mounts",
                             every=every)
        if wrong:
            mount.problem(wrong)
        _check_mount(mount, v, nfs_servers)
    if problems:
        raise PlanError(problems)
    resolved = [_resolve(item, v, address_of) for item in mounts]
    wanted = [m for m in resolved if m["state"] == "mounted"]
    if os_family is not None:
        _check_efs_utils(host, v, wanted, problems, os_family=os_family, distribution=distribution, is_file=is_file,
                         sha256_of=sha256_of)
        if problems:
            raise PlanError(problems)
    return {"mounts": resolved, "wanted": wanted}
