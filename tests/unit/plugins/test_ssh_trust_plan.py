# SPDX-License-Identifier: GPL-3.0-or-later
"""The SSH trust plan (plugins/plugin_utils/ssh_trust_plan.py): the ssh_trust role's variables checked, each bad one
named with the host, and who holds the key and the sshd lines to find in `sshd -T` computed as the role's Jinja
computed them before."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.ssh_trust_plan import (
    SSH_TRUST_VARS,
    PlanError,
    host_principals,
    ssh_trust_plan,
    sshd_effective_lines,
    timespec_seconds,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/ssh_trust/defaults/main.yml").read_text())
HEADS = ("head",)
WORKERS = ("worker1", "worker2")
KEY = "/srv/inventory/credentials/ssh_trust_ed25519"
DIRECTORIES = ("/srv/inventory/credentials", "/srv/keys.pub")
# sshd.yml's Jinja before the plan: the "key value" lines sshd -T prints for the settings
OLD_EXPECTED = ("{{ s.keys() | map('lower') | zip(s.values() | map('lower')) | map('join', ' ') "
                "| map('regex_replace', ' prohibit-password$', ' without-password') | list }}")


def _old_expected(settings):
    env = jinja2.Environment(extensions=[])
    env.filters["regex_replace"] = lambda value, pattern, repl: re.sub(pattern, repl, value)
    env.filters["zip"] = zip
    return env.from_string(OLD_EXPECTED.replace("| list }}", "| join('\\n') }}")).render(s=settings).split("\n")


CA_KEY = "/srv/inventory/credentials/ssh_trust_ca_ed25519"
PRINCIPALS = ("worker1", "10.0.0.2")


def settings(**extra) -> dict:
    """The variables the role passes (its defaults; the key paths rendered)."""
    v = {name: DEFAULTS[name] for name in SSH_TRUST_VARS} | {"ssh_trust_key_path": KEY,
                                                             "ssh_trust_ca_key_path": CA_KEY}
    return v | extra


def plan(host="worker1", password_vars=(), membership="static", principals=PRINCIPALS, **extra) -> dict:
    return ssh_trust_plan(host, settings(**extra), HEADS, WORKERS, password_vars=password_vars, login_user="debian",
                          is_dir=lambda path: path in DIRECTORIES, membership=membership, principals=principals)


def problems(host="worker1", password_vars=(), membership="static", principals=PRINCIPALS, **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(host, password_vars, membership, principals, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith(f"ssh_trust on {host}: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def one_problem(**extra) -> str:
    found = problems(**extra)
    assert len(found) == 1, found
    return found[0]


def test_defaults_pass():
    assert plan() == {
        "holds_key": False, "rotate": False, "restrict_source": True,
        "ca": False, "ca_rotate": False, "principals": [],
        "host_certificate": "/etc/ssh/ssh_host_ed25519_key-cert.pub", "user_ca_keys": "/etc/ssh/rayfleet_user_ca.pub",
        "sshd_harden": True, "sshd_dropin": True,
        "sshd_settings": {"PasswordAuthentication": "no", "KbdInteractiveAuthentication": "no",
                          "PermitEmptyPasswords": "no", "PermitRootLogin": "prohibit-password"},
        "sshd_options": ["-oPasswordAuthentication=no", "-oKbdInteractiveAuthentication=no",
                         "-oPermitEmptyPasswords=no", "-oPermitRootLogin=prohibit-password"],
        "sshd_keywords": ["PasswordAuthentication", "KbdInteractiveAuthentication", "PermitEmptyPasswords",
                          "PermitRootLogin"],
        "sshd_expected": ["passwordauthentication no", "kbdinteractiveauthentication no", "permitemptypasswords no",
                          "permitrootlogin without-password"],
    }


def test_the_sshd_lines_as_the_jinja_had_them():
    for value in (DEFAULTS["ssh_trust_sshd_settings"], {"PermitRootLogin": "Prohibit-Password", "MaxAuthTries": "3",
                                                        "AuthenticationMethods": "publickey"}):
        assert sshd_effective_lines(value) == _old_expected(value)


@pytest.mark.parametrize(("host", "on", "holds"), [("head", "head", True), ("worker1", "head", False),
                                                   ("worker1", "all", True), ("head", "all", True)])
def test_who_holds_the_key(host, on, holds):
    assert plan(host, ssh_trust_private_key_on=on)["holds_key"] is holds


@pytest.mark.parametrize(("word", "value"), [("true", True), ("no", False), ("False", False), (1, True), ("on", True)])
def test_booleans_take_ansibles_words(word, value):
    got = plan(ssh_trust_rotate=word, ssh_trust_restrict_source=word)
    assert (got["rotate"], got["restrict_source"]) == (value, value)


def test_sshd_settings_written_as_yaml_numbers_and_booleans_are_written_as_sshd_reads_them():
    """ClientAliveInterval: 60 and PasswordAuthentication: no (a YAML boolean) are what an operator writes: the
    drop-in gets 60 and no, sshd -T is expected to print them so, and the host's sshd checks them as options."""
    got = plan(ssh_trust_sshd_settings={"ClientAliveInterval": 60, "PasswordAuthentication": False,
                                        "X11Forwarding": True, "MaxStartups": "10:30:60"})
    assert got["sshd_settings"] == {"ClientAliveInterval": "60", "PasswordAuthentication": "no",
                                    "X11Forwarding": "yes", "MaxStartups": "10:30:60"}
    assert got["sshd_expected"] == ["clientaliveinterval 60", "passwordauthentication no", "x11forwarding yes",
                                    "maxstartups 10:30:60"]
    assert got["sshd_options"] == ["-oClientAliveInterval=60", "-oPasswordAuthentication=no", "-oX11Forwarding=yes",
                                   "-oMaxStartups=10:30:60"]


def test_without_hardening_the_sshd_settings_are_not_read():
    got = plan(ssh_trust_sshd_harden="false", ssh_trust_sshd_settings={"PasswordAuthentication": False},
               password_vars=["ansible_password"])
    assert (got["sshd_harden"], got["sshd_keywords"], got["sshd_expected"], got["sshd_settings"]) == (False, [], [], {})


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("ssh_trust_key_path", "credentials/key", 'ssh_trust_key_path is "credentials/key"; expected an absolute path on '
                                              "the controller for the cluster's private key file (not a directory, no "
                                              "trailing /; the public key goes to <path>.pub)."),
    ("ssh_trust_key_path", "/srv/inventory/credentials", 'ssh_trust_key_path is "/srv/inventory/credentials"; '
                                                         "expected an absolute path on the controller for the "
                                                         "cluster's private key file (not a directory, no trailing /; "
                                                         "the public key goes to <path>.pub), but it is a directory."),
    ("ssh_trust_key_path", "/srv/keys", 'ssh_trust_key_path is "/srv/keys"; expected an absolute path on the '
                                        "controller for the cluster's private key file (not a directory, no trailing "
                                        "/; the public key goes to <path>.pub), but /srv/keys.pub is a directory."),
    ("ssh_trust_key_path", "/srv/keys/", 'ssh_trust_key_path is "/srv/keys/"; expected an absolute path'),
    ("ssh_trust_key_path", None, "ssh_trust_key_path is null; expected an absolute path"),
    ("ssh_trust_key_comment", "a\nb", 'ssh_trust_key_comment is "a\\nb"; expected the cluster public key\'s comment, '
                                      "a string on one line."),
    ("ssh_trust_private_key_on", "workers", 'ssh_trust_private_key_on is "workers"; expected head or all.'),
    ("ssh_trust_user", "", 'ssh_trust_user is ""; expected a user name (the Ray service user'),
    ("ssh_trust_user", "ray user", 'ssh_trust_user is "ray user"; expected a user name'),
    ("ssh_trust_user", 1000, "ssh_trust_user is 1000; expected a user name"),
    ("ssh_trust_rotate", "maybe", 'ssh_trust_rotate is "maybe"; expected true or false.'),
    ("ssh_trust_restrict_source", None, "ssh_trust_restrict_source is null; expected true or false."),
    ("ssh_trust_sshd_harden", "yep", 'ssh_trust_sshd_harden is "yep"; expected true or false.'),
    ("ssh_trust_extra_authorized_keys", "ssh-ed25519 AAAA alice", 'ssh_trust_extra_authorized_keys is "ssh-ed25519 '
                                                                  'AAAA alice"; expected a list of authorized_keys '
                                                                  "lines for ssh_trust_user"),
    ("ssh_trust_extra_authorized_keys", ["ssh-ed25519 AAAA alice", "", "ssh-rsa AAAA\nbob", 5],
     'ssh_trust_extra_authorized_keys has ["", "ssh-rsa AAAA\\nbob", 5]; expected a list of authorized_keys lines'),
    ("ssh_trust_sshd_settings", ["PasswordAuthentication no"], 'ssh_trust_sshd_settings is ["PasswordAuthentication '
                                                               'no"]; expected sshd keywords mapped to values on one '
                                                               'line'),
    ("ssh_trust_sshd_settings", {"PasswordAuthentication": None, "AllowUsers": ["ray"]},
     'ssh_trust_sshd_settings is {"AllowUsers": ["ray"], "PasswordAuthentication": null}: the values [null, ["ray"]] '
     "are not values on one line; expected sshd keywords mapped to values on one line (strings, numbers, or "
     'true/false for yes/no), each keyword once, e.g. {"PasswordAuthentication": "no", "ClientAliveInterval": 60}.'),
    ("ssh_trust_sshd_settings", {"Password-Authentication": "no", "X11Forwarding": "no\nPermitRootLogin yes"},
     'the keywords ["Password-Authentication"] are not sshd keywords (a letter, then letters and digits); the values '
     '["no\\nPermitRootLogin yes"] are not values on one line'),
    ("ssh_trust_sshd_settings", {"PasswordAuthentication": "no", "passwordauthentication": "yes"},
     '["PasswordAuthentication", "passwordauthentication"] name one keyword (sshd reads keywords in any case and '
     "keeps the first)"),
    ("ssh_trust_sshd_settings", {"PasswordAuthentication": " "}, 'the values [" "] are not values on one line'),
])
def test_each_bad_setting_is_named(var, value, expected):
    found = one_problem(**{var: value})
    assert expected in found, found
    assert found.startswith(f"ssh_trust on worker1: {var} "), found


def test_every_problem_at_once():
    found = problems(ssh_trust_private_key_on="x", ssh_trust_user="", ssh_trust_sshd_settings=[])
    assert [p.split(": ")[1].split()[0] for p in found] == ["ssh_trust_private_key_on", "ssh_trust_user",
                                                            "ssh_trust_sshd_settings"]


def test_a_password_login_is_refused_with_hardening_only():
    found = one_problem(password_vars=["ansible_password", "ansible_ssh_pass"])
    assert found == ("ssh_trust on worker1: ssh_trust_sshd_harden is true, but Ansible connects to this host with a "
                     "password (ansible_password, ansible_ssh_pass): key-only SSH logins would lock it out. Expected "
                     "a key installed for debian first, or ssh_trust_sshd_harden: false.")
    assert plan(password_vars=["ansible_password"], ssh_trust_sshd_harden=False)["sshd_harden"] is False


# ---- trust by certificate (network membership) ----

def test_network_membership_trusts_by_certificate():
    """The authority's settings join the sshd drop-in (and sshd -T's expected lines, which the drift check watches),
    but not the options the host's sshd checks before anything changes: they name files the role installs first."""
    got = plan(membership="network")
    assert got["ca"] is True and got["principals"] == list(PRINCIPALS)
    assert got["sshd_settings"]["HostCertificate"] == "/etc/ssh/ssh_host_ed25519_key-cert.pub"
    assert got["sshd_settings"]["TrustedUserCAKeys"] == "/etc/ssh/rayfleet_user_ca.pub"
    assert "trustedusercakeys /etc/ssh/rayfleet_user_ca.pub" in got["sshd_expected"]
    assert not any("Certificate" in o or "CAKeys" in o for o in got["sshd_options"]), got["sshd_options"]
    unhardened = plan(membership="network", ssh_trust_sshd_harden=False)
    assert unhardened["sshd_dropin"] is True and list(unhardened["sshd_settings"]) == [
        "HostCertificate", "TrustedUserCAKeys"]
    assert plan(ssh_trust_sshd_harden=False)["sshd_dropin"] is False


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("ssh_trust_ca_key_path", "relative/ca", "an absolute path on the controller for the private key of the "
                                             "cluster's SSH certificate authority"),
    ("ssh_trust_ca_key_path", "/srv/inventory/credentials", "but it is a directory"),
    ("ssh_trust_cert_validity", "52w", "ssh-keygen's relative time (+52w, +90d)"),
    ("ssh_trust_cert_validity", "forever", "ssh-keygen's relative time"),
    ("ssh_trust_cert_renew_before", 4, "ssh-keygen's relative time (+4w, +7d)"),
    ("ssh_trust_cert_renew_before", "+52w", "not less than ssh_trust_cert_validity"),
    ("ssh_trust_ca_rotate", "maybe", "true or false"),
])
def test_each_bad_certificate_setting_is_named(var, value, expected):
    found = one_problem_in("network", **{var: value})
    assert var in found and expected in found, found


def test_certificate_settings_are_not_read_without_network_membership():
    assert plan(ssh_trust_cert_validity="soon", ssh_trust_ca_key_path="relative")["ca"] is False


def test_a_host_without_a_name_or_address_has_nothing_to_sign():
    found = problems(membership="network", principals=[])
    assert any("no name or address to sign its host key for" in p for p in found), found


def test_timespecs_count_seconds():
    assert timespec_seconds("+52w") == 52 * 604800
    assert timespec_seconds("+4w3d2h") == 4 * 604800 + 3 * 86400 + 2 * 3600
    assert timespec_seconds("52w") is None and timespec_seconds("+") is None and timespec_seconds(7) is None


def test_the_principals_are_the_names_other_hosts_reach_it_by():
    facts = {"hostname": "w1", "fqdn": "w1.example", "all_ipv4_addresses": ["10.0.0.2", "172.17.0.1"],
             "interfaces": ["eth0", "docker0"], "docker0": {"ipv4": {"address": "172.17.0.1"}}}
    assert host_principals("worker1", {"ansible_host": "192.0.2.7", "ansible_facts": facts}, "10.0.0.2") == [
        "worker1", "192.0.2.7", "w1", "w1.example", "10.0.0.2"]


def one_problem_in(membership, **extra) -> str:
    found = problems(membership=membership, **extra)
    assert len(found) == 1, found
    return found[0]
