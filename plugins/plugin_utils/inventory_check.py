# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""An inventory checked offline: the group contract, and every role's variables on every host where site.yml runs
it, checked against the role's argument spec and its plan, on the controller, from the inventory alone (no host
contacted, no facts gathered; facts a fact cache holds are read).

Pure Python (the inventory_check action does Ansible's part: rendering each host's variables, loading the roles'
specs, calling the plan actions); unit-tested as functions.
"""

from __future__ import annotations

import ipaddress
import json

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import check_ip
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import STAGES

NODE_GROUPS = ("ray_head", "ray_worker")


def contract_problems(groups):
    """The inventory contract site.yml's plays rely on: exactly one host in ray_head, a group ray_worker (which may be
    empty) and no host in both. Returns its problems (each one sentence)."""
    heads = list(groups.get("ray_head") or [])
    workers = groups.get("ray_worker")
    both = sorted(set(heads) & set(workers or []))
    if len(heads) == 1 and workers is not None and not both:
        return []
    return ["Inventory contract: exactly one host in group ray_head (found %s), a group ray_worker (may be empty; "
            "found %s), and no host in both%s." % (
                json.dumps(heads), json.dumps("no such group" if workers is None else list(workers)),
                " (in both: %s)" % ", ".join(both) if both else "")]


def checked_roles():
    """Each role site.yml runs, once, in the order of its stages (the ray role before those that read its plan), with
    the groups whose hosts it runs on."""
    seen = {}
    for stage in STAGES:
        for role in stage.roles:
            seen.setdefault(role, stage.groups)
    # the cluster plan is the ray role's: every role planned after it reads it
    order = ["common", "ray"] + [role for role in seen if role not in ("common", "ray")]
    return [(role, seen[role]) for role in order]


# What each role checks only on the host (its validate tasks there), shown as deferred: the checks a run of site.yml
# or validate.yml makes when it reaches the host. A check that needs facts is deferred only where no fact cache holds
# them (FACT_CHECKS).
HOST_CHECKS = {
    "ray": ("the head address resolves on the worker (getent)",
            "no other Ray cluster on the host collides with this one (names, ports, temp dir, venv)",
            "ray_pip_extras are extras the pinned Ray declares (pip, in the venv)"),
    "ssh_trust": ("sshd on the host accepts ssh_trust_sshd_settings (sshd -T)",),
    "firewall": ("the host's ephemeral port range, when firewall_restrict_ephemeral_ports",),
    "shared_storage": ("the host can take its mounts (kernel NFS client, servers answering)",),
    "nccl": ("NVIDIA GPUs and EFA devices on the PCI bus decide the NCCL source and EFA",),
    "apex": ("the Ray venv's PyTorch and the CUDA toolkit decide the build",),
    "submit_host": ("submit_host_user has an account on the host",),
}
# Checks that read a host's facts: run from a fact cache's facts, else deferred
FACT_CHECKS = {
    "ray": ("ray_node_ip: the address of the host's default route (ansible_facts.default_ipv4)",),
    "ssh_trust": ("each host's ed25519 host key (ansible_facts.ssh_host_key_ed25519_public)",),
    "shared_storage": ("where amazon-efs-utils comes from, for the host's OS (ansible_facts.os_family)",),
    "nccl": ("nccl_socket_ifname names one of the host's interfaces (ansible_facts.interfaces)",),
    "monitoring": ("Grafana's signing key for the host's OS family (ansible_facts.os_family)",),
    "nfs_server": ("the NFS server's packages for the host's OS family (ansible_facts.os_family)",),
    "nvidia_driver": ("the driver's source and packages for the host's OS and the GPUs on its PCI bus",),
    "cuda": ("the CUDA toolkit's source and packages for the host's OS and its GPUs",),
    "rocm": ("the ROCm install for the host's OS and its GPUs",),
}
# Roles whose plan reads the host's OS variables (vars/<distribution>.yml) and its PCI devices: offline only their
# argument spec is checked
SPEC_ONLY_ROLES = frozenset({"nvidia_driver", "cuda", "rocm"})


def offline_node_ip(index, inventory_ip, ansible_host, networks):
    """The address the offline plan gives a Ray host whose ray_node_ip comes from its facts: the inventory's
    ray_node_ip where it names one, else its ansible_host where that is an IP address, else a stand-in (one per
    host, in the first of ray_cluster_networks under network membership, else in 198.18.0.0/15, a range no host
    is on). Returns (address, known): known is False for a stand-in."""
    for value in (inventory_ip, ansible_host):
        if isinstance(value, str) and check_ip(value):
            return check_ip(value), True
    pool = ipaddress.ip_network(str(next(iter(networks or ()), "198.18.0.0/15")), strict=False)
    return str(pool.network_address + 1 + index % max(pool.num_addresses - 2, 1)), False


class Report:
    """The offline check's findings: problems (each naming the host and the variable), and what was deferred to the
    hosts, by check (the hosts it waits for)."""

    def __init__(self):
        self.problems = []
        self.deferred = {}
        self.checked = {}

    def problem(self, text):
        if text not in self.problems:
            self.problems.append(text)

    def defer(self, role, check, host):
        self.deferred.setdefault("%s: %s" % (role, check), []).append(host)

    def ran(self, role, host):
        self.checked.setdefault(role, []).append(host)

    def deferred_lines(self):
        """One line per deferred check: the check, then the hosts it waits for (the first few, then a count)."""
        lines = []
        for check, hosts in self.deferred.items():
            shown = ", ".join(hosts[:3]) + (" and %d more" % (len(hosts) - 3) if len(hosts) > 3 else "")
            lines.append("%s (on %s)" % (check, shown))
        return lines

    def to_dict(self):
        return {"problems": self.problems, "deferred": self.deferred_lines(),
                "checked": {role: len(hosts) for role, hosts in self.checked.items()},
                "hosts": len({host for hosts in self.checked.values() for host in hosts})}
