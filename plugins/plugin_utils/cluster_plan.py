# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The cluster plan: each host's Ray nodes, and the nodes the cluster must list, computed from the inventory.

Pure Python on the controller (the ``rayfleet.cluster.plan`` action calls it); roles and playbooks read the
result instead of deriving the cluster's shape themselves. Every error names the variable and the host, and says
what was expected: the action fails before anything changes. The same step checks the ray role's other settings that
need no look at the host (the token, the cluster's name, a worker's head address, the timings, the preemption
watcher, the dashboard's metrics URLs, the container settings), each bad one in a message of its own.

A host runs one Ray node, or several (``ray_node_instances``, container workers): the instance in slot *s* (its
``slot``, else its place in the list) gets the single node's ports + *s* x ``ray_node_instance_port_step``, the
*s*-th of ``slot_count`` equal slices of the worker port range, and its own unit, settings file, temp dir and Ray
node name ``<ip>/<name>``.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import re
from urllib.parse import urlsplit

from ansible.module_utils.parsing.convert_bool import boolean as convert_bool
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.openpgp import pinned_fingerprint

# The ports every node of a host opens itself (shifted per instance slot); the others are the head's or the range.
SHIFTED_PORTS = ("object_manager", "node_manager", "dashboard_agent_grpc", "runtime_env_agent", "metrics_export",
                 "dashboard_agent_listen")
HEAD_PORTS = ("gcs", "dashboard", "client_server")
PORT_VARS = {name: "ray_%s_port" % name for name in HEAD_PORTS + SHIFTED_PORTS + ("min_worker", "max_worker")}
# The head's autoscaler and dashboard metrics ports: Ray's own, fixed (AUTOSCALER_METRIC_PORT, DASHBOARD_METRIC_PORT)
METRICS_PORTS = (44217, 44227)
# Ray ignores token authentication silently before this release
TOKEN_AUTH_MIN_RAY = (2, 52)
# Ray's own floor for the object store (ray start refuses less)
MIN_OBJECT_STORE = 75 * 1024 * 1024
INSTANCE_NAME = re.compile(r"^[a-z0-9]{1,15}$")
GPU_ID = re.compile(r"^([0-9]+|(GPU|MIG)-[0-9A-Za-z/-]+)$")
# PEP 440, public versions (the ray wheel's)
PEP440 = re.compile(r"^([1-9][0-9]*!)?(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?"
                    r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?$")


class PlanError(ValueError):
    """Bad input for the plan: every problem found, each naming the host and the variable."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__(" ".join(self.problems))


def _json(value):
    """A value as the operator wrote it (JSON-like), for messages."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


class Problems:
    """Every problem found in one role's variables (v) on one host, each naming the role and the host: the one
    bad-value message of every plan (problems: a list they go into, else a new one)."""

    def __init__(self, role, host, v, problems=None):
        self.role, self.host, self.v = role, host, v
        self.problems = [] if problems is None else problems

    def problem(self, text):
        self.problems.append("%s on %s: %s" % (self.role, self.host, text))

    def bad(self, var, expected):
        self.problem("%s is %s; expected %s." % (var, _json(self.v.get(var)), expected))

    def boolean(self, *names):
        """Each of names true or false as Ansible's bool reads it, else named."""
        for var in names:
            if boolean(self.v.get(var)) is None:
                self.bad(var, "true or false")


def _whole(value, minimum=0):
    """value as an int when it is a whole number >= minimum (an int or its digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        return None
    return number if number >= minimum else None


def path_problem(item, index, seen, *, pattern, what, shape, list_name, every):
    """What is wrong with the `path` of item, entry `index` of the list `list_name` (None when nothing is; a good
    path is recorded in `seen`, path -> index): not set, not matching `pattern` (an absolute path `shape`), or the
    path of an earlier entry. `what` says what the path is; `every` lists the paths given, for the message."""
    path = item.get("path")
    if "path" not in item:
        return "path is not set; expected %s, an absolute path (the paths given: %s)." % (what, every)
    if not (isinstance(path, str) and pattern.match(path)):
        return "path is %s; expected an absolute path, starting with /, %s (the paths given: %s)." % (
            _json(path), shape, every)
    if path in seen:
        return "path %s is also the path of %s[%d]; expected each path once (the paths given: %s)." % (
            path, list_name, seen[path], every)
    seen[path] = index
    return None


# A user or group: a name without blanks or colons
ACCOUNT = re.compile(r"^[^\s:]+$")


def account(value):
    """value when it names a user or group (a name without blanks or colons, or a number), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    return value if isinstance(value, str) and ACCOUNT.match(value) else None


# A directory's mode, as an octal string
MODE = re.compile(r"^0?[0-7]{3,4}$")


def check_ownership(entry, item, what, example_mode):
    """Names, through entry.bad(key, expected), a bad owner, group or mode of item's directory (`what`: "the mount
    point"). The mode must be a quoted octal string: an unquoted 0775 reaches the file module as a decimal number."""
    for key in ("owner", "group"):
        if key in item and account(item[key]) is None:
            entry.bad(key, "a user or group name (or number) for %s" % what)
    if "mode" in item and not (isinstance(item["mode"], str) and MODE.match(item["mode"])):
        entry.bad("mode", "%s's mode as a quoted octal string such as '%s'" % (what, example_mode))


def check_ip(value):
    """The address text when value is an IPv4 or IPv6 address, else None."""
    return _address_text(str(value).strip())


def check_network(value):
    """The network text when value is an address or a CIDR (host bits allowed), else None."""
    return _network_text(str(value).strip())


# Pure functions of their text, asked of every member by every host's plan: each text parsed once
@functools.lru_cache(maxsize=65536)
def _address_text(text):
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


@functools.lru_cache(maxsize=65536)
def _network_text(text):
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        return None


# A DNS name: labels of letters, digits and inner hyphens (63 at most), the last one not all digits (a bad IPv4
# address is not taken for a name); a trailing dot allowed
HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def check_hostname(value):
    """The name when value is a DNS host name (letters, digits, hyphens, dots), else None."""
    if not isinstance(value, str):
        return None
    name = value[:-1] if value.endswith(".") else value
    labels = name.split(".")
    if not name or len(name) > 253 or not all(HOST_LABEL.match(label) for label in labels) or labels[-1].isdigit():
        return None
    return value


URL_SCHEMES = ("http", "https", "file")


def is_url(value, schemes=URL_SCHEMES):
    """True when value is a URL of one of schemes, written in lower case, without blanks; http(s) with a host, file
    with a path."""
    if not isinstance(value, str) or any(c.isspace() for c in value):
        return False
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:  # a bad port or a bracketed address left open
        return False
    if parts.scheme not in schemes or not value.startswith(parts.scheme + "://"):
        return False
    return bool(parts.path) if parts.scheme == "file" else bool(host)


# A download's sha256, as get_url's checksum takes it: "sha256:" and 64 lower-case hex digits
SHA256_CHECKSUM = re.compile(r"sha256:[0-9a-f]{64}")


def is_sha256_checksum(value):
    """True when value is a download's sha256 written as get_url's checksum takes it: sha256:<64 lower-case hex
    digits>."""
    return isinstance(value, str) and SHA256_CHECKSUM.fullmatch(value) is not None


# S3's bucket naming rules (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), general purpose
# buckets
S3_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")
S3_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
S3_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
S3_BUCKET_RULES = (
    "3-63 characters of lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit, no "
    "two adjacent dots or a dot next to a hyphen, not an IP address, not starting with %s, not ending with %s"
    % (", ".join(S3_BUCKET_RESERVED_PREFIXES), ", ".join(S3_BUCKET_RESERVED_SUFFIXES)))


def s3_bucket_problem(value):
    """What makes value a bucket name S3 refuses (a few words), or None when S3 accepts it (S3_BUCKET_RULES)."""
    if not isinstance(value, str):
        return "not a string"
    if not 3 <= len(value) <= 63:
        return "%d characters" % len(value)
    if not S3_BUCKET_CHARS.match(value):
        return "other characters than lowercase letters, digits, dots and hyphens, or not a letter or digit at an end"
    if ".." in value or ".-" in value or "-." in value:
        return "two adjacent dots, or a dot next to a hyphen"
    if re.match(r"^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$", value):
        return "the form of an IP address"
    reserved = [p for p in S3_BUCKET_RESERVED_PREFIXES if value.startswith(p)]
    reserved += [s for s in S3_BUCKET_RESERVED_SUFFIXES if value.endswith(s)]
    if reserved:
        return "a prefix or suffix S3 reserves (%s)" % reserved[0]
    return None


def version_tuple(value):
    """(major, minor, ...) of a PEP 440 version, or None when value is not one."""
    text = str(value).strip()
    if not PEP440.match(text):
        return None
    release = text.rsplit("!", maxsplit=1)[-1]
    return tuple(int(part) for part in re.match(r"^[0-9.]+", release).group(0).rstrip(".").split("."))


def _instance_problems(v, is_gpu_host, role):
    """The problems of ray_node_instances / ray_node_instance_slots / ray_node_instance_port_step (no host prefix)."""
    out = []
    if _whole(v.get("ray_node_instance_port_step"), 1) is None:
        out.append("ray_node_instance_port_step is %s" % _json(v.get("ray_node_instance_port_step")))
    items = v.get("ray_node_instances")
    if items is None:
        items = []
    if isinstance(items, (str, bytes, dict)) or not isinstance(items, (list, tuple)):
        return [*out, "not a list"]
    slots_var = v.get("ray_node_instance_slots")
    slots = None if slots_var is None else _whole(slots_var, 1)
    slots_ok = slots_var is None or (slots is not None and slots >= len(items))
    if not slots_ok:
        out.append("ray_node_instance_slots is %s (null, or a whole number >= the %d instances)"
                   % (_json(slots_var), len(items)))
    slot_count = slots if slots_ok and slots is not None else len(items)
    names, gpus_seen, slots_seen = [], [], []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or set(item) - {"name", "gpus", "slot"}:
            out.append("item %d is not a mapping of name, gpus and slot" % (index + 1))
            continue
        name = str(item.get("name", ""))
        if not INSTANCE_NAME.match(name) or name in ("head", "worker"):
            out.append("item %d has the name %s" % (index + 1, _json(name)))
        elif name in names:
            out.append("the name %s is given twice" % name)
        names.append(name)
        gpus = item.get("gpus", [])
        if isinstance(gpus, (str, bytes, dict)) or not isinstance(gpus, (list, tuple)):
            out.append("%s: gpus is not a list" % name)
        elif is_gpu_host and len(items) > 1 and not gpus:
            out.append("%s: no gpus (this host is in group gpu: each instance names its own)" % name)
        elif not is_gpu_host and gpus:
            out.append("%s: gpus %s, but this host is not in group gpu" % (name, _json(gpus)))
        else:
            for gpu in (str(g) for g in gpus):
                if not GPU_ID.match(gpu):
                    out.append("%s: %s is not a GPU index or UUID" % (name, _json(gpu)))
                elif gpu in gpus_seen:
                    out.append("%s: GPU %s is also given to another instance" % (name, gpu))
                gpus_seen.append(gpu)
        slot_value = item.get("slot", index)
        slot = _whole(slot_value)
        if slot is None:
            out.append("%s: slot %s is not a whole number >= 0" % (name, _json(slot_value)))
            continue
        if slots_ok and slot >= slot_count:
            out.append("%s: slot %d, but the host has %d slots (0 to %d, ray_node_instance_slots)"
                       % (name, slot, slot_count, slot_count - 1))
        elif slot in slots_seen:
            out.append("%s: slot %d is taken by another instance too" % (name, slot))
        slots_seen.append(slot)
    if items:
        if role != "worker":
            out.append("this host is the head (instances are workers)")
        if v.get("ray_runtime", "host") != "container":
            out.append("ray_runtime is %s (instances run in containers)" % v.get("ray_runtime", "host"))
    return out


# The kernel's ceiling for an open-files limit (fs.nr_open can be raised at most this far; systemd raises it there at
# boot): a larger limit fails the unit's or PAM's setrlimit
NOFILE_MAX = 1073741816
# The resources Ray names itself (ray start refuses them in --resources)
RAY_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
# Ray runs as an unprivileged user (ray_service_user): a port below this one needs root
LOWEST_PORT = 1024

# The health timer's shortest interval: a run reads NVML, the kernel log, the shared storage and the cluster's GCS
HEALTH_MIN_INTERVAL_S = 10
HEALTH_VARS = ("ray_health_enabled", "ray_health_interval_s", "ray_health_dir", "ray_health_script_timeout_s",
               "ray_health_drain", "ray_health_textfile_dir")


def boolean(value):
    """value as a bool when Ansible's ``bool`` (the argument specs' type, the bool filter) takes it for one: True/False,
    1/0 (ints and floats), and yes/no, on/off, true/false, y/n, t/f, 1/0 as text in any case; else None."""
    try:
        return convert_bool(value, strict=True)
    except TypeError:
        return None


def _abs_path(value):
    return isinstance(value, str) and value.startswith("/") and value != "/" and not any(c.isspace() for c in value)


def _health_problems(host, v):
    """The problems of the health timer's variables (only those given: a caller without them checks nothing)."""
    if not any(var in v for var in HEALTH_VARS):
        return []
    out = []
    enabled = boolean(v.get("ray_health_enabled"))
    for var in ("ray_health_enabled", "ray_health_drain"):
        if boolean(v.get(var)) is None:
            out.append("ray on %s: %s is %s; expected true or false." % (host, var, _json(v.get(var))))
    if enabled is False:
        return out
    if _whole(v.get("ray_health_interval_s"), HEALTH_MIN_INTERVAL_S) is None:
        out.append("ray on %s: ray_health_interval_s is %s; expected whole seconds, at least %d (the health checks "
                   "read NVML, the kernel log, the shared storage and Ray each time)."
                   % (host, _json(v.get("ray_health_interval_s")), HEALTH_MIN_INTERVAL_S))
    if _whole(v.get("ray_health_script_timeout_s"), 1) is None:
        out.append("ray on %s: ray_health_script_timeout_s is %s; expected whole seconds, at least 1."
                   % (host, _json(v.get("ray_health_script_timeout_s"))))
    for var, what in (("ray_health_dir", "the directory of the site's health scripts"),
                      ("ray_health_textfile_dir", "node exporter's textfile collector directory")):
        if not _abs_path(v.get(var)):
            out.append("ray on %s: %s is %s; expected %s, an absolute path without spaces (not /)."
                       % (host, var, _json(v.get(var)), what))
    return out


# A cluster's name in its hosts' unit and file names
CLUSTER_NAME = re.compile(r"([a-z0-9][a-z0-9-]{0,30})?")
# A container image reference (registry/name:tag or @digest), lowercase; and the command that runs Python in it
IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:@-]*")
COMMAND = re.compile(r"[A-Za-z0-9._/-]+")
# http(s)://host[:port][/path]: the host a name, an IPv4 address or an IPv6 address in brackets; no blanks anywhere
HTTP_URL = re.compile(r"https?://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
                      r"(?::(?P<port>[0-9]{1,5}))?(?P<path>/\S*)?")
RAY_STATES = ("started", "stopped", "restarted", "baked")
DASHBOARD_URL_VARS = ("ray_dashboard_prometheus_url", "ray_dashboard_grafana_url", "ray_dashboard_grafana_iframe_url")
# The ray role's settings the plan checks besides its nodes' shape (their defaults: the role's defaults/main.yml)
SETTING_NAMES = (
    "ray_cluster_name", "ray_membership", "ray_cluster_networks", "ray_runtime", "ray_state", "ray_stop_drain_s",
    "ray_liveness_check_interval_s", "ray_restart_sec", "ray_gcs_reconnect_timeout_s", "ray_wait_timeout",
    "ray_restart_running_jobs", "ray_restart_wait_s", "ray_limit_nofile", "ray_resources", "ray_labels",
    "ray_preemption_provider", "ray_preemption_metadata_url", "ray_preemption_interval_s",
    "ray_dashboard_prometheus_url", "ray_dashboard_grafana_url", "ray_dashboard_grafana_iframe_url",
    "ray_container_engine", "ray_container_image",
    "ray_container_image_archive", "ray_container_pull", "ray_container_python", "ray_container_shm_size_mb",
    "ray_container_gpus", "ray_container_nvidia_key_url", "ray_container_nvidia_key_fingerprint",
    "ray_installer", "ray_uv_version",
)
# And the token's path (read with token authentication) and a worker's head address
SETTING_VARS = ("ray_auth_token_path", "ray_head_address", *SETTING_NAMES)


def _matches(pattern, value):
    """Whether value is a string that pattern matches whole (no trailing newline either)."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def http_url(value, path=True):
    """Whether value is an http(s):// URL: a host name, an IPv4 address or a bracketed IPv6 address, an optional port
    1-65535, and (path) an optional path, else at most a "/"; ASCII, no blanks, no user name."""
    matched = HTTP_URL.fullmatch(value) if isinstance(value, str) and value.isascii() else None
    if matched is None or (matched.group("path") and not path and matched.group("path") != "/"):
        return False
    host, port = matched.group("host"), matched.group("port")
    if port is not None and not 1 <= int(port) <= 65535:
        return False
    if host.startswith("["):
        return check_ip(host[1:-1]) is not None and ":" in host
    # a host written as digits and dots is an IPv4 address
    return not re.match(r"^[0-9.]+$", host) or check_ip(host) is not None


def _one_of(value, choices):
    return isinstance(value, str) and value in choices


def _token_problems(v, is_dir):
    """(variable, expected) of the token settings: the mode, and the token's path on the controller."""
    mode = v.get("ray_auth_mode")
    if not _one_of(mode, ("token", "disabled")):
        return [("ray_auth_mode", "token or disabled")]
    path = v.get("ray_auth_token_path")
    if mode == "token" and not (isinstance(path, str) and path.startswith("/") and not is_dir(path)):
        return [("ray_auth_token_path", "the absolute path on the controller of the file that holds the cluster's "
                 "Ray token (made there once; read with ray_auth_mode token), not a directory")]
    return []


def _service_problems(v, role):
    """(variable, expected) of the cluster's name, the head's address and the node service's timings."""
    out = []
    if not _one_of(v.get("ray_state"), RAY_STATES):
        out.append(("ray_state", "started, stopped, restarted or baked"))
    name = v.get("ray_cluster_name")
    if not _matches(CLUSTER_NAME, name):
        out.append(("ray_cluster_name", "lowercase letters, digits and '-', starting with a letter or digit, at most "
                    "31, or empty for the host's one unnamed cluster"))
    head = v.get("ray_head_address")
    if (role == "worker" and v.get("ray_state") != "baked"
            and not (isinstance(head, str) and head.strip() and not any(c.isspace() for c in head))):
        out.append(("ray_head_address", "the head's host name or IP address (empty: the cluster IP of the host in "
                    "the ray_head group - is that group empty?)"))
    if _whole(v.get("ray_stop_drain_s")) is None:
        out.append(("ray_stop_drain_s", "whole seconds, at least 0"))
    if _whole(v.get("ray_liveness_check_interval_s"), 1) is None:
        out.append(("ray_liveness_check_interval_s", "whole seconds, at least 1"))
    for var, what in (("ray_restart_sec", "whole seconds systemd waits before it restarts a failed node, at least 1 "
                       "(the unit has no start limit: 0 restarts a crashing node in a tight loop)"),
                      ("ray_gcs_reconnect_timeout_s", "whole seconds a node waits for the head's GCS to come back "
                       "before it exits, at least 1"),
                      ("ray_wait_timeout", "whole seconds this run waits for Ray's nodes, at least 1")):
        if _whole(v.get(var), 1) is None:
            out.append((var, what))
    if boolean(v.get("ray_restart_running_jobs")) is None:
        out.append(("ray_restart_running_jobs", "true (a restart may end running jobs) or false"))
    if _whole(v.get("ray_restart_wait_s")) is None:
        out.append(("ray_restart_wait_s", "whole seconds a restart waits for running jobs to end, at least 0 (0: it "
                    "does not wait)"))
    limit = _whole(v.get("ray_limit_nofile"), 1)
    if limit is None or limit > NOFILE_MAX:
        out.append(("ray_limit_nofile", "open files of the node's unit (LimitNOFILE), a whole number 1-%d (the "
                    "kernel's ceiling)" % NOFILE_MAX))
    resources = v.get("ray_resources")
    if not (isinstance(resources, dict) and all(
            isinstance(name, str) and name.strip() and name not in RAY_BUILTIN_RESOURCES
            and _number_at_least_0(amount) for name, amount in resources.items())):
        out.append(("ray_resources", "a mapping of custom resource names to amounts >= 0 (not %s: ray_num_cpus, "
                    "ray_num_gpus and ray_object_store_memory set those)" % ", ".join(RAY_BUILTIN_RESOURCES)))
    labels = v.get("ray_labels")
    if not (isinstance(labels, dict) and all(
            isinstance(key, str) and key.strip() and not isinstance(value, (bool, dict, list)) and value is not None
            for key, value in labels.items())):
        out.append(("ray_labels", "a mapping of Ray node label keys to text values, such as {market: spot}"))
    return out


def _number_at_least_0(value):
    """Whether value is a number (or its text) >= 0, not a boolean."""
    if isinstance(value, bool):
        return False
    try:
        return float(value) >= 0
    except (TypeError, ValueError):
        return False


def _preemption_problems(v):
    """(variable, expected) of the preemption watcher's settings (checked whether the watcher runs or not)."""
    out = []
    if not _one_of(v.get("ray_preemption_provider"), ("aws", "gcp")):
        out.append(("ray_preemption_provider", "aws or gcp"))
    url = v.get("ray_preemption_metadata_url")
    if not (url == "" or http_url(url, path=False)):
        out.append(("ray_preemption_metadata_url", "empty for the provider's own endpoint, or http(s)://host[:port]"))
    if _whole(v.get("ray_preemption_interval_s"), 1) is None:
        out.append(("ray_preemption_interval_s", "whole seconds between polls, at least 1"))
    return out


# Where the dashboard's metrics addresses come from by default (the ray role's defaults): a bad listen address of the
# monitoring role shows up here first, so the message names it
DASHBOARD_URL_SOURCES = {
    "ray_dashboard_prometheus_url": "monitoring_prometheus_listen",
    "ray_dashboard_grafana_url": "monitoring_grafana_listen",
    "ray_dashboard_grafana_iframe_url": "ray_dashboard_grafana_url",
}


def _dashboard_problems(v):
    """(variable, expected) of the metrics addresses the head's dashboard reads."""
    return [(var, "an http(s):// URL (e.g. http://127.0.0.1:9090) or empty; by default it is built from %s"
             % DASHBOARD_URL_SOURCES[var])
            for var in DASHBOARD_URL_VARS if not (v.get(var) == "" or http_url(v.get(var)))]


def _installer_problems(v):
    """(variable, expected) of what installs into the Ray venv."""
    out = []
    if not _one_of(v.get("ray_installer"), ("uv", "pip")):
        out.append(("ray_installer", "uv or pip"))
    elif v.get("ray_installer") == "uv" and version_tuple(v.get("ray_uv_version", "")) is None:
        out.append(("ray_uv_version", "the uv release installed into the Ray venv (a PEP 440 version such as "
                    "0.13.10), with ray_installer uv"))
    return out


def _gpu_list_problem(gpus, is_gpu_host):
    """What ray_container_gpus must be when it is wrong, else None."""
    expected = "all, or a list of this host's GPU indices or UUIDs (GPU-... or MIG-...), each once"
    if gpus == "all":
        return None
    if isinstance(gpus, (str, bytes, dict)) or not isinstance(gpus, (list, tuple)):
        return expected
    items = [str(gpu) for gpu in gpus if not isinstance(gpu, (bool, dict, list))]
    if len(items) != len(gpus) or not all(GPU_ID.match(gpu) for gpu in items) or len(set(items)) != len(items):
        return expected
    if items and not is_gpu_host:
        return expected + " - and this host is not in group gpu, so it has no GPUs to give: leave it all or []"
    return None


def _container_problems(v, is_gpu_host, is_file):
    """(variable, expected) of the container settings: checked with ray_runtime container only."""
    runtime = v.get("ray_runtime")
    if not _one_of(runtime, ("host", "container")):
        return [("ray_runtime", "host or container")]
    if runtime != "container":
        return []
    out = []
    if not _one_of(v.get("ray_container_engine"), ("podman", "docker")):
        out.append(("ray_container_engine", "podman or docker"))
    image = v.get("ray_container_image")
    if not _matches(IMAGE, image):
        out.append(("ray_container_image", "the node image, registry/name:tag in lowercase (required with "
                    "ray_runtime container)"))
    if not _one_of(v.get("ray_container_pull"), ("missing", "always")):
        out.append(("ray_container_pull", "missing or always"))
    archive = v.get("ray_container_image_archive")
    if not (archive == "" or (isinstance(archive, str) and is_file(archive))):
        out.append(("ray_container_image_archive", "empty, or an image archive file on the controller (podman save "
                    "or docker save)"))
    python = v.get("ray_container_python")
    if not _matches(COMMAND, python):
        out.append(("ray_container_python", "the command of the image's Python, one word of letters, digits, '.', "
                    "'_', '/' and '-'"))
    if v.get("ray_container_shm_size_mb") is not None and _whole(v.get("ray_container_shm_size_mb")) is None:
        out.append(("ray_container_shm_size_mb", "MiB, a whole number, or null for the object store's size + 1024"))
    if v.get("ray_state") == "baked":
        out.append(("ray_state", "started, stopped or restarted with ray_runtime container (a baked image runs Ray on "
                    "the host: bake with ray_runtime host)"))
    gpus = _gpu_list_problem(v.get("ray_container_gpus"), is_gpu_host)
    if gpus:
        out.append(("ray_container_gpus", gpus))
    if is_gpu_host and pinned_fingerprint(v.get("ray_container_nvidia_key_fingerprint")) is None:
        out.append(("ray_container_nvidia_key_fingerprint", "the fingerprint of the signing key (%s) of the NVIDIA "
                    "Container Toolkit, which a GPU host with ray_runtime container installs, checked against it "
                    "before apt trusts it: 40 hex digits, or 64 for a version 5 or 6 key; spaces allowed"
                    % v.get("ray_container_nvidia_key_url")))
    return out


MEMBERSHIPS = ("static", "network")


def cluster_networks(value):
    """The networks of ray_cluster_networks (texts, host bits cleared), None when it is not a list of CIDRs."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return None
    found = [check_network(item) if isinstance(item, str) else None for item in value]
    return None if None in found else found


def _membership_problems(v):
    """(variable, expected) of the membership settings: network membership admits whole networks, so Ray's token
    must be on and the networks given."""
    mode = v.get("ray_membership", "static")
    if mode not in MEMBERSHIPS:
        return [("ray_membership", "static or network")]
    networks = cluster_networks(v.get("ray_cluster_networks"))
    if networks is None:
        return [("ray_cluster_networks", "a list of CIDRs (10.0.0.0/16, fd00::/64): the cluster's networks")]
    if mode != "network":
        return []
    found = []
    if v.get("ray_auth_mode") != "token":
        found.append(("ray_membership", "static unless ray_auth_mode is token (it is %s): network membership admits "
                      "every host of ray_cluster_networks, so the cluster's token must be the lock"
                      % _json(v.get("ray_auth_mode"))))
    if not networks:
        found.append(("ray_cluster_networks", "at least one CIDR (the VPC subnet, the placement group's range) with "
                      "ray_membership network"))
    return found


def in_networks(ip, networks):
    """Whether the address ip is inside one of the networks (texts)."""
    address = ipaddress.ip_address(ip)
    return any(address in ipaddress.ip_network(net) for net in networks)


def _settings_problems(host, v, groups, role, *, is_file, is_dir):
    """The problems of the settings the plan checks but does not plan with: one per bad variable, naming it, its
    value and what was expected."""
    found = (_token_problems(v, is_dir) + _service_problems(v, role) + _preemption_problems(v)
             + _dashboard_problems(v) + _container_problems(v, "gpu" in groups, is_file) + _membership_problems(v)
             + _installer_problems(v))
    return ["ray on %s: %s is %s; expected %s." % (host, var, _json(v.get(var)), expected) for var, expected in found]


INSTANCES_EXPECTED = (
    "Expected a list of {name, gpus[, slot]} (name: lowercase letters and digits, at most 15, not head or worker, "
    "each once; gpus: this host's GPU indices or UUIDs, on hosts of group gpu only, no GPU in two instances; slot: 0 "
    "to ray_node_instance_slots - 1, each once, by default the place in the list), on a worker with ray_runtime "
    "container, ray_node_instance_slots null or at least the number of instances, and ray_node_instance_port_step a "
    "whole number >= 1. Nothing was changed.")


def host_plan(host, v, groups=(), *, is_file=os.path.isfile, is_dir=os.path.isdir):
    """The plan of one host's Ray nodes from its ray_* variables (v), checked; raises PlanError naming each problem.

    groups: the host's group names (group gpu decides whether instances and the container may name GPUs, and whether
    the NVIDIA Container Toolkit's key pin is read).
    is_file(path), is_dir(path): whether path is a file, a directory on the controller (ray_container_image_archive,
    ray_auth_token_path)."""
    problems = []
    role = v.get("ray_node_role")
    if role not in ("head", "worker"):
        problems.append("ray on %s: ray_node_role is %s; expected head or worker." % (host, _json(role)))
    node_ip = check_ip(v.get("ray_node_ip") or "")
    if node_ip is None:
        problems.append(
            "ray_node_ip on %s is %s; expected this host's IP address on the cluster network (by default the address "
            "of its default route; gather facts or set ray_node_ip)." % (host, _json(v.get("ray_node_ip"))))
    version = version_tuple(v.get("ray_version", ""))
    if version is None:
        problems.append("ray on %s: ray_version is %s; expected a Ray release (a PEP 440 version such as 2.60.0)."
                        % (host, _json(v.get("ray_version"))))
    elif v.get("ray_auth_mode") == "token" and version[:2] < TOKEN_AUTH_MIN_RAY:
        problems.append(
            "ray on %s: ray_version %s with ray_auth_mode token; Ray before %d.%d ignores token authentication and "
            "would run the cluster open. Expected ray_version >= %d.%d (or ray_auth_mode disabled, knowingly)."
            % (host, v.get("ray_version"), *TOKEN_AUTH_MIN_RAY, *TOKEN_AUTH_MIN_RAY))
    for var in ("ray_num_cpus", "ray_num_gpus"):
        if v.get(var) is not None and _whole(v.get(var)) is None:
            problems.append("ray on %s: %s is %s; expected a whole number >= 0, or null for what Ray detects."
                            % (host, var, _json(v.get(var))))
    store = v.get("ray_object_store_memory")
    if store is not None and (_whole(store) is None or _whole(store) < MIN_OBJECT_STORE):
        problems.append("ray on %s: ray_object_store_memory is %s; expected bytes, at least %d (75 MiB, Ray's floor), "
                        "or null for Ray's default." % (host, _json(store), MIN_OBJECT_STORE))
    temp_dir = v.get("ray_temp_dir")
    name = v.get("ray_cluster_name")
    # a bad cluster name is named itself (_service_problems), not through the temp dir the ray role derives from it
    derived = isinstance(name, str) and bool(name) and not _matches(CLUSTER_NAME, name) and (
        isinstance(temp_dir, str) and temp_dir.endswith("-" + name))
    if not derived and (not isinstance(temp_dir, str) or not temp_dir.startswith("/")
                        or any(c.isspace() for c in temp_dir)):
        problems.append("ray on %s: ray_temp_dir is %s; expected an absolute path without spaces."
                        % (host, _json(temp_dir)))
    networks = cluster_networks(v.get("ray_cluster_networks"))
    if (node_ip is not None and v.get("ray_membership") == "network" and networks
            and not in_networks(node_ip, networks)):
        problems.append("ray on %s: ray_node_ip %s is in none of ray_cluster_networks %s; expected every node's "
                        "address in the cluster's networks (ray_membership network admits those only)."
                        % (host, node_ip, _json(v.get("ray_cluster_networks"))))
    instance_problems = _instance_problems(v, "gpu" in groups, role)
    if instance_problems:
        problems.append("ray on %s: ray_node_instances %s - %s. %s" % (
            host, _json(v.get("ray_node_instances")), "; ".join(instance_problems), INSTANCES_EXPECTED))
    problems += _health_problems(host, v)
    problems += _settings_problems(host, v, groups, role, is_file=is_file, is_dir=is_dir)
    base = {}
    for name, var in PORT_VARS.items():
        port = _whole(v.get(var))
        if port is None:
            problems.append("ray on %s: %s is %s; expected a port number 1024-65535." % (host, var, _json(v.get(var))))
        base[name] = port
    if problems:
        raise PlanError(problems)

    items = v.get("ray_node_instances") or [{"name": ""}]
    slots = v.get("ray_node_instance_slots")
    slot_count = _whole(slots) if v.get("ray_node_instances") and slots is not None else max(len(items), 1)
    step = _whole(v["ray_node_instance_port_step"])
    span = (base["max_worker"] - base["min_worker"] + 1) // slot_count
    ns = "-%s" % v["ray_cluster_name"] if v.get("ray_cluster_name") else ""
    instances = []
    for index, item in enumerate(items):
        name = str(item.get("name", ""))
        slot = _whole(item.get("slot", index))
        ports = dict(base)
        for key in SHIFTED_PORTS:
            ports[key] = base[key] + slot * step
        ports["min_worker"] = base["min_worker"] + slot * span
        ports["max_worker"] = base["min_worker"] + (slot + 1) * span - 1
        suffix = "-%s" % name if name else ""
        stem = "ray%s-%s%s" % (ns, role, suffix)
        instances.append({
            "name": name, "index": index, "slot": slot, "gpus": list(item.get("gpus", [])), "ports": ports,
            "label": name or role, "suffix": suffix, "unit": stem + ".service", "container_name": stem,
            "config_path": "/etc/rayfleet/%s.json" % stem,
            "container_record": "/etc/rayfleet/%s.container.json" % stem,
            "temp_dir": v["ray_temp_dir"] + ("_%s" % name if name else ""),
            "node_name": "%s/%s" % (node_ip, name) if name else "",
        })
    _check_ports(host, v, base, instances, span=span, slot_count=slot_count)
    if role == "worker":
        _check_cluster_wide(host, v)
    head_address = str(v.get("ray_head_address") or "") if role == "worker" else node_ip
    head_gcs_port = base["gcs"]
    if role == "worker" and v.get("ray_head_gcs_port") is not None:
        head_gcs_port = _whole(v["ray_head_gcs_port"])
        if head_gcs_port is None or not LOWEST_PORT <= head_gcs_port <= 65535:
            raise PlanError(["ray on %s: the head's ray_gcs_port is %s; expected a port number 1024-65535 (a worker "
                             "reaches the head's GCS at the head's port)." % (host, _json(v["ray_head_gcs_port"]))])
    return {
        "host": host,
        "role": role,
        "node_ip": node_ip,
        # where this host's Ray reaches the head's GCS: ray_head_address on a worker ('' on a baked one: its launch
        # file names the head), its own IP on the head
        "head_address": head_address,
        # and with the head's GCS port (the head's ray_gcs_port, which a worker follows): host:port, '' on a baked
        # worker
        "gcs_address": with_port(head_address, head_gcs_port) if head_address else "",
        "ns": ns,
        "slot_count": slot_count,
        "instances": instances,
        "units": [i["unit"] for i in instances],
        # The units of this cluster a node of this host may run under, whichever role it has now: the head's, and the
        # worker's (or its instances') - the firewall starts before any of them
        "any_role_units": ["ray%s-head.service" % ns] + (
            [i["unit"] for i in instances] if role == "worker" and instances[0]["name"]
            else ["ray%s-worker.service" % ns]),
        "config_paths": [i["config_path"] for i in instances],
        # What Ray must list alive for this host: its IP for its one node, <ip>/<name> for each instance
        "expected_nodes": expected_of(host, node_ip, [i["name"] for i in instances if i["name"]]),
        # Every single TCP port of the host's Ray nodes, which the firewall opens to the cluster: the head's, every
        # instance's, and the head's metrics ports; and the worker port range all the instances share
        "ray_ports": sorted({port for i in instances for key, port in i["ports"].items()
                             if key in HEAD_PORTS + SHIFTED_PORTS and (key in SHIFTED_PORTS or i["slot"] == 0)}
                            | set(METRICS_PORTS)),
        "worker_port_range": "%d-%d" % (base["min_worker"], base["max_worker"]),
    }


def _port_labels(v, instances):
    """(the variable a Ray port comes from, in the operator's words, its number) for every single port of the host's
    nodes: the head's ports and slot 0's by their ray_*_port, an instance's shifted ones by ray_*_port + its slot x
    ray_node_instance_port_step."""
    out = [(PORT_VARS[key], instances[0]["ports"][key]) for key in HEAD_PORTS]
    for inst in instances:
        for key in SHIFTED_PORTS:
            label = PORT_VARS[key]
            if inst["slot"]:
                label = "%s + %d x ray_node_instance_port_step %s (instance %s)" % (
                    label, inst["slot"], _json(v.get("ray_node_instance_port_step")), inst["name"])
            out.append((label, inst["ports"][key]))
    return out


def _check_ports(host, v, base, instances, *, span, slot_count):
    """Each Ray port in 1024-65535, each different, and none inside the worker port range (each instance's slice of it
    2 ports at least): every problem named by the variables it comes from."""
    labelled = _port_labels(v, instances)
    lo, hi = base["min_worker"], base["max_worker"]
    problems = []
    for label, port in [*labelled, ("ray_min_worker_port", lo), ("ray_max_worker_port", hi)]:
        if not LOWEST_PORT <= port <= 65535:
            problems.append("%s is %d; expected a port number %d-65535 (Ray runs as an unprivileged user: a port "
                            "below %d needs root)." % (label, port, LOWEST_PORT, LOWEST_PORT))
    by_port = {}
    for label, port in labelled:
        by_port.setdefault(port, []).append(label)
    for port, labels in sorted(by_port.items()):
        if len(labels) > 1:
            problems.append("%s are %s %d; expected each Ray port different." % (
                " and ".join(labels), "both" if len(labels) == 2 else "all", port))
    if lo >= hi:
        problems.append("ray_min_worker_port %d is not below ray_max_worker_port %d; expected a range low-high."
                        % (lo, hi))
    elif span < 2:
        problems.append("the worker port range %d-%d split in %d slots (ray_node_instance_slots) leaves %d port(s) "
                        "each; expected 2 at least: a wider range or fewer slots." % (lo, hi, slot_count, span))
    for label, port in labelled:
        if lo <= port <= hi:
            problems.append("%s is %d, inside the worker port range %d-%d (ray_min_worker_port-ray_max_worker_port); "
                            "expected a port outside it." % (label, port, lo, hi))
    if problems:
        raise PlanError(["ray on %s: %s" % (host, problem) for problem in problems])


# The settings every node of a cluster must share with its head: Ray refuses a node of another release, and a head with
# token authentication refuses a node without the token
CLUSTER_WIDE_VARS = ("ray_version", "ray_auth_mode", "ray_membership", "ray_cluster_networks")


def _check_cluster_wide(host, v):
    """A worker's CLUSTER_WIDE_VARS against the head's (v["ray_head_shared"], from the head's inventory or the role's
    defaults, where the action read them)."""
    shared = v.get("ray_head_shared") or {}
    problems = ["ray on %s: %s is %s, but the head (%s) has %s; expected the head's value on every node of the cluster "
                "(set it where both read it, such as group_vars/all)."
                % (host, var, _json(v.get(var)), v.get("ray_head_name"), _json(shared[var]))
                for var in CLUSTER_WIDE_VARS if var in shared and str(shared[var]) != str(v.get(var))]
    if problems:
        raise PlanError(problems)


def with_port(address, port):
    """host:port of a host name or address; an IPv6 address in brackets; an address that names its port already
    (host:port, [v6]:port) as it is."""
    if address.startswith("[") and "]:" in address:
        return address
    if address.count(":") == 1:
        return address
    if ":" in address:
        return "[%s]:%d" % (address.strip("[]"), port)
    return "%s:%d" % (address, port)


def expected_of(host, ip, instance_names):
    """node name -> inventory name of what Ray must list alive for a host: ip -> host, or <ip>/<i> -> <host>/<i>."""
    if not instance_names:
        return {ip: host}
    return {"%s/%s" % (ip, name): "%s/%s" % (host, name) for name in instance_names}


def member_ip(host, hostvars):
    """A cluster host's IP: its ray_node_ip where the inventory sets it, else its default-route address."""
    found = hostvars.get("ray_node_ip") or ((hostvars.get("ansible_facts") or {}).get("default_ipv4") or {}).get(
        "address") or ""
    return check_ip(found) or found


# The local bridges of container engines and hypervisors (docker0, docker's br-<id> networks, podman's, CNI's,
# libvirt's) and their veth ends: nothing leaves a host from their addresses (engines masquerade), and they come and go
# with the engine, so they are no address of the cluster's members
LOCAL_BRIDGE = re.compile(r"^(docker\d+|br-[0-9a-f]{12}|podman\d+|cni-podman\d+|cni\d+|virbr\d+|veth\w*)$")


def local_bridge_addresses(facts):
    """The addresses on a host's local container and VM bridges (LOCAL_BRIDGE), from its facts."""
    found = set()
    for name in facts.get("interfaces") or []:
        if not LOCAL_BRIDGE.match(str(name)):
            continue
        iface = facts.get(str(name).replace("-", "_")) or {}
        v4 = iface.get("ipv4")
        for entry in ([v4] if isinstance(v4, dict) else list(v4 or [])) + list(iface.get("ipv4_secondaries") or []) \
                + list(iface.get("ipv6") or []):
            if isinstance(entry, dict) and entry.get("address"):
                found.add(str(entry["address"]))
    return found


def member_addresses(ip, facts):
    """Every address a cluster host may connect from: its IPv4 addresses, then its IPv6 ones but link-local (on
    every interface, routed nowhere) and but those of local container and VM bridges (unless it is ip), from its
    facts; ip (its cluster IP) alone when its facts are not known."""
    facts = facts or {}
    local = local_bridge_addresses(facts) - {ip}
    v4 = [str(a) for a in facts.get("all_ipv4_addresses") or [] if str(a) not in local]
    v6 = [str(a) for a in facts.get("all_ipv6_addresses") or []
          if not str(a).lower().startswith("fe80:") and str(a) not in local]
    return (v4 + v6) or ([ip] if ip else [])


def known_host(host, hostvars, addresses):
    """A cluster host's known_hosts entry, from its facts: the names other hosts reach it by (inventory name,
    ansible_host, hostname, FQDN and its member addresses) and its ed25519 host key ("" where its facts hold none)."""
    facts = hostvars.get("ansible_facts") or {}
    names = [host, hostvars.get("ansible_host"), facts.get("hostname"), facts.get("fqdn"), *addresses]
    return {"names": list(dict.fromkeys(str(n) for n in names if n)),
            "key": str(facts.get("ssh_host_key_ed25519_public") or "")}


# A member's exporter settings the monitoring host scrapes it by (where its inventory sets them; else the monitoring
# role's defaults): its Prometheus targets are the cluster plan's, so a member's new port is an input of the stage
# that writes them on the monitoring host
MEMBER_MONITORING_VARS = ("monitoring_enabled", "monitoring_node_exporter", "monitoring_node_exporter_port",
                          "monitoring_dcgm_exporter", "monitoring_dcgm_exporter_port")


def member_entry(host, hv):
    """What the cluster plan takes of one member's variables (hostvars_of's): its exporter settings, IP, addresses,
    known_hosts entry and the nodes Ray must list for it."""
    ip = member_ip(host, hv)
    addresses = member_addresses(ip, hv.get("ansible_facts"))
    names = [str(i.get("name", "")) for i in (hv.get("ray_node_instances") or []) if isinstance(i, dict)]
    return {"monitoring": {var: hv[var] for var in MEMBER_MONITORING_VARS if hv.get(var) is not None},
            "ip": ip, "addresses": addresses, "known_host": known_host(host, hv, addresses),
            "nodes": expected_of(host, ip, names)}


def cluster_members(head, workers, hostvars_of, left_out=(), *, networks=None, gpu_hosts=()):
    """The cluster's members (head first), their IPs, and every node Ray must list alive (name -> inventory name).

    hostvars_of(host) -> that host's inventory variables and facts (ray_node_ip, ray_node_instances, ansible_host,
    ansible_facts, ray_cluster_name, and MEMBER_MONITORING_VARS where set).
    left_out: the hosts a run goes on without (unreachable): members still, with their nodes in expected_nodes (the
    cluster's configuration keeps their place), but not in awaited_nodes (what this run waits to see alive).
    networks: the cluster's networks (ray_membership network), which are then its sources instead of the members'
    addresses, and SSH trust's known_hosts is its certificate authority instead of the members' host keys
    (known_hosts empty), and the monitoring host discovers the exporters from Ray's node table (scrape empty): a
    member that joins or leaves changes no host's firewall, SSH trust, NFS exports or scrape targets.
    gpu_hosts: the hosts of group gpu (the DCGM exporters the monitoring host scrapes with static membership)."""
    members = list(head) + [w for w in workers if w not in head]
    ips, expected, awaited, addresses, known_hosts, monitoring = {}, {}, {}, {}, {}, {}
    for host in members:
        entry = member_entry(host, hostvars_of(host))
        monitoring[host], ips[host] = entry["monitoring"], entry["ip"]
        addresses[host], known_hosts[host] = entry["addresses"], entry["known_host"]
        expected.update(entry["nodes"])
        if host not in left_out:
            awaited.update(entry["nodes"])
    found = [a for host in members for a in addresses[host]]
    # every member's addresses, IPv4 first (the firewall's and SSH trust's sources)
    if networks is not None:
        found = list(networks)
    sources = list(dict.fromkeys([a for a in found if ":" not in a] + [a for a in found if ":" in a]))
    # the head's ray_cluster_name: the name of its settings file and units, which hosts outside the cluster (a submit
    # host) read
    name = str(hostvars_of(members[0]).get("ray_cluster_name") or "") if head else ""
    return {"members": members, "ips": ips, "expected_nodes": expected, "addresses": addresses, "sources": sources,
            "cluster_name": name, "membership": "static" if networks is None else "network",
            "known_hosts": known_hosts if networks is None else {},
            # what the monitoring host scrapes: the members, their IPs, the exporter settings their inventories set and
            # which are GPU hosts (nothing with network membership: rayfleet.targets discovers them)
            "scrape": {"members": members, "ips": ips, "monitoring": monitoring,
                       "gpu_hosts": [m for m in members if m in gpu_hosts]} if networks is None else {},
            "head": members[0] if head else None, "head_ip": ips.get(head[0]) if head else None,
            "awaited_nodes": awaited, "left_out": sorted(h for h in members if h in left_out)}
