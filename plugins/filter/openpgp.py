# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Jinja filter rayfleet.cluster.openpgp_fingerprints: the primary key fingerprints of an armored OpenPGP key."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.openpgp import OpenPGPError, fingerprints


def openpgp_fingerprints(text):
    """Upper-case hex fingerprint of every primary key in text (an ASCII-armored public key block)."""
    try:
        return fingerprints(text)
    except OpenPGPError as exc:
        raise AnsibleFilterError(f"openpgp_fingerprints: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"openpgp_fingerprints": openpgp_fingerprints}
