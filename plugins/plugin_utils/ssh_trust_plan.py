# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The SSH trust plan: the ssh_trust role's variables checked, and who holds the cluster's private key and which
sshd settings must be in effect, computed on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the role's tasks and templates read the result.
Every problem is collected, each naming the host, the variable and the bad value, and saying what was expected: the
action fails before anything changes.

The key pair lives on the controller (``ssh_trust_key_path``, the public key beside it at ``<path>.pub``); the hosts
of ray_head and ray_worker are the cluster's members, and the private key goes to the head only, or to every member
(``ssh_trust_private_key_on: all``). With ``ssh_trust_sshd_harden`` the role writes ``ssh_trust_sshd_settings`` into
an sshd drop-in and then reads ``sshd -T``: each setting must be in effect there, as ``sshd -T`` prints it (lower
case, ``prohibit-password`` by its old name ``without-password``).

A cluster with network membership (the cluster plan's ``membership``) trusts by certificate instead of by list: an SSH
certificate authority on the controller (``ssh_trust_ca_key_path``) signs each host's ed25519 host key for the names
and addresses other hosts reach it by, and the cluster key as a user certificate for ``ssh_trust_user`` (valid from
the cluster's sources only). Hosts trust the authority (``@cert-authority`` in ``known_hosts``, ``TrustedUserCAKeys``
in sshd), so a host that joins is trusted by every other host without a change to their files.
"""

from __future__ import annotations

import os
import re

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    account,
    boolean,
    known_host,
    member_addresses,
)

PRIVATE_KEY_ON = ("head", "all")
# an sshd keyword: letters, then letters and digits (X11Forwarding)
SSHD_KEYWORD = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
# The connection variables that make Ansible log in with a password (the ssh connection plugin's)
PASSWORD_VARS = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password")
BOOLEAN_VARS = ("ssh_trust_rotate", "ssh_trust_restrict_source", "ssh_trust_sshd_harden", "ssh_trust_ca_rotate")
SSH_TRUST_VARS = ("ssh_trust_key_path", "ssh_trust_key_comment", "ssh_trust_private_key_on", "ssh_trust_user",
                  "ssh_trust_extra_authorized_keys", "ssh_trust_sshd_settings", "ssh_trust_ca_key_path",
                  "ssh_trust_cert_validity", "ssh_trust_cert_renew_before", *BOOLEAN_VARS)
# Where a host keeps the certificate of its ed25519 host key and the authority its sshd trusts for user certificates
HOST_CERTIFICATE = "/etc/ssh/ssh_host_ed25519_key-cert.pub"
USER_CA_KEYS = "/etc/ssh/rayfleet_user_ca.pub"
# ssh-keygen's relative time: "+" and one or more counts of weeks, days, hours, minutes or seconds (+52w, +4w3d)
TIMESPEC = re.compile(r"^\+(?:\d+[wdhms])+$")
_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


def timespec_seconds(value):
    """The seconds of an ssh-keygen relative time (+52w, +4w3d); None for what is not one."""
    if not (isinstance(value, str) and TIMESPEC.match(value)):
        return None
    return sum(int(count) * _SECONDS[unit] for count, unit in re.findall(r"(\d+)([wdhms])", value))


def _one_line(value):
    """True when value is a string without line breaks or other control characters."""
    return isinstance(value, str) and not any(ord(c) < 32 or ord(c) == 127 for c in value)


def sshd_effective_lines(settings):
    """The lines `sshd -T` prints for settings when they are in effect: "keyword value", lower case, and
    prohibit-password by its old name, without-password."""
    lines = []
    for key, value in settings.items():
        line = ("%s %s" % (key, value)).lower()
        if line.endswith(" prohibit-password"):
            line = line[:-len("prohibit-password")] + "without-password"
        lines.append(line)
    return lines


def _check_key_path(v, var, what, is_dir, bad):
    path = v.get(var)
    expected = ("an absolute path on the controller for %s (not a directory, no trailing /; the public key goes to "
                "<path>.pub)" % what)
    if not (_one_line(path) and os.path.isabs(path)) or path.endswith("/"):
        bad(var, expected)
    elif is_dir(path):
        bad(var, expected + ", but it is a directory")
    elif is_dir(path + ".pub"):
        bad(var, expected + ", but %s.pub is a directory" % path)


def _check_certificates(v, bad, problem):
    validity = timespec_seconds(v.get("ssh_trust_cert_validity"))
    renew = timespec_seconds(v.get("ssh_trust_cert_renew_before"))
    if validity is None:
        bad("ssh_trust_cert_validity", "how long a certificate is valid, as ssh-keygen's relative time (+52w, +90d)")
    if renew is None:
        bad("ssh_trust_cert_renew_before", "how long before its end a certificate is signed again, as ssh-keygen's "
            "relative time (+4w, +7d)")
    if validity is not None and renew is not None and renew >= validity:
        problem("ssh_trust_cert_renew_before is %s, not less than ssh_trust_cert_validity %s: every run would sign "
                "every certificate again; expected a renewal window shorter than the validity."
                % (_json(v["ssh_trust_cert_renew_before"]), _json(v["ssh_trust_cert_validity"])))


def _check_authorized_keys(v, bad, problem):
    keys = v.get("ssh_trust_extra_authorized_keys")
    expected = ("a list of authorized_keys lines for ssh_trust_user (each a non-empty string on one line, such as "
                "\"ssh-ed25519 AAAA... alice@laptop\")")
    if not isinstance(keys, (list, tuple)):
        bad("ssh_trust_extra_authorized_keys", expected)
        return
    wrong = [key for key in keys if not (_one_line(key) and key.strip())]
    if wrong:
        problem("ssh_trust_extra_authorized_keys has %s; expected %s." % (_json(wrong), expected))


def sshd_value(value):
    """An sshd setting's value as the drop-in writes it: a string as it is, a number as its digits, a YAML boolean as
    sshd's own words for one (yes, no); None for what is no scalar (a list, a mapping, null)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    return value if isinstance(value, str) else None


def _check_sshd_settings(v, bad, problem):
    settings = v.get("ssh_trust_sshd_settings")
    expected = ("sshd keywords mapped to values on one line (strings, numbers, or true/false for yes/no), each "
                "keyword once, e.g. {\"PasswordAuthentication\": \"no\", \"ClientAliveInterval\": 60}")
    if not isinstance(settings, dict):
        bad("ssh_trust_sshd_settings", expected)
        return
    keywords = [key for key in settings if not (isinstance(key, str) and SSHD_KEYWORD.match(key))]
    values = [value for value in settings.values()
              if not (_one_line(sshd_value(value)) and sshd_value(value).strip())]
    lowered = [key.lower() for key in settings if isinstance(key, str)]
    twice = sorted({key for key in settings if isinstance(key, str) and lowered.count(key.lower()) > 1})
    if keywords or values or twice:
        found = []
        if keywords:
            found.append("the keywords %s are not sshd keywords (a letter, then letters and digits)"
                         % _json([str(k) for k in keywords]))
        if values:
            found.append("the values %s are not values on one line" % _json(values))
        if twice:
            found.append("%s name one keyword (sshd reads keywords in any case and keeps the first)" % _json(twice))
        problem("ssh_trust_sshd_settings is %s: %s; expected %s." % (_json(settings), "; ".join(found), expected))


def host_principals(host, hostvars, node_ip):
    """The names and addresses other hosts reach host by (its known_hosts names: inventory name, ansible_host,
    hostname, FQDN, its cluster IP and its other addresses), the principals of its host certificate."""
    return known_host(host, hostvars, member_addresses(node_ip, hostvars.get("ansible_facts")))["names"]


def ssh_trust_plan(host, v, heads=(), workers=(), *, password_vars=(), login_user="", is_dir=os.path.isdir,
                   membership="static", principals=()):
    """The SSH trust of host from the ssh_trust role's variables (v, SSH_TRUST_VARS), checked; raises PlanError
    naming every problem.

    heads, workers: the hosts of groups ray_head and ray_worker (the cluster's members; the head holds the key).
    The members themselves, their addresses and host keys are the cluster plan's (cluster_members).
    password_vars: the connection variables set for host that make Ansible log in with a password (PASSWORD_VARS):
    key-only logins would lock it out. login_user: the user Ansible logs in as (named in that message).
    is_dir(path): whether path is a directory on the controller (ssh_trust_key_path and <path>.pub must not be).
    membership: the cluster plan's (static or network: network trusts by certificate, through the authority).
    principals: the host's names and addresses (host_principals), its host certificate's principals.
    Returns whether host holds the private key, the booleans, whether it trusts by certificate (ca) and, so, its
    host certificate's principals, and the keywords the sshd drop-in sets (ssh_trust_sshd_settings with
    ssh_trust_sshd_harden, the certificate settings with ca) and the lines `sshd -T` must print for them."""

    found = Problems("ssh_trust", host, v)
    problems, problem, bad = found.problems, found.problem, found.bad

    ca = membership == "network"
    _check_key_path(v, "ssh_trust_key_path", "the cluster's private key file", is_dir, bad)
    if ca:
        _check_key_path(v, "ssh_trust_ca_key_path", "the private key of the cluster's SSH certificate authority "
                        "(network membership trusts hosts and the cluster key by certificate)", is_dir, bad)
        _check_certificates(v, bad, problem)
        if not principals:
            problem("no name or address to sign its host key for: expected its cluster IP (ray_node_ip) or facts.")
    if not _one_line(v.get("ssh_trust_key_comment")):
        bad("ssh_trust_key_comment", "the cluster public key's comment, a string on one line")
    if v.get("ssh_trust_private_key_on") not in PRIVATE_KEY_ON:
        bad("ssh_trust_private_key_on", "head or all")
    user = v.get("ssh_trust_user")
    if not (isinstance(user, str) and account(user)):
        bad("ssh_trust_user", "a user name (the Ray service user, which the common role creates: common_user)")
    for var in BOOLEAN_VARS:
        if boolean(v.get(var)) is None:
            bad(var, "true or false")
    _check_authorized_keys(v, bad, problem)
    harden = boolean(v.get("ssh_trust_sshd_harden"))
    if harden is not False:
        _check_sshd_settings(v, bad, problem)
    if harden and password_vars:
        problem("ssh_trust_sshd_harden is %s, but Ansible connects to this host with a password (%s): key-only SSH "
                "logins would lock it out. Expected a key installed for %s first, or ssh_trust_sshd_harden: false."
                % (_json(v.get("ssh_trust_sshd_harden")), ", ".join(password_vars), login_user or "the login user"))
    if problems:
        raise PlanError(problems)

    settings = {key: sshd_value(value) for key, value in v["ssh_trust_sshd_settings"].items()} if harden else {}
    if ca:
        settings.update(HostCertificate=HOST_CERTIFICATE, TrustedUserCAKeys=USER_CA_KEYS)
    return {
        "ca": ca,
        "ca_rotate": boolean(v["ssh_trust_ca_rotate"]),
        "principals": list(principals) if ca else [],
        "host_certificate": HOST_CERTIFICATE,
        "user_ca_keys": USER_CA_KEYS,
        "holds_key": v["ssh_trust_private_key_on"] == "all" or host in heads,
        "rotate": boolean(v["ssh_trust_rotate"]),
        "restrict_source": boolean(v["ssh_trust_restrict_source"]),
        "sshd_harden": harden,
        # whether the role writes the sshd drop-in (its hardening, or the certificate settings)
        "sshd_dropin": bool(settings),
        # keyword -> value as the drop-in writes it (the host's sshd checks each one before anything changes)
        "sshd_settings": settings,
        # ssh_trust_sshd_settings as sshd's command-line options (-oKeyword=value), for the host's sshd to check
        # them before anything changes (the certificate settings name files the role installs first)
        "sshd_options": ["-o%s=%s" % item for item in settings.items()
                         if item[0] not in ("HostCertificate", "TrustedUserCAKeys")],
        "sshd_keywords": list(settings),
        "sshd_expected": sshd_effective_lines(settings),
    }
