# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The monitoring plan: the monitoring role's variables checked on the controller, and the values its tasks print.

Pure Python (the ``rayfleet.cluster.plan`` action calls it). Every problem is collected, each naming the
host and the variable, the bad value and what was expected: the action fails before anything changes.

Listen addresses are ``address:port`` with an IP literal for the address (IPv4, or IPv6 in brackets: ``[::1]:9090``),
checked with Python's ``ipaddress``, and a TCP port (1-65535). Grafana's repository signing key fingerprint is
checked on the monitoring host when Grafana is on, for the key of the host's package manager.
"""

from __future__ import annotations

import ipaddress
import os
import re

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    _whole,
    boolean,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.openpgp import pinned_fingerprint

__all__ = ["GRAFANA_KEYS", "PlanError", "monitoring_plan", "parse_listen", "scrape_targets"]

RETENTION = re.compile(r"^[0-9]+[smhdwy]$")
SCRAPE_INTERVAL = re.compile(r"^([0-9]+)(ms|s|m|h)$")
# A Grafana release (e.g. 12.2.1), or empty: the repository's newest
GRAFANA_VERSION = re.compile(r"^[0-9A-Za-z.+~-]*$")
# A package version with its optional epoch (e.g. 1:4.6.0-1), or empty: the repository's newest
PACKAGE_VERSION = re.compile(r"^([0-9]+:)?[0-9A-Za-z.+~-]*$")
CUDA_MAJOR = re.compile(r"^([0-9]{2})?$")
# Grafana's repository signing key per package manager: the variable pinning its fingerprint and where it is fetched
# (Debian-family hosts use apt's, every other family dnf's)
GRAFANA_KEYS = {
    "apt": {"var": "monitoring_grafana_key_fingerprint", "url": "https://apt.grafana.com/gpg.key"},
    "dnf": {"var": "monitoring_grafana_rpm_key_fingerprint", "url": "https://rpm.grafana.com/gpg.key"},
}
LISTEN_EXPECTED = ("address:port, the address an IP literal (IPv4 such as 127.0.0.1, or IPv6 in brackets "
                   "such as [::1]) and the port 1-65535")
PORT_EXPECTED = "a TCP port (1-65535)"


def parse_listen(value):
    """(address, port) of an ``address:port`` listen address, the address in Python's canonical form; None when value
    is not one (a string; the address an IPv4 literal or a bracketed IPv6 literal, the port 1-65535)."""
    if not isinstance(value, str):
        return None
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not port_text.isdigit() or not port_text.isascii():
        return None
    port = int(port_text)
    if not 1 <= port <= 65535:
        return None
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        address = ipaddress.ip_address(host[1:-1] if bracketed else host)
    except ValueError:
        return None
    # IPv6 in brackets (its colons would run into the port's), IPv4 without
    if bracketed != (address.version == 6):
        return None
    return str(address), port


def _port(value):
    """value as a TCP port (1-65535, an int or its digits, not a boolean), else None."""
    port = _whole(value, 1)
    return port if port is not None and port <= 65535 else None


def _endpoint(address, port):
    """address:port, an IPv6 address in brackets."""
    return "[%s]:%d" % (address, port) if ":" in address else "%s:%d" % (address, port)


def _listen_result(found):
    address, port = found
    return {"address": address, "port": port, "listen": _endpoint(address, port)}


def _check_listens(v, bad):
    """The listen addresses parsed ({address, port, listen} each; None for a bad one, named with bad())."""
    out = {}
    for key, var in (("prometheus", "monitoring_prometheus_listen"), ("grafana", "monitoring_grafana_listen")):
        found = parse_listen(v.get(var))
        if found is None:
            bad(var, LISTEN_EXPECTED)
            out[key] = None
        else:
            out[key] = _listen_result(found)
    prometheus, grafana = out["prometheus"], out["grafana"]
    addresses = {prometheus["address"], grafana["address"]} if prometheus and grafana else set()
    # one port on one address, or on every address (0.0.0.0, ::) and any other: the second server cannot bind it
    if boolean(v.get("monitoring_grafana")) and addresses and prometheus["port"] == grafana["port"] and (
            len(addresses) == 1 or addresses & {"0.0.0.0", "::"}):
        bad("monitoring_grafana_listen", "another address or port than monitoring_prometheus_listen %s (both run "
            "on the monitoring host)" % _json(v.get("monitoring_prometheus_listen")))
    return out


def _check_ports(v, bad, problem):
    """The exporters' ports (None for a bad one, named with bad()); the DCGM exporter's must differ from node
    exporter's."""
    node = _port(v.get("monitoring_node_exporter_port"))
    dcgm = _port(v.get("monitoring_dcgm_exporter_port"))
    if node is None:
        bad("monitoring_node_exporter_port", PORT_EXPECTED)
    if dcgm is None:
        bad("monitoring_dcgm_exporter_port", "%s, not node exporter's" % PORT_EXPECTED)
    elif dcgm == node:
        problem("monitoring_dcgm_exporter_port is %s, node exporter's port (monitoring_node_exporter_port %s); "
                "expected a port of its own (both listen on the node's cluster address)."
                % (_json(v.get("monitoring_dcgm_exporter_port")), _json(v.get("monitoring_node_exporter_port"))))
    return node, dcgm


def _check_prometheus(v, bad):
    retention = v.get("monitoring_prometheus_retention")
    if not (isinstance(retention, str) and RETENTION.match(retention)):
        bad("monitoring_prometheus_retention", "a duration, digits and one unit of s, m, h, d, w or y (e.g. 15d)")
    interval = v.get("monitoring_scrape_interval")
    matched = SCRAPE_INTERVAL.match(interval) if isinstance(interval, str) else None
    if matched is None or int(matched.group(1)) == 0:
        bad("monitoring_scrape_interval", "a duration above zero, digits and one unit of ms, s, m or h (e.g. 15s)")


def _check_versions(v, bad, problem):
    grafana = v.get("monitoring_grafana_version")
    if not (isinstance(grafana, str) and GRAFANA_VERSION.match(grafana)):
        bad("monitoring_grafana_version", "a quoted Grafana release such as \"12.2.1\", or empty for the "
            "repository's newest")
    pair = []
    for var in ("monitoring_dcgm_version", "monitoring_dcgm_exporter_version"):
        value = v.get(var)
        if isinstance(value, str) and PACKAGE_VERSION.match(value):
            pair.append(value)
        else:
            bad(var, "a quoted package version such as \"1:4.6.0-1\", or empty for the repository's newest")
    if len(pair) == 2 and bool(pair[0]) != bool(pair[1]):
        problem("monitoring_dcgm_version is %s and monitoring_dcgm_exporter_version %s; expected both set or both "
                "empty (NVIDIA releases DCGM and its exporter in pairs: pin the pair from its version compatibility "
                "table, or neither for the repository's newest)." % (_json(pair[0]), _json(pair[1])))
    cuda = v.get("monitoring_dcgm_cuda_major")
    if cuda is None:
        cuda = ""
    if isinstance(cuda, bool) or not isinstance(cuda, (str, int)) or not CUDA_MAJOR.match(str(cuda)):
        bad("monitoring_dcgm_cuda_major", "two digits, a CUDA major such as 12, or empty for the one the driver "
            "supports")


def _check_grafana_key(v, os_family, problem):
    """Grafana's repository key for this host's package manager, its pin normalised ({var, url, value, pin}); None
    when the pin is not 40 or 64 hex digits (a problem named)."""
    if not isinstance(os_family, str) or not os_family:
        problem("the host's OS family is %s; expected its os_family fact, which picks Grafana's repository signing "
                "key (apt's on Debian-family hosts, dnf's on the others): gather the host's facts first."
                % _json(os_family))
        return None
    key = dict(GRAFANA_KEYS["apt" if os_family == "Debian" else "dnf"])
    value = v.get(key["var"])
    pin = pinned_fingerprint(value)
    if pin is None:
        problem("Grafana from Grafana's repository needs the fingerprint of its signing key (%s) in %s; it is %s "
                "(expected 40 hex digits, or 64 for a version 5 or 6 key; spaces allowed). Set it to the fingerprint "
                "Grafana publishes for that key, or to the one `gpg --show-keys` prints for a copy you trust; the key "
                "is checked against it before the package manager trusts it." % (key["url"], key["var"], _json(value)))
        return None
    return {**key, "value": value, "pin": pin}


def monitoring_plan(host, v, inventory_hosts, *, os_family=None, is_file=os.path.isfile):
    """The monitoring role's variables (v) on host, checked; raises PlanError naming every problem.

    inventory_hosts: every host of the inventory (monitoring_host must be one of them).
    os_family: the host's OS family fact; picks Grafana's repository key (apt on Debian, dnf on every other family),
    checked on the monitoring host when monitoring_grafana is true.
    is_file(path): whether path is a file on the controller (monitoring_dcgm_exporter_collectors).
    Returns the listen addresses parsed (address, port and the listen text, IPv6 in brackets), the exporters' ports
    as numbers, whether this host is the monitoring host, and Grafana's key (its variable, URL and the pin
    normalised: no spaces, upper case) where it was checked, else None."""
    found = Problems("monitoring", host, v)
    problems, problem, bad = found.problems, found.problem, found.bad

    monitoring_host = v.get("monitoring_host")
    hosts = list(inventory_hosts or [])
    if not (isinstance(monitoring_host, str) and monitoring_host in hosts):
        bad("monitoring_host", "an inventory host (by default the first host of group ray_head)")
    listens = _check_listens(v, bad)
    _check_prometheus(v, bad)
    node_port, dcgm_port = _check_ports(v, bad, problem)
    _check_versions(v, bad, problem)
    collectors = v.get("monitoring_dcgm_exporter_collectors")
    if collectors is None:
        collectors = ""
    if not isinstance(collectors, str) or (collectors and not is_file(collectors)):
        bad("monitoring_dcgm_exporter_collectors", "a counters CSV file on the controller (dcgm-exporter's format), "
            "or empty for the package's default-counters.csv")
    grafana = v.get("monitoring_grafana")
    if not isinstance(grafana, bool):
        bad("monitoring_grafana", "true or false")
    is_monitoring_host = host == monitoring_host
    key = _check_grafana_key(v, os_family, problem) if grafana is True and is_monitoring_host else None
    if problems:
        raise PlanError(problems)
    return {
        "monitoring_host": monitoring_host,
        "is_monitoring_host": is_monitoring_host,
        "prometheus_listen": listens["prometheus"],
        "grafana_listen": listens["grafana"],
        "node_exporter_port": node_port,
        "dcgm_exporter_port": dcgm_port,
        "dcgm_cuda_major": str(v.get("monitoring_dcgm_cuda_major") or ""),
        "dcgm_exporter_collectors": collectors,
        "grafana_key": key,
    }


def scrape_targets(cluster, gpu_hosts, own):
    """The monitoring host's scrape targets of its cluster, from the cluster plan (cluster: its members, their IPs and
    the exporter settings their inventories set, cluster.monitoring): each member's node exporter where the member
    runs monitoring and its node exporter, and the DCGM exporter of each member of group gpu (gpu_hosts) with it on,
    at the member's cluster IP and its own ports. own: this host's settings with the role's defaults
    (MEMBER_MONITORING_VARS), for what a member's inventory leaves unset. Raises PlanError naming a member's bad
    setting. Returns {"node": [address:port, ...], "dcgm": {member: address:port}} in the members' order."""
    problems, node, dcgm = [], [], {}
    settings = cluster.get("monitoring") or {}
    for member in cluster.get("members") or []:
        mine = {**own, **(settings.get(member) or {})}

        def flag(var, mine=mine, member=member):
            value = boolean(mine.get(var))
            if value is None:
                problems.append("monitoring on %s: %s is %s; expected true or false." % (
                    member, var, _json(mine.get(var))))
            return bool(value)

        def port(var, mine=mine, member=member):
            value = _port(mine.get(var))
            if value is None:
                problems.append("monitoring on %s: %s is %s; expected %s." % (
                    member, var, _json(mine.get(var)), PORT_EXPECTED))
            return value

        if not flag("monitoring_enabled"):
            continue
        ip = str((cluster.get("ips") or {}).get(member) or "")
        if flag("monitoring_node_exporter"):
            found = port("monitoring_node_exporter_port")
            if found and ip:
                node.append(_endpoint(ip, found))
        if member in (gpu_hosts or ()) and flag("monitoring_dcgm_exporter"):
            found = port("monitoring_dcgm_exporter_port")
            if found and ip:
                dcgm[member] = _endpoint(ip, found)
    if problems:
        raise PlanError(problems)
    return {"node": node, "dcgm": dcgm}
