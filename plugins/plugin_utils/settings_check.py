# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The settings checks of the roles that derive nothing from their variables: common, image_cleanup, preflight and
bake.

Pure Python on the controller (the ``rayfleet.cluster.plan`` action calls it, with the role's name and its
variables); the roles whose plan returns values to read have a plan action of their own (pytorch_plan, apex_plan,
nccl_plan, ...). Every problem is collected, each naming the role, the host, the variable and its value (JSON) and
saying what was expected: the action fails before anything changes.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping

import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    NOFILE_MAX,
    PlanError,
    Problems,
    _json,
    _whole,
    boolean,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.storage_plan import AWS_REGION


def _list(value):
    """value when it is a list (not a string or a mapping), else None."""
    return list(value) if isinstance(value, (list, tuple)) else None


def _number(value):
    """value as a float when it is a number or a number's text (not a boolean), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


# ---- common ----

COMMON_VARS = ("common_sysctl_apply", "common_extra_ca_certificates", "common_nofile_limit", "common_nproc_limit",
               "common_apt_cache_valid_time", "common_user_uid", "common_group_gid", "common_sysctl")
# The largest uid or gid (2^32 - 2: -1 means "no change" to the kernel)
ID_MAX = 4294967294
# A kernel parameter's name as sysctl.d takes it: dotted (or slashed) lowercase words
SYSCTL_NAME = re.compile(r"^[a-z0-9_*-]+([./][a-z0-9_*-]+)+$")


def _ca_name(path):
    """The name ca.yml gives a CA certificate in the system's directory: rayfleet-<its name without .pem/.crt>.crt"""
    return "rayfleet-%s.crt" % re.sub(r"\.(pem|crt)$", "", posixpath.basename(path))


def _check_common_numbers(s):
    """The numbers common writes, against what takes them: limits.d's nofile and nproc (PAM's setrlimit), apt's cache
    age, and the Ray user's uid and gid (not root's 0)."""
    if _whole(s.v.get("common_nofile_limit"), 1) is None or _whole(s.v.get("common_nofile_limit")) > NOFILE_MAX:
        s.bad("common_nofile_limit", "open files, a whole number 1-%d (the kernel's ceiling; limits.d writes it for "
              "common_user)" % NOFILE_MAX)
    if _whole(s.v.get("common_nproc_limit"), 1) is None:
        s.bad("common_nproc_limit", "processes, a whole number >= 1 (limits.d writes it for common_user)")
    if _whole(s.v.get("common_apt_cache_valid_time")) is None:
        s.bad("common_apt_cache_valid_time", "seconds, a whole number >= 0")
    for var, what in (("common_user_uid", "uid"), ("common_group_gid", "gid")):
        value = s.v.get(var)
        if value is not None and (_whole(value, 1) is None or _whole(value) > ID_MAX):
            s.bad(var, "null (the system picks one) or a %s 1-%d (0 is root's)" % (what, ID_MAX))
    sysctl = s.v.get("common_sysctl")
    if not isinstance(sysctl, Mapping):
        s.bad("common_sysctl", "a mapping of kernel parameters (net.core.somaxconn) to values")
        return
    names = [key for key in sysctl if not (isinstance(key, str) and SYSCTL_NAME.match(key))]
    values = [value for value in sysctl.values()
              if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not str(value).strip()
              or any(c in str(value) for c in "\n\r")]
    if names or values:
        s.problem("common_sysctl is %s: %s; expected kernel parameter names (dotted lowercase words, such as "
                  "net.core.somaxconn) mapped to values on one line (numbers or strings)." % (_json(sysctl), "; ".join(
                      part for part in ("the names %s are no kernel parameter names" % _json(names) if names else "",
                                        "the values %s are no sysctl values" % _json(values) if values else "")
                      if part)))


def check_common(s, is_file):
    _check_common_numbers(s)
    value = s.v.get("common_sysctl_apply")
    if value != "auto" and boolean(value) is None:
        s.bad("common_sysctl_apply", "auto (yes except inside containers), true or false")
    certs = _list(s.v.get("common_extra_ca_certificates"))
    if certs is None:
        s.bad("common_extra_ca_certificates", "a list of paths of PEM CA certificates on the controller")
        return
    missing = [path for path in certs if not (isinstance(path, str) and path and is_file(path))]
    if missing:
        s.problem("common_extra_ca_certificates has %s, not a file on the controller; expected the paths of PEM CA "
                  "certificates on the controller." % _json(missing))
    names = {}
    for path in certs:
        if isinstance(path, str) and path not in missing:
            names.setdefault(_ca_name(path), []).append(path)
    for name, paths in sorted(names.items()):
        if len(set(paths)) > 1:
            s.problem("common_extra_ca_certificates has %s, which the hosts would all get as %s (one replacing the "
                      "other); expected certificates with different file names." % (_json(paths), name))


# ---- image_cleanup ----

IMAGE_CLEANUP_VARS = ("image_cleanup_extra_paths", "image_cleanup_max_log_bytes", "image_cleanup_hold_packages",
                      "image_cleanup_disable_auto_upgrades", "image_cleanup_remove_authorized_keys",
                      "image_cleanup_verify")
# The top-level directories a path to remove may be below but never be
TOP_LEVEL_DIRS = ("bin", "boot", "dev", "etc", "lib", "lib64", "opt", "proc", "sbin", "sys", "usr", "var", "home",
                  "root")
# A package glob: a package name's characters and the wildcards * and ? (vars/main.yml turns them into a regex)
PACKAGE_GLOB = re.compile(r"^[A-Za-z0-9*?][A-Za-z0-9.+_*?:-]*$")


def _cleanup_path_ok(path):
    """True when path is absolute and, normalized, below a top-level directory (not /, not /etc, /usr, ...)."""
    if not (isinstance(path, str) and path.startswith("/") and len(path) > 1):
        return False
    normal = posixpath.normpath(path)
    # normpath keeps a leading // (POSIX leaves its meaning open): the path is the same directory for the file module
    normal = "/" + normal.lstrip("/")
    return normal != "/" and normal.strip("/") not in TOP_LEVEL_DIRS


def check_image_cleanup(s):
    paths = _list(s.v.get("image_cleanup_extra_paths"))
    if paths is None:
        s.bad("image_cleanup_extra_paths", "a list of absolute paths below a top-level directory")
    else:
        wrong = [path for path in paths if not _cleanup_path_ok(path)]
        if wrong:
            s.problem("image_cleanup_extra_paths has %s; expected absolute paths below a top-level directory, never "
                      "/ or a whole /etc, /usr, ... (%s)." % (_json(wrong), ", ".join("/" + d for d in TOP_LEVEL_DIRS)))
    if _whole(s.v.get("image_cleanup_max_log_bytes")) is None:
        s.bad("image_cleanup_max_log_bytes", "bytes, a whole number >= 0")
    globs = _list(s.v.get("image_cleanup_hold_packages"))
    if globs is None or not all(isinstance(glob, str) and PACKAGE_GLOB.match(glob) for glob in globs):
        s.bad("image_cleanup_hold_packages", "a list of package names or globs such as nvidia-* (letters, digits, "
              "'.', '+', '_', ':', '-' and the wildcards * and ?)")
    s.boolean("image_cleanup_disable_auto_upgrades", "image_cleanup_remove_authorized_keys", "image_cleanup_verify")


# ---- preflight ----

PREFLIGHT_BOOLEANS = ("preflight_ssh_check", "preflight_storage_check", "preflight_gpus_required",
                      "preflight_collective", "preflight_pairwise", "preflight_pair_concurrent")
PREFLIGHT_SIZES = ("preflight_min_bytes", "preflight_max_bytes", "preflight_pair_bytes")
PREFLIGHT_VARS = ("preflight_backend", *PREFLIGHT_SIZES, "preflight_warmup_iters", "preflight_iters",
                  "preflight_nodes", "preflight_pair_ratio", "preflight_pair_ring_max", "preflight_instance_type",
                  "preflight_min_busbw_gbps",
                  "preflight_expect_network", "preflight_nccl_env", "preflight_timeout", "preflight_allow_missing",
                  "preflight_dcgm_diag_level", "preflight_dcgm_required", "preflight_expect_gpus",
                  *PREFLIGHT_BOOLEANS)
BACKENDS = ("auto", "nccl", "gloo")
# A message size as nccl-tests takes it: bytes, or a number with K, M, G or T (KiB/KB/K alike: powers of 1024)
SIZE = re.compile(r"^([0-9]+)([KMGTkmgt](i?B)?)?$")
SIZE_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}
# The smallest message the all-reduce sends: one float32 element
ELEMENT_BYTES = 4
# The bandwidth check's shortest timeout (seconds)
MIN_TIMEOUT = 30
DCGM_LEVELS = range(5)


def size_text(value):
    """A size as it is written (an int's digits), or None when value is no size (empty counts as one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if value >= 0 else None
    if isinstance(value, str) and (value == "" or SIZE.match(value)):
        return value
    return None


def size_bytes(text):
    """The bytes of a size's text (0 for empty)."""
    match = SIZE.match(text.strip())
    if not match:
        return 0
    return int(match.group(1)) * SIZE_UNITS[(match.group(2) or "")[:1].upper()]


# The preflight role's data file: the bandwidth floor and network of each known instance type
THRESHOLDS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles",
                          "preflight", "files", "busbw_thresholds.yml")


def known_instance_types(path=THRESHOLDS):
    """The instance types the preflight's data file has a floor for, sorted."""
    with open(path, encoding="utf-8") as handle:
        return sorted(yaml.safe_load(handle)["instance_types"])


def _check_instance_type(s, floor):
    """A preflight_instance_type the data file does not know would run the preflight with no bandwidth floor: a typo
    must not switch the floor off. Refused unless preflight_min_busbw_gbps gives the floor itself."""
    kind = s.v.get("preflight_instance_type")
    if kind in ("", None):
        return
    if not isinstance(kind, str):
        s.bad("preflight_instance_type", "empty (read from the head's DMI product name) or an instance type name")
        return
    known = known_instance_types()
    if kind not in known and floor is None:
        s.problem("preflight_instance_type is %s, which the preflight's data file (busbw_thresholds.yml) has no "
                  "bandwidth floor for: the preflight would run with none. Expected one of %s, or the floor for this "
                  "hardware in preflight_min_busbw_gbps (GB/s; 0 for none, knowingly)."
                  % (_json(kind), ", ".join(known)))


def check_preflight(s, inventory_nodes):
    """inventory_nodes: how many hosts ray_head and ray_worker hold together (the all-reduce spans at most these)."""
    v = s.v
    if v.get("preflight_backend") not in BACKENDS:
        s.bad("preflight_backend", "auto (NCCL when Ray reports GPUs, else gloo), nccl or gloo")
    sizes = {}
    for var in PREFLIGHT_SIZES:
        sizes[var] = size_text(v.get(var))
        if sizes[var] is None:
            s.bad(var, "a message size like 8, 64K, 16M or 1G (bytes, or K, M, G, T: powers of 1024), or empty")
        elif sizes[var] and size_bytes(sizes[var]) < ELEMENT_BYTES:
            s.bad(var, "a message size of at least %d bytes (one float32 element), or empty" % ELEMENT_BYTES)
            sizes[var] = None
    for var, minimum in (("preflight_warmup_iters", 0), ("preflight_iters", 1), ("preflight_nodes", 0),
                         ("preflight_pair_ring_max", 3)):
        if _whole(v.get(var), minimum) is None:
            s.bad(var, "a whole number >= %d%s" % (minimum, " (0: every alive node)" if var == "preflight_nodes"
                                                   else ""))
    ratio = _number(v.get("preflight_pair_ratio"))
    if ratio is None or not 0 < ratio <= 1:
        s.bad("preflight_pair_ratio", "a number in (0, 1]: a pair below this share of the best pair is slow")
    floor = v.get("preflight_min_busbw_gbps")
    if floor is not None and (_number(floor) is None or _number(floor) < 0):
        s.bad("preflight_min_busbw_gbps", "null (the floor of preflight_instance_type from the data file) or GB/s "
              ">= 0 (0: no floor)")
    _check_instance_type(s, floor)
    network = v.get("preflight_expect_network")
    if network is not None and _list(network) is None:
        s.bad("preflight_expect_network", "null (the network of preflight_instance_type from the data file) or a "
              "list of NCCL networks ([] for none)")
    if not isinstance(v.get("preflight_nccl_env"), Mapping):
        s.bad("preflight_nccl_env", "a mapping of environment variables for the ranks")
    if _whole(v.get("preflight_timeout"), MIN_TIMEOUT) is None:
        s.bad("preflight_timeout", "whole seconds, at least %d" % MIN_TIMEOUT)
    if _whole(v.get("preflight_allow_missing")) is None:
        s.bad("preflight_allow_missing", "a count of nodes, a whole number >= 0")
    if _whole(v.get("preflight_dcgm_diag_level")) not in DCGM_LEVELS:
        s.bad("preflight_dcgm_diag_level", "0 (off) or a dcgmi diag level 1-4")
    required = v.get("preflight_dcgm_required")
    if required is not None and boolean(required) is None:
        s.bad("preflight_dcgm_required", "null (required at a burn-in level, 2 and up), true or false")
    gpus = v.get("preflight_expect_gpus")
    if gpus is not None and _whole(gpus) is None:
        s.bad("preflight_expect_gpus", "null (any number) or the GPUs each node must have, a whole number >= 0")
    s.boolean(*PREFLIGHT_BOOLEANS)
    low, high = sizes["preflight_min_bytes"], sizes["preflight_max_bytes"]
    if low is not None and high and size_bytes(low) > size_bytes(high):
        s.problem("preflight_min_bytes %s (%d bytes) is larger than preflight_max_bytes %s (%d bytes): the size range "
                  "is empty." % (low, size_bytes(low), high, size_bytes(high)))
    nodes = _whole(v.get("preflight_nodes"))
    if nodes is not None and nodes > inventory_nodes:
        s.problem("preflight_nodes is %d, but the inventory has %d node(s) in ray_head and ray_worker: the all-reduce "
                  "cannot span more nodes than the cluster has." % (nodes, inventory_nodes))


# ---- bake ----

BAKE_YAML_VARS = ("bake_subnet_id", "bake_security_group_id", "bake_key_name", "bake_ssh_private_key",
                  "bake_head_instance_type", "bake_worker_instance_type", "bake_cluster_name")
BAKE_VARS = ("bake_backend", "bake_image_name", "bake_image_tag", "bake_tags", "bake_aws_region",
             "bake_aws_instance_id", "bake_aws_terminate_builder", "bake_aws_wait_timeout", "bake_cluster_yaml",
             "bake_min_workers", "bake_max_workers", "bake_podman_remove_builder", *BAKE_YAML_VARS)
BAKE_BACKENDS = ("aws", "podman")
IMAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,100}$")
IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


def check_bake(s):
    v = s.v
    backend = v.get("bake_backend")
    if backend not in BAKE_BACKENDS:
        s.bad("bake_backend", "aws (an AMI) or podman (an image of a sandbox builder)")
    if not (isinstance(v.get("bake_image_name"), str) and IMAGE_NAME.match(v["bake_image_name"])):
        s.bad("bake_image_name", "lower-case letters, digits, '.', '_' and '-', at most 101, starting with a letter "
              "or digit")
    tag = v.get("bake_image_tag")
    if isinstance(tag, int) and not isinstance(tag, bool):
        tag = str(tag)
    if not (tag == "" or (isinstance(tag, str) and IMAGE_TAG.match(tag))):
        s.bad("bake_image_tag", "empty (a UTC timestamp), or a tag: letters, digits, '_', '.' and '-', at most 128, "
              "not starting with '.' or '-'")
    if not isinstance(v.get("bake_tags"), Mapping):
        s.bad("bake_tags", "a mapping of extra tags (labels) for the image")
    if backend == "podman":
        s.boolean("bake_podman_remove_builder")
    if backend != "aws":
        return
    if not (isinstance(v.get("bake_aws_region"), str) and AWS_REGION.match(v["bake_aws_region"])):
        s.bad("bake_aws_region", "the builder's AWS region, such as us-east-1 (set it, or AWS_REGION on the "
              "controller)")
    if not (isinstance(v.get("bake_aws_instance_id"), str) and INSTANCE_ID.match(v["bake_aws_instance_id"])):
        s.bad("bake_aws_instance_id", "the builder's instance id, i- and 8 to 17 hex digits (inventories/aws sets it "
              "from rayfleet_instance_id)")
    s.boolean("bake_aws_terminate_builder")
    if _whole(v.get("bake_aws_wait_timeout"), 1) is None:
        s.bad("bake_aws_wait_timeout", "whole seconds, at least 1, to wait for the AMI")
    cluster_yaml = boolean(v.get("bake_cluster_yaml"))
    if cluster_yaml is None:
        s.bad("bake_cluster_yaml", "true or false")
    if not cluster_yaml:
        return
    for var in BAKE_YAML_VARS:
        if v.get(var) in ("", None):
            s.problem("%s is %s; the cluster YAML needs it: expected a value, or bake_cluster_yaml=false."
                      % (var, _json(v.get(var))))
    low, high = _whole(v.get("bake_min_workers")), _whole(v.get("bake_max_workers"))
    for var, number in (("bake_min_workers", low), ("bake_max_workers", high)):
        if number is None:
            s.bad(var, "a whole number of workers >= 0, for the cluster YAML")
    if low is not None and high is not None and low > high:
        s.problem("bake_min_workers %d is more than bake_max_workers %d; expected min <= max, for the cluster YAML."
                  % (low, high))


# ---- dispatch ----

ROLE_VARS = {
    "common": COMMON_VARS,
    "image_cleanup": IMAGE_CLEANUP_VARS,
    "preflight": PREFLIGHT_VARS,
    "bake": BAKE_VARS,
}


def settings_check(role, host, v, *, inventory_nodes=0, is_file=os.path.isfile):
    """Check one role's variables (v: every name of ROLE_VARS[role]) on host; raises PlanError naming every problem.

    inventory_nodes: the hosts of ray_head and ray_worker together (preflight_nodes may not ask for more).
    is_file(path): whether path is a file on the controller (common_extra_ca_certificates).
    Returns what was checked: the role and its variables' names."""
    if role not in ROLE_VARS:
        raise PlanError(["settings_check on %s: role is %s; expected one of %s." % (host, _json(role),
                                                                                    ", ".join(ROLE_VARS))])
    missing = [name for name in ROLE_VARS[role] if name not in v]
    unknown = sorted(set(v) - set(ROLE_VARS[role]), key=str)
    if missing or unknown:
        raise PlanError(["settings_check on %s: the %s role's task gives %s; expected exactly the role's variables "
                         "%s." % (host, role, _json(sorted(v, key=str)), _json(list(ROLE_VARS[role])))])
    s = Problems(role, host, v)
    if role == "common":
        check_common(s, is_file)
    elif role == "image_cleanup":
        check_image_cleanup(s)
    elif role == "preflight":
        check_preflight(s, inventory_nodes)
    else:
        check_bake(s)
    if s.problems:
        raise PlanError(s.problems)
    return {"role": role, "checked": list(ROLE_VARS[role])}
