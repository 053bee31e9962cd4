# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The stages of site.yml, what each one manages on a host, and whether it must run there.

Pure Python, run on the controller (by the stage_items callback and the drift_check, stage_gate and stage_record
actions); unit-tested as functions.

A stage's record on a host (written by rayfleet.cluster.stage_record when the stage finishes there) holds:
  - the digest of the stage's inputs (the collection's code, the host's variables and facts it reads, the cluster's
    members for stages that read them);
  - the items the stage managed there (files, units, packages, pip packages, mounts, users, groups, kernel modules,
    nftables tables), taken from the results of the tasks that ran, with each item's state at that moment;
  - the digests of the records of its upstream stages at that moment (the ray stage reads what the nccl stage wrote).
A stage runs on a host when it has no record there, its inputs changed, an item drifted, an upstream stage's record
changed since, or (cluster-scoped stages) when it runs on any host.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.rayfleet.cluster.plugins.module_utils.stage_state import item_key, upstream_spec

RECORD_DIR = "/var/lib/rayfleet/stages"


# What a stage takes from the other hosts (Stage.cluster_inputs)
HEAD = "head"
MEMBERS = "members"


@dataclass(frozen=True)
class Stage:
    name: str
    roles: tuple[str, ...]
    # stages whose record this one reads: a change there makes this one run ("<stage>:<kind>": only that stage's
    # items of that kind, upstream_spec)
    upstream: tuple[str, ...] = ()
    # host: runs on the hosts that need it; cluster: on every host of its play when any needs it;
    # head: on every host of its play when the head (group ray_head) needs it
    scope: str = "host"
    # what the stage's inputs take from the other hosts besides what it reads of the cluster plan (plan_inputs):
    # HEAD, the host's own groups and the hosts of group ray_head (who holds the cluster key, which host is the
    # head, the default monitoring host: a worker that joins or leaves changes neither on the other hosts);
    # MEMBERS, the contract groups whole and the plan's cluster section whole (a stage that reads other hosts'
    # variables, as the submit hosts' plan does); None: nothing
    cluster_inputs: str | None = None
    # what it reads of the cluster plan, declared (plan_inputs' keys), in place of what its code's text suggests: for a
    # stage whose plugin reads the plan in Python, where the text names the plan whole
    plan_reads: tuple[str, ...] | None = None
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

STAGES = (
    Stage("common", ("common",), tags=("common", "base")),
    Stage("gpu", ("nvidia_driver", "cuda", "rocm"), groups=("gpu",), tags=("gpu", "nvidia_driver", "cuda", "rocm")),
    Stage("nccl", ("nccl",), upstream=("gpu",), tags=("gpu", "nccl")),
    Stage("firewall", ("firewall",), cluster_inputs=HEAD, tags=("firewall", "security")),
    Stage("ssh_trust", ("ssh_trust",), scope="cluster", cluster_inputs=HEAD, tags=("ssh", "ssh_trust"),
          renew_every_s=CERT_RENEWAL_PERIOD_S),
    # the exports' clients are the plan's sources: every member's address, or the networks (network membership)
    Stage("nfs_server", ("nfs_server",), cluster_inputs=HEAD, plan_reads=("cluster.sources",), groups=("nfs_server",),
          tags=("storage", "nfs_server")),
    Stage("shared_storage", ("shared_storage",), tags=("storage", "shared_storage")),
    Stage("checkpoint_store", ("checkpoint_store",), tags=("storage", "checkpoint_store")),
    Stage("ray", ("ray",), upstream=("gpu", "nccl", "checkpoint_store"), scope="head", cluster_inputs=HEAD,
          tags=("ray",)),
    # the ML libraries install into the Ray venv: they read the packages the ray stage installs there, not its units
    # or settings
    Stage("ml", ("pytorch", "nccl", "apex", "checkpoint_store"), upstream=("gpu", "ray:pip"),
          tags=("ml", "pytorch", "nccl", "apex", "checkpoint_store")),
    Stage("monitoring", ("monitoring",), cluster_inputs=HEAD, tags=("monitoring",)),
    Stage("submit_host", ("submit_host",), cluster_inputs=MEMBERS, groups=("ray_submit",), tags=("submit_host",)),
)
STAGE_BY_NAME = {stage.name: stage for stage in STAGES}


def upstream_views(name=None):
    """What stages read of other stages' records by kind ("ray:pip"), all of them or those of stage name: the drift
    check and the records report each one's digest."""
    return sorted({up for item in STAGES for up in item.upstream
                   if upstream_spec(up)[1] and (name is None or upstream_spec(up)[0] == name)})


# The gate of the validate plays: a host is checked when any stage runs on it (nothing changes on the others)
VALIDATE = "validate"

# Variables that say how to run, not what to converge to (how long this run waits for Ray's nodes or for a host's
# reboot, say): never part of a stage's inputs, so a new value makes no stage run again
RUN_OPTIONS = frozenset({
    "rayfleet_full", "rayfleet_gpu_serial", "rayfleet_max_unreachable", "ray_wait_timeout",
    "nvidia_driver_reboot_timeout", "rayfleet_lock_wait", "rayfleet_lock_stale_after", "rayfleet_lock_break",
    "rayfleet_converge_lock",
})
# Facts a stage's result depends on: a new kernel or distribution makes every stage run again; a new address, the
# stages that read addresses (ADDRESS_FACTS)
INPUT_FACTS = ("distribution", "distribution_version", "architecture", "kernel", "default_ipv4", "default_ipv6")
ADDRESS_FACTS = ("default_ipv4", "default_ipv6")
# Parts of the default addresses' facts no stage reads, which may change when a host boots (a container's or a VM's
# MAC address is new on every start): they are no input
VOLATILE_ADDRESS_FACTS = frozenset({"macaddress"})
# Variables the collection's roles and playbooks set from results (register, set_fact): outputs, not inputs
RESULT_VARS = frozenset({
    "preflight_gpu", "preflight_ssh", "ray_cluster_state", "ray_node_result", "shared_storage_status", "submit_job",
    "bake_result", "bake_versions", "image_cleanup_report", "nvidia_driver_reboot_pending",
})
# The inventory groups the stages' plays target
CONTRACT_GROUPS = ("ray_head", "ray_worker", "gpu", "nfs_server", "monitoring", "ray_submit")
# The collection's code that decides what the stages apply
CODE_DIRS = ("roles", "plugins", "playbooks", "library_py")
CODE_FILES = ("site.yml",)
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".md")


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


_TAGS = re.compile(r"^\s*tags:\s*\[([^\]]*)\]", re.M)


def collection_tags(root):
    """Every tag the collection's playbooks and roles put on plays, roles and tasks."""
    tags = set()
    for top in ("playbooks", "roles"):
        for path in glob.glob(os.path.join(root, top, "**", "*.yml"), recursive=True):
            with open(path) as handle:
                for match in _TAGS.finditer(handle.read()):
                    tags.update(tag.strip().strip("'\"") for tag in match.group(1).split(","))
    return tags - {"always", ""}


def partial_run(run_tags, skip_tags, root):
    """Why a run applies only part of the stages (--tags, or --skip-tags naming one of the collection's tags), or
    None. A partial run writes no record: it cannot vouch for what it left out."""
    if list(run_tags or ["all"]) != ["all"]:
        return "--tags %s" % ",".join(run_tags)
    skipped = sorted(set(skip_tags or ()) & collection_tags(root))
    if skipped:
        return "--skip-tags %s" % ",".join(skipped)
    return None


def variable_prefixes(role_names):
    """The prefixes of the variables the collection's roles read: <role>_ for every role, and rayfleet_."""
    return tuple(sorted({"%s_" % name for name in role_names} | {"rayfleet_"}))


def input_vars(variables, prefixes):
    """The host's variables a stage reads: those with a collection prefix, minus the run options."""
    return {
        key: value for key, value in variables.items()
        if key.startswith(prefixes) and key not in RUN_OPTIONS and key not in RESULT_VARS
    }


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


# What a run reads from the plan without it being the cluster's configuration (the hosts a run goes on without)
RUN_ONLY_PLAN_KEYS = ("awaited_nodes", "left_out")
# What the cluster plan holds for one stage alone: an input of the stages that name it (plan_inputs), not of every
# stage that reads the cluster (the members' exporter settings are the monitoring host's scrape targets)
NAMED_ONLY_PLAN_KEYS = ("scrape",)


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


def _site_playbooks(root):
    """The playbooks site.yml imports (playbooks/site.yml): those whose plays are the stages (bake.yml's plays apply
    some of the same roles, for an image)."""
    with open(os.path.join(root, "playbooks", "site.yml")) as handle:
        names = re.findall(r"^\s*(?:ansible\.builtin\.)?import_playbook:\s*(\S+)\s*$", handle.read(), re.M)
    return sorted(os.path.join(root, "playbooks", name) for name in names)


_STAGE_FILES = {}


def _stage_files(root, item, code):
    """The texts of the collection's files that decide what stage `item` applies: the playbooks that gate it, its
    roles and every role those include (rayfleet.cluster.<role>), the action plugins they call (an action reads its
    settings from the task's arguments, named in the roles, or from the host's plan), and the cluster plan's tasks
    where the stage includes those alone. Read once per code digest."""
    return _stage_files_and_plan(root, item, code)[0]


def _stage_own_files(root, item, code):
    """_stage_files without those read only for the cluster plan: the files whose names are the stage's inputs."""
    texts, plan_paths = _stage_files_and_plan(root, item, code)
    return {path: text for path, text in texts.items() if path not in plan_paths}


def _stage_files_and_plan(root, item, code):
    key = (root, code, item.name)
    if key not in _STAGE_FILES:
        _STAGE_FILES[key] = _read_stage_files(root, item)
    return _STAGE_FILES[key]


def _read_stage_files(root, item):
    """{path: text} of the files that decide what stage `item` applies, and the paths among them read only for the
    cluster plan: a stage that includes the ray role's plan tasks alone (tasks_from: plan) reads the plan's result,
    which the drift check's play computes before any stage, not the ray role's variables."""
    texts = {}
    called = set()  # the names of the collection's plugins and roles the texts read so far name

    def read(path, text=None):
        if path not in texts:
            if text is None:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            texts[path] = text
            mentions = _PLUGIN_CALL.findall(text)
            plan_only = [name for name in _PLAN_INCLUDE.findall(text) if name == CLUSTER_PLAN_ROLE]
            called.update(name for name in set(mentions) if mentions.count(name) > plan_only.count(name))

    gate = re.compile(r"stage_gate:\s*\n\s*stage:\s*%s\s*$" % re.escape(item.name), re.M)
    for path in _site_playbooks(root):
        with open(path) as handle:
            text = handle.read()
        if gate.search(text):
            # of a playbook that holds several stages, the plays of this one and those of none (their facts, the
            # plan); the whole file is the stage's code either way
            head, *plays = _PLAY_START.split(text)
            read(path, "".join([head, *("- " + play for play in plays
                                        if gate.search(play) or not _ANY_GATE.search(play))]))
    roles, todo = set(), list(item.roles)
    while todo:
        role = todo.pop()
        if role in roles:
            continue
        roles.add(role)
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, "roles", role)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if not name.endswith(SKIPPED_SUFFIXES):
                    read(os.path.join(dirpath, name))
        todo.extend(name for name in called if os.path.isdir(os.path.join(root, "roles", name)))
    for name in sorted(called - STAGE_MACHINERY):
        path = os.path.join(root, "plugins", "action", "%s.py" % name)
        if os.path.isfile(path):
            read(path)
    # the cluster plan's own code, where the stage includes it alone: part of the stage's code, not of what it reads
    plan_paths = set()
    if CLUSTER_PLAN_ROLE not in roles and any(CLUSTER_PLAN_ROLE in _PLAN_INCLUDE.findall(t) for t in texts.values()):
        plan_task = os.path.join(root, "roles", CLUSTER_PLAN_ROLE, "tasks", "plan.yml")
        with open(plan_task, encoding="utf-8") as handle:
            plan_text = handle.read()
        plan_paths.add(plan_task)
        texts[plan_task] = plan_text
        for name in sorted(set(_PLUGIN_CALL.findall(plan_text)) - STAGE_MACHINERY):
            path = os.path.join(root, "plugins", "action", "%s.py" % name)
            if os.path.isfile(path) and path not in texts:
                with open(path, encoding="utf-8") as handle:
                    texts[path] = handle.read()
                plan_paths.add(path)
    return texts, frozenset(plan_paths)


_PLUGIN_CALL = re.compile(r"\brayfleet\.cluster\.(\w+)")
# The cluster plan: the ray role's plan tasks register it, and the drift check's play computes it for every member
# before it compares the hosts with their records, so what a stage reads of it is one of the stage's inputs
CLUSTER_PLAN_ROLE = "ray"
CLUSTER_PLAN = "__ray_plan_result"
# a play of a playbook, and a play gated by some stage
_PLAY_START = re.compile(r"^- ", re.M)
_ANY_GATE = re.compile(r"stage_gate:\s*\n\s*stage:")
# an include of a role's plan tasks alone
_PLAN_INCLUDE = re.compile(r"\bname:\s*rayfleet\.cluster\.(\w+)\s*\n\s*tasks_from:\s*plan\s*$", re.M)
# a read of the cluster plan: one of its host's or cluster's keys, one section whole, a test whether there is one (no
# read), or the whole of it; and where the ray role's plan tasks register it (no read)
_PLAN_READ = re.compile(r"(?<![\w.])%s(?:\.(host|cluster)(?:\.(\w+))?|(\s+is\s+(?:not\s+)?defined\b))?"
                        % re.escape(CLUSTER_PLAN))
_PLAN_REGISTER = re.compile(r"\bregister:\s*%s\s*$" % re.escape(CLUSTER_PLAN), re.M)
# the plugins every stage play calls to decide whether it runs and to record what it did: they read no setting
STAGE_MACHINERY = frozenset({"stage_gate", "stage_record", "stage_items", "drift_check", "reach_policy"})
# what the machinery's own code is, besides those plugins: it decides whether a stage runs and what its record says,
# and applies nothing
_MACHINERY_FILES = ("plugins/plugin_utils/stages.py", "plugins/module_utils/stage_state.py",
                    "plugins/callback/stage_items.py", "plugins/doc_fragments/stage_records.py")
_PY_IMPORT = re.compile(r"\bansible_collections\.rayfleet\.cluster\.plugins\.(\w+)\.(\w+)")
# a role that reads the collection's whole tree (the submit_host role installs the collection itself)
_READS_COLLECTION = re.compile(r"role_path\s*}}/\.\./\.\./?[\"']?\s*$", re.M)
_STAGE_CODE = {}


def stage_code(root, code):
    """{stage: digest of the code that decides what it applies}: its playbook, its roles and the roles they include,
    the modules and action plugins they call with the plugin code those import, and what every stage shares (the
    node library, the filter and test plugins, site.yml and the other playbooks). A release or an edit that changes
    one role runs that role's stages again, not every stage; the code that only decides whether a stage runs and
    what its record says (the drift check, the gates, the records) is no stage's. A stage whose role reads the
    whole collection takes the whole collection's digest. Cached per code digest."""
    key = (root, code)
    if key in _STAGE_CODE:
        return _STAGE_CODE[key]
    files = code_files(root)
    rel = {path: os.path.relpath(path, root) for path in files}
    gating = set()
    for item in STAGES:
        gating.update(path for path in _stage_files(root, item, code) if rel.get(path, "").startswith("playbooks/"))
    machinery = set(_MACHINERY_FILES) | {
        "plugins/%s/%s.py" % (kind, name) for kind in ("action", "modules") for name in STAGE_MACHINERY}
    shared = [path for path in files if not rel[path].startswith(("roles/", "plugins/")) and path not in gating]
    shared += [path for path in files if rel[path].startswith(("plugins/filter/", "plugins/test/"))]
    sums = {}
    out = {}
    for item in STAGES:
        texts = _stage_files(root, item, code)
        if any(_READS_COLLECTION.search(text) for text in texts.values()):
            out[item.name] = code
            continue
        mine = {path for path in texts if not rel.get(path, "").startswith("plugins/")}
        todo = ["plugins/%s/%s.py" % (kind, name)
                for name in {name for text in texts.values() for name in _PLUGIN_CALL.findall(text)}
                for kind in ("action", "modules")]
        seen = set()
        while todo:
            path = todo.pop()
            full = os.path.join(root, path)
            if path in seen or path in machinery or not os.path.isfile(full):
                continue
            seen.add(path)
            mine.add(full)
            with open(full, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            # the plugin code it imports, and the modules it names (an action plugin runs its module by name)
            todo.extend("plugins/%s/%s.py" % found for found in _PY_IMPORT.findall(text))
            todo.extend("plugins/%s/%s.py" % (kind, name) for name in _PLUGIN_CALL.findall(text)
                        for kind in ("action", "modules"))
        out[item.name] = files_digest(root, set(shared) | mine, sums)
    _STAGE_CODE[key] = out
    return out


_STAGE_READS = {}


def stage_reads(root, code):
    """{stage: (prefixes, names, plan keys)}: the variables each stage reads - every variable with the prefix of one
    of its roles (a role may build its own variables' names, as the cluster plan builds ray_<port>_port), the whole
    prefix of a role whose plan it reads (computed in its validate stage from that role's variables), and each other
    collection variable its files name, rayfleet_ ones included (an inventory's per-host rayfleet_instance_id is an
    input only of the stages that name it) - and what it reads of the cluster plan (plan_inputs): its keys named
    ('host.extra_ports', 'cluster.sources'), a section read whole ('host'), or '*' for all of it. A stage that reads
    the cluster plan reads the plan the drift check's play computed, not the Ray settings it came from: a Ray setting
    that changes no key a stage reads does not run it. Computed from the collection's code (cached per code digest),
    so a new variable in a role is an input of the stages that use it without a list to keep."""
    key = (root, code)
    if key not in _STAGE_READS:
        roles = sorted(os.listdir(os.path.join(root, "roles")))
        named = re.compile(r"(?<![\w.])(?:%s)_\w*[a-z0-9]" % "|".join(map(re.escape, [*roles, "rayfleet"])))
        plans = re.compile(r"(?<!\w)__(%s)_plan" % "|".join(map(re.escape, roles)))
        reads = {}
        for item in STAGES:
            text = "\n".join(_stage_own_files(root, item, code).values())
            prefixes = {"%s_" % role for role in item.roles}
            prefixes |= {"%s_" % role for role in plans.findall(_PLAN_READ.sub("", text))}
            plan_keys = set()
            for section, name, tested in _PLAN_READ.findall(_PLAN_REGISTER.sub("", text)):
                if section:
                    plan_keys.add("%s.%s" % (section, name) if name else section)
                elif not tested:
                    plan_keys.add("*")
            reads[item.name] = (tuple(sorted(prefixes)), frozenset(named.findall(text)),
                                frozenset({"*"} if "*" in plan_keys else plan_keys))
        _STAGE_READS[key] = reads
    return _STAGE_READS[key]


def plan_inputs(plan, keys, own=True):
    """What a stage reads of the host's cluster plan (the ray role's plan result: {"host": ..., "cluster": ...}):
    keys from stage_reads ('host.<key>', 'cluster.<key>', 'host' or 'cluster': that section whole, or '*': both
    sections whole). The cluster's keys a run
    only reads (the hosts it goes on without) are none of it; own=False (a host outside the cluster, which reads the
    head's plan) has no host section. None when the stage reads none of it."""
    if not keys:
        return None
    plan = plan if isinstance(plan, Mapping) else {}
    cluster = plan.get("cluster") if isinstance(plan.get("cluster"), Mapping) else {}
    sections = {
        "host": plan.get("host") if own else None,
        "cluster": {key: value for key, value in cluster.items() if key not in RUN_ONLY_PLAN_KEYS},
    }
    if "*" in keys:
        return sections
    out = {}
    for key in sorted(keys):
        section, name = key.split(".", 1) if "." in key else (key, "")
        value = sections[section]
        if not name:
            out[key] = value
        else:
            out[key] = value.get(name) if isinstance(value, Mapping) and name not in RUN_ONLY_PLAN_KEYS else None
    return out


# What in a stage's files reads the host's addresses: the address facts, the node's IP, the cluster plan (its node IP
# and members), the other hosts' addresses
_READS_ADDRESSES = re.compile(
    r"\b(?:default_ipv[46]|all_ipv[46]_addresses|ray_node_ip|node_ip|ansible_host|__ray_plan\w*|head_address)\b")
_ADDRESS_STAGES = {}


def address_stages(root, code):
    """The stages whose inputs include the host's default addresses: those that read the cluster's members whole, and
    those whose own files read an address other than through the cluster plan (computed from the collection's code,
    cached per code digest). What a stage reads of the plan (the node's IP, the members' addresses) is its input
    already (plan_inputs): where the inventory pins ray_node_ip, a new default address changes none of it. A host
    whose address changes (a new DHCP lease, a node booted from a baked image) runs these again, and not the others."""
    key = (root, code)
    if key not in _ADDRESS_STAGES:
        _ADDRESS_STAGES[key] = frozenset(
            item.name for item in STAGES
            if item.cluster_inputs == MEMBERS
            or any(_READS_ADDRESSES.search(_PLAN_READ.sub("", text))
                   for text in _stage_own_files(root, item, code).values()))
    return _ADDRESS_STAGES[key]


def stage_vars(host_vars, reads):
    """The host's variables one stage reads ((prefixes, names, plan keys) of stage_reads)."""
    prefixes, names = reads[:2]
    return {key: value for key, value in host_vars.items() if key.startswith(prefixes) or key in names}


_CODE = {}


def collection_code(root):
    """({stage: code digest} (stage_code), stage_reads, address_stages) of the collection at root, computed once per
    process. The stage_items callback computes them in Ansible's main process when the playbook starts, so the worker
    processes that run each task (forked from it) inherit them rather than each reading and hashing the collection
    again."""
    if root not in _CODE:
        code = code_digest(root)
        _CODE[root] = (stage_code(root, code), stage_reads(root, code), address_stages(root, code))
    return _CODE[root]


def host_inputs(hostvars, host, groups, only=None):
    """Each stage's inputs digest for host (only: that stage's, whatever groups host is in), read from Ansible's
    hostvars (inventory, group and extra variables; no role defaults: those are code)."""
    root = collection_root()
    roles = os.listdir(os.path.join(root, "roles"))
    mine = hostvars[host]
    prefixes = variable_prefixes(roles)
    values = {}
    for key in sorted(input_vars(dict.fromkeys(mine.keys()), prefixes)):
        try:
            values[key] = plain(mine[key])
        except Exception as exc:  # an undefined or broken template: its text and the error are the input
            values[key] = {"unrendered": plain(hostvars.raw_get(host).get(key)), "error": type(exc).__name__}
    facts = plain(mine.get("ansible_facts") or {})
    # the cluster as this run planned it: a member's own plan (a run limited to some hosts plans those), else the
    # head's (an NFS server or submit host outside the cluster)
    plan = mine.get(CLUSTER_PLAN)
    own = isinstance(plan, Mapping)
    heads = groups.get("ray_head") or []
    if not own and heads:
        plan = hostvars[heads[0]].get(CLUSTER_PLAN)
    if isinstance(plan, Mapping):
        plan = {"host": plain(plan.get("host")), "cluster": plain(plan.get("cluster"))}
    cluster = plan["cluster"] if isinstance(plan, Mapping) else None
    these = [stage(only)] if only else stages_of(mine.get("group_names") or [])
    code, reads, addresses = collection_code(root)
    return inputs_digests(code, values, facts, cluster_inputs(groups, cluster), these, reads=reads,
                          addresses=addresses, plan=plan, own_plan=own, own_groups=mine.get("group_names") or [])


def inputs_digests(code, host_vars, facts, cluster, these=STAGES, *, reads=None, addresses=None, plan=None,
                   own_plan=True, own_groups=(), now=None):
    """Each stage's inputs digest for one host: its code digest (code: {stage: digest} from stage_code, or one digest
    for every stage), the host's variables that stage reads (reads: from stage_reads; None: all of them) and facts
    (the default addresses only for the stages in addresses, from address_stages; None: every stage), for the
    stages that read them, the other hosts as the stage takes them (cluster, from cluster_inputs: the heads and the
    host's own groups (own_groups), or the contract groups and the members whole for a stage that reads them so or
    where reads is None), and what the stage reads of the host's cluster plan (plan, the host's own unless own_plan
    is false; plan_inputs), and with network membership the current period of a stage renewed every so often
    (renew_every_s; now: the time, default time.time())."""
    facts = input_facts(facts or {})
    network = isinstance(plan, Mapping) and (plan.get("cluster") or {}).get("membership") == "network"
    now = time.time() if now is None else now
    local = {name: value for name, value in facts.items() if name not in ADDRESS_FACTS}
    out = {}
    for item in these:
        mine = host_vars if reads is None else stage_vars(host_vars, reads[item.name])
        seen = facts if addresses is None or item.name in addresses else local
        inputs = {"code": code[item.name] if isinstance(code, Mapping) else code, "facts": seen, "stage": item.name,
                  "vars": mine}
        if item.cluster_inputs == MEMBERS or (item.cluster_inputs and reads is None):
            inputs["cluster"] = cluster
        elif item.cluster_inputs == HEAD:
            # the host's contract groups only: an inventory's own groups (a rack, a zone) decide no stage
            inputs["cluster"] = {"heads": cluster["groups"].get("ray_head") or [],
                                 "own_groups": sorted(set(own_groups or ()) & set(CONTRACT_GROUPS))}
        keys = item.plan_reads if item.plan_reads is not None else reads[item.name][2] if reads is not None else None
        planned = plan_inputs(plan, keys, own_plan) if keys is not None else None
        if planned is not None:
            inputs["plan"] = planned
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
    "gpu_hardware_info", "gpu_check", "ray_job", "ray_cluster_info", "collective_check", "storage_check", "nccl_plan",
    "ray_host_clusters", "ray_probe", "ray_work", "storage_precheck", "reach_policy", "preflight_verdict",
    "cluster_plan", "firewall_plan", "storage_plan", "nfs_server_plan", "monitoring_plan", "checkpoint_store_plan",
    "submit_host_plan", "ssh_trust_plan", "pytorch_plan", "apex_plan", "settings_check", "nvidia_driver_plan",
    "cuda_plan", "rocm_plan", "stage_gate", "stage_record", "drift_check", "inventory_check", "doctor_report",
    "converge_lock",
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
    scope = STAGE_BY_NAME[name].scope
    if scope == "cluster":
        for other in play_hosts:
            if other != host and _own_verdict(name, other, drift, records_now)[0]:
                return True, "it runs on %s, and this stage runs on every host together" % other
    elif scope == "head":
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
    where an upstream stage ran and changed its record, and a stage that runs on the head (or, for the stages that run
    on every host together, on any host) runs on the others. Before any stage ran this is not known yet, so a stage
    counts here when it may run: its own verdict now, or an upstream stage that may run on the host, or (by the
    stage's scope) the head or any other host where it may run. Every stage a gate will run is in this list; a host
    with an empty list is settled, and the stage plays leave it without asking their gates."""
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
            scope = STAGE_BY_NAME[name].scope
            if not found:
                if scope == "cluster":
                    found = any(may_own(name, peer) for peer in play_hosts if peer != other)
                elif scope == "head":
                    found = any(may_own(name, head) for head in group_heads if head != other and head in play_hosts)
            seen[name, other] = found
        return seen[name, other]

    return [item.name for item in STAGES if item.name in (drift[host].get("stages") or {}) and may(item.name, host)]


def roles_to_check(running):
    """The roles whose variables are checked on a host where these stages run (None: all of them)."""
    if running is None:
        return None
    return sorted({role for name in running for role in STAGE_BY_NAME[name].roles})


def drift_summary(checked):
    """One line per stage of a drift_check result: whether the stage would run on the host and why (this host's
    records only; site.yml's gates also follow stages that run on the head or on every host together)."""
    lines = []
    for item in STAGES:
        if item.name not in (checked.get("stages") or {}):
            continue
        run, reason = _own_verdict(item.name, "host", {"host": checked}, {"host": checked.get("records") or {}})
        lines.append("%-16s %-4s %s" % (item.name, "run" if run else "ok", reason))
    return lines


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
