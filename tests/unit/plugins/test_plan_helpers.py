# SPDX-License-Identifier: GPL-3.0-or-later
"""The plans' shared checks (plugins/plugin_utils/cluster_plan.py): Ansible's boolean words, URLs, DNS names, S3's
bucket naming rules and downloads' sha256 checksums, each written once for every plan that reads such a value."""

from __future__ import annotations

import pytest
from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE
from ansible.module_utils.parsing.convert_bool import boolean as convert_bool
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    boolean,
    check_hostname,
    is_sha256_checksum,
    is_url,
    s3_bucket_problem,
)


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), (1, True), (0, False), (1.0, True), ("yes", True), ("No", False), ("ON", True),
    ("off", False), ("true", True), ("False", False), ("1", True), ("0", False), ("y", True), ("F", False),
    (" yes ", True), (2, None), (None, None), ("", None), ("maybe", None), ([], None), ({}, None), (1.5, None),
])
def test_boolean_takes_ansibles_words(value, expected):
    assert boolean(value) is expected


@pytest.mark.parametrize("value", [True, False, 1, 0, 1.0, 0.0, 2, -1, 1.5, None, "", "yes", "NO", " on ", "y", "t",
                                   "1", "0", "2", "maybe", [], {}, ["yes"]])
def test_boolean_agrees_with_the_argument_specs_bool(value):
    """One parser for every plan, and it agrees with the type bool of the roles' argument specs: what Ansible takes
    for a bool the plans take for the same bool, and what it refuses they refuse."""
    try:
        ansible = convert_bool(value, strict=True)
    except TypeError:
        ansible = None
    assert boolean(value) is ansible


def test_every_word_boolean_takes_is_one_ansible_takes():
    for word in ("true", "yes", "on", "1", "TRUE", "Yes"):
        assert boolean(word) is True and (word.lower() in BOOLEANS_TRUE)
    for word in ("false", "no", "off", "0", "FALSE", "No"):
        assert boolean(word) is False and (word.lower() in BOOLEANS_FALSE)


@pytest.mark.parametrize(("value", "schemes", "ok"), [
    ("https://s3.example.com:7480", ("https",), True),
    ("http://10.0.0.5:9000/", ("http", "https"), True),
    ("http://[fd00::5]:9000", ("http", "https"), True),
    ("file:///srv/wheels", ("file",), True),
    ("https://", ("https",), False),
    ("HTTPS://s3.example.com", ("https",), False),
    ("https://s3 .example.com", ("https",), False),
    ("http://[::1", ("http",), False),
    ("ftp://s3.example.com", ("http", "https"), False),
    (None, ("http",), False),
])
def test_is_url(value, schemes, ok):
    assert is_url(value, schemes) is ok


@pytest.mark.parametrize(("name", "ok"), [("nfs1", True), ("nfs1.example.com", True), ("nfs1.example.com.", True),
                                          ("-nfs", False), ("nfs_1", False), ("10.0.0.300", False), ("", False),
                                          (5, False)])
def test_check_hostname(name, ok):
    assert bool(check_hostname(name)) is ok


@pytest.mark.parametrize("name", ["acme-ray-checkpoints", "abc", "a" * 63, "ray.checkpoints.2026", "1ab"])
def test_bucket_names_s3_accepts(name):
    assert s3_bucket_problem(name) is None


@pytest.mark.parametrize(("name", "why"), [
    ("ab", "2 characters"),
    ("a" * 64, "64 characters"),
    ("Ray_Checkpoints", "other characters"),
    ("-ray", "other characters"),
    ("ray-", "other characters"),
    ("ray..ckpt", "two adjacent dots"),
    ("ray.-ckpt", "a dot next to a hyphen"),
    ("ray-.ckpt", "a dot next to a hyphen"),
    ("192.168.5.4", "the form of an IP address"),
    ("xn--ray", "(xn--)"),
    ("sthree-ray", "(sthree-)"),
    ("amzn-s3-demo-ray", "(amzn-s3-demo-)"),
    ("ray-s3alias", "(-s3alias)"),
    ("ray--ol-s3", "(--ol-s3)"),
    ("ray.mrap", "(.mrap)"),
    ("ray--x-s3", "(--x-s3)"),
    ("ray--table-s3", "(--table-s3)"),
    (None, "not a string"),
])
def test_bucket_names_s3_refuses(name, why):
    assert why in s3_bucket_problem(name)


@pytest.mark.parametrize(("value", "ok"), [
    ("sha256:" + "0123456789abcdef" * 4, True),
    ("sha256:" + "0123456789ABCDEF" * 4, False),
    ("SHA256:" + "0123456789abcdef" * 4, False),
    ("sha256:" + "0123456789abcdef" * 4 + "\n", False),
    ("sha256:" + "0123456789abcdef" * 3, False),
    ("0123456789abcdef" * 4, False),
    ("sha512:" + "0123456789abcdef" * 8, False),
    ("", False),
    (None, False),
])
def test_is_sha256_checksum(value, ok):
    assert is_sha256_checksum(value) is ok
