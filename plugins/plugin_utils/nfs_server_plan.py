# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The NFS server plan: a host's NFS exports and their clients, checked and computed on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the nfs_server role's templates only print
the result. Every problem is collected, each naming the host, the variable (``nfs_server_exports[<i>]`` and the
field for an export) and the bad value, and saying what was expected: the action fails before anything changes.

Each export is served to the cluster's clients - every address of every cluster host (the cluster plan's
``cluster.sources``) and ``nfs_server_extra_clients`` - and to the export's own ``clients``. An address or CIDR is
checked with Python's ``ipaddress``; a CIDR is written with its host bits cleared, an address as the address.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Mapping

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    _whole,
    check_ip,
    check_network,
    check_ownership,
    cluster_members,
    cluster_networks,
    path_problem,
)

IMPLEMENTATIONS = ("kernel", "ganesha")
# The packages of each implementation, per OS family (the families the role supports)
PACKAGES = {
    "kernel": {"Debian": ["nfs-kernel-server"], "RedHat": ["nfs-utils"]},
    "ganesha": {"Debian": ["nfs-ganesha", "nfs-ganesha-vfs"], "RedHat": ["nfs-ganesha", "nfs-ganesha-vfs"]},
}
SERVICES = {"kernel": "nfs-server.service", "ganesha": "nfs-ganesha.service"}
# The keys an export may have (the role's defaults/main.yml and meta/argument_specs.yml document them)
EXPORT_KEYS = ("path", "owner", "group", "mode", "access", "squash", "clients")
ACCESS = ("rw", "ro")
SQUASH = ("root_squash", "all_squash", "no_root_squash")
DEFAULT_ACCESS = "rw"
DEFAULT_SQUASH = "root_squash"
DEFAULT_OWNER = "root"
DEFAULT_MODE = "0755"
# The kernel server's options of every client entry, besides access and squash
KERNEL_OPTIONS = "sync,no_subtree_check,sec=sys"
# An absolute directory: no blanks, quotes or backslashes (the exports file and NFS-Ganesha's configuration quote
# nothing), no trailing slash, and not / itself
EXPORT_PATH = re.compile(r'^/[^\s"\\]*[^/\s"\\]$')
CLIENTS_EXPECTED = ("expected IP addresses or CIDRs (10.0.0.0/8, fd00::/64; a prefix no longer than the address: "
                    "/32 for IPv4, /128 for IPv6)")
EXPORT_EXPECTED = ("Each export of nfs_server_exports is a dict of %s; see the nfs_server role's defaults/main.yml."
                   % ", ".join(EXPORT_KEYS))


def client_text(value):
    """An NFS client as the exports list it: an address as the address, a CIDR with its host bits cleared (both in
    Python's canonical form); None when value is neither (a string only)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    return str(net) if "/" in text else str(net.network_address)


def _order(text):
    """Sort key of client texts: IPv4 first, then as text (the exports' order: a converged host keeps its file)."""
    return ":" in text, text


def _clients(label, name, value, problems):
    """The clients of a list of addresses/CIDRs (client_text), problems appended for bad ones."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        problems.append("%s %s is %s; expected a list of IP addresses or CIDRs (10.0.0.0/8, fd00::/64)."
                        % (label, name, _json(value)))
        return []
    texts = [client_text(item) for item in value]
    bad = [item for item, text in zip(value, texts) if text is None]
    if bad:
        problems.append("%s %s has %s; %s." % (label, name, _json(bad), CLIENTS_EXPECTED))
    return [text for text in texts if text is not None]


class _Export:
    """One entry of nfs_server_exports being checked: its problems say where they are."""

    def __init__(self, host, index, item, problems):
        self.host, self.index, self.item, self.problems = host, index, item, problems
        path = item.get("path")
        self.label = " (%s)" % path if isinstance(path, str) and EXPORT_PATH.match(path) else ""

    @property
    def where(self):
        return "nfs_server on %s: nfs_server_exports[%d]%s:" % (self.host, self.index, self.label)

    def problem(self, text):
        self.problems.append("%s %s" % (self.where, text))

    def bad(self, key, expected):
        shown = "is %s" % _json(self.item[key]) if key in self.item else "is not set"
        self.problem("%s %s; expected %s." % (key, shown, expected))


def _check_export(export):
    """Check one export's fields besides its path and clients (export.problem for each problem found)."""
    item = export.item
    for key in sorted(set(item) - set(EXPORT_KEYS), key=str):
        close = difflib.get_close_matches(str(key), EXPORT_KEYS, n=1)
        export.problem("unknown key %s%s; expected only %s." % (
            _json(key), " (did you mean %s?)" % close[0] if close else "", ", ".join(EXPORT_KEYS)))
    if item.get("access", DEFAULT_ACCESS) not in ACCESS:
        export.bad("access", "rw or ro")
    if item.get("squash", DEFAULT_SQUASH) not in SQUASH:
        export.bad("squash", "root_squash, all_squash or no_root_squash")
    check_ownership(export, item, "the exported directory", "2775")


def _check_settings(host, v, os_family, problems):
    """The problems of the role's variables besides the exports and clients (each one sentence, with the host)."""
    bad = Problems("nfs_server", host, v, problems).bad

    implementation = v.get("nfs_server_implementation")
    if implementation not in IMPLEMENTATIONS:
        bad("nfs_server_implementation", "kernel or ganesha")
    elif os_family is not None and os_family not in PACKAGES[implementation]:
        problems.append("nfs_server on %s: the OS family is %s; expected %s (the families the nfs_server role "
                        "installs %s for)." % (host, _json(os_family), " or ".join(PACKAGES[implementation]),
                                               implementation))
    port = _whole(v.get("nfs_server_port"), 1)
    if port is None or port > 65535:
        bad("nfs_server_port", "a TCP port (1-65535)")
    elif implementation == "kernel" and port != KERNEL_NFS_PORT:
        bad("nfs_server_port", "%d with nfs_server_implementation kernel (the kernel's NFS server listens there; the "
            "role does not move it), or another port with ganesha" % KERNEL_NFS_PORT)
    if implementation == "ganesha":
        grace = _whole(v.get("nfs_server_ganesha_grace_period"), 1)
        lease = _whole(v.get("nfs_server_ganesha_lease_lifetime"), 1)
        if grace is None or grace > GANESHA_GRACE_MAX:
            bad("nfs_server_ganesha_grace_period", "whole seconds, 1-%d (NFS-Ganesha refuses a longer grace period)"
                % GANESHA_GRACE_MAX)
            grace = None
        if lease is None or lease > GANESHA_LEASE_MAX:
            bad("nfs_server_ganesha_lease_lifetime", "whole seconds, 1-%d (NFS-Ganesha refuses a longer lease)"
                % GANESHA_LEASE_MAX)
        elif grace is not None and lease > grace:
            problems.append("nfs_server on %s: nfs_server_ganesha_lease_lifetime is %s, above "
                            "nfs_server_ganesha_grace_period %s; expected a lease no longer than the grace period."
                            % (host, _json(v.get("nfs_server_ganesha_lease_lifetime")),
                               _json(v.get("nfs_server_ganesha_grace_period"))))


# NFS-Ganesha's limits on its NFSv4 timers (its config's NFSv4 block: Grace_Period 0-180, Lease_Lifetime 1-120), and the
# kernel NFS server's port
GANESHA_GRACE_MAX = 180
GANESHA_LEASE_MAX = 120
KERNEL_NFS_PORT = 2049


def _unique(texts):
    return list(dict.fromkeys(texts))


def _resolve(item, index, cluster_clients, own_clients):
    """One export as the templates print it; item is checked already."""
    access = item.get("access", DEFAULT_ACCESS)
    squash = item.get("squash", DEFAULT_SQUASH)
    clients = _unique(cluster_clients + own_clients)
    options = "%s,%s,%s" % (access, KERNEL_OPTIONS, squash)
    entries = ["%s(%s)" % (client, options) for client in clients]
    return {
        "export_id": index + 1,
        "path": item["path"],
        "owner": item.get("owner", DEFAULT_OWNER),
        "group": item.get("group", DEFAULT_OWNER),
        "mode": item.get("mode", DEFAULT_MODE),
        "access": access,
        "squash": squash,
        "clients": clients,
        "options": options,
        "entries": entries,
        # the line of /etc/exports.d/rayfleet.exports: the path, then each client with its options, each followed
        # by a blank
        "exports_line": "%s %s" % (item["path"], "".join(entry + " " for entry in entries)),
        "ganesha_clients": ", ".join(clients),
        "ganesha_access_type": "RW" if access == "rw" else "RO",
    }


def nfs_server_plan(host, v, cluster_addresses, os_family):
    """The host's NFS exports from the nfs_server role's variables (v), checked; raises PlanError naming every
    problem.

    cluster_addresses: every address of every cluster host (the cluster plan's cluster.sources).
    os_family: the host's OS family fact (Debian, RedHat; None: not known, its packages neither checked nor listed).
    Returns the implementation, port, packages and service, the cluster's clients (the cluster's addresses and
    nfs_server_extra_clients, each once, IPv4 first, then as text) and each export resolved (its clients: the
    cluster's, then its own; the exports file's line, NFS-Ganesha's client list and access type)."""
    problems = []
    _check_settings(host, v, os_family, problems)
    prefix = "nfs_server on %s:" % host
    members = []
    if isinstance(cluster_addresses, (str, bytes, Mapping)) or not isinstance(cluster_addresses, (list, tuple)):
        problems.append("%s the cluster's addresses are %s; expected a list of IP addresses (the cluster plan's "
                        "cluster.sources)." % (prefix, _json(cluster_addresses)))
    else:
        for address in cluster_addresses:
            # a member's address, or one of the cluster's networks (ray_membership network)
            found = check_network(address) if "/" in str(address) else check_ip(address)
            if found is None:
                problems.append("%s a cluster host's address %s is not an IP address." % (prefix, _json(address)))
            else:
                members.append(found)
    extra_clients = _clients(prefix, "nfs_server_extra_clients", v.get("nfs_server_extra_clients"), problems)
    exports = v.get("nfs_server_exports")
    if isinstance(exports, (str, bytes, Mapping)) or not isinstance(exports, (list, tuple)) or not exports:
        problems.append("%s nfs_server_exports is %s; expected a list of at least one export. %s"
                        % (prefix, _json(exports), EXPORT_EXPECTED))
        raise PlanError(problems)
    # every path given, shown with a path's problem
    every = _json([e.get("path", "<no path>") if isinstance(e, Mapping) else "<not a dict>" for e in exports])
    cluster_clients = sorted(set(members + extra_clients), key=_order)
    seen, own, bare = {}, [], []
    for index, item in enumerate(exports):
        if not isinstance(item, Mapping):
            problems.append("%s nfs_server_exports[%d] is %s; expected a dict. %s"
                            % (prefix, index, _json(item), EXPORT_EXPECTED))
            own.append([])
            continue
        export = _Export(host, index, item, problems)
        path = item.get("path")
        wrong = path_problem(item, index, seen, pattern=EXPORT_PATH, what="the exported directory",
                             shape="without blanks, quotes, backslashes or a trailing slash",
                             list_name="nfs_server_exports", every=every)
        if wrong:
            export.problem(wrong)
        _check_export(export)
        own.append(_clients(export.where, "clients", item.get("clients"), problems))
        # no client at all, good or bad (a bad one is named above)
        if not (cluster_addresses or v.get("nfs_server_extra_clients") or item.get("clients")):
            bare.append(path if isinstance(path, str) else "nfs_server_exports[%d]" % index)
    if bare:
        problems.append(
            "%s no client address to export %s to: the cluster plan lists no address of a ray_head or ray_worker "
            "host, and neither nfs_server_extra_clients nor the export's clients name one. Expected the cluster's "
            "hosts in groups ray_head and ray_worker with their facts gathered in the same run (playbooks/storage.yml "
            "gathers them), or nfs_server_extra_clients." % (prefix, ", ".join(bare)))
    if problems:
        raise PlanError(problems)
    implementation = v["nfs_server_implementation"]
    resolved = [_resolve(item, index, cluster_clients, own[index]) for index, item in enumerate(exports)]
    return {
        "implementation": implementation,
        "port": _whole(v["nfs_server_port"]),
        "packages": list(PACKAGES[implementation].get(os_family, ())),
        "service": SERVICES[implementation],
        "ganesha_grace_period": _whole(v.get("nfs_server_ganesha_grace_period")),
        "ganesha_lease_lifetime": _whole(v.get("nfs_server_ganesha_lease_lifetime")),
        "cluster_clients": cluster_clients,
        "exports": resolved,
    }


def run_cluster_sources(host, plan_of, groups, hostvars_of):
    """Every address of every cluster host for an NFS server, and where they were read.

    This run's cluster plan (the host's, else the head's, as the stages' inputs read it): plan_of(name) -> the
    cluster plan registered for that host ({"cluster": ...}) or None. A run without one at hand (limited to hosts
    outside the cluster) computes the cluster's members from their inventory and facts with the cluster plan's own
    code: hostvars_of(name) -> that host's ray_node_ip, ray_node_instances and ansible_facts (and the head's
    ray_membership and ray_cluster_networks, where its inventory sets them: network membership's sources are the
    networks)."""
    heads = list(groups.get("ray_head") or [])
    for name in _unique([host, *heads[:1]]):
        plan = plan_of(name)
        cluster = plan.get("cluster") if isinstance(plan, Mapping) else None
        if isinstance(cluster, Mapping) and cluster.get("sources") is not None:
            return list(cluster["sources"]), "the cluster plan of %s" % name
    head = hostvars_of(heads[0]) if heads else {}
    networks = cluster_networks(head.get("ray_cluster_networks")) if head.get("ray_membership") == "network" else None
    cluster = cluster_members(heads, list(groups.get("ray_worker") or []), hostvars_of, networks=networks)
    return cluster["sources"], "the members' facts (no cluster plan in this run)"
