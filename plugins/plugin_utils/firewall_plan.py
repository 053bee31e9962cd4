# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The firewall plan: a host's nftables tables, sets and port lists, computed and checked on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the firewall role's templates only print the
result. Every problem is collected, each naming the host and the variable and saying what was expected.

Each cluster (``ray_cluster_name``) has a table of its own: its Ray ports (and NFS on an NFS server) open to the
cluster's hosts and its extra sources only. The host's ephemeral ports and its own services' ports (exporters) are
the host's, not one cluster's: one shared table admits the hosts of every rayfleet cluster on the host, each cluster
adding its hosts from a file of its own.
"""

from __future__ import annotations

import functools
import ipaddress

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    _json,
    check_ip,
    check_network,
)

EPHEMERAL_TABLE = "rayfleet_ephemeral"
EPHEMERAL_RULES_PATH = "/etc/nftables.rayfleet-ephemeral.nft"
EPHEMERAL_UNIT = "rayfleet-firewall-ephemeral.service"
MEMBERS_DIR = "/etc/rayfleet/firewall.d"


def _port(value):
    """value as a TCP port (1-65535, an int or its digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and 1 <= value <= 65535 else None


def _networks(name, value, problems, prefix):
    """The networks of a list of addresses/CIDRs (normalised: host bits cleared), problems appended for bad ones."""
    if value is None:
        value = []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        problems.append("%s %s is %s: expected a list of IP addresses or CIDRs (10.0.0.0/8, fd00::/64)."
                        % (prefix, name, _json(value)))
        return []
    out, bad = [], []
    for item in value:
        try:
            out.append(ipaddress.ip_network(str(item).strip(), strict=False) if isinstance(item, str) else None)
        except ValueError:
            out.append(None)
        if out[-1] is None:
            bad.append(item)
    if bad:
        problems.append("%s %s has %s: expected IP addresses or CIDRs (10.0.0.0/8, fd00::/64; a prefix no longer "
                        "than the address: /32 for IPv4, /128 for IPv6)." % (prefix, name, _json(bad)))
    return [net for net in out if net is not None]


def _ports(name, value, problems, prefix):
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        problems.append("%s %s is %s: expected a list of TCP ports (1-65535)." % (prefix, name, _json(value)))
        return []
    ports = [_port(item) for item in value]
    bad = [item for item, port in zip(value, ports) if port is None]
    if bad:
        problems.append("%s %s has %s: expected TCP ports (1-65535)." % (prefix, name, _json(bad)))
    return [port for port in ports if port is not None]


def _range(name, value, prefix, problems):
    """(low, high) of a "low-high" port range with 1 <= low < high <= 65535, else None (a problem appended)."""
    parts = str(value).strip().split("-") if isinstance(value, (str, int)) else []
    bounds = [_port(part) for part in parts] if len(parts) == 2 else []
    if len(bounds) == 2 and None not in bounds and bounds[0] < bounds[1]:
        return bounds[0], bounds[1]
    problems.append("%s %s is %s: expected low-high, two TCP ports (1-65535) with low < high (10002-11999)."
                    % (prefix, name, _json(value)))
    return None


@functools.lru_cache(maxsize=65536)
def _network(text):
    """The network of an address's or a CIDR's text (each member's, asked by every host's plan: parsed once)."""
    return ipaddress.ip_network(text)


def _text(nets):
    """Sorted, distinct network texts (a single address as the address), leaving out those inside another one:
    an nftables interval set refuses overlapping elements."""
    kept = []
    # in this order a network comes after every network it is inside, and after no network outside the last kept
    # one that would hold it: each one is checked against the last kept network only
    for net in sorted(set(nets), key=lambda net: (net.version, net.network_address, net.prefixlen)):
        if not (kept and kept[-1].version == net.version and net.subnet_of(kept[-1])):
            kept.append(net)
    return [str(net.network_address) if net.num_addresses == 1 else str(net) for net in kept]


def _join_ports(ports, ranges=()):
    return ", ".join([str(p) for p in sorted(set(ports))] + [r for r in ranges if r])


def ephemeral_range(text):
    """The host's ephemeral port range ("32768-60999") from /proc/sys/net/ipv4/ip_local_port_range's text."""
    parts = str(text or "").split()
    bounds = [_port(part) for part in parts]
    if len(bounds) != 2 or None in bounds or bounds[0] > bounds[1]:
        raise ValueError("ip_local_port_range reads %s: expected two ports" % _json(text))
    return bounds[0], bounds[1]


def firewall_plan(host, args, member_addresses, *, ray_ports=(), worker_port_range="", nfs_port=0,
                  nfs_extra_clients=(), ephemeral_text=None):
    """This host's firewall: names, address sets and port lists for the templates.

    args: the firewall role's variables (firewall_*, ray_cluster_name).
    member_addresses: every address of every cluster host (a node may reach another from any interface), or the
    cluster's networks with ray_membership network: the cluster plan's sources.
    ray_ports: every single TCP port of the host's Ray nodes, worker_port_range: their worker port range (low-high;
    firewall_ray_port_range, when set, instead): the cluster plan's.
    nfs_port: the NFS port when the host serves NFS to the cluster (0: it does not); nfs_extra_clients, the
    addresses or CIDRs outside the cluster it serves too.
    ephemeral_text: /proc/sys/net/ipv4/ip_local_port_range's text, read on the host when
    firewall_restrict_ephemeral_ports is true.
    """
    prefix = "firewall on %s:" % host
    problems = []
    ray_sources = _networks("firewall_ray_allowed_sources", args.get("firewall_ray_allowed_sources"), problems,
                            prefix)
    ssh_sources = _networks("firewall_ssh_allowed_sources", args.get("firewall_ssh_allowed_sources"), problems,
                            prefix)
    nfs_clients = _networks("nfs_server_extra_clients", list(nfs_extra_clients), problems, prefix)
    more_ports = _ports("firewall_ray_ports", args.get("firewall_ray_ports"), problems, prefix)
    host_ports = _ports("firewall_host_ports", args.get("firewall_host_ports"), problems, prefix)
    given_range = args.get("firewall_ray_port_range")
    port_range = _range("firewall_ray_port_range", given_range, prefix, problems) if given_range not in ("", None) \
        else _range("the ray role's worker port range", worker_port_range, prefix, problems)
    if nfs_port and _port(nfs_port) is None:
        problems.append("%s nfs_server_port is %s: expected a TCP port (1-65535)." % (prefix, _json(nfs_port)))
    members = []
    for address in member_addresses:
        # a member's address, or one of the cluster's networks (ray_membership network)
        found = check_network(address) if "/" in str(address) else check_ip(address)
        if found is None:
            problems.append("%s a cluster host's address %s is not an IP address." % (prefix, _json(address)))
        else:
            members.append(_network(found))
    restrict = args.get("firewall_restrict_ephemeral_ports", True)
    if not isinstance(restrict, bool):
        problems.append("%s firewall_restrict_ephemeral_ports is %s: expected true or false."
                        % (prefix, _json(restrict)))
    elif restrict and ephemeral_text is None:
        problems.append("%s firewall_restrict_ephemeral_ports is true, and the host's ip_local_port_range was not "
                        "read." % prefix)
    if problems:
        raise PlanError(problems)

    cluster = _text(members + ray_sources)
    cluster_v4 = [net for net in cluster if ":" not in net]
    cluster_v6 = [net for net in cluster if ":" in net]
    # SSH stays open to the cluster and its extra sources when it is restricted to some sources
    ssh = _text(members + ray_sources + ssh_sources) if ssh_sources else []
    name = str(args.get("ray_cluster_name") or "")
    suffix = "-" + name if name else ""
    table = "rayfleet" + suffix.replace("-", "_")
    restricted = "%d-%d" % port_range
    own_ports = [int(p) for p in ray_ports] + more_ports + ([int(nfs_port)] if nfs_port else [])

    ephemeral = ""
    shared_ports = sorted(set(host_ports))
    if restrict:
        low, high = ephemeral_range(ephemeral_text)
        ephemeral = "%d-%d" % (low, high)
        # a set's intervals may not overlap: ports inside the range are left to the range
        shared_ports = [p for p in shared_ports if not low <= p <= high]
    return {
        "table": table,
        "unit_name": "rayfleet-firewall%s.service" % suffix,
        "rules_path": "/etc/nftables.rayfleet%s.nft" % suffix,
        "members_path": "%s/%s.nft" % (MEMBERS_DIR, table),
        "members_dir": MEMBERS_DIR,
        "ephemeral_table": EPHEMERAL_TABLE,
        "ephemeral_rules_path": EPHEMERAL_RULES_PATH,
        "ephemeral_unit_name": EPHEMERAL_UNIT,
        "cluster_v4": cluster_v4,
        "cluster_v6": cluster_v6,
        "ssh_v4": [net for net in ssh if ":" not in net],
        "ssh_v6": [net for net in ssh if ":" in net],
        "tcp_ports": _join_ports(own_ports, [restricted]),
        "nfs_port": int(nfs_port or 0),
        "nfs_extra_clients": [{"family": "ip6" if ":" in net else "ip", "source": net}
                              for net in _text(nfs_clients)],
        "ephemeral_range": ephemeral,
        "host_tcp_ports": _join_ports(shared_ports, [ephemeral]),
    }
