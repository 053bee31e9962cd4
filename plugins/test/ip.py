# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Jinja tests rayfleet.cluster.ip_address and rayfleet.cluster.ip_network, with Python's ipaddress."""

from __future__ import annotations

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import check_ip, check_network


def ip_address(value):
    """True when value is an IPv4 or IPv6 address."""
    return isinstance(value, str) and check_ip(value) is not None


def ip_network(value):
    """True when value is an IPv4 or IPv6 address or CIDR (10.0.0.0/8, fd00::/64; host bits may be set)."""
    return isinstance(value, str) and check_network(value) is not None


class TestModule:
    def tests(self):
        return {"ip_address": ip_address, "ip_network": ip_network}
