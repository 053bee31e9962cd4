# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/plugin_utils/openpgp.py and the openpgp_fingerprints filter: the fingerprints a repository's signing key
is checked against. The keys in tests/unit/files/openpgp were made for these tests with GnuPG 2.2 (one: ed25519 with
a cv25519 subkey; two: RSA 2048; both: the two exported together); the expected fingerprints are what
`gpg --show-keys --with-colons` printed for them."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.rayfleet.cluster.plugins.filter.openpgp import FilterModule
from ansible_collections.rayfleet.cluster.plugins.plugin_utils import openpgp
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.openpgp import (
    OpenPGPError,
    fingerprints,
    normalize_fingerprint,
    pinned_fingerprint,
)

FILES = Path(__file__).resolve().parents[1] / "files" / "openpgp"
ONE = "A17999DCE731920033CD481C7E57E3680B9B3E24"
ONE_SUBKEY = "93F585BF9B8A3BD3939A02919662789CD0ECCEDA"
TWO = "586AC911BEC634741AC8530EEA847900F65637FE"


def key(name: str) -> str:
    return (FILES / f"{name}.asc").read_text()


def binary(text: str) -> bytes:
    body = text.split("\n\n", 1)[1].split("-----END", 1)[0]
    return base64.b64decode("".join(line for line in body.split() if not line.startswith("=")))


def armor(data: bytes, headers: str = "", checksum: bool = True) -> str:
    lines = [base64.b64encode(data[i:i + 48]).decode() for i in range(0, len(data), 48)]
    if checksum:
        lines.append("=" + base64.b64encode(openpgp._crc24(data).to_bytes(3, "big")).decode())
    return "-----BEGIN PGP PUBLIC KEY BLOCK-----\n" + headers + "\n" + "\n".join(lines) + \
        "\n-----END PGP PUBLIC KEY BLOCK-----\n"


def new_format(tag: int, body: bytes) -> bytes:
    if len(body) < 192:
        length = bytes([len(body)])
    elif len(body) < 8384:
        length = bytes([((len(body) - 192) >> 8) + 192, (len(body) - 192) & 0xFF])
    else:
        length = b"\xff" + len(body).to_bytes(4, "big")
    return bytes([0xC0 | tag]) + length + body


@pytest.mark.parametrize(("name", "expected"), [("one", [ONE]), ("two", [TWO]), ("both", [ONE, TWO])])
def test_every_primary_key_as_gpg_prints_it(name, expected):
    assert fingerprints(key(name)) == expected


def test_a_subkey_is_not_a_primary_key():
    assert ONE_SUBKEY not in fingerprints(key("one"))


def test_two_blocks_in_one_file_and_text_around_them():
    text = "keys of example.com\n" + key("one") + "\n" + key("two") + "\n-- \n"
    assert fingerprints(text) == [ONE, TWO]


def test_armor_headers_crlf_and_no_checksum():
    data = binary(key("two"))
    text = armor(data, headers="Version: GnuPG v1\nComment: https://example.com/gpg.key\n", checksum=False)
    assert fingerprints(text.replace("\n", "\r\n")) == [TWO]


def test_new_format_packet_headers_give_the_same_fingerprints():
    # gpg writes old-format headers; other tools write new ones (one- and two-octet lengths here)
    data = b"".join(new_format(tag, body) for tag, body in openpgp._packets(binary(key("both"))))
    assert data != binary(key("both"))
    assert fingerprints(armor(data)) == [ONE, TWO]


def test_a_version_6_key_is_hashed_with_sha256():
    body = b"\x06" + bytes(range(40))
    expected = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    assert fingerprints(armor(new_format(6, body))) == [expected]


def test_a_key_with_one_key_more_than_the_pin_does_not_match_it():
    assert fingerprints(key("both")) != [normalize_fingerprint(ONE)]


@pytest.mark.parametrize(("text", "message"), [
    ("<html><body>404 Not Found</body></html>", "no ASCII-armored OpenPGP public key block"),
    ("", "no ASCII-armored OpenPGP public key block"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "not valid base64"),
])
def test_what_is_not_a_key_block_is_refused(text, message):
    with pytest.raises(OpenPGPError, match=message):
        fingerprints(text)


def test_a_damaged_key_fails_its_armor_checksum():
    text = key("one")
    lines = text.splitlines()
    lines[3] = lines[3][:10] + ("A" if lines[3][10] != "A" else "B") + lines[3][11:]
    with pytest.raises(OpenPGPError, match="checksum does not match"):
        fingerprints("\n".join(lines))


def test_a_truncated_key_is_refused():
    data = binary(key("two"))
    with pytest.raises(OpenPGPError, match="cut short"):
        fingerprints(armor(data[:200]))


def test_a_secret_key_packet_is_refused():
    body = next(body for tag, body in openpgp._packets(binary(key("one"))) if tag == 6)
    with pytest.raises(OpenPGPError, match="secret key"):
        fingerprints(armor(new_format(5, body)))


def test_a_version_3_key_is_refused():
    with pytest.raises(OpenPGPError, match="version 3"):
        fingerprints(armor(new_format(6, b"\x03" + bytes(20))))


def test_a_block_without_a_public_key_is_refused():
    user_id = new_format(13, b"someone <someone@example.invalid>")
    with pytest.raises(OpenPGPError, match="no public key"):
        fingerprints(armor(user_id))


@pytest.mark.parametrize("written", [
    ONE, ONE.lower(), "A179 99DC E731 9200 33CD  481C 7E57 E368 0B9B 3E24", f" {ONE}\n"])
def test_a_pin_may_be_written_with_spaces_and_in_lower_case(written):
    assert normalize_fingerprint(written) == ONE


@pytest.mark.parametrize(("value", "pin"), [
    (ONE, ONE), ("a179 99dc e731 9200 33cd  481c 7e57 e368 0b9b 3e24", ONE), ("AB" * 32, "AB" * 32),
    (int("1" * 40), "1" * 40), (ONE[:-1], None), (ONE + "0", None), ("G" * 40, None), ("", None), (None, None),
    (True, None), ([ONE], None),
])
def test_a_pin_is_40_or_64_hex_digits_as_written_or_none(value, pin):
    assert pinned_fingerprint(value) == pin


def test_the_filter_returns_the_list_and_names_itself_in_errors():
    flt = FilterModule().filters()["openpgp_fingerprints"]
    assert flt(key("both")) == [ONE, TWO]
    with pytest.raises(AnsibleFilterError, match=r"^openpgp_fingerprints: no ASCII-armored"):
        flt("Not Found")
