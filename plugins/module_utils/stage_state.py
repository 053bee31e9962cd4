# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The state of the items a stage manages on a host, and the stage records (rayfleet.cluster.stage_record and
rayfleet.cluster.drift_check).

An item is a dict with a kind:
  file {path}              type, mode, owner, group, and the sha256 of a regular file (size and mtime above 16 MiB)
  unit {name}              whether it is running, and its unit-file state (enabled, disabled, static, masked)
  package {name}           version and dpkg selection/status (or rpm's epoch:version-release)
  pip {venv, name}         the version installed in the venv
  mount {path}             the fstab entry and whether it is mounted, with what
  user {name} / group {name}  uid, gid, home, shell / gid
  kmod {name}              whether the kernel module is loaded
  nft_table {family, name} the sha256 of the table's ruleset (nft -s: without counters)
  sshd {name}              the sha256 of sshd's effective settings for that user (sshd -T), whatever file set them
Every state is captured the same way when a stage records and when the drift check compares, in a few commands for
all items together.
"""

from __future__ import annotations

import glob
import grp
import hashlib
import json
import os
import pwd
import re
import stat
import tempfile

from ansible.module_utils.common.text.converters import to_text

RECORD_FORMAT = 1
KINDS = frozenset({"file", "unit", "package", "pip", "mount", "user", "group", "kmod", "nft_table", "sshd"})
BIG_FILE = 16 * 1024 * 1024
C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def item_key(item):
    kind = item["kind"]
    if kind in ("file", "mount"):
        return "%s:%s" % (kind, item["path"])
    if kind == "pip":
        return "pip:%s:%s" % (item["venv"], item["name"])
    if kind == "nft_table":
        return "nft_table:%s %s" % (item["family"], item["name"])
    return "%s:%s" % (kind, item["name"])


def _file_state(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"type": "absent"}
    except OSError as exc:
        return {"type": "error", "error": exc.strerror}
    state = {"mode": "%04o" % stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISLNK(st.st_mode):
        state.update(type="link", target=os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        state["type"] = "directory"
    elif stat.S_ISREG(st.st_mode):
        state["type"] = "file"
        if st.st_size > BIG_FILE:
            state.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        else:
            sha = hashlib.sha256()
            try:
                with open(path, "rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        sha.update(chunk)
                state["sha256"] = sha.hexdigest()
            except OSError as exc:
                state["error"] = exc.strerror
    else:
        state["type"] = "other"
    return state


def _run(module, argv):
    rc, out, err = module.run_command(argv, environ_update=C_LOCALE)
    return rc, to_text(out), to_text(err)


def _unit_states(module, names):
    systemctl = module.get_bin_path("systemctl")
    if not names:
        return {}
    if systemctl is None:
        return {name: {"error": "no systemctl"} for name in names}
    argv = [systemctl, "show", "--property=Id,LoadState,ActiveState,SubState,UnitFileState", "--", *list(names)]
    blocks = _run(module, argv)[1].split("\n\n")
    states = {}
    for name, block in zip(names, blocks + [""] * (len(names) - len(blocks))):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        active = props.get("ActiveState", "unknown")
        running = active in ("active", "reloading") or (
            active == "activating" and props.get("SubState") != "auto-restart")
        states[name] = {
            "loaded": props.get("LoadState", "unknown"),
            "running": running,
            "enabled": props.get("UnitFileState", ""),
        }
    return states


def _package_states(module, names):
    if not names:
        return {}
    states = {name: None for name in names}
    dpkg = module.get_bin_path("dpkg-query")
    if dpkg is not None:
        out = _run(module, [dpkg, "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n", "--", *names])[1]
        for line in out.splitlines():
            fields = line.split("\t")
            if len(fields) == 3 and fields[0] in states:
                states[fields[0]] = {"version": fields[1], "status": fields[2].strip()} if fields[1] else None
        return states
    rpm = module.get_bin_path("rpm")
    if rpm is not None:
        out = _run(module, [rpm, "-q", "--qf", "%{NAME}\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\n", "--", *names])[1]
        for line in out.splitlines():
            fields = line.split("\t")
            if len(fields) == 2 and fields[0] in states:
                states[fields[0]] = {"version": fields[1]}
    return states


def installed_packages(module):
    """The names of the packages installed on the host (dpkg: fully installed ones; rpm), sorted; [] where the host
    has neither. Read once by the drift check, so that a stage's package task need not ask apt or dnf about packages
    already there."""
    dpkg = module.get_bin_path("dpkg-query")
    if dpkg is not None:
        out = _run(module, [dpkg, "-W", "-f", "${db:Status-Abbrev}\t${Package}\n"])[1]
        return sorted({fields[1] for fields in (line.split("\t") for line in out.splitlines())
                       if len(fields) == 2 and fields[0].strip() == "ii"})
    rpm = module.get_bin_path("rpm")
    if rpm is not None:
        return sorted(set(_run(module, [rpm, "-qa", "--qf", "%{NAME}\n"])[1].split()))
    return []


def _normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _venv_packages(venv):
    """{normalised name: version} of a venv's installed distributions, read from their .dist-info directories."""
    found = {}
    for path in glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "*.dist-info")):
        stem = os.path.basename(path)[: -len(".dist-info")]
        name, version = ([*stem.split("-", 1), ""])[:2]
        found[_normalise(name)] = version
    return found


def _mount_state(path):
    fstab = None
    try:
        with open("/etc/fstab") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 4 and not fields[0].startswith("#") and fields[1] == path:
                    fstab = fields[:4]
    except OSError:
        pass
    mounted = None
    try:
        with open("/proc/self/mountinfo") as handle:
            for line in handle:
                left, right = ([*line.split(" - ", 1), ""])[:2]
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and fields[4] == path and len(rest) >= 2:
                    mounted = {"fstype": rest[0], "source": rest[1]}
    except OSError:
        pass
    return {"fstab": fstab, "mounted": mounted}


def _user_state(name):
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return {"uid": entry.pw_uid, "gid": entry.pw_gid, "home": entry.pw_dir, "shell": entry.pw_shell}


def _group_state(name):
    try:
        return {"gid": grp.getgrnam(name).gr_gid}
    except KeyError:
        return None


def _nft_state(module, family, table):
    nft = module.get_bin_path("nft", opt_dirs=["/usr/sbin", "/sbin"])
    if nft is None:
        return None
    rc, out, _err = _run(module, [nft, "-s", "list", "table", family, table])
    if rc != 0:
        return None
    return {"sha256": hashlib.sha256(out.encode()).hexdigest()}


def _sshd_state(module, user):
    sshd = module.get_bin_path("sshd", opt_dirs=["/usr/sbin", "/sbin"])
    if sshd is None:
        return None
    rc, out, err = _run(module, [sshd, "-T", "-C", "user=%s,host=localhost,addr=127.0.0.1" % user])
    if rc != 0:
        return {"error": err.strip()[:200]}
    return {"sha256": hashlib.sha256(out.encode()).hexdigest()}


def capture(module, items):
    """{item key: state} for items, as the host has them now."""
    states = {}
    units = sorted({item["name"] for item in items if item["kind"] == "unit"})
    unit_states = _unit_states(module, units)
    packages = sorted({item["name"] for item in items if item["kind"] == "package"})
    package_states = _package_states(module, packages)
    venvs = {}
    for item in items:
        kind, key = item["kind"], item_key(item)
        if kind == "file":
            states[key] = _file_state(item["path"])
        elif kind == "unit":
            states[key] = unit_states.get(item["name"])
        elif kind == "package":
            states[key] = package_states.get(item["name"])
        elif kind == "pip":
            if item["venv"] not in venvs:
                venvs[item["venv"]] = _venv_packages(item["venv"])
            states[key] = venvs[item["venv"]].get(_normalise(item["name"]))
        elif kind == "mount":
            states[key] = _mount_state(item["path"])
        elif kind == "user":
            states[key] = _user_state(item["name"])
        elif kind == "group":
            states[key] = _group_state(item["name"])
        elif kind == "kmod":
            states[key] = os.path.isdir("/sys/module/%s" % item["name"].replace("-", "_"))
        elif kind == "nft_table":
            states[key] = _nft_state(module, item["family"], item["name"])
        elif kind == "sshd":
            states[key] = _sshd_state(module, item["name"])
        else:
            states[key] = {"error": "unknown kind %s" % kind}
    return states


def describe(key, recorded, found):
    """One line: what changed in an item."""
    if not isinstance(recorded, dict) or not isinstance(found, dict):
        return "%s (%s -> %s)" % (key, _short(recorded), _short(found))
    changed = sorted(k for k in set(recorded) | set(found) if recorded.get(k) != found.get(k))
    return "%s (%s)" % (key, ", ".join("%s %s -> %s" % (k, _short(recorded.get(k)), _short(found.get(k)))
                                       for k in changed))


def _short(value):
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 24 else text[:12] + "..."


def record_digest(record, kinds=None):
    """The digest of what a record says the stage left on the host: its items' states, not its inputs. A downstream
    stage keeps it and runs again when it changes; a stage applied again with other inputs that left the same files,
    units and packages behind does not make the stages that read them run. kinds: the digest of the states of those
    kinds of items alone (("pip",): the packages of the stage's venv)."""
    state = record.get("state")
    if kinds:
        state = {key: value for key, value in (state or {}).items() if key.split(":", 1)[0] in kinds}
    body = {"state": state}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def upstream_spec(spec):
    """(stage, kinds) of what a stage reads of an upstream stage: "ray" (all it manages; kinds None) or "ray:pip"
    (the items of those kinds, comma-separated)."""
    name, _colon, kinds = str(spec).partition(":")
    return name, tuple(kind for kind in kinds.split(",") if kind) or None


def upstream_digest(record, spec):
    """The digest a downstream stage keeps of an upstream record (None: no record), as spec reads it."""
    return record_digest(record, upstream_spec(spec)[1]) if record is not None else None


def record_path(directory, stage):
    return os.path.join(directory, "%s.json" % stage)


def read_record(directory, stage):
    try:
        with open(record_path(directory, stage)) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        return None
    return record


def write_record(directory, stage, record):
    """Write the record atomically (0600, in a 0700 directory). Returns True when its content changed."""
    text = json.dumps(record, sort_keys=True, indent=1) + "\n"
    path = record_path(directory, stage)
    try:
        with open(path) as handle:
            if handle.read() == text:
                return False
    except OSError:
        pass
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % stage)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def aside_path(directory, stage):
    return os.path.join(directory, "%s.json.aside" % stage)


# Where a baked image keeps the records of the stages playbooks/bake.yml applied on its builder: a node booted from
# the image takes them for its cluster's own until its cluster applies the stage with other inputs
IMAGE_RECORD_DIR = "/var/lib/rayfleet/image-stages"


def image_superseded_path(directory, stage):
    """The marker, in a cluster's record directory, that the cluster's stage superseded the image's record."""
    return os.path.join(directory, "%s.image-superseded" % stage)


def effective_record(directory, image_directory, stage):
    """(record, from_image): the stage's record in the cluster's directory, else the image's record of the stage
    (image_directory) unless the cluster's stage superseded it; (None, False) without either."""
    record = read_record(directory, stage)
    if record is not None or not image_directory or os.path.exists(image_superseded_path(directory, stage)):
        return record, False
    record = read_record(image_directory, stage)
    return record, record is not None


def supersede_image_record(directory, image_directory, stage):
    """Stop trusting the image's record of the stage on this host for this cluster (its stage is about to apply
    other inputs; a run that stops part way leaves the host matching neither). True when the image has one."""
    if not image_directory or read_record(image_directory, stage) is None:
        return False
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(image_superseded_path(directory, stage), os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    return True


def trust_image_record_again(directory, stage):
    """Trust the image's record again (a partial run set it aside and changed nothing). True when it was marked."""
    return _unlink(image_superseded_path(directory, stage))


def _move(source, target):
    """os.replace; False when there was nothing to move."""
    try:
        os.replace(source, target)
        return True
    except FileNotFoundError:
        return False


def set_aside(directory, stage):
    """Move the stage's record aside (a stage that applies other inputs than it records). True when there was one."""
    return _move(record_path(directory, stage), aside_path(directory, stage))


def restore_aside(directory, stage):
    """Put the record set aside back where no record was written since. True when it was put back."""
    if os.path.exists(record_path(directory, stage)):
        discard_aside(directory, stage)
        return False
    return _move(aside_path(directory, stage), record_path(directory, stage))


def _unlink(path):
    """os.unlink; False when there was nothing to remove."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def discard_aside(directory, stage):
    """Remove the record set aside. True when there was one."""
    return _unlink(aside_path(directory, stage))


def check_stage(record, states):
    """Compare a record's items with the states captured now (its inputs are compared on the controller)."""
    if record is None:
        return {"recorded": False, "inputs": None, "drifted": [], "drifted_items": [], "upstream": {}, "digest": None}
    keys = [key for key, recorded in sorted((record.get("state") or {}).items()) if states.get(key) != recorded]
    return {
        "recorded": True,
        "inputs": record.get("inputs"),
        "drifted": [describe(key, record["state"][key], states.get(key)) for key in keys],
        "drifted_items": keys,
        "upstream": record.get("upstream") or {},
        "digest": record_digest(record),
    }
