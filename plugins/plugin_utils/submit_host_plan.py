# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The submit host plan: the submit_host role's variables and the inventory checked, and the names the role gives
this cluster's client computed, on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the role's tasks and templates read the
result. Every problem is collected, each naming the host, the variable and the bad value, and saying what was
expected: the action fails before anything changes, on the cluster or on the submit host.

A submit host is a machine outside the cluster (not in ray_head or ray_worker) that submits to the one head; its
client's files, commands and tunnel unit are named after ``submit_host_cluster_name``, so several clusters' clients
sit side by side. The head's Ray settings file is named after the head's ``ray_cluster_name``.
"""

from __future__ import annotations

import re

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    _whole,
    boolean,
    check_hostname,
    check_ip,
)

STATES = ("present", "absent")
CLUSTER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# The forwarding-only account made on the head (useradd's portable names)
TUNNEL_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# The user who submits on this machine (an existing account; dots allowed, as on many laptops)
SUBMIT_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
# The tunnel's local end: an unprivileged port (the tunnel runs as the user)
LOCAL_PORT_MIN = 1024
BOOLEAN_VARS = ("submit_host_tunnel_unit", "submit_host_install_packages", "submit_host_ansible")
SUBMIT_HOST_VARS = ("submit_host_state", "submit_host_cluster_name", "submit_host_user", "submit_host_local_port",
                    "submit_host_head_address", "submit_host_head_ssh_port", "submit_host_tunnel_user",
                    *BOOLEAN_VARS)


def _port(value, minimum):
    """value as a TCP port >= minimum (an int or its digits, not a boolean), else None."""
    port = _whole(value, minimum)
    return port if port is not None and port <= 65535 else None


def _check_settings(v, bad):
    if v.get("submit_host_state") not in STATES:
        bad("submit_host_state", "present or absent")
    name = v.get("submit_host_cluster_name")
    if not (isinstance(name, str) and CLUSTER_NAME.match(name)):
        bad("submit_host_cluster_name", "lowercase letters, digits and '-', at most 40, starting with a letter or "
            "digit (it names this cluster's files, commands and tunnel unit here)")
    if _port(v.get("submit_host_local_port"), LOCAL_PORT_MIN) is None:
        bad("submit_host_local_port", "a port 1024-65535 (the tunnel's local end on 127.0.0.1, one per cluster)")
    if _port(v.get("submit_host_head_ssh_port"), 1) is None:
        bad("submit_host_head_ssh_port", "the head's SSH port, 1-65535")
    tunnel_user = v.get("submit_host_tunnel_user")
    if not (isinstance(tunnel_user, str) and TUNNEL_USER.match(tunnel_user)):
        bad("submit_host_tunnel_user", "a user name for the forwarding-only account on the head (lowercase letters, "
            "digits, '_' and '-', at most 32, not starting with a digit or '-')")
    user = v.get("submit_host_user")
    if user != "" and not (isinstance(user, str) and SUBMIT_USER.match(user)):
        bad("submit_host_user", "empty (the login user) or the name of the user who submits jobs here (lowercase "
            "letters, digits, '_', '.' and '-', at most 32, not starting with a digit, '.' or '-')")
    address = v.get("submit_host_head_address")
    if address != "" and not (isinstance(address, str) and address == address.strip()
                              and (check_ip(address) or check_hostname(address))):
        bad("submit_host_head_address", "empty (the head's ansible_host), or the head's address as this machine "
            "reaches it over SSH: an IP address (IPv6 without brackets) or a DNS name")
    for var in BOOLEAN_VARS:
        if boolean(v.get(var)) is None:
            bad(var, "true or false")


def _check_inventory(host, heads, workers, problem):
    if len(heads) != 1:
        problem("group ray_head has %s; expected exactly one host, the head a submit host submits to."
                % _json(list(heads)))
    member = [group for group, hosts in (("ray_head", heads), ("ray_worker", workers)) if host in hosts]
    if member:
        problem("this host is in group %s; expected a machine outside the cluster, not a Ray node itself (remove it "
                "from ray_head and ray_worker, or from ray_submit)." % " and ".join(member))


def submit_host_plan(host, v, heads=(), workers=(), *, head_vars=None, login_user=""):
    """The names of this cluster's client on host from the submit_host role's variables (v, SUBMIT_HOST_VARS) and
    the inventory, checked; raises PlanError naming every problem.

    heads, workers: the hosts of groups ray_head and ray_worker (exactly one head; host in neither).
    head_vars: the head's ray_cluster_name and ansible_host (its settings file's name; where this machine reaches
    it by default). login_user: the user Ansible logs in as here (ansible_user, else the controller's $USER), the
    submitting user when submit_host_user is empty.
    Returns the head, its settings file and its preflight verdict's path, the head's SSH address and its known_hosts
    name, the submitting user, the tunnel unit, the commands, and the ports as numbers."""

    found = Problems("submit_host", host, v)
    problems, problem, bad = found.problems, found.problem, found.bad

    _check_settings(v, bad)
    if v.get("submit_host_user") == "" and not (isinstance(login_user, str) and SUBMIT_USER.match(login_user)):
        problem("submit_host_user is \"\" (the login user), but the login user is %s (ansible_user, else the "
                "controller's $USER); expected the name of the user who submits jobs here, in submit_host_user or "
                "ansible_user." % ("unknown" if not login_user else _json(login_user)))
    _check_inventory(host, list(heads), list(workers), problem)
    if problems:
        raise PlanError(problems)

    head = heads[0]
    head_vars = head_vars or {}
    cluster = head_vars.get("ray_cluster_name") or ""
    ns = "-%s" % cluster if cluster else ""
    name = v["submit_host_cluster_name"]
    head_ssh = v["submit_host_head_address"] or head_vars.get("ansible_host") or head
    ssh_port = _port(v["submit_host_head_ssh_port"], 1)
    return {
        "state": v["submit_host_state"],
        "head": head,
        "head_ns": ns,
        "head_config": "/etc/rayfleet/ray%s-head.json" % ns,
        "preflight_state_path": "/etc/rayfleet/preflight%s.json" % ns,
        "head_ssh": head_ssh,
        "head_ssh_port": ssh_port,
        # the head in known_hosts form ([address]:port unless port 22)
        "known_host": head_ssh if ssh_port == 22 else "[%s]:%d" % (head_ssh, ssh_port),
        "user": v["submit_host_user"] or login_user,
        "local_port": _port(v["submit_host_local_port"], LOCAL_PORT_MIN),
        "unit": "rayfleet-tunnel-%s.service" % name,
        "commands": ["ray-%s" % name, "rayfleet-submit-%s" % name, "rayfleet-tunnel-%s" % name],
    }
