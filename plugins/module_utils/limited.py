# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Running a child with a wall-clock limit that the parent never waits past.

``AnsibleModule.run_command`` has no time limit, and a child blocked in the kernel on a hard NFS mount whose server
is gone cannot be reaped: the caller must give up on it without waiting. Probes of shared storage go through here.
"""

from __future__ import annotations

import os
import pwd
import subprocess

from ansible.module_utils.common.text.converters import to_native


def user_entry(user):
    """The passwd entry of ``user``, or None when no user is given or it does not exist."""
    if not user:
        return None
    try:
        return pwd.getpwnam(user)
    except KeyError:
        return None


def run_limited(argv, timeout, user=None) -> tuple[int, str]:
    """Run ``argv`` (list form, cwd /, own session) for at most ``timeout`` seconds; return (rc, combined output).

    rc 124 means it did not finish in time (the child is killed and left to the kernel, not waited for); rc 127 that
    it could not be started. As root, ``user`` runs it with that user's uid and gid and no supplementary groups.
    """
    kwargs = {}
    pw = user_entry(user)
    if pw is not None and os.geteuid() == 0:
        kwargs = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd="/", start_new_session=True, **kwargs)
    except OSError as exc:
        return 127, to_native(exc)
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return 124, "no answer in %gs" % timeout
    return proc.returncode, (out or "").strip()
