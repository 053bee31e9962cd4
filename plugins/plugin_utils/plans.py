# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The roles' plans behind the one plan action, ``rayfleet.cluster.plan``: one entry per role (``PLANS``).

A role's validate task names the role and gives what its earlier tasks read on the host (``given``); the action
takes the role's variables from its argument spec (``meta/argument_specs.yml``) and the other roles' variables the
entry declares (``Plan.reads``), rendered in the host's context as they are read, and calls the entry. The offline
inventory check (``rayfleet.cluster.inventory_check``) calls the same entries with the inventory's values.

Each entry returns the values the role's tasks read, or raises PlanError naming every problem, each with the host,
the variable, its value and what was expected, before anything changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ansible.module_utils.common.text.formatters import human_to_bytes
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.apex_plan import APEX_VARS, apex_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.checkpoint_store_plan import (
    CHECKPOINT_STORE_VARS,
    checkpoint_store_plan,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    CLUSTER_WIDE_VARS,
    HEALTH_VARS,
    MEMBER_MONITORING_VARS,
    PORT_VARS,
    SETTING_VARS,
    PlanError,
    _json,
    boolean,
    cluster_members,
    cluster_networks,
    host_plan,
    member_ip,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cuda_plan import CUDA_VARS, cuda_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.firewall_plan import firewall_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.monitoring_plan import monitoring_plan, scrape_targets
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nccl_plan import NCCL_VARS, nccl_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nfs_server_plan import (
    nfs_server_plan,
    run_cluster_sources,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.nvidia_driver_plan import (
    NVIDIA_DRIVER_VARS,
    OS_ARGS,
    nvidia_driver_plan,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.pytorch_plan import PYTORCH_VARS, pytorch_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.rocm_plan import ROCM_VARS, rocm_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.settings_check import ROLE_VARS, settings_check
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.ssh_trust_plan import (
    PASSWORD_VARS,
    SSH_TRUST_VARS,
    host_principals,
    ssh_trust_plan,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    collection_yaml,
    trust_as_template,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import role_options as stage_role_options
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.storage_plan import (
    EFS_UTILS_VARS,
    file_sha256,
    storage_plan,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.submit_host_plan import (
    SUBMIT_HOST_VARS,
    submit_host_plan,
)

# The collection's roles (plugins/plugin_utils/plans.py is three levels down)
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")


@dataclass
class Call:
    """One role's plan asked for one host.

    v: the role's variables and the entry's reads, rendered as they are read; given: the task's ``given``;
    task_vars: the task's variables (groups, group_names, hostvars, ansible_facts, ansible_host, ansible_user);
    template: renders a value in the host's context; role_default: the ray role's default of a variable, rendered
    (None: none); result: the task's result, for values reported even when the plan fails."""

    host: str
    v: Mapping
    given: Mapping = field(default_factory=dict)
    task_vars: Mapping = field(default_factory=dict)
    template: Callable = lambda value: value
    role_default: Callable = lambda var: None
    result: dict = field(default_factory=dict)
    _hostvars: dict = field(default_factory=dict, repr=False)

    def hostvars(self, name):
        """name's variables (hostvars[name], {} where it has none), looked up once per call: each lookup of
        hostvars works out all of the host's variables."""
        if name not in self._hostvars:
            self._hostvars[name] = (self.task_vars.get("hostvars") or {}).get(name) or {}
        return self._hostvars[name]

    def pick(self, names):
        """{name: its value, None where unset} of names."""
        return {name: self.v.get(name) for name in names}

    def fact(self, name):
        facts = self.task_vars.get("ansible_facts")
        return facts.get(name) if isinstance(facts, Mapping) else None

    @property
    def groups(self):
        return self.task_vars.get("groups") or {}


@dataclass(frozen=True)
class Plan:
    """A role's plan: run(call) -> the values its tasks read; reads: the other roles' variables it reads (their
    role's default where the host sets none); given: what the role's tasks may give."""

    run: Callable
    reads: tuple = ()
    given: tuple = ()


# ---- the ray role: the host's nodes and the cluster's members ----

# The host's variables the cluster plan reads
HOST_VARS = ("ray_node_role", "ray_node_ip", "ray_version", "ray_auth_mode", "ray_num_cpus", "ray_num_gpus",
             "ray_object_store_memory", "ray_temp_dir", "ray_node_instances", "ray_node_instance_slots",
             "ray_node_instance_port_step", *PORT_VARS.values(), *SETTING_VARS, *HEALTH_VARS)
# Each other member's variables and facts the cluster plan reads (its address, node instances, names and host key,
# and the head's cluster name)
MEMBER_VARS = ("ray_node_ip", "ray_node_instances", "ansible_host", "ansible_facts", "ray_cluster_name")
# Read only in some settings: the token's path on the controller with token authentication, the head's address on
# a worker
UNREAD = {"ray_auth_token_path": ("ray_auth_mode", "token"), "ray_head_address": ("ray_node_role", "worker")}


def _ray(call):
    v, host = call.v, call.host
    if call.given.get("node") is not None:  # the role's second call, once it has read the host
        return _ray_node(call, call.given["node"])
    if call.given.get("cluster") is True:  # the run's one call: the cluster section, the same for every host
        return {"cluster": _cluster(call)}
    settings = {}
    for name in HOST_VARS:
        if name in HEALTH_VARS:
            continue
        if name in UNREAD and v.get(UNREAD[name][0]) != UNREAD[name][1]:
            settings[name] = ""
        else:
            settings[name] = v.get(name)
    # the health timer's variables are checked when the role has them (the ray role does)
    settings.update((name, v[name]) for name in HEALTH_VARS if name in v)
    groups = call.groups
    heads = groups.get("ray_head", [])
    # a worker reaches the head at its cluster IP unless ray_head_address names it otherwise
    if settings.get("ray_node_role") == "worker" and not settings.get("ray_head_address") and heads:
        head_vars = call.hostvars(heads[0])
        settings["ray_head_address"] = member_ip(heads[0], {key: head_vars.get(key) for key in MEMBER_VARS})
    # the GCS port is the head's: a worker follows the head's ray_gcs_port, whichever host or group sets it; the
    # Ray release and the token mode are the cluster's: a worker's must be the head's
    if settings.get("ray_node_role") == "worker" and heads:
        settings["ray_head_gcs_port"] = _heads_value(call, heads[0], "ray_gcs_port")
        settings["ray_head_shared"] = {var: _heads_value(call, heads[0], var) for var in CLUSTER_WIDE_VARS}
        settings["ray_head_name"] = heads[0]
    # the token's path and the image archive are the controller's (the plan runs there)
    return {"host": host_plan(host, settings, call.task_vars.get("group_names", []), is_file=os.path.isfile,
                              is_dir=os.path.isdir)}


def _member_vars(hv):
    """A member's variables (hv: its hostvars) as the cluster plan reads every member's: as its inventory sets
    them (no role's defaults)."""
    return {key: hv.get(key) for key in (*MEMBER_VARS, *MEMBER_MONITORING_VARS)}


def _cluster(call):
    """The cluster section of the plan: every member's entry (address, nodes, known_hosts entry, exporter settings)
    as its inventory and facts give it, worked out once for a run (a run_once task) and the same for every host. Its
    membership mode and networks are the planning host's (cluster-wide: each worker's plan checks its own against
    the head's)."""
    groups = call.groups
    network = call.v.get("ray_membership") == "network"
    return cluster_members(groups.get("ray_head", []), groups.get("ray_worker", []),
                           lambda name: _member_vars(call.hostvars(name)),
                           left_out=call.given.get("left_out") or (),
                           networks=cluster_networks(call.v.get("ray_cluster_networks")) if network else None,
                           gpu_hosts=groups.get("gpu", []))


# The share of a host's memory Ray gives its object store where it sets none (Ray's own default), and what a
# container's /dev/shm holds beyond it (MiB)
OBJECT_STORE_SHARE = 0.3
SHM_HEADROOM_MB = 1024


def _ray_node(call, node):
    """The settings of this host's Ray nodes that depend on what the role read on the host (node): the container
    probe's CPUs and memory, the nccl role's settings and the checkpoint store's environment file's digest."""
    v, host = call.v, call.host
    probe = node.get("probe") or {}
    slots = max(int(node.get("slots") or 1), 1)
    shares = bool(v.get("ray_node_instances"))
    memtotal_mb = int(probe.get("memtotal_mb") or 4096)
    cpus = v.get("ray_num_cpus")
    if cpus is None and shares:  # several nodes on the host: one slot's share (Ray would give each all of them)
        cpus = max(int(probe.get("cpus") or 1) // slots, 1)
    store = v.get("ray_object_store_memory")
    if store is None and shares:
        store = int(memtotal_mb * 1048576 * OBJECT_STORE_SHARE / slots)
    shm_mb = v.get("ray_container_shm_size_mb")
    if shm_mb is None:
        shm_mb = (int(store) // 1048576 if store is not None else int(memtotal_mb * OBJECT_STORE_SHARE)) \
            + SHM_HEADROOM_MB
    nccl = node.get("nccl") or {}
    ray_env = v.get("ray_env") or {}
    env = dict(nccl.get("env") or {})
    if node.get("checkpoint_env_sha256"):
        env["RAYFLEET_CHECKPOINT_ENV_SHA256"] = node["checkpoint_env_sha256"]
    # the head's dashboard: where its metrics views read Prometheus and embed Grafana (Ray's own variables; workers
    # carry them too, unread, so that every node's settings come from the same values, baked or not)
    if v.get("ray_dashboard_prometheus_url"):
        env["RAY_PROMETHEUS_HOST"] = v["ray_dashboard_prometheus_url"]
    grafana = v.get("ray_dashboard_grafana_url")
    env.update({"RAY_GRAFANA_HOST": grafana, "RAY_GRAFANA_IFRAME_HOST": v.get("ray_dashboard_grafana_iframe_url")
                or grafana} if grafana else {"RAY_GRAFANA_HOST": "DISABLED"})
    env.update(ray_env)
    if "NCCL_SOCKET_IFNAME" in ray_env or "GLOO_SOCKET_IFNAME" in ray_env:
        socket_ifname = ""  # ray_env names the interface itself
    elif v.get("ray_socket_ifname") is not None:
        socket_ifname = v["ray_socket_ifname"]
    else:
        socket_ifname = nccl.get("socket_ifname") or ""
    link_check = None
    if boolean(v.get("ray_admission_link_check")):
        try:
            link_bytes = human_to_bytes(str(v.get("ray_admission_link_bytes")))
        except ValueError as exc:
            raise PlanError(["ray on %s: ray_admission_link_bytes is %s; expected a size such as 16M (%s)." % (
                host, _json(v.get("ray_admission_link_bytes")), exc)]) from exc
        link_check = {"bytes": link_bytes, "warmup": 2, "iters": int(v.get("ray_admission_link_iters")),
                      "ratio": float(v.get("ray_admission_link_ratio")),
                      "min_busbw_gbps": v.get("ray_admission_link_min_busbw_gbps"),
                      "timeout_s": float(v.get("ray_admission_link_timeout_s"))}
    return {"node": {"num_cpus": cpus, "object_store_memory": None if store is None else int(store),
                     "container_shm_mb": int(shm_mb), "env": env, "socket_ifname": socket_ifname,
                     "link_check": link_check}}


def _heads_value(call, head, var):
    """The head's value of one of the ray role's variables: as the head's inventory (or -e) sets it; where it sets
    none, the ray role's default, which is this host's own value unless its own inventory sets one."""
    head_vars = call.hostvars(head)
    if head_vars.get(var) is not None:
        return head_vars[var]
    mine = call.v.get(var)
    if var not in call.hostvars(call.host):
        return mine
    default = call.role_default(var)
    return default if default is not None else mine


# ---- the roles that read the cluster plan ----

FIREWALL_VARS = ("ray_cluster_name", "firewall_ray_allowed_sources", "firewall_ssh_allowed_sources",
                 "firewall_ray_ports", "firewall_host_ports", "firewall_ray_port_range",
                 "firewall_restrict_ephemeral_ports")


def _firewall(call):
    v, host = call.v, call.host
    # an NFS server of the cluster (group nfs_server, its role on) is closed to all but the cluster and its extra
    # clients
    serves_nfs = host in call.groups.get("nfs_server", []) and boolean(v.get("nfs_server_enabled", True)) is True
    settings = call.pick(FIREWALL_VARS)
    restrict = boolean(settings["firewall_restrict_ephemeral_ports"])
    if restrict is not None:  # else left as written: the plan names it
        settings["firewall_restrict_ephemeral_ports"] = restrict
    try:
        return firewall_plan(
            host, settings, call.given.get("cluster_addresses") or [],
            ray_ports=call.given.get("ray_ports") or (), worker_port_range=call.given.get("worker_port_range"),
            nfs_port=v.get("nfs_server_port", 2049) if serves_nfs else 0,
            nfs_extra_clients=(v.get("nfs_server_extra_clients") or []) if serves_nfs else [],
            ephemeral_text=call.given.get("ip_local_port_range"))
    except PlanError:
        raise
    except ValueError as exc:  # the host's ephemeral port range, unreadable
        raise PlanError(["firewall on %s: %s" % (host, exc)]) from exc


MONITORING_VARS = ("monitoring_host", "monitoring_prometheus_listen", "monitoring_prometheus_retention",
                   "monitoring_scrape_interval", "monitoring_node_exporter_port", "monitoring_dcgm_exporter_port",
                   "monitoring_dcgm_version", "monitoring_dcgm_exporter_version", "monitoring_dcgm_cuda_major",
                   "monitoring_dcgm_exporter_collectors", "monitoring_grafana", "monitoring_grafana_version",
                   "monitoring_grafana_listen", "monitoring_grafana_key_fingerprint",
                   "monitoring_grafana_rpm_key_fingerprint")


def _monitoring(call):
    v, given = call.v, call.given
    settings = call.pick(MONITORING_VARS)
    grafana = boolean(settings["monitoring_grafana"])
    if grafana is not None:  # else left as written: the plan names it
        settings["monitoring_grafana"] = grafana
    inventory_hosts = call.groups.get("all", [])
    # the counters file is read on the controller (the role copies it from there); Grafana's repository key is
    # picked by the host's OS family
    plan = monitoring_plan(call.host, settings, inventory_hosts, os_family=call.fact("os_family"),
                           is_file=os.path.isfile)
    plan["scrape_targets"] = None
    # network membership: the exporters are discovered from Ray's node table on the monitoring host
    # (rayfleet.targets), so no host's configuration lists another
    plan["discovered"] = given.get("membership") == "network"
    if plan["is_monitoring_host"] and plan["discovered"]:
        plan["scrape_targets"] = {"node": [], "dcgm": {}}
    elif plan["is_monitoring_host"] and given.get("cluster") is not None:
        # what a member's inventory leaves unset is this host's (the role's defaults)
        own = {"monitoring_enabled": True, **{name: v.get(name) for name in MEMBER_MONITORING_VARS
                                              if v.get(name) is not None}}
        plan["scrape_targets"] = scrape_targets(given["cluster"], (given["cluster"] or {}).get("gpu_hosts") or [],
                                                own)
    return plan


def _ssh_trust(call):
    task_vars = call.task_vars
    # whether Ansible logs in with a password (only the variables' names are read, never their values)
    password_vars = [name for name in PASSWORD_VARS if name in task_vars]
    login_user = call.template(task_vars.get("ansible_user")) if password_vars else None
    # the host's certificate names it as other hosts reach it: its names and addresses, from its facts
    own = {"ansible_host": call.template(task_vars.get("ansible_host")),
           "ansible_facts": task_vars.get("ansible_facts") or {}}
    principals = host_principals(call.host, own, call.given.get("node_ip"))
    # the key pair is on the controller, where this runs
    return ssh_trust_plan(call.host, call.pick(SSH_TRUST_VARS), call.groups.get("ray_head", []),
                          call.groups.get("ray_worker", []), password_vars=password_vars, login_user=login_user,
                          is_dir=os.path.isdir, membership=call.given.get("membership") or "static",
                          principals=principals)


NFS_SERVER_VARS = ("nfs_server_implementation", "nfs_server_port", "nfs_server_exports", "nfs_server_extra_clients",
                   "nfs_server_ganesha_grace_period", "nfs_server_ganesha_lease_lifetime")


def _nfs_server(call):
    host = call.host
    if call.given.get("cluster_addresses") is not None:
        addresses, source = call.given["cluster_addresses"], "the task's cluster_addresses"
    else:
        hostvars = call.task_vars.get("hostvars", {})

        def plan_of(name):
            if name == host:
                return call.task_vars.get("__ray_cluster_plan")
            return (hostvars.get(name) or {}).get("__ray_cluster_plan")

        def hostvars_of(name):
            hv = hostvars.get(name) or {}
            return {key: hv.get(key) for key in ("ray_node_ip", "ray_node_instances", "ansible_facts",
                                                 "ray_membership", "ray_cluster_networks")}

        addresses, source = run_cluster_sources(host, plan_of, call.groups, hostvars_of)
    call.result["cluster_source"] = source
    return nfs_server_plan(host, call.pick(NFS_SERVER_VARS), addresses, call.fact("os_family"))


# ---- the roles that read only their own variables and the host ----

STORAGE_VARS = ("shared_storage_mounts", "shared_storage_efs_tls", "shared_storage_efs_region",
                "shared_storage_nfs_options", "shared_storage_boot_options", "shared_storage_on_degraded",
                "shared_storage_probe_timeout", "common_user", "common_group", *EFS_UTILS_VARS)


def _storage(call):
    settings = call.pick(STORAGE_VARS)
    if settings["shared_storage_mounts"] is None:
        settings["shared_storage_mounts"] = []
    hostvars = call.task_vars.get("hostvars", {})

    def address_of(name):
        """An NFS server host's address: its ansible_host, else its inventory name."""
        return (hostvars.get(name) or {}).get("ansible_host") or name

    # where amazon-efs-utils comes from is checked given the host's OS family; efs-utils' source release is a file
    # on the controller (the plan runs there)
    return storage_plan(call.host, settings, call.groups.get("nfs_server", []), address_of,
                        os_family=call.fact("os_family"), distribution=call.fact("distribution"),
                        is_file=os.path.isfile, sha256_of=file_sha256)


def _checkpoint_store(call):
    # every variable the host has (the secret key too: read from the host's variables, never given as an argument,
    # which a task's header can show)
    settings = {name: call.v[name] for name in CHECKPOINT_STORE_VARS if name in call.v}
    settings["ray_cluster_name"] = settings.get("ray_cluster_name") or ""
    settings.setdefault("shared_storage_mounts", [])
    return checkpoint_store_plan(call.host, settings, call.groups.get("ray_head", []))


def _submit_host(call):
    groups = call.groups
    heads = groups.get("ray_head", [])
    # the head's cluster name (its settings file's) and address, as the inventory gives them
    head_vars = {}
    if heads:
        hostvars = (call.task_vars.get("hostvars") or {}).get(heads[0]) or {}
        head_vars = {key: hostvars.get(key) for key in ("ray_cluster_name", "ansible_host")}
    # the user Ansible logs in as here, else the controller's user (as ansible_user | default($USER) read it)
    login_user = call.template(call.task_vars.get("ansible_user")) or os.environ.get("USER", "")
    return submit_host_plan(call.host, call.pick(SUBMIT_HOST_VARS), heads, groups.get("ray_worker", []),
                            head_vars=head_vars, login_user=login_user)


def _pytorch(call):
    return pytorch_plan(call.host, call.pick(PYTORCH_VARS))


def _apex(call):
    # apex_source given as a path is the controller's (the plan runs there); the host's venv, GPUs and CUDA
    # toolkit once the role read them
    return apex_plan(call.host, call.pick(APEX_VARS), call.given.get("venv"), call.given.get("hardware"),
                     call.given.get("cuda_home"), is_dir=os.path.isdir, exists=os.path.exists)


def _nccl(call):
    return nccl_plan(call.host, call.pick(NCCL_VARS), call.given.get("hardware"), call.fact("interfaces"),
                     call.fact("architecture"))


def _os_facts(call):
    return (call.fact("distribution"), call.fact("distribution_version"))


def _nvidia_driver(call):
    # the Secure Boot key pair is read on the controller (the role copies it from there)
    os_values = {name: call.given.get(name) for name in OS_ARGS}
    return nvidia_driver_plan(call.host, call.pick(NVIDIA_DRIVER_VARS), os_values, call.given.get("hardware"),
                              architecture=call.fact("architecture"),
                              os_facts=_os_facts(call), scope=call.given.get("scope") or "main",
                              is_file=os.path.isfile)


def _cuda(call):
    given = call.given
    return cuda_plan(call.host, call.pick(CUDA_VARS), given.get("hardware"), given.get("default_source"),
                     given.get("distribution_cuda"), os_facts=_os_facts(call))


def _rocm(call):
    given = call.given
    return rocm_plan(call.host, call.pick(ROCM_VARS), given.get("hardware"), given.get("default_source"),
                     given.get("distribution_rocm"), installer_url=given.get("installer_url") or "",
                     os_facts=_os_facts(call))


def _settings(role):
    """The check of a role that works nothing out from its variables (settings_check)."""

    def run(call):
        # the Ray nodes of the inventory (a host in both groups counts once)
        nodes = set(call.groups.get("ray_head", [])) | set(call.groups.get("ray_worker", []))
        # the CA certificates are the controller's files (the plan runs there)
        return settings_check(role, call.host, call.pick(ROLE_VARS[role]), inventory_nodes=len(nodes),
                              is_file=os.path.isfile)

    return run


PLANS = {
    "ray": Plan(_ray, given=("left_out", "node", "cluster")),
    "firewall": Plan(_firewall, reads=("ray_cluster_name", "nfs_server_enabled", "nfs_server_port",
                                       "nfs_server_extra_clients"),
                     given=("cluster_addresses", "ray_ports", "worker_port_range", "ip_local_port_range")),
    "monitoring": Plan(_monitoring, given=("membership", "cluster")),
    "ssh_trust": Plan(_ssh_trust, given=("membership", "node_ip")),
    "nfs_server": Plan(_nfs_server, given=("cluster_addresses",)),
    "shared_storage": Plan(_storage, reads=("common_user", "common_group")),
    "checkpoint_store": Plan(_checkpoint_store, reads=("ray_cluster_name", "ray_service_user", "ray_service_group",
                                                       "shared_storage_mounts")),
    "submit_host": Plan(_submit_host),
    "pytorch": Plan(_pytorch),
    "apex": Plan(_apex, reads=("apex_source_checksum",), given=("venv", "hardware", "cuda_home")),
    "nccl": Plan(_nccl, reads=("nvidia_driver_force",), given=("hardware",)),
    "nvidia_driver": Plan(_nvidia_driver, given=("scope", "hardware", *OS_ARGS)),
    "cuda": Plan(_cuda, given=("hardware", "default_source", "distribution_cuda")),
    "rocm": Plan(_rocm, given=("hardware", "default_source", "distribution_rocm", "installer_url")),
    **{role: Plan(_settings(role)) for role in ROLE_VARS},
}


# ---- the variables of a plan ----

def role_options(role):
    """{variable: its option} of every entry point of role's meta/argument_specs.yml (read once per process)."""
    return stage_role_options(os.path.dirname(ROLES_DIR), role)


def plan_variables(role):
    """The variables role's plan reads: those its argument spec declares, and the entry's reads."""
    return frozenset(role_options(role)) | frozenset(PLANS[role].reads)


_OWNERS = {}


def owner_default(var):
    """(True, the default) of var as defaults/main.yml of the role whose argument spec declares it writes it (a
    template), else (False, None)."""
    if not _OWNERS:
        for role in sorted(os.listdir(ROLES_DIR)):
            if os.path.isfile(os.path.join(ROLES_DIR, role, "meta", "argument_specs.yml")):
                for name in role_options(role):
                    _OWNERS.setdefault(name, role)
    role = _OWNERS.get(var)
    path = os.path.join(ROLES_DIR, role or "", "defaults", "main.yml")
    if role is None or not os.path.isfile(path):
        return False, None
    defaults = collection_yaml(path) or {}
    default = defaults.get(var)
    # the collection's own text: a template to render in the host's context
    return (var in defaults), trust_as_template(default) if isinstance(default, str) else default


class Undeclared(LookupError):
    """A plan read a variable neither its role's argument spec nor its entry's reads declare: a change to it would
    reach no host's stage inputs, so it is refused (a defect of the collection, not of the inventory)."""


class Variables(Mapping):
    """A role's variables as its plan reads them: the task's variables (the inventory's, -e and the role's defaults)
    of the names the plan declares, each rendered in the host's context when first read; a read of another role that
    the host does not set is that role's default. Reading a name not declared raises Undeclared."""

    def __init__(self, names, task_vars, template, default=owner_default):
        self._names = names
        self._task_vars = task_vars
        self._template = template
        self._default = default
        self._cache = {}

    def _declared(self, name):
        if name not in self._names:
            raise Undeclared("the plan reads %s, which the role's argument spec does not declare" % name)

    def _raw(self, name):
        if name in self._task_vars:
            return True, self._task_vars[name]
        return self._default(name)

    def __getitem__(self, name):
        self._declared(name)
        if name not in self._cache:
            found, raw = self._raw(name)
            if not found:
                raise KeyError(name)
            self._cache[name] = self._template(raw)
        return self._cache[name]

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:  # declared, and unset
            return default

    def __contains__(self, name):
        self._declared(name)
        return self._raw(name)[0]

    def __iter__(self):
        return (name for name in sorted(self._names) if self._raw(name)[0])

    def __len__(self):
        return sum(1 for _name in self)


def run_plan(role, call):
    """The plan of role for call.host (a Call with its variables), or PlanError."""
    if role not in PLANS:
        raise PlanError(["plan on %s: role is %s; expected one of %s." % (call.host, _json(role), ", ".join(PLANS))])
    unknown = sorted(set(call.given) - set(PLANS[role].given), key=str)
    if unknown:
        raise PlanError(["plan on %s: the %s role's task gives %s; expected only %s." % (
            call.host, role, ", ".join(map(str, unknown)), ", ".join(PLANS[role].given) or "nothing")])
    return PLANS[role].run(call)
