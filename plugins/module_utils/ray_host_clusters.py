# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The Ray clusters a host already runs, read from the settings files rayfleet.cluster.ray_node writes, and how a
cluster about to be configured there fits beside them.

Each node's settings are /etc/rayfleet/ray[-<cluster>]-<role>[-<instance>].json; beside a container node's, its
ray[-<cluster>]-<role>[-<instance>].container.json says what its container runs (engine, image, GPU UUIDs), and the
node's venv holds .rayfleet-requirements (what was installed into it). Only reads.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re

# ray[-<cluster>]-<role>[-<instance>].json: an instance name has no '-' and is never head or worker, so the cluster
# name is the one the ray role wrote
SETTINGS_NAME = re.compile(
    r"^ray(?:-(?P<name>[a-z0-9][a-z0-9-]*))?-(?P<role>head|worker)(?:-(?P<instance>[a-z0-9]+))?\.json$"
)
# The worker port range is a range, not ports each node opens itself
RANGE_KEYS = ("min_worker", "max_worker")
# At most this many clashing ports are named in a message
SHOWN_PORTS = 5


def _read_json(path):
    with open(path) as handle:
        return json.load(handle)


def read_clusters(root):
    """Every Ray node rayfleet configured under root: its settings file, cluster name, role, instance, head address,
    node IP, ports, temp dir, venv and that venv's requirements, and its container record where it has one. A file
    that cannot be read is listed with its error (and left out of every comparison)."""
    found = []
    for path in sorted(glob.glob(os.path.join(root, "ray*-*.json"))):
        match = SETTINGS_NAME.match(os.path.basename(path))
        if not match:
            continue
        entry = {"path": path, "name": match["name"] or "", "role": match["role"], "instance": match["instance"] or ""}
        try:
            data = _read_json(path)
        except (OSError, ValueError) as exc:
            entry["error"] = str(exc)
            found.append(entry)
            continue
        venv = os.path.dirname(os.path.dirname(data.get("ray_bin") or ""))
        try:
            with open(os.path.join(venv, ".rayfleet-requirements")) as handle:
                requirements = handle.read()
        except OSError:
            requirements = ""
        entry.update(
            head_address=data.get("head_address") or "",
            node_ip=data.get("node_ip") or "",
            ports=data.get("ports") or {},
            temp_dir=data.get("temp_dir") or "",
            venv=venv,
            requirements=requirements,
        )
        with contextlib.suppress(OSError, ValueError):  # a host node has no container record
            entry["container"] = _read_json(path[: -len(".json")] + ".container.json")
        found.append(entry)
    return found


def _readable(found):
    return [c for c in found if "error" not in c]


def _label(cluster):
    return cluster["name"] or "(unnamed)"


def ports_of(ports):
    """The ports a node's settings take: its own ports and every port of its worker range."""
    taken = {int(value) for key, value in (ports or {}).items() if key not in RANGE_KEYS and value is not None}
    if (ports or {}).get("min_worker") is not None and ports.get("max_worker") is not None:
        taken |= set(range(int(ports["min_worker"]), int(ports["max_worker"]) + 1))
    return taken


def unit_name(cluster_name, role, instance):
    return "ray%s-%s%s.service" % ("-" + cluster_name if cluster_name else "", role, "-" + instance if instance else "")


def unwanted(found, cluster_name, role, instance_names):
    """This cluster's nodes on the host that the plan no longer has: of this role, those not among instance_names
    (an instance taken out, the host's one node once instances are set, the instances once unset); and instances of
    the other role (the other role's one node is the ray role's other_role step). Each with its unit and files."""
    out = []
    for cluster in _readable(found):
        if cluster["name"] != cluster_name:
            continue
        same_role = cluster["role"] == role
        if (same_role and cluster["instance"] not in instance_names) or (not same_role and cluster["instance"]):
            unit = unit_name(cluster_name, cluster["role"], cluster["instance"])
            path = cluster["path"]
            out.append({"unit": unit, "files": ["/etc/systemd/system/" + unit, path,
                                                path[: -len(".json")] + ".container.json"]})
    return out


def head_host(address):
    """The host of a head's host:port ([v6]:port, or a bare host): a head that moves its GCS port (ray_gcs_port) is
    the same head, not another cluster's."""
    address = str(address or "").strip()
    if address.startswith("["):
        return address[1:].partition("]")[0]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def collisions(found, me):
    """Why this cluster cannot be configured beside the ones found on the host (empty: it fits). me: name, role,
    head (the head's host:port this node joins, or its own address for a head), ports (every port its nodes take),
    temp_dir, venv, requirements (the text the ray role writes to the venv)."""
    problems = []
    readable = _readable(found)
    if me["role"] == "worker":
        for cluster in readable:
            if (cluster["name"] == me["name"] and cluster["role"] == "worker"
                    and head_host(cluster["head_address"]) != head_host(me["head"])):
                problems.append(
                    "the name is already the cluster whose head is %s (%s), not %s - another cluster claims this "
                    "name; pick another ray_cluster_name, or run playbooks/down.yml for the old cluster and remove "
                    "%s;" % (cluster["head_address"], cluster["path"], me["head"], cluster["path"])
                )
    mine = set(me["ports"])
    for cluster in readable:
        if cluster["name"] == me["name"]:
            continue
        both = sorted(mine & ports_of(cluster.get("ports")))
        if both:
            shown = ", ".join(str(port) for port in both[:SHOWN_PORTS]) + (", ..." if len(both) > SHOWN_PORTS else "")
            problems.append(
                "port(s) %s are also cluster %s's on this host (%s) - give each cluster on a shared host its own "
                "ray_*_port values and worker port range;" % (shown, _label(cluster), cluster["path"])
            )
        if cluster.get("temp_dir") == me["temp_dir"]:
            problems.append("ray_temp_dir %s is also cluster %s's (%s);"
                            % (me["temp_dir"], _label(cluster), cluster["path"]))
        if cluster.get("venv") == me["venv"] and cluster.get("requirements") not in ("", me["requirements"]):
            first = (cluster["requirements"].splitlines() or [""])[0]
            problems.append(
                "ray_venv_dir %s also runs cluster %s (%s) with other packages (%s) - set a ray_venv_dir of its own "
                "for this cluster;" % (me["venv"], _label(cluster), cluster["path"], first)
            )
    return problems


def gpu_collisions(found, cluster_name, gpus):
    """The GPUs (UUIDs) of this cluster's containers that a container of another cluster on the host also has."""
    problems = []
    mine = set(gpus)
    for cluster in _readable(found):
        container = cluster.get("container")
        if cluster["name"] == cluster_name or not isinstance(container, dict):
            continue
        both = [gpu for gpu in container.get("gpus") or [] if gpu in mine]
        if both:
            problems.append("GPU(s) %s are also given to container %s of cluster %s (%s)."
                            % (", ".join(both), container.get("name") or "?", _label(cluster), cluster["path"]))
    return problems
