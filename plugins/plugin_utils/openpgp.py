# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The fingerprints of the primary keys in an ASCII-armored OpenPGP public key block, without gpg.

A package repository's signing key is fetched over HTTPS and checked against a pinned fingerprint before apt or dnf
is told to trust it. The fingerprint is the key's own hash (RFC 4880 section 12.2, RFC 9580 section 5.5.4): SHA-1 of
0x99, the two-octet length and the public-key packet body for a version 4 key, SHA-256 of 0x9a / 0x9b, the
four-octet length and the body for version 5 / 6 keys. Every primary key in the block is listed, so a block that
carries one more key than the pinned one is caught. Nothing here verifies signatures: apt and dnf do that, with the
key this checks.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

__all__ = ["OpenPGPError", "fingerprints", "normalize_fingerprint", "pinned_fingerprint"]

_BLOCK = re.compile(
    r"-----BEGIN PGP PUBLIC KEY BLOCK-----[ \t]*\r?\n(?P<body>.*?)-----END PGP PUBLIC KEY BLOCK-----", re.S)
_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")
_PUBLIC_KEY, _SECRET_KEY, _SECRET_SUBKEY = 6, 5, 7
_CRC24_INIT, _CRC24_POLY = 0xB704CE, 0x1864CFB
# A pinned fingerprint, normalized: 40 hex digits (a version 4 key) or 64 (version 5 or 6)
_PIN = re.compile(r"^([0-9A-F]{40}|[0-9A-F]{64})$")


class OpenPGPError(ValueError):
    """Data that is not an ASCII-armored OpenPGP public key block this module can read."""


def normalize_fingerprint(value) -> str:
    """A fingerprint as the operator may write it (spaces, lower case) in the form fingerprints() returns."""
    return re.sub(r"\s+", "", str(value or "")).upper()


def pinned_fingerprint(value):
    """The pin of a variable that pins a signing key's fingerprint, normalized (no spaces, upper case), or None when
    it is not 40 or 64 hex digits. A string; a number is read as its digits (YAML reads an unquoted all-digit
    fingerprint as one)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    pin = normalize_fingerprint(value)
    return pin if _PIN.match(pin) else None


def _crc24(data: bytes) -> int:
    crc = _CRC24_INIT
    for octet in data:
        crc ^= octet << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= _CRC24_POLY
    return crc & 0xFFFFFF


def _dearmor(text: str) -> list[bytes]:
    blocks = list(_BLOCK.finditer(text))
    if not blocks:
        start = " ".join(text.strip()[:60].split())
        raise OpenPGPError(f"no ASCII-armored OpenPGP public key block (the data starts {start!r})")
    out = []
    for block in blocks:
        lines = [line.strip() for line in block.group("body").splitlines()]
        while lines and _HEADER.match(lines[0]):  # armor headers (Version:, Comment:, ...)
            lines.pop(0)
        checksum = None
        if lines and lines[-1] == "":
            lines.pop()
        if lines and lines[-1].startswith("=") and len(lines[-1]) == 5:
            checksum = lines.pop()[1:]
        try:
            data = base64.b64decode("".join(lines), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise OpenPGPError(f"the armored block is not valid base64: {exc}") from exc
        if checksum is not None:
            try:
                want = int.from_bytes(base64.b64decode(checksum, validate=True), "big")
            except (binascii.Error, ValueError) as exc:
                raise OpenPGPError(f"the armor checksum {checksum!r} is not valid base64") from exc
            if _crc24(data) != want:
                raise OpenPGPError("the armor checksum does not match the data (a damaged or truncated key)")
        out.append(data)
    return out


def _packets(data: bytes):
    """(tag, body) of each packet; old and new packet formats, no partial body lengths (keys never use them)."""
    pos = 0
    while pos < len(data):
        ctb = data[pos]
        pos += 1
        if not ctb & 0x80:
            raise OpenPGPError(f"not an OpenPGP packet at octet {pos - 1} (tag octet 0x{ctb:02x})")
        if ctb & 0x40:  # new format
            tag = ctb & 0x3F
            if pos >= len(data):
                raise OpenPGPError("a packet header is cut short")
            first = data[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 224:
                if pos + 1 >= len(data):
                    raise OpenPGPError("a packet header is cut short")
                length, pos = ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif first == 255:
                length, pos = int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5
            else:
                raise OpenPGPError(f"packet {tag} uses a partial body length, which key packets never do")
        else:  # old format
            tag, kind = (ctb >> 2) & 0x0F, ctb & 0x03
            if kind == 3:
                length = len(data) - pos
            else:
                size = (1, 2, 4)[kind]
                length, pos = int.from_bytes(data[pos:pos + size], "big"), pos + size
        if pos + length > len(data):
            raise OpenPGPError(f"packet {tag} is cut short ({length} octets announced, {len(data) - pos} left)")
        yield tag, data[pos:pos + length]
        pos += length


def _fingerprint(body: bytes) -> str:
    version = body[0] if body else None
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise OpenPGPError(f"a version {version} public key (only versions 4, 5 and 6 have these fingerprints)")


def fingerprints(text: str) -> list[str]:
    """The fingerprints (upper-case hex) of every primary public key in the armored blocks of text, in order."""
    if isinstance(text, bytes):
        text = text.decode("ascii", errors="replace")
    if not isinstance(text, str):
        raise OpenPGPError(f"expected the key as text, got {type(text).__name__}")
    found = []
    for data in _dearmor(text):
        for tag, body in _packets(data):
            if tag in (_SECRET_KEY, _SECRET_SUBKEY):
                raise OpenPGPError("the block holds a secret key; a repository's signing key is a public key")
            if tag == _PUBLIC_KEY:
                found.append(_fingerprint(body))
    if not found:
        raise OpenPGPError("the armored block holds no public key")
    return found
