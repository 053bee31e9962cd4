#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_node
short_description: Ensure this host runs a Ray head or worker with the given settings
version_added: "0.1.0"
description:
  - Writes the node's effective Ray settings to a JSON file (O(config_path)) and makes the Ray
    service match them. The systemd unit installed by the C(rayfleet.cluster.ray) role runs
    C(python -m rayfleet.raynode exec) on that file, i.e. C(ray start --block) with those settings.
  - Ray is restarted only when the effective settings change (or O(state=restarted)); a re-run with
    the same settings leaves the running node untouched, so its node id does not change.
  - When systemd is PID 1 the node is started through its unit; otherwise C(ray start) is run directly.
  - After a start or restart the module waits until the cluster's GCS node table (Ray's own C(GcsClient), as
    C(ray status) reads it) lists this node alive with the expected resources, and returns its node id, IP and
    resources. Only the GCS port is needed, so the head's dashboard may listen on its loopback only.
  - The unit proves the node before C(ray start) with C(python -m rayfleet.admission) - GPUs through NVML, DCGM level 1
    where installed, NCCL's bootstrap, the shared storage, Ray's and the node library's versions against the head's.
    A node they refuse does not start, and the module fails at once with their reasons.
  - Must run with the Ray venv's interpreter (the C(rayfleet) library and C(ray) are imported there).
author:
  - rayfleet authors (@rayfleet)
options:
  role:
    description: Whether this node is the cluster head or a worker.
    type: str
    required: true
    choices: [head, worker]
  state:
    description:
      - V(started) starts Ray if it is not running and restarts it when the settings changed.
      - V(restarted) always restarts it. V(stopped) stops it (the settings file is kept).
    type: str
    default: started
    choices: [started, stopped, restarted]
  node_ip:
    description: This node's IP address on the cluster network (C(--node-ip-address)).
    type: str
  head_address:
    description:
      - The head's host or IP, optionally with C(:port) (the GCS port, default O(ports.gcs)). Workers only.
      - Must resolve on this host.
    type: str
  ray_bin:
    description: Absolute path of the C(ray) executable. Defaults to C(ray) beside the interpreter running the module.
    type: path
  ports:
    description: Every port Ray opens, pinned. Keys not given keep their defaults.
    type: dict
    default: {}
    suboptions:
      gcs: {description: GCS port of the head (C(--port)). Default 6379., type: int}
      dashboard: {description: Dashboard and state API port of the head. Default 8265., type: int}
      client_server: {description: Ray client server port of the head. Default 10001., type: int}
      object_manager: {description: Object manager port. Default 8076., type: int}
      node_manager: {description: Raylet (node manager) port. Default 8077., type: int}
      dashboard_agent_grpc: {description: Dashboard agent gRPC port. Default 8078., type: int}
      runtime_env_agent: {description: Runtime env agent port. Default 8079., type: int}
      metrics_export: {description: Prometheus metrics export port. Default 8080., type: int}
      dashboard_agent_listen: {description: Dashboard agent HTTP port. Default 52365., type: int}
      min_worker: {description: Lowest worker process port. Default 10002., type: int}
      max_worker: {description: Highest worker process port. Default 11999., type: int}
  num_cpus:
    description: CPUs this node offers to Ray. Omit to let Ray detect them.
    type: int
  num_gpus:
    description: GPUs this node offers to Ray. Omit to let Ray detect them.
    type: int
  resources:
    description: Custom resources, name to amount.
    type: dict
    default: {}
  labels:
    description:
      - Ray node labels, key to value (Kubernetes' syntax), for the label selectors of tasks, actors and placement
        group bundles.
      - The prefixes C(ray.io/) and C(rayfleet.io/) are reserved; a node that passed its admission checks also
        carries C(rayfleet.io/admission=passed).
    type: dict
    default: {}
  object_store_memory:
    description: Object store size in bytes. Omit for Ray's default (30% of memory, capped by /dev/shm).
    type: int
  temp_dir:
    description: Ray's temporary and log directory on this node.
    type: path
    default: /tmp/ray
  node_name:
    description:
      - Ray's node name (C(--node-name)); Ray's default is O(node_ip).
      - Set it for each of a host's several Ray nodes (the ray role's C(ray_node_instances), which share the host's
        IP, as C(<node_ip>/<instance>)) - the wait for registration then finds this node by its name.
    type: str
  link_check:
    description:
      - A worker's link check at admission (C(rayfleet.link)) - before its raylet starts, the node pair-tests its
        link against a node already proved, through a Ray client connection, and is refused when the all-reduce's
        bus bandwidth is below O(link_check.ratio) times that of two proved nodes, or below
        O(link_check.min_busbw_gbps).
      - Omit it or set null to turn the check off. A change is written to the settings file and applies at the node's
        next start; it restarts no node.
    type: dict
    suboptions:
      bytes:
        description: Message size of the pair all-reduce, in bytes.
        type: int
        default: 16777216
      warmup:
        description: Untimed all-reduces before the timed ones.
        type: int
        default: 2
      iters:
        description: Timed all-reduces.
        type: int
        default: 5
      ratio:
        description: The fraction of the proved pair's bus bandwidth the node's pair must reach.
        type: float
        default: 0.75
      min_busbw_gbps:
        description: An absolute floor (GB/s) the node's pair must reach too; null for none.
        type: float
      timeout_s:
        description: Seconds the pair tests may take in all; a rank stuck on a broken link fails the check then.
        type: float
        default: 60
  dashboard_host:
    description:
      - Address the head's dashboard (state API, Jobs API) binds to. Defaults to O(node_ip) (not 0.0.0.0).
      - C(127.0.0.1) keeps it on the head, reached through an SSH tunnel; nodes never need it.
    type: str
  include_dashboard:
    description: Run the dashboard on the head. Required for Ray's state API and job submission.
    type: bool
    default: true
  env:
    description:
      - Extra environment for the Ray processes (e.g. C(NCCL_SOCKET_IFNAME)).
      - C(RAY_USAGE_STATS_ENABLED=0) is always set.
      - The C(RAY_AUTH_*) variables are not accepted here; use O(auth_token_path).
    type: dict
    default: {}
  socket_ifname:
    description:
      - The interface NCCL and gloo use on this node (C(NCCL_SOCKET_IFNAME=\=<name>), C(GLOO_SOCKET_IFNAME)).
      - C(auto) is the interface holding O(node_ip), looked up each time Ray starts (so the settings of a baked
        image hold on every host booted from it).
      - Unset leaves both to NCCL's and gloo's own choice. Not together with either variable in O(env).
    type: str
  auth_token_path:
    description:
      - File holding the cluster's Ray token (Ray token authentication, C(RAY_AUTH_MODE=token)).
      - Ray on this node, and this module's own GCS queries, authenticate with it.
      - The token itself never enters the settings file, only this path.
      - Unset, Ray runs without token authentication.
    type: path
  config_path:
    description: Settings file the unit reads. Defaults to C(/etc/rayfleet/ray-<role>.json).
    type: path
  service:
    description: systemd unit name. Defaults to C(ray-<role>.service).
    type: str
  service_manager:
    description: V(auto) uses systemd when it is PID 1, else runs C(ray start) directly.
    type: str
    default: auto
    choices: [auto, systemd, none]
  restart_reasons:
    description:
      - Why this node must restart although its settings are unchanged (a new Ray or rayfleet library in its venv,
        a new unit or token file), in words; each one restarts a running node.
      - A restart refused for running work (O(running_work)) is kept on the node, in a file beside O(config_path),
        and done by the next run that may restart it.
    type: list
    elements: str
    default: []
  running_work:
    description:
      - What a restart does when it would end running work (C(rayfleet.work), read from Ray's GCS) - on the head
        every live job and actor of the cluster, on a worker the drivers, actors and tasks placed on it.
      - V(refuse) fails before anything on the node changes, naming the work.
      - V(wait) waits up to O(running_work_timeout) seconds for it to end, then refuses.
      - V(restart) restarts anyway and returns what ended as RV(lost_work), with a warning.
      - A node Ray does not list alive, or a GCS that does not answer, has no work to lose; a warning says so.
    type: str
    default: refuse
    choices: [refuse, wait, restart]
  running_work_timeout:
    description: Seconds O(running_work=wait) waits for the running work to end.
    type: int
    default: 600
  hold_restart:
    description:
      - Why this node must not restart now (in the ray role, that the cluster's head failed or refused in this run).
        A restart it would do fails with this reason before anything on the node changes, and is kept like one
        refused for running work; a node that needs no restart goes on.
    type: str
  wait:
    description: Wait until this node is registered alive with the expected resources.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for registration.
    type: int
    default: 120
extends_documentation_fragment: []
attributes:
  check_mode:
    support: full
    description: Reports what would change (settings, start, restart) without writing or touching Ray.
  diff_mode:
    support: full
    description: Shows the settings file before and after.
notes:
  - The systemd unit itself is installed by the C(rayfleet.cluster.ray) role.
seealso:
  - module: rayfleet.cluster.ray_cluster_info
"""

EXAMPLES = r"""
- name: Start the Ray head
  rayfleet.cluster.ray_node:
    role: head
    node_ip: "{{ ansible_default_ipv4.address }}"
    num_gpus: 8
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python

- name: Join a worker to the head, with a custom resource
  rayfleet.cluster.ray_node:
    role: worker
    node_ip: "{{ ansible_default_ipv4.address }}"
    head_address: "10.0.0.10:6379"
    resources:
      efa: 1
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python

- name: Stop Ray on this worker
  rayfleet.cluster.ray_node:
    role: worker
    state: stopped
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python
"""

RETURN = r"""
rayfleet_managed:
  description:
    - The items this node's settings live in (its settings file), for the stage record
      (M(rayfleet.cluster.stage_record)) that the next drift check compares the host with.
  returned: always
  type: list
  elements: dict
  sample: [{kind: file, path: /etc/rayfleet/ray-worker.json}]
action:
  description: What was done to the Ray service.
  returned: always
  type: str
  sample: restarted
  choices: [none, started, restarted, stopped]
restart_reason:
  description:
    - Why a node with unchanged settings was restarted (O(restart_reasons), a restart kept from an earlier run, or
      a worker whose unit ran but that Ray did not list alive).
  returned: when such a restart happened
  type: str
running_work:
  description: The work a restart would end (jobs, actors, held resources, a summary), as C(rayfleet.work) read it.
  returned: when the node was to restart
  type: dict
lost_work:
  description: The work the restart ended (O(running_work=restart)).
  returned: when a restart ended running work
  type: dict
settings_changed:
  description: Whether the effective settings (the settings file) changed.
  returned: always
  type: bool
changed_keys:
  description: Settings that differ from the previous run, dotted (e.g. C(ports.dashboard)).
  returned: always
  type: list
  elements: str
  sample: [num_cpus]
node_id:
  description: Ray's id of this node, once registered. Empty in check mode or when not waiting.
  returned: when state is not stopped
  type: str
  sample: 31c0321d3e511d351d943add249c61e4fb8edf91d96aec3036c43126
node_ip:
  description: The IP the node registered with.
  returned: when state is not stopped
  type: str
  sample: 10.0.0.11
resources:
  description: Resources Ray reports for this node (Ray's internal C(node:*) entries left out).
  returned: when state is not stopped
  type: dict
  sample: {CPU: 8.0, GPU: 1.0, memory: 1.0e10, object_store_memory: 2.0e9}
ray_start_args:
  description: The full C(ray start) command line the service runs.
  returned: when state is not stopped
  type: list
  elements: str
dashboard_url:
  description: The head's dashboard (state API and Jobs API) address; on the head's loopback by default.
  returned: when state is not stopped
  type: str
  sample: http://127.0.0.1:8265
gcs_address:
  description: The cluster's GCS whose node table this node was checked against (no dashboard needed).
  returned: when state is not stopped
  type: str
  sample: 10.0.0.10:6379
service:
  description: The systemd unit, or C(none) when Ray runs without systemd.
  returned: always
  type: str
  sample: ray-worker.service
"""

import json
import os
import sys
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.rayfleet.cluster.plugins.module_utils.rayfleet_common import (
    C_LOCALE,
    Systemd,
    require_rayfleet,
    systemd_is_init,
)

try:
    from rayfleet.admission import failures, read_record, record_path
    from rayfleet.cluster import gcs_fetcher, get_state, lacking_resources
    from rayfleet.errors import RayfleetError, SettingsError
    from rayfleet.raynode import RayNodeSettings, resolve, settings_diff, split_address
    from rayfleet.work import Work, read_work, wait_idle
except ImportError:
    pass  # reported by require_rayfleet()

PORT_KEYS = ("gcs", "dashboard", "client_server", "object_manager", "node_manager", "dashboard_agent_grpc",
             "runtime_env_agent", "metrics_export", "dashboard_agent_listen", "min_worker", "max_worker")


def build_module():
    port_opts = dict((k, dict(type="int")) for k in PORT_KEYS)
    return AnsibleModule(
        argument_spec=dict(
            role=dict(type="str", required=True, choices=["head", "worker"]),
            state=dict(type="str", default="started", choices=["started", "stopped", "restarted"]),
            node_ip=dict(type="str"),
            head_address=dict(type="str"),
            ray_bin=dict(type="path"),
            ports=dict(type="dict", default={}, options=port_opts),
            num_cpus=dict(type="int"),
            num_gpus=dict(type="int"),
            resources=dict(type="dict", default={}),
            labels=dict(type="dict", default={}),
            object_store_memory=dict(type="int"),
            temp_dir=dict(type="path", default="/tmp/ray"),
            node_name=dict(type="str"),
            link_check=dict(type="dict", options=dict(
                bytes=dict(type="int", default=16777216), warmup=dict(type="int", default=2),
                iters=dict(type="int", default=5), ratio=dict(type="float", default=0.75),
                min_busbw_gbps=dict(type="float"), timeout_s=dict(type="float", default=60))),
            dashboard_host=dict(type="str"),
            include_dashboard=dict(type="bool", default=True),
            env=dict(type="dict", default={}),
            socket_ifname=dict(type="str"),
            auth_token_path=dict(type="path"),
            config_path=dict(type="path"),
            service=dict(type="str"),
            service_manager=dict(type="str", default="auto", choices=["auto", "systemd", "none"]),
            restart_reasons=dict(type="list", elements="str", default=[]),
            running_work=dict(type="str", default="refuse", choices=["refuse", "wait", "restart"]),
            running_work_timeout=dict(type="int", default=600),
            hold_restart=dict(type="str"),
            wait=dict(type="bool", default=True),
            wait_timeout=dict(type="int", default=120),
        ),
        required_if=[
            ("state", "started", ("node_ip",)),
            ("state", "restarted", ("node_ip",)),
        ],
        supports_check_mode=True,
    )


def read_settings_file(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        return None
    except ValueError:
        return {"unreadable": True}


def write_settings_file(module, path, content):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(content)
    os.chmod(tmp, 0o644)
    module.atomic_move(tmp, path)


class NoSystemdService:
    """Ray started directly with `ray start` when systemd is not PID 1 (plain containers, chroots)."""

    def __init__(self, module, settings):
        self.module = module
        self.settings = settings

    def is_active(self, unit):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/comm" % pid) as f:
                    if f.read().strip() == "raylet":
                        return True
            except OSError:
                continue
        return False

    def action(self, verb, unit):
        ray = self.settings.ray_bin
        env = dict(C_LOCALE, RAY_USAGE_STATS_ENABLED="0")
        env.update(self.settings.env)
        env.update(self.settings.collective_env())
        env.update(self.settings.auth_env())
        if verb in ("stop", "restart"):
            self.module.run_command([ray, "stop", "--force"], environ_update=env, check_rc=True)
        if verb in ("start", "restart"):
            self.module.run_command(self.settings.start_args(block=False), environ_update=env, check_rc=True)


REGISTRATION_GRACE_S = 15


def refused_since(settings, since):
    """The reasons this node's admission checks (rayfleet.admission) refused it at a start after `since` (Unix
    time), else None."""
    record = read_record(settings)
    if record is None or record.get("ok") or float(record.get("timestamp") or 0) < since:
        return None
    return failures(record)


def wait_registered(module, settings, not_node_id, timeout, started=None):
    """Poll the cluster's GCS node table until this node is alive with the expected resources; fail at once when
    the node's admission checks refused it at a start after `started`."""
    fetch = gcs_fetcher(settings.gcs_address, timeout=10)
    want = settings.expected_resources()
    deadline = time.monotonic() + timeout
    problem = "no answer yet"
    while True:
        refused = refused_since(settings, started) if started is not None else None
        if refused:
            module.fail_json(
                msg="Ray %s on %s was refused at admission and did not start: %s. Its record: %s; see 'journalctl "
                    "-u %s'." % (settings.role, settings.node_ip, "; ".join(refused), record_path(settings),
                                 module.params["service"] or "ray-" + settings.role))
        try:
            node = get_state(fetch).alive_node(settings.node_ip, settings.node_name)
            if node is None:
                problem = "no alive node %s is registered" % (
                    ("named %s" % settings.node_name) if settings.node_name else ("with IP %s" % settings.node_ip))
            elif not_node_id and node.node_id == not_node_id:
                problem = "the node from before the restart (%s) is still the one registered" % not_node_id
            else:
                lacking = lacking_resources(node, want)
                labels = dict((k, (v, node.labels.get(k))) for k, v in settings.labels.items()
                              if node.labels.get(k) != v)
                if not lacking and not labels:
                    return node
                problem = "; ".join(filter(None, [
                    lacking and "resources differ (name: wanted, found): %s" % ", ".join(
                        "%s: %g, %g" % (k, w, f) for k, (w, f) in sorted(lacking.items())),
                    labels and "labels differ (key: wanted, found): %s" % ", ".join(
                        "%s: %s, %s" % (k, w, f) for k, (w, f) in sorted(labels.items()))]))
        except Exception as exc:  # the GCS may still be starting
            problem = to_native(exc)
        if time.monotonic() >= deadline:
            module.fail_json(
                msg="Ray %s on %s did not register alive within %d s at %s: %s. "
                    "See 'journalctl -u %s' and %s/session_latest/logs on this host."
                    % (settings.role, settings.node_ip, timeout, settings.gcs_address, problem,
                       module.params["service"] or "ray-" + settings.role, settings.temp_dir))
        time.sleep(1)


def registered_within(settings, seconds):
    """Whether Ray lists this node alive within `seconds`: True as soon as it does; False when the GCS answered
    (last poll) and never listed it; None when it did not answer (the head may be down, and restarting this node
    would not help)."""
    fetch = gcs_fetcher(settings.gcs_address, timeout=5)
    deadline = time.monotonic() + seconds
    while True:
        try:
            if get_state(fetch).alive_node(settings.node_ip, settings.node_name) is not None:
                return True
            answered = True
        except Exception:
            answered = False
        if time.monotonic() >= deadline:
            return False if answered else None
        time.sleep(1)


def pending_path(config_path):
    return config_path + ".restart-pending"


def read_pending(config_path):
    """The reasons of a restart an earlier run refused for running work ([] when none is kept)."""
    try:
        with open(pending_path(config_path)) as f:
            reasons = json.load(f)
    except (OSError, ValueError):
        return []
    return [str(r) for r in reasons] if isinstance(reasons, list) else []


def running_work(module, settings):
    """What restarting this node would end: the cluster's work for the head, the node's own for a worker."""
    p = module.params

    def read():
        try:
            return read_work(settings.gcs_address, "" if settings.role == "head" else settings.node_ip,
                             settings.node_name, timeout=10)
        except RayfleetError as exc:
            module.warn("could not read the running work before restarting Ray on %s: %s" % (
                settings.node_ip, to_native(exc)))
            return Work(node_ip=settings.node_ip)

    work = read()
    if work and p["running_work"] == "wait" and not module.check_mode:
        work = wait_idle(read, p["running_work_timeout"])
    return work


def keep_pending(module, config_path, pending):
    """Keep the restart the caller asked for (its reasons) beside the settings file, for the next run."""
    if module.params["restart_reasons"]:
        write_settings_file(module, pending_path(config_path),
                            json.dumps(sorted(set(module.params["restart_reasons"]) | set(pending))) + "\n")


def refuse(module, settings, why, work, waited):
    scope = "the cluster (a head restart ends every job)" if settings.role == "head" else "this node"
    module.fail_json(
        msg="ray_node (%s) on %s: not restarting Ray (%s): it would end running work on %s: %s.%s Nothing on this "
            "node was changed. Let the work finish and run again, wait for it (running_work=wait; the ray role's "
            "ray_restart_wait_s), or restart anyway and lose it (running_work=restart; the ray role's "
            "ray_restart_running_jobs=true)." % (
                settings.role, settings.node_ip, "; ".join(why), scope, work.describe(),
                (" It was still running after %d s." % module.params["running_work_timeout"]) if waited else ""),
        running_work=work.to_dict(), refused=True)


def current_node_id(settings):
    try:
        node = get_state(gcs_fetcher(settings.gcs_address, timeout=5)).alive_node(settings.node_ip, settings.node_name)
    except Exception:
        return None
    return node.node_id if node else None


def main():
    module = build_module()
    require_rayfleet(module)
    p = module.params
    role = p["role"]
    config_path = p["config_path"] or "/etc/rayfleet/ray-%s.json" % role
    use_systemd = p["service_manager"] == "systemd" or (p["service_manager"] == "auto" and systemd_is_init())
    unit = p["service"] or "ray-%s.service" % role
    result = dict(changed=False, action="none", settings_changed=False, changed_keys=[],
                  service=unit if use_systemd else "none",
                  rayfleet_managed=[dict(kind="file", path=config_path)])

    ray_bin = p["ray_bin"] or os.path.join(os.path.dirname(sys.executable), "ray")
    before = read_settings_file(config_path)

    if p["state"] == "stopped":
        settings = RayNodeSettings.from_mapping(before) if before and "unreadable" not in before else None
        service = Systemd(module) if use_systemd else NoSystemdService(module, settings)
        if (use_systemd or settings is not None) and service.is_active(unit):
            result.update(changed=True, action="stopped")
            if not module.check_mode:
                service.action("stop", unit)
        module.exit_json(**result)

    try:
        settings = RayNodeSettings.from_mapping(dict(
            role=role, node_ip=p["node_ip"], ray_bin=ray_bin, head_address=p["head_address"],
            ports=dict((k, v) for k, v in p["ports"].items() if v is not None),
            num_cpus=p["num_cpus"], num_gpus=p["num_gpus"], resources=p["resources"],
            labels=p["labels"], object_store_memory=p["object_store_memory"], temp_dir=p["temp_dir"],
            dashboard_host=p["dashboard_host"], include_dashboard=p["include_dashboard"], env=p["env"],
            socket_ifname=p["socket_ifname"], auth_token_path=p["auth_token_path"], node_name=p["node_name"],
            link_check=p["link_check"],
        ))
        if role == "worker":
            resolve(split_address(settings.head_address, settings.ports.gcs)[0])
        settings.collective_env()  # "auto" must name an interface here, before anything changes
    except SettingsError as exc:
        module.fail_json(msg="ray_node (%s): %s" % (role, to_native(exc)))
    if not os.access(settings.ray_bin, os.X_OK):
        module.fail_json(msg="ray_bin: %s is not an executable; install Ray with the rayfleet.cluster.ray role "
                             "or set ray_bin" % settings.ray_bin)
    if settings.auth_token_path and not os.path.isfile(settings.auth_token_path):
        module.fail_json(msg="auth_token_path: %s is not a file on this node; the ray role installs the cluster's "
                             "token there" % settings.auth_token_path)
    # This module's own GCS queries carry the token too.
    os.environ.update(settings.auth_env())
    after = settings.to_dict()
    content = settings.to_json()
    changes = settings_diff(before, after)
    # The link check is read at each start: a new one is written for the next, and restarts nothing
    restart_changes = [key for key in changes if key.split(".")[0] != "link_check"]
    result.update(settings_changed=bool(changes), changed_keys=sorted(changes),
                  ray_start_args=settings.start_args(block=True), dashboard_url=settings.dashboard_url,
                  gcs_address=settings.gcs_address, node_ip=settings.node_ip, node_id="", resources={})
    if module._diff:
        result["diff"] = dict(
            before_header=config_path, after_header=config_path,
            before=json.dumps(before, indent=2, sort_keys=True) + "\n" if before else "",
            after=content)

    service = Systemd(module) if use_systemd else NoSystemdService(module, settings)
    active = service.is_active(unit)
    pending = read_pending(config_path)
    reasons = list(p["restart_reasons"]) + ["kept from an earlier run: %s" % r for r in pending
                                            if r not in p["restart_reasons"]]
    if not active:
        action = "started"
    elif p["state"] == "restarted" or restart_changes or reasons:
        action = "restarted"
        if reasons and not restart_changes:
            result["restart_reason"] = "; ".join(reasons)
    else:
        action = "none"
    # A worker whose unit runs but whose raylet is gone (it exited after a drain, say) is not listed alive by Ray:
    # restart it, but only on Ray's word (the state API answered for the whole grace period without it).
    if (action == "none" and p["wait"] and role == "worker"
            and registered_within(settings, REGISTRATION_GRACE_S) is False):
        action = "restarted"
        result["restart_reason"] = ("the unit was active but Ray did not list this node alive for %d s"
                                    % REGISTRATION_GRACE_S)
    result["action"] = action
    result["changed"] = bool(changes) or action != "none"

    # A restart would end what runs: on the head the whole cluster's jobs, on a worker its own drivers, actors and
    # tasks. Refused (or waited for) before anything on the node changes, unless the caller accepts the loss.
    work = Work(node_ip=settings.node_ip)
    if action == "restarted":
        why = (["state=restarted"] if p["state"] == "restarted" else []) + [
            "%s changed" % key for key in restart_changes] + reasons or [result["restart_reason"]]
        if p["hold_restart"] and not module.check_mode:
            keep_pending(module, config_path, pending)
            module.fail_json(msg="ray_node (%s) on %s: not restarting Ray (%s) now: %s. Nothing on this node was "
                                 "changed." % (role, settings.node_ip, "; ".join(why), p["hold_restart"]),
                             refused=True)
        work = running_work(module, settings)
        if work:
            result["running_work"] = work.to_dict()
            if module.check_mode:
                module.warn("restarting Ray on %s would end running work: %s" % (settings.node_ip, work.describe()))
            elif p["running_work"] != "restart":
                keep_pending(module, config_path, pending)
                refuse(module, settings, why, work, waited=p["running_work"] == "wait")

    if module.check_mode:
        module.exit_json(**result)

    if changes:
        write_settings_file(module, config_path, content)
    previous_id = current_node_id(settings) if action == "restarted" and p["wait"] else None
    started = time.time()
    if action == "restarted":
        service.action("restart", unit)
        if work:
            result["lost_work"] = work.to_dict()
            module.warn("restarting Ray on %s ended running work: %s" % (settings.node_ip, work.describe()))
    elif action == "started":
        service.action("start", unit)
    if pending and action in ("restarted", "started"):
        os.unlink(pending_path(config_path))

    if p["wait"]:
        try:
            node = wait_registered(module, settings, previous_id, p["wait_timeout"],
                                   started=started if action != "none" else None)
        except RayfleetError as exc:
            module.fail_json(msg=to_native(exc), **result)
        result.update(node_id=node.node_id, node_ip=node.node_ip, resources=dict(node.resources))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
