# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The converge lock's file on the head (rayfleet.cluster.converge_lock, and rayfleet.cluster.drift_check, which
takes it in the drift check's round trip): taken atomically (O_EXCL), held, taken over, given back."""

from __future__ import annotations

import contextlib
import json
import os
import time

LOCK_PATH = "/var/lib/rayfleet/converge.lock"


def read_lock(path):
    """The lock's owner (None: no lock); a file that is not a lock's JSON reads as an owner with no run."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    try:
        owner = json.loads(text)
    except ValueError:
        owner = None
    if not isinstance(owner, dict):
        owner = {"run": "", "unreadable": text[:200]}
    try:
        owner["age_s"] = round(max(0.0, time.time() - os.stat(path).st_mtime), 1)
    except FileNotFoundError:
        return None
    return owner


def _write_new(path, owner):
    """Create the lock for owner; False when it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(owner, handle, sort_keys=True)
    return True


def _replace(path, owner):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(owner, handle, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def take(path, owner, take_over=None, check_mode=False):
    """Take the lock at path for owner (a dict with its run id). Returns the result: lock taken, held (by this run),
    taken_over (the lock of the run named take_over, which still held it) or busy (with the owner that holds it)."""
    held = read_lock(path)
    if held is None:
        if check_mode or _write_new(path, owner):
            return {"lock": "taken", "changed": False, "owner": owner}
        held = read_lock(path)  # another run took it between the read and the create
        if held is None:
            return {"lock": "busy", "changed": False, "owner": {"run": ""}}
    if held.get("run") == owner["run"]:
        return {"lock": "held", "changed": False, "owner": held}
    if take_over is not None and held.get("run") == take_over:
        if not check_mode:
            _replace(path, owner)
            again = read_lock(path)  # two runs taking over the same dead run: the last write wins, the other waits
            if (again or {}).get("run") != owner["run"]:
                return {"lock": "busy", "changed": False, "owner": again or {"run": ""}}
        return {"lock": "taken_over", "changed": False, "owner": owner, "replaced": held}
    return {"lock": "busy", "changed": False, "owner": held}


def release(path, owner, check_mode=False):
    """Give back the lock at path when owner's run holds it; another run's is left alone."""
    held = read_lock(path)
    if held is None or held.get("run") != owner["run"]:
        return {"lock": "not_held", "changed": False, **({"owner": held} if held else {})}
    if not check_mode:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return {"lock": "released", "changed": False}


def take_on_host(path, owner, take_over=None, reason=None, check_mode=False):
    """take(), with the lock's directory made first and the take-over's reason kept in the result."""
    directory = os.path.dirname(path)
    if not check_mode and not os.path.isdir(directory):
        with contextlib.suppress(FileExistsError):
            os.makedirs(directory, 0o755)
    result = take(path, owner, take_over, check_mode)
    if result["lock"] == "taken_over" and reason:
        result["replaced"] = {**result["replaced"], "reason": reason}
    return result
