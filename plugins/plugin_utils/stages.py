# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The stages of site.yml, what each one manages on a host, and whether it must run there.

Pure Python, run on the controller (by the stage_items callback and the drift_check, stage_gate and stage_record
actions); unit-tested as functions.

A stage's record on a host (written by rayfleet.cluster.stage_record when the stage finishes there) holds:
  - the digest of the stage's inputs, as the stage table declares them (its code, the host's variables its roles'
    argument specs declare and those it names, the facts, what it reads of the cluster plan, the controller files
    it installs);
  - the items the stage managed there (files, units, packages, pip packages, mounts, users, groups, kernel modules,
    nftables tables), taken from the results of the tasks that ran, with each item's state at that moment;
  - the digests of the records of its upstream stages at that moment (the ray stage reads what the nccl stage wrote).
A stage runs on a host when it has no record there, its inputs changed, an item drifted, an upstream stage's record
changed since, or (the ray stage) when it runs on the head.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

try:  # ansible-core 2.19+: only text trusted as a template is rendered
    from ansible.template import trust_as_template
except ImportError:  # older ansible-core renders any text
    def trust_as_template(value):
        return value

from ansible_collections.rayfleet.cluster.plugins.module_utils.stage_state import item_key, upstream_spec

RECORD_DIR = "/var/lib/rayfleet/stages"


# What a stage takes from the other hosts (Stage.cluster_inputs)
HEAD = "head"
MEMBERS = "members"


@dataclass(frozen=True)
class Stage:
    """One stage of site.yml, and its inputs, declared: nothing about a stage is read from its code's text."""
    name: str
    # the roles its play applies
    roles: tuple[str, ...]
    # the playbook (under playbooks/) that holds its play
    playbook: str
    # other roles whose tasks its roles include: their code is the stage's code, and the variables of their argument
    # specs are its inputs, as its own roles' are
    uses: tuple[str, ...] = ()
    # variables of other roles' argument specs, and the inventory's own variables, that its roles and play read
    reads: tuple[str, ...] = ()
    # what it reads of the cluster plan: 'host.<key>', 'cluster.<key>', or a section whole ('host', 'cluster')
    plan: tuple[str, ...] = ()
    # whether it reads the host's default addresses (facts) other than through the cluster plan
    addresses: bool = False
    # files on the controller it puts on its hosts, each a variable naming a path and a suffix to it (the key pair
    # at ssh_trust_key_path is read as <path>.pub): their contents are its inputs
    files: tuple[tuple[str, str], ...] = ()
    # stages whose record this one reads: a change there makes this one run ("<stage>:<kind>": only that stage's
    # items of that kind, upstream_spec)
    upstream: tuple[str, ...] = ()
    # host: runs on the hosts that need it; head: on every host of its play when the head (group ray_head) needs it
    scope: str = "host"
    # what the stage's inputs take from the other hosts besides what it reads of the cluster plan: HEAD, the host's
    # own contract groups and the hosts of group ray_head (who holds the cluster key, which host is the head, the
    # default monitoring host: a worker that joins or leaves changes neither on the other hosts); MEMBERS, the
    # contract groups whole and the plan's cluster section whole (a stage that reads other hosts' variables, as the
    # submit hosts' plan does); None: nothing
    cluster_inputs: str | None = None
    # its role installs the collection itself: the whole collection is its code
    whole_collection: bool = False
    # the inventory groups its play targets
    groups: tuple[str, ...] = ("ray_head", "ray_worker")
    # the tags of its play's tasks (--tags naming one of them runs some of the stage)
    tags: tuple[str, ...] = ()
    # with network membership: seconds after which the stage runs again on every host, its inputs holding the
    # period's number (a time input: SSH trust's certificates are signed again only by a run of the stage, within
    # ssh_trust_cert_renew_before of their end, however long nothing else changed)
    renew_every_s: int | None = None


# A week: a cluster converged at least that often renews its SSH certificates in their last
# ssh_trust_cert_renew_before (4 weeks by default; at least 2 weeks is safe)
CERT_RENEWAL_PERIOD_S = 7 * 86400

# Where pip finds the ML wheels (an offline site's wheelhouse), read by every role that installs into the Ray venv
_WHEELHOUSE = ("pytorch_find_links", "pytorch_no_index")

STAGES = (
    Stage("common", ("common",), "base.yml", reads=("ray_limit_nofile",), tags=("common", "base")),
    Stage("gpu", ("nvidia_driver", "cuda", "rocm"), "gpu.yml", reads=("common_user", "ray_state"), groups=("gpu",),
          tags=("gpu", "nvidia_driver", "cuda", "rocm")),
    Stage("nccl", ("nccl",), "gpu.yml", uses=("nvidia_driver",),
          reads=(*_WHEELHOUSE, "ray_cluster_name", "ray_state", "ray_venv_dir"), upstream=("gpu",),
          tags=("gpu", "nccl")),
    Stage("firewall", ("firewall",), "firewall.yml",
          reads=("ray_cluster_name", "monitoring_node_exporter_port", "monitoring_dcgm_exporter_port",
                 "nfs_server_enabled", "nfs_server_port", "nfs_server_extra_clients"),
          plan=("cluster.sources", "host.any_role_units", "host.ray_ports", "host.worker_port_range"),
          cluster_inputs=HEAD,
          tags=("firewall", "security")),
    # static membership: every member's host key and address are plan inputs (known_hosts, from=); network
    # membership: none, so a host that joins runs the stage alone. The cluster key pair and the certificate
    # authority live on the controller: a new or restored one runs the stage on every host.
    Stage("ssh_trust", ("ssh_trust",), "ssh.yml", reads=("common_user", "ray_membership"),
          plan=("cluster.known_hosts", "cluster.membership", "cluster.sources", "host.node_ip"), addresses=True,
          files=(("ssh_trust_key_path", ".pub"), ("ssh_trust_key_path", "-cert.pub"),
                 ("ssh_trust_ca_key_path", ".pub")),
          cluster_inputs=HEAD, tags=("ssh", "ssh_trust"), renew_every_s=CERT_RENEWAL_PERIOD_S),
    # the exports' clients are the plan's sources: every member's address, or the networks (network membership)
    Stage("nfs_server", ("nfs_server",), "storage.yml",
          reads=("common_user", "common_group", "ray_membership", "ray_cluster_networks", "ray_node_ip",
                 "ray_node_instances", "shared_storage_on_degraded"),
          plan=("cluster.sources",), addresses=True, cluster_inputs=HEAD, groups=("nfs_server",),
          tags=("storage", "nfs_server")),
    Stage("shared_storage", ("shared_storage",), "storage.yml",
          reads=("common_user", "common_user_uid", "common_group", "common_group_gid", "ray_state"), addresses=True,
          tags=("storage", "shared_storage")),
    Stage("checkpoint_store", ("checkpoint_store",), "storage.yml",
          reads=(*_WHEELHOUSE, "ray_cluster_name", "ray_service_user", "ray_service_group", "ray_venv_dir",
                 "shared_storage_mounts", "shared_storage_on_degraded"),
          tags=("storage", "checkpoint_store")),
    # the host's plan whole, and of the cluster only the head (no other member's address or key: a member that
    # joins or leaves changes nothing in it)
    Stage("ray", ("ray",), "ray.yml", uses=("checkpoint_store", "logs"),
          reads=(*_WHEELHOUSE, "rayfleet_spot", "nccl_socket_ifname", "shared_storage_mounts", "monitoring_enabled",
                 "monitoring_grafana", "monitoring_grafana_listen", "monitoring_prometheus_listen",
                 "preflight_allow_missing", "preflight_max_bytes", "preflight_pair_bytes", "preflight_pair_ratio"),
          plan=("host",), addresses=True,
          upstream=("gpu", "nccl", "checkpoint_store"), scope="head", cluster_inputs=HEAD, tags=("ray",)),
    # the ML libraries install into the Ray venv: they read the packages the ray stage installs there, not its units
    # or settings
    Stage("ml", ("pytorch", "nccl", "apex", "checkpoint_store"), "ml.yml", uses=("nvidia_driver",),
          reads=("ray_cluster_name", "ray_service_user", "ray_service_group", "ray_state", "ray_venv_dir",
                 "shared_storage_mounts"),
          upstream=("gpu", "ray:pip"), tags=("ml", "pytorch", "nccl", "apex", "checkpoint_store")),
    Stage("monitoring", ("monitoring",), "monitoring.yml", uses=("nvidia_driver",),
          reads=("ray_cluster_name", "ray_state", "ray_venv_dir", "rayfleet_cluster"),
          plan=("cluster.membership", "cluster.scrape", "host.config_paths", "host.instances", "host.node_ip"),
          cluster_inputs=HEAD, tags=("monitoring",)),
    Stage("submit_host", ("submit_host",), "submit_host.yml", uses=("common",),
          reads=("ray_cluster_name", "ray_limit_nofile", "preflight_state_path"), cluster_inputs=MEMBERS,
          whole_collection=True, groups=("ray_submit",), tags=("submit_host",)),
)
STAGE_BY_NAME = {stage.name: stage for stage in STAGES}
# Every tag of the stages' plays: --skip-tags naming one leaves part of a stage out
STAGE_TAGS = frozenset(tag for stage in STAGES for tag in stage.tags)


def upstream_views(name=None):
    """What stages read of other stages' records by kind ("ray:pip"), all of them or those of stage name: the drift
    check and the records report each one's digest."""
    return sorted({up for item in STAGES for up in item.upstream
                   if upstream_spec(up)[1] and (name is None or upstream_spec(up)[0] == name)})


# The gate of the validate plays: a host is checked when any stage runs on it (nothing changes on the others)
VALIDATE = "validate"
# The drift check's selection, once for the run: the groups site.yml's plays target (stage_groups)
SELECT = "select"
GROUP_PREFIX = "rayfleet_stage_"
# Every host the selection saw: while this group exists, the stage plays target the selection's groups
SELECTED_GROUP = GROUP_PREFIX + "selected"

# Variables that say how to run, not what to converge to (how long this run waits for Ray's nodes or for a host's
# reboot, say): never part of a stage's inputs, so a new value makes no stage run again
RUN_OPTIONS = frozenset({
    "rayfleet_full", "rayfleet_gpu_serial", "rayfleet_max_unreachable", "ray_wait_timeout",
    "nvidia_driver_reboot_timeout", "rayfleet_lock_wait", "rayfleet_lock_stale_after", "rayfleet_lock_break",
    "rayfleet_converge_lock",
})
# Facts a stage's result depends on: a new kernel or distribution makes every stage run again; a new address, the
# stages that read addresses (Stage.addresses)
INPUT_FACTS = ("distribution", "distribution_version", "architecture", "kernel", "default_ipv4", "default_ipv6")
ADDRESS_FACTS = ("default_ipv4", "default_ipv6")
# Parts of the default addresses' facts no stage reads, which may change when a host boots (a container's or a VM's
# MAC address is new on every start): they are no input
VOLATILE_ADDRESS_FACTS = frozenset({"macaddress"})
# The inventory groups the stages' plays target
CONTRACT_GROUPS = ("ray_head", "ray_worker", "gpu", "nfs_server", "monitoring", "ray_submit")
# The collection's code (code_files)
CODE_DIRS = ("roles", "plugins", "playbooks", "library_py")
CODE_FILES = ("site.yml",)
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".md")
# The code every stage shares: the plugins its roles call and the node library its hosts run
SHARED_CODE = ("plugins/", "library_py/", "playbooks/site.yml", "site.yml")
# The machinery's own code: it decides whether a stage runs and what its record says, and applies nothing
MACHINERY_FILES = frozenset({
    "plugins/plugin_utils/stages.py", "plugins/module_utils/stage_state.py", "plugins/callback/stage_items.py",
    "plugins/doc_fragments/stage_records.py", "plugins/module_utils/converge_lock.py",
    "plugins/plugin_utils/converge_lock.py",
    *("plugins/%s/%s.py" % (kind, name) for kind in ("action", "modules")
      for name in ("stage_gate", "stage_record", "stage_items", "drift_check", "reach_policy", "converge_lock")),
})


class StageError(Exception):
    pass


def stages_of(group_names):
    """The stages whose plays target a host of these groups."""
    mine = set(group_names)
    return [item for item in STAGES if mine & set(item.groups)]


def stage(name):
    try:
        return STAGE_BY_NAME[name]
    except KeyError:
        raise StageError("unknown stage %r; the stages are: %s (and %s, the gate of the validate plays)"
                         % (name, ", ".join(STAGE_BY_NAME), VALIDATE)) from None


def digest(obj) -> str:
    """sha256 of obj's canonical JSON (sorted keys; values JSON cannot hold are written as their str())."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def code_files(root):
    """The collection's code under root (roles, plugins, playbooks, the node library, site.yml), skipping caches and
    Markdown (a role's README changes no host): absolute paths, sorted."""
    paths = [os.path.join(root, name) for name in CODE_FILES if os.path.isfile(os.path.join(root, name))]
    for top in CODE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            paths.extend(os.path.join(dirpath, f) for f in filenames if not f.endswith(SKIPPED_SUFFIXES))
    return sorted(paths)


def files_digest(root, paths, sums=None) -> str:
    """sha256 over the paths (relative to root) and contents of these files (sums: {path: sha256 digest of its
    content} already read)."""
    sums = {} if sums is None else sums
    sha = hashlib.sha256()
    for path in sorted(paths):
        if path not in sums:
            with open(path, "rb") as handle:
                sums[path] = hashlib.sha256(handle.read()).digest()
        sha.update(os.path.relpath(path, root).encode() + b"\0")
        sha.update(sums[path])
    return sha.hexdigest()


def code_digest(root) -> str:
    """sha256 over the paths and contents of the collection's code under root (code_files)."""
    return files_digest(root, code_files(root))


def stage_code(root):
    """{stage: digest of its code}: the directories of its roles and of the roles they use, its playbook, and the
    code every stage shares (the plugins and the node library, without the machinery's own code, which decides
    whether a stage runs and applies nothing). A stage whose role installs the collection takes the whole
    collection's digest."""
    files = code_files(root)
    rel = {path: os.path.relpath(path, root) for path in files}
    shared = [path for path in files if rel[path].startswith(SHARED_CODE) and rel[path] not in MACHINERY_FILES]
    sums = {}
    out = {}
    for item in STAGES:
        if item.whole_collection:
            out[item.name] = files_digest(root, files, sums)
            continue
        dirs = tuple("roles/%s/" % role for role in item.roles + item.uses)
        mine = [path for path in files if rel[path].startswith(dirs) or rel[path] == "playbooks/" + item.playbook]
        out[item.name] = files_digest(root, shared + mine, sums)
    return out


# libyaml's parser where PyYAML has it: the argument specs are read by every host's plan, in its own process
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def collection_yaml(path):
    """One of the collection's YAML files, parsed once per process (shared: not to be changed)."""
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_YAML_LOADER)  # nosec B506 - a safe loader


@functools.lru_cache(maxsize=None)
def role_options(root, role):
    """{variable: its option} of every entry point of role's meta/argument_specs.yml, once per process (shared: not
    to be changed)."""
    specs = (collection_yaml(os.path.join(root, "roles", role, "meta", "argument_specs.yml")) or {}).get(
        "argument_specs") or {}
    return {name: option for entry in specs.values() for name, option in (entry.get("options") or {}).items()}


def role_variables(root, role):
    """The variables role declares in meta/argument_specs.yml (all its entry points)."""
    return frozenset(role_options(root, role))


def stage_variables(root):
    """{stage: the variables it reads}: those its roles and the roles they use declare in their argument specs, and
    those it declares it reads (Stage.reads), less the run options."""
    specs = {}
    out = {}
    for item in STAGES:
        names = set(item.reads)
        for role in item.roles + item.uses:
            if role not in specs:
                specs[role] = role_variables(root, role)
            names |= specs[role]
        out[item.name] = frozenset(names - RUN_OPTIONS)
    return out


def role_default(root, item, variable):
    """The default of one of stage item's variables, as its roles' defaults/main.yml writes it (a template), or
    None."""
    for role in item.roles + item.uses:
        path = os.path.join(root, "roles", role, "defaults", "main.yml")
        if os.path.isfile(path):
            defaults = collection_yaml(path) or {}
            if variable in defaults:
                return defaults[variable]
    return None


def input_facts(facts):
    out = {name: facts.get(name) for name in INPUT_FACTS}
    for name in ("default_ipv4", "default_ipv6"):
        if isinstance(out[name], Mapping):
            out[name] = {key: value for key, value in out[name].items() if key not in VOLATILE_ADDRESS_FACTS}
    return out


def plain(value):
    """Ansible's lazy and tagged containers and strings -> plain JSON-able values (templated as they are read)."""
    if isinstance(value, Mapping):
        return {str(key): plain(value[key]) for key in value}
    if isinstance(value, (list, tuple, set, frozenset)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    ):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def collection_root():
    """This collection's root (plugins/plugin_utils/stages.py is three levels down)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def record_dir(hostvars, host):
    """Where host keeps its stage records: one directory per Ray cluster (ray_cluster_name; "default" unnamed), so
    two clusters sharing hosts keep their own."""
    try:
        name = str(hostvars[host].get("ray_cluster_name") or "")
    except Exception:  # an undefined or broken template: the plan names it
        name = ""
    return os.path.join(RECORD_DIR, re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "default")


def partial_run(run_tags, skip_tags):
    """Why a run applies only part of the stages (--tags, or --skip-tags naming one of the stages' tags), or None. A
    partial run writes no record: it cannot vouch for what it left out."""
    if list(run_tags or ["all"]) != ["all"]:
        return "--tags %s" % ",".join(run_tags)
    skipped = sorted(set(skip_tags or ()) & STAGE_TAGS)
    if skipped:
        return "--skip-tags %s" % ",".join(skipped)
    return None


# What a run reads from the plan without it being the cluster's configuration (the hosts a run goes on without)
RUN_ONLY_PLAN_KEYS = ("awaited_nodes", "left_out")
# What the cluster plan holds for one stage alone: an input of the stages that name it (plan_inputs), not of every
# stage that reads the cluster (the members' exporter settings are the monitoring host's scrape targets)
NAMED_ONLY_PLAN_KEYS = ("scrape",)
# The cluster plan: the ray role's plan tasks register it, and the drift check's play computes it before it compares
# the hosts with their records: each member's own plan (host), and the cluster's (cluster), worked out once for the
# run and registered for every host of the play
HOST_PLAN = "__ray_plan_result"
CLUSTER_PLAN = "__ray_cluster_plan"


def cluster_inputs(groups, cluster):
    """What the cluster-reading stages take from the other hosts: the contract groups and the cluster plan's members
    and their addresses (a host down in this run keeps its place: what the run awaits is no input; what one stage
    alone reads of the plan is that stage's)."""
    members = cluster
    if isinstance(cluster, Mapping):
        members = {key: value for key, value in cluster.items()
                   if key not in RUN_ONLY_PLAN_KEYS + NAMED_ONLY_PLAN_KEYS}
    return {
        "groups": {name: sorted(groups.get(name) or []) for name in CONTRACT_GROUPS},
        "members": members,
    }


def plan_inputs(plan, keys, own=True):
    """What a stage reads of the host's cluster plan (the ray role's plan result: {"host": ..., "cluster": ...}):
    keys ('host.<key>', 'cluster.<key>', or 'host' or 'cluster': that section whole). The cluster's keys a run only
    reads (the hosts it goes on without) are none of it; own=False (a host outside the cluster, which reads the
    head's plan) has no host section. None when the stage reads none of it."""
    if not keys:
        return None
    plan = plan if isinstance(plan, Mapping) else {}
    cluster = plan.get("cluster") if isinstance(plan.get("cluster"), Mapping) else {}
    sections = {
        "host": plan.get("host") if own else None,
        "cluster": {key: value for key, value in cluster.items() if key not in RUN_ONLY_PLAN_KEYS},
    }
    out = {}
    for key in sorted(keys):
        section, name = key.split(".", 1) if "." in key else (key, "")
        value = sections[section]
        if not name:
            out[key] = value
        else:
            out[key] = value.get(name) if isinstance(value, Mapping) and name not in RUN_ONLY_PLAN_KEYS else None
    return out


_CODE = {}


def collection_code(root):
    """({stage: code digest} (stage_code), {stage: variables} (stage_variables)) of the collection at root, computed
    once per process. The stage_items callback computes them in Ansible's main process when the playbook starts, so
    the worker processes that run each task (forked from it) inherit them rather than each reading and hashing the
    collection again."""
    if root not in _CODE:
        _CODE[root] = (stage_code(root), stage_variables(root))
    return _CODE[root]


def controller_files(item, host_vars, template=None, root=None):
    """{'<variable><suffix>': sha256 of the file, or None where there is none} of the controller files stage item
    puts on its hosts (Stage.files): each path is the host's variable, else its role default rendered by template
    (the action's templar; without one, the default's text names the file)."""
    out = {}
    for variable, suffix in item.files:
        key = variable + suffix
        try:
            if variable in host_vars:
                base = plain(host_vars[variable])
            else:
                raw = role_default(root or collection_root(), item, variable)
                base = plain(template(raw)) if template is not None and raw is not None else raw
        except Exception as exc:  # an undefined or broken template: the error is the input
            out[key] = {"error": type(exc).__name__}
            continue
        path = "%s%s" % (base, suffix) if base else None
        if path and os.path.isfile(path):
            with open(path, "rb") as handle:
                out[key] = hashlib.sha256(handle.read()).hexdigest()
        else:
            out[key] = None
    return out


def renderer(templar):
    """A function rendering a role default's text (a template the collection wrote) with templar's variables (an
    action's: the task's host)."""
    return lambda text: templar.template(trust_as_template(text))


def host_inputs(hostvars, host, groups, only=None, template=None, *, memo=None):
    """Each stage's inputs digest for host (only: that stage's, whatever groups host is in), read from Ansible's
    hostvars (inventory, group and extra variables; no role defaults: those are code), and the controller files the
    stages put on it (template: renders a role default naming one). memo: a dict kept across the hosts of one run,
    so the cluster section of the plan, the same for every host, is read and digested once."""
    root = collection_root()
    mine = hostvars[host]
    these = [stage(only)] if only else stages_of(mine.get("group_names") or [])
    code, variables = collection_code(root)
    wanted = set().union(*(variables[item.name] for item in these)) if these else set()
    values = {}
    for key in sorted(wanted & set(mine.keys())):
        try:
            values[key] = plain(mine[key])
        except Exception as exc:  # an undefined or broken template: its text and the error are the input
            values[key] = {"unrendered": plain(hostvars.raw_get(host).get(key)), "error": type(exc).__name__}
    found = mine.get("ansible_facts") or {}
    facts = {name: plain(found.get(name)) for name in INPUT_FACTS}
    # the cluster as this run planned it (the host's, else the head's: a host outside the plan's play), and a
    # member's own plan (a run limited to some hosts plans those)
    heads = groups.get("ray_head") or []
    host_plan = mine.get(HOST_PLAN)
    own = isinstance(host_plan, Mapping)
    cluster_plan = mine.get(CLUSTER_PLAN)
    if not isinstance(cluster_plan, Mapping) and heads:
        cluster_plan = hostvars[heads[0]].get(CLUSTER_PLAN)
    cluster = None
    if isinstance(cluster_plan, Mapping):
        # registered once for the run (run_once), so the same for every host that has one
        cluster = _once(memo, "cluster", lambda: plain(cluster_plan.get("cluster")))
    plan = None
    if own or cluster is not None:
        plan = {"host": plain(host_plan.get("host")) if own else None, "cluster": cluster}
    files = {item.name: controller_files(item, mine, template, root) for item in these if item.files}
    shared = memo if cluster is not None else None
    return inputs_digests(code, values, facts, _once(shared, "members", lambda: cluster_inputs(groups, cluster)),
                          these, variables=variables, plan=plan, own_plan=own,
                          own_groups=mine.get("group_names") or [], files=files, memo=shared)


def _once(memo, key, make):
    """make(), kept in memo under key (memo None: nothing kept)."""
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]


def inputs_changed(found, digests):
    """The stages of a drift check's result (found: rayfleet.cluster.drift_check's) whose record holds inputs other
    than digests ({stage: the inputs digest now}, from host_inputs)."""
    return sorted(name for name, verdict in ((found or {}).get("stages") or {}).items()
                  if verdict.get("recorded") and verdict.get("inputs") != digests.get(name))


def with_inputs(found, changed):
    """found (a drift check's result) with each recorded stage's inputs_changed set from changed (the stages whose
    inputs changed, from inputs_changed; None where they were not compared: then every recorded stage counts as
    changed, as a stage that runs once too often is harmless and one that misses a change is not)."""
    if not isinstance(found, Mapping) or not found.get("stages"):
        return found
    stages = {name: dict(verdict, inputs_changed=changed is None or name in changed) if verdict.get("recorded")
              else verdict for name, verdict in found["stages"].items()}
    return dict(found, stages=stages)


def inputs_digests(code, host_vars, facts, cluster, these=STAGES, *, variables=None, plan=None, own_plan=True,
                   own_groups=(), files=None, now=None, memo=None):
    """Each stage's inputs digest for one host: its code digest (code: {stage: digest} from stage_code, or one digest
    for every stage), the host's variables that stage reads (variables: {stage: names} from stage_variables; None:
    all of host_vars), the facts (the default addresses for the stages that read them), the other hosts as the
    stage takes them (cluster, from cluster_inputs: the heads and the host's own groups (own_groups), or the
    contract groups and the members whole), what the stage reads of the host's cluster plan (plan, the host's own
    unless own_plan is false; plan_inputs), the controller files it puts on the host (files: {stage: controller_files})
    and with network membership the current period of a stage renewed every so often (renew_every_s; now: the time,
    default time.time()). What a stage reads of the cluster goes in by its digest, worked out once per memo (the
    same for every host of a run)."""
    facts = input_facts(facts or {})
    network = isinstance(plan, Mapping) and (plan.get("cluster") or {}).get("membership") == "network"
    now = time.time() if now is None else now
    local = {name: value for name, value in facts.items() if name not in ADDRESS_FACTS}
    out = {}
    for item in these:
        names = None if variables is None else variables[item.name]
        mine = {key: value for key, value in host_vars.items()
                if key not in RUN_OPTIONS and (names is None or key in names)}
        reads_addresses = item.addresses or item.cluster_inputs == MEMBERS
        inputs = {"code": code[item.name] if isinstance(code, Mapping) else code,
                  "facts": facts if reads_addresses else local, "stage": item.name, "vars": mine}
        if item.cluster_inputs == MEMBERS:
            inputs["cluster"] = _once(memo, "members.digest", lambda: digest(cluster))
        elif item.cluster_inputs == HEAD:
            # the host's contract groups only: an inventory's own groups (a rack, a zone) decide no stage
            inputs["cluster"] = {"heads": cluster["groups"].get("ray_head") or [],
                                 "own_groups": sorted(set(own_groups or ()) & set(CONTRACT_GROUPS))}
        planned = plan_inputs(plan, item.plan, own_plan)
        if planned is not None:
            inputs["plan"] = {key: _once(memo, "plan." + key, lambda value=value: digest(value))
                              if key.split(".", 1)[0] == "cluster" else value for key, value in planned.items()}
        if item.files and files is not None:
            inputs["files"] = files.get(item.name)
        if item.renew_every_s and network:
            inputs["period"] = int(now // item.renew_every_s)
        out[item.name] = digest(inputs)
    return out


# ---- the items a task managed, read from its result (the stage_items callback) ----

_PKG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*")
_PIP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
# actions whose results name files they wrote (dest or path in the result, else in the arguments)
FILE_ACTIONS = frozenset({
    "copy", "template", "file", "lineinfile", "blockinfile", "replace", "ini_file", "get_url", "assemble",
    "known_hosts", "openssh_keypair", "openssh_cert", "yum_repository",
})
UNIT_ACTIONS = frozenset({"systemd_service", "systemd", "service"})
PACKAGE_ACTIONS = frozenset({"apt", "package", "dnf", "yum", "dpkg_selections"})
# actions that read, run or decide, and manage no item a drift check could compare (or whose items the role
# declares through rayfleet.cluster.stage_items); unarchive and git fill build directories, whose product the
# role records
UNRECORDED_ACTIONS = frozenset({
    "assert", "debug", "fail", "set_fact", "include_tasks", "import_tasks", "include_role", "import_role",
    "include_vars", "meta", "slurp", "stat", "find", "getent", "package_facts", "service_facts", "setup",
    "gather_facts", "uri",
    "wait_for", "fetch", "command", "shell", "script", "raw", "tempfile", "reboot", "unarchive", "archive", "git",
    "gpu_hardware_info", "gpu_check", "ray_job", "ray_cluster_info", "collective_check", "storage_check", "plan",
    "ray_host_clusters", "ray_probe", "ray_work", "storage_precheck", "reach_policy", "preflight_verdict",
    "stage_gate", "stage_record", "drift_check", "inventory_check", "doctor_report", "converge_lock",
    "group_by", "add_host", "pause",
    "docker_image", "docker_image_load", "dnf_versionlock", "yum_versionlock", "alternatives",
})


def short_action(action):
    """ansible.builtin.copy, ansible.legacy.copy, copy -> copy"""
    return (action or "").rsplit(".", 1)[-1]


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return [part for part in value if isinstance(part, str)]


def _package_name(spec):
    """A package as apt/dnf take it (name, name=version, name:arch) -> its name; globs, paths and URLs -> None."""
    if any(ch in spec for ch in "*?[/") or spec.endswith((".deb", ".rpm")):
        return None
    match = _PKG_NAME.match(spec)
    if not match:
        return None
    return match.group(0).split("=", 1)[0]


def package_items(specs):
    """The package items of what a package task installs (name, name=version, name:arch), as the stage_items callback
    takes them from the task's result and roles declare them; globs, paths and URLs name none."""
    return [{"kind": "package", "name": name} for name in (_package_name(spec) for spec in specs) if name]


def unit_name(unit):
    """A unit as systemd names it (ssh -> ssh.service)."""
    return unit if "." in unit else unit + ".service"


def pip_items(venv, requirements):
    """The pip items of these requirements in venv, named as a pip task's result names them."""
    names = (_pip_name(spec) for spec in requirements if isinstance(spec, str))
    return [{"kind": "pip", "venv": venv, "name": name} for name in dict.fromkeys(names) if name]


def _pip_name(spec):
    """A pip requirement (name[extra]==1.0, name>=2) -> its normalised name; paths and URLs -> None."""
    if "/" in spec or spec.startswith("."):
        return None
    match = _PIP_NAME.match(spec.strip())
    if not match:
        return None
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def items_of_result(action, result, args):
    """The items one task result managed on its host. result: the module's result for one host (one loop item);
    args: the task's arguments as the worker rendered them (used only where the result does not say)."""
    name = short_action(action)
    if not isinstance(result, dict) or result.get("skipped") or result.get("failed"):
        return []
    if result.get("_ansible_delegated_vars") is not None:
        return []  # acted on another host (the controller, usually)
    args = args or {}
    invocation = (result.get("invocation") or {}).get("module_args") or {}

    def arg(*keys):
        for key in keys:
            for source in (result, invocation, args):
                value = source.get(key)
                if isinstance(value, str) and value:
                    return value
        return None

    items = []
    managed = result.get("rayfleet_managed")
    if isinstance(managed, list):
        items.extend(item for item in managed if isinstance(item, dict) and item.get("kind"))
    if name in FILE_ACTIONS:
        path = arg("dest", "path", "filename", "name") if name != "yum_repository" else None
        if name == "yum_repository":
            repo = arg("file", "repo", "name")
            path = "/etc/yum.repos.d/%s.repo" % repo if repo else None
        if name == "known_hosts":
            path = arg("path")
        if path and path.startswith("/"):
            items.append({"kind": "file", "path": path})
    elif name in UNIT_ACTIONS:
        unit = arg("name")
        if unit:
            items.append({"kind": "unit", "name": unit_name(unit)})
    elif name in PACKAGE_ACTIONS:
        specs = invocation.get("name") if invocation else None
        if specs is None:
            specs = args.get("name") or args.get("pkg")
        items.extend(package_items(_as_list(specs)))
    elif name == "pip":
        venv = arg("virtualenv")
        specs = invocation.get("name") if invocation else None
        if specs is None:
            specs = args.get("name")
        if venv:
            items.extend(pip_items(venv, _as_list(specs)))
    elif name == "mount":
        path = arg("path", "name")
        if path:
            items.append({"kind": "mount", "path": path})
    elif name == "authorized_key":
        keyfile = arg("keyfile")
        if keyfile and keyfile.startswith("/"):
            items.append({"kind": "file", "path": keyfile})
    elif name == "user":
        user = arg("name")
        if user:
            items.append({"kind": "user", "name": user})
    elif name == "group":
        group = arg("name")
        if group:
            items.append({"kind": "group", "name": group})
    elif name == "modprobe":
        module = arg("name")
        if module:
            items.append({"kind": "kmod", "name": module})
    return items


def items_of_task_result(action, result, args):
    """items_of_result over a task's result, loop or not."""
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        items = []
        for each in result["results"]:
            items.extend(items_of_result(action, each, {}))
        return items
    return items_of_result(action, result, args)


def merge_items(items):
    """Items once each, in a stable order."""
    by_key = {item_key(item): item for item in items}
    return [dict(by_key[key]) for key in sorted(by_key)]


# ---- whether a stage runs on a host ----

def stage_verdict(name, host, drift, records_now, *, group_heads, play_hosts, full=False):
    """Whether stage `name` runs on `host`, and why.

    drift: {host: drift_check result (stages: {name: {...}}) or None when the host was not checked};
    records_now: {host: {stage: record digest}} as they are now (drift_check's, updated by each stage_record);
    group_heads: the hosts of group ray_head; play_hosts: the hosts of the stage's play.
    Returns (run, reason)."""
    if full:
        return True, "rayfleet_full is set"
    if name == VALIDATE:
        return _validate_verdict(host, drift, records_now, group_heads, play_hosts)
    stage(name)
    mine = _own_verdict(name, host, drift, records_now)
    if mine[0]:
        return mine
    if STAGE_BY_NAME[name].scope == "head":
        for head in group_heads:
            if head != host and head in play_hosts and _own_verdict(name, head, drift, records_now)[0]:
                return True, "it runs on the head %s" % head
    return mine


def supersedes_record(name, host, drift, run_tags=None):
    """Whether stage `name`, about to run on `host`, must set the host's record aside first: the stage applies inputs
    other than those recorded (or, run without a drift check, may), and the run selects some of its tasks (no
    --tags, or --tags naming one of the stage's). A run that stops part way, or runs only some of the stage's tasks,
    then leaves no record vouching for the old inputs, and the next run applies the stage in full. (--skip-tags is
    not weighed: setting a record aside that the run leaves alone only makes the next run apply the stage.)"""
    tags = set(run_tags or ["all"])
    if "all" not in tags and not tags & set(STAGE_BY_NAME[name].tags):
        return False
    checked = drift.get(host)
    if not checked:
        return True
    own = (checked.get("stages") or {}).get(name) or {}
    return bool(own.get("recorded")) and own.get("inputs_changed") is not False


def _validate_verdict(host, drift, records_now, group_heads, play_hosts):
    checked = drift.get(host)
    if not checked:
        return True, "no drift check ran on this host"
    running = running_stages(host, drift, records_now, group_heads=group_heads, play_hosts=play_hosts)
    if running:
        return True, "stages that may run here: %s" % ", ".join(running)
    return False, "no stage runs here, so nothing changes"


def running_stages(host, drift, records_now, *, group_heads, play_hosts):
    """The stages that may run on host in this run, in order (None without a drift check: all of them).

    A stage's gate decides when its play comes, after the earlier stages wrote their records: a stage runs on a host
    where an upstream stage ran and changed its record, and a stage that runs on the head (scope head) runs on the
    others. Before any stage ran this is not known yet, so a stage counts here when it may run: its own verdict now,
    or an upstream stage that may run on the host, or (scope head) the head where it may run. Every stage a gate will
    run is in this list; a host with an empty list is settled, and no stage play targets it (stage_groups)."""
    if not drift.get(host):
        return None
    seen = {}

    def may_own(name, other):
        # the stage's own verdict on `other`, a host its play targets, with the records of the upstream stages that
        # may run there (a host without a drift check, or without a record of the stage, runs it)
        return _own_verdict(name, other, drift, records_now)[0] or any(
            may(upstream_spec(up)[0], other) for up in STAGE_BY_NAME[name].upstream)

    def may(name, other):
        if drift.get(other) and name not in (drift[other].get("stages") or {}):
            return False  # the stage's play does not target the host
        if (name, other) not in seen:
            seen[name, other] = False
            found = may_own(name, other)
            if not found and STAGE_BY_NAME[name].scope == "head":
                found = any(may_own(name, head) for head in group_heads if head != other and head in play_hosts)
            seen[name, other] = found
        return seen[name, other]

    return [item.name for item in STAGES if item.name in (drift[host].get("stages") or {}) and may(item.name, host)]


def roles_to_check(running):
    """The roles whose variables are checked on a host where these stages run (None: all of them)."""
    if running is None:
        return None
    return sorted({role for name in running for role in STAGE_BY_NAME[name].roles})


def stage_groups(drift, records_now, *, group_heads, host_groups, full=False):
    """host -> the groups site.yml's plays target it by, for the hosts of host_groups ({host: its group_names}):
    GROUP_PREFIX + <stage> for each stage that may run on it in this run (running_stages; with full, every stage its
    groups' plays hold), GROUP_PREFIX + validate on a Ray node where any may run, and SELECTED_GROUP. A host in no
    stage's group is settled: no stage play targets it."""
    hosts = list(host_groups)
    nodes = {"ray_head", "ray_worker"}
    selected = {}
    for host, names in host_groups.items():
        if full:
            running = [item.name for item in stages_of(names)]
        else:
            running = running_stages(host, drift, records_now, group_heads=group_heads, play_hosts=hosts)
            if running is None:
                running = [item.name for item in stages_of(names)]
        mine = [GROUP_PREFIX + name for name in running]
        if running and nodes & set(names):
            mine.append(GROUP_PREFIX + VALIDATE)
        selected[host] = [*mine, SELECTED_GROUP]
    return selected


def _own_verdicts(checked):
    """(stage, run, reason) for each stage of a drift_check result, by this host's records only."""
    for item in STAGES:
        if item.name in (checked.get("stages") or {}):
            records = {"host": checked.get("records") or {}}
            yield (item.name, *_own_verdict(item.name, "host", {"host": checked}, records))


def drifted_report(hosts, drift):
    """host -> "<stage>: <why>" for each stage that would run there by its own records, for the hosts where one
    would: a settled host is not named."""
    report = {}
    for host in hosts:
        checked = drift.get(host)
        lines = (["%s: %s" % (name, reason) for name, run, reason in _own_verdicts(checked) if run] if checked
                 else ["no drift check ran on this host"])
        if lines:
            report[host] = lines
    return report


def _own_verdict(name, host, drift, records_now):
    run, reason = _own_verdict_of_record(name, host, drift, records_now)
    verdict = ((drift.get(host) or {}).get("stages") or {}).get(name) or {}
    return run, reason + (" (the image's record)" if verdict.get("from_image") else "")


def _own_verdict_of_record(name, host, drift, records_now):
    checked = drift.get(host)
    if not checked:
        return True, "no drift check ran on this host"
    verdict = (checked.get("stages") or {}).get(name)
    if not verdict or not verdict.get("recorded"):
        return True, "no record of this stage"
    if verdict.get("inputs_changed"):
        return True, "its inputs changed"
    if verdict.get("drifted"):
        return True, "drifted: " + ", ".join(verdict["drifted"][:5]) + (" ..." if len(verdict["drifted"]) > 5 else "")
    seen = verdict.get("upstream") or {}
    now = records_now.get(host) or {}
    for up in STAGE_BY_NAME[name].upstream:
        if seen.get(up) != now.get(up):
            stage_name, kinds = upstream_spec(up)
            return True, "the %s stage's %s changed" % (
                stage_name, "record" if not kinds else "%s items" % "/".join(kinds))
    return False, "nothing drifted"


# ---- the spool: the items each host's current stage reported (written by the callback, read by stage_record) ----

SPOOL_ENV = "RAYFLEET_STAGE_SPOOL"
# Said by the drift check, in a run's first seconds, when the callback is not watching the run
NO_CALLBACK = ("rayfleet.cluster.stage_items is not enabled: this run records no stage, so every stage runs on every "
               "host on every run. Enable it in ansible.cfg ([defaults] callbacks_enabled = "
               "rayfleet.cluster.stage_items) or with ANSIBLE_CALLBACKS_ENABLED=rayfleet.cluster.stage_items.")


def callback_watching():
    """Whether the stage_items callback watches this run (it hands its spool to the workers through the
    environment)."""
    return bool(os.environ.get(SPOOL_ENV))


def _spool_file(spool, host):
    return os.path.join(spool, hashlib.sha1(host.encode()).hexdigest() + ".json")


def spool_write(spool, host, stage_items, changed=()):
    """Replace host's spool: the items each stage reported ({stage: [items]}) and the stages a task changed something
    in."""
    path = _spool_file(spool, host)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump({"items": stage_items, "changed": sorted(changed)}, handle)
    os.replace(tmp, path)


def _spooled(host, spool):
    spool = spool or os.environ.get(SPOOL_ENV)
    if not spool or not os.path.isdir(spool):
        return None
    try:
        with open(_spool_file(spool, host)) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {"items": {}, "changed": []}


def spooled_items(host, name, spool=None):
    """The items host's stage `name` reported in this run; None when no callback collects them, or when it could
    not read one of the stage's results."""
    spooled = _spooled(host, spool)
    if spooled is None:
        return None
    stages_items = spooled["items"]
    if name in stages_items and stages_items[name] is None:
        return None
    return list(stages_items.get(name) or [])


def spooled_changed(host, name, spool=None):
    """Whether a task of host's stage `name` changed something in this run; None when no callback watches."""
    spooled = _spooled(host, spool)
    return None if spooled is None else name in spooled["changed"]
