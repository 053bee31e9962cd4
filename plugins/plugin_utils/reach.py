# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The unreachable-host policy: which hosts a run leaves out, and whether it may go on without them.

A fleet always has a host down. ``rayfleet_max_unreachable`` says how many of the run's hosts may be unreachable
(a count, or a percentage of the hosts) for the run to go on with the others; the head never may. Hosts left out
keep their place in the cluster's configuration (firewall members, known hosts, monitoring targets, the nodes Ray
must list): their Ray node rejoins by itself when they boot, and the next run converges them.
"""

from __future__ import annotations

import math
import re

POLICY_VAR = "rayfleet_max_unreachable"
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class ReachError(ValueError):
    """A bad policy value, or hosts unreachable beyond what the policy allows."""


def allowed(policy, hosts, policy_var=POLICY_VAR):
    """How many of `hosts` hosts may be unreachable under policy (a count, or 'N%' of the hosts, rounded down);
    policy_var: the variable that set it, for the messages."""
    if isinstance(policy, bool):
        policy = None
    if isinstance(policy, int) and policy >= 0:
        return policy
    if isinstance(policy, str):
        text = policy.strip()
        if text.isdigit():
            return int(text)
        match = _PERCENT.match(text)
        if match and float(match.group(1)) <= 100:
            return math.floor(float(match.group(1)) * hosts / 100.0 + 1e-9)
    raise ReachError(
        "%s is %r; expected a count of hosts (0, 1, 2 ...) or a percentage of the run's hosts ('10%%'), the most "
        "that may be unreachable for the run to go on without them" % (policy_var, policy)
    )


def decide(results, heads, policy, policy_var=POLICY_VAR):
    """The run's verdict on its hosts.

    results: host -> its reach attempt (the setup task's result: unreachable, msg); heads: the ray_head group.
    Returns {"left_out": {host: error}, "allowed": n, "hosts": total}; raises ReachError (naming every unreachable
    host and its error) when the head is unreachable or more hosts are than the policy allows."""
    total = len(results)
    limit = allowed(policy, total, policy_var)
    left_out = {
        host: str(result.get("msg") or "unreachable").strip()
        for host, result in sorted(results.items())
        if isinstance(result, dict) and result.get("unreachable")
    }
    why = {host: _why_unread(result) for host, result in sorted(results.items())
           if isinstance(result, dict) and result and host not in left_out}
    unread = {host: error for host, error in why.items() if error}
    if unread:
        raise ReachError(
            "reached, but the facts could not be read (become, Python?): %s. Nothing was changed."
            % "; ".join("%s (%s)" % (host, error) for host, error in unread.items())
        )
    named = "; ".join("%s (%s)" % (host, error) for host, error in left_out.items())
    down_heads = [host for host in heads if host in left_out]
    if down_heads:
        raise ReachError(
            "the head %s is unreachable: a run never goes on without it, whatever %s says. Unreachable: %s. "
            "Nothing was changed." % (", ".join(down_heads), policy_var, named)
        )
    if len(left_out) > limit:
        raise ReachError(
            "%d of %d host(s) unreachable, more than %s=%s allows (%d): %s. Nothing was changed; bring them back, "
            "or raise %s to go on without them."
            % (len(left_out), total, policy_var, policy, limit, named, policy_var)
        )
    return {"left_out": left_out, "allowed": limit, "hosts": total}


def _why_unread(result):
    """Why a reached host's facts were not read ('' when they were): the first contact runs with failed_when false,
    so a failed setup module (no Python, become refused) shows as no facts and, for gather_facts, failed_modules."""
    if result.get("skipped"):
        return ""
    failed = result.get("failed_modules") or {}
    if not failed and not result.get("failed") and result.get("ansible_facts"):
        return ""
    errors = [str(item.get("msg") or "").strip() for item in failed.values() if isinstance(item, dict)]
    return "; ".join(error for error in errors if error) or str(result.get("msg") or "no facts").strip()
