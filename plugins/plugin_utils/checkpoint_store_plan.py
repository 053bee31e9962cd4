# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The checkpoint store plan: the checkpoint_store role's variables checked, and the store's URI, S3 endpoint and
shared-directory marker computed, on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the role's tasks and templates read the
result. Every problem is collected, each naming the host, the variable and the bad value (never a secret key's), and
saying what was expected: the action fails before anything changes.

The URI is what Ray Train's ``RunConfig(storage_path=...)`` reads from ``RAYFLEET_CHECKPOINT_URI``: the shared
directory itself, or ``s3://<bucket>/<prefix>`` with, for an S3-compatible endpoint, the ``endpoint_override``,
``scheme`` and ``region`` query parameters pyarrow takes. With backend ``shared`` the first head leaves a marker line
in the directory that every other node must read back: a stable line naming the cluster, the head and the directory.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from urllib.parse import urlsplit

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    S3_BUCKET_RULES,
    PlanError,
    Problems,
    _abs_path,
    _json,
    account,
    boolean,
    is_url,
    s3_bucket_problem,
)

BACKENDS = ("none", "s3", "shared")
# An S3 key prefix: characters S3 calls safe for object keys, the first not a slash
PREFIX = re.compile(r"^[A-Za-z0-9!_.*()-][A-Za-z0-9!_.*()/-]*$")
# An AWS region (us-east-1, eu-central-2, us-gov-west-1)
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")
# Directories of the system and of the collection itself that never hold the checkpoints (nor anything below them)
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt/rayfleet", "/proc",
               "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var/lib/rayfleet")
MARKER_NAME = ".rayfleet-shared-check"
DEFAULT_USER = "rayfleet"
BOOLEAN_VARS = ("checkpoint_store_create_bucket", "checkpoint_store_versioning", "checkpoint_store_install_train")
# The variables the plan reads: the role's, the ray role's cluster name and service account, and shared_storage's
# mounts (the checkpoint directory is not one of their mount points)
CHECKPOINT_STORE_VARS = ("checkpoint_store_backend", "checkpoint_store_path", "checkpoint_store_bucket",
                         "checkpoint_store_prefix", "checkpoint_store_endpoint_url", "checkpoint_store_region",
                         *BOOLEAN_VARS, "checkpoint_store_access_key_id", "checkpoint_store_secret_access_key",
                         "checkpoint_store_find_links", "checkpoint_store_no_index", "checkpoint_store_venv_dir",
                         "ray_cluster_name",
                         "ray_service_user", "ray_service_group", "shared_storage_mounts")
PATH_EXPECTED = (
    "an absolute, normalized path (no trailing /, no . or .. parts, no line breaks) of a directory on a filesystem "
    "every Ray node mounts at the same path, such as /mnt/shared/checkpoints: not /, not a mount point of "
    "shared_storage_mounts itself (a directory inside it), and not in %s" % ", ".join(SYSTEM_DIRS))


def endpoint_parts(url):
    """(host[:port], scheme) of an S3-compatible endpoint URL such as https://s3.storage.internal:7480; None when url is
    not one (http or https, a host, a port 1-65535 if any, nothing but a slash after them, no user)."""
    if not is_url(url, ("http", "https")):
        return None
    parts = urlsplit(url)
    try:
        port = parts.port  # raises on a port outside 0-65535 or not a number
    except ValueError:
        return None
    if port == 0:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in url or "#" in url or "@" in parts.netloc:
        return None
    return parts.netloc, parts.scheme


def directory_problem(path, mount_points):
    """Why path cannot be the shared checkpoint directory (a few words), or None."""
    if not isinstance(path, str) or not path.startswith("/"):
        return "not an absolute path"
    if path == "/" or path.startswith("//"):
        return "the root directory" if path.strip("/") == "" else "not normalized: it starts with //"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "a line break or another control character"
    if path != posixpath.normpath(path):
        return "not normalized: %s" % posixpath.normpath(path)
    if path in mount_points:
        return "a mount point of shared_storage_mounts"
    inside = [d for d in SYSTEM_DIRS if path == d or path.startswith(d + "/")]
    if inside:
        return "in %s" % inside[0]
    return None


def mount_points(mounts):
    """The mount points of shared_storage_mounts (each entry's path, normalized), whatever else is wrong with it."""
    if not isinstance(mounts, (list, tuple)):
        return []
    return [posixpath.normpath(m["path"]) for m in mounts
            if isinstance(m, dict) and isinstance(m.get("path"), str) and m["path"].startswith("/")]


def marker(cluster_name, head, path):
    """The line the head leaves in the shared directory: the cluster, the head, and a token of the three."""
    name = "" if cluster_name is None else str(cluster_name)
    token = hashlib.sha256("|".join([name, str(head), str(path)]).encode("utf-8")).hexdigest()
    return "rayfleet shared-filesystem check: cluster %s, written by the head %s, token %s" % (
        name or "default", head, token)


def _check_keys(v, bad, problem):
    key_id, secret = v.get("checkpoint_store_access_key_id"), v.get("checkpoint_store_secret_access_key")
    id_ok = isinstance(key_id, str) and not any(c.isspace() for c in key_id)
    if not id_ok:
        bad("checkpoint_store_access_key_id", "an access key id without blanks, or empty on AWS with an instance "
            "profile")
    # the secret is never shown
    if not isinstance(secret, str) or any(c.isspace() for c in secret):
        problem("checkpoint_store_secret_access_key is %s (its value is not shown); expected the secret key as a "
                "string without blanks, or empty." % ("not a string" if not isinstance(secret, str)
                                                      else "a string with blanks or line breaks"))
    elif id_ok and bool(key_id) != bool(secret):
        problem("checkpoint_store_access_key_id is %s and checkpoint_store_secret_access_key is %s; expected both set "
                "or both empty (empty: the instance profile's or the AWS chain's credentials)."
                % (_json(key_id), "set (its value is not shown)" if secret else "empty"))


def _check_settings(v, bad, problem):
    """The problems of every variable but the bucket and the shared path (those are the backend's)."""
    if v.get("checkpoint_store_backend") not in BACKENDS:
        bad("checkpoint_store_backend", "none, s3 or shared")
    prefix = v.get("checkpoint_store_prefix")
    if not (isinstance(prefix, str) and PREFIX.match(prefix)):
        bad("checkpoint_store_prefix", "an S3 key prefix: letters, digits and !_.*()-/, not starting with /")
    endpoint = v.get("checkpoint_store_endpoint_url")
    if endpoint != "" and endpoint_parts(endpoint) is None:
        bad("checkpoint_store_endpoint_url", "empty for AWS S3, or an S3-compatible endpoint as http(s)://host[:port] "
            "(nothing after the port but a slash)")
    region = v.get("checkpoint_store_region")
    if not (isinstance(region, str) and REGION.match(region)):
        bad("checkpoint_store_region", "a region like us-east-1")
    for var in BOOLEAN_VARS:
        if boolean(v.get(var)) is None:
            bad(var, "true or false")
    _check_keys(v, bad, problem)
    links = v.get("checkpoint_store_find_links")
    if links not in ("", None) and not (_abs_path(links) or is_url(links)):
        bad("checkpoint_store_find_links", "empty, an absolute path on the nodes or an http://, https:// or file:// "
            "URL, without blanks")
    no_index = boolean(v.get("checkpoint_store_no_index", False))
    if no_index is None:
        bad("checkpoint_store_no_index", "true or false")
    elif (no_index and links in ("", None)
          and v.get("checkpoint_store_backend") != "none" and boolean(v.get("checkpoint_store_install_train"))):
        problem("checkpoint_store_no_index is true and checkpoint_store_find_links is empty; expected a wheel "
                "directory in checkpoint_store_find_links that holds ray[train] at the installed Ray's version and "
                "its dependencies (pip asks no index).")
    if not _abs_path(v.get("checkpoint_store_venv_dir")):
        bad("checkpoint_store_venv_dir", "an absolute path without blanks (the Ray venv)")
    for var in ("ray_service_user", "ray_service_group"):
        if var in v and not isinstance(account(v[var]), str):
            bad(var, "the Ray service account's name (the owner of the shared checkpoint directory)")


def checkpoint_store_plan(host, v, heads=()):
    """The checkpoint store of host from the checkpoint_store role's variables (v, CHECKPOINT_STORE_VARS), checked;
    raises PlanError naming every problem.

    heads: the hosts of group ray_head (the first one leaves the shared directory's marker).
    Returns the backend, the URI Ray Train reads (empty with backend none), the S3 endpoint's host[:port] and scheme,
    the owner and group of the shared directory, the head, and the marker's path and line (backend shared, else
    None)."""

    found = Problems("checkpoint_store", host, v)
    problems, problem, bad = found.problems, found.problem, found.bad

    _check_settings(v, bad, problem)
    backend = v.get("checkpoint_store_backend")
    bucket, path = v.get("checkpoint_store_bucket"), v.get("checkpoint_store_path")
    if backend == "s3":
        why = s3_bucket_problem(bucket)
        if why:
            problem("checkpoint_store_bucket is %s (%s); expected a bucket name S3 accepts: %s."
                    % (_json(bucket), why, S3_BUCKET_RULES))
    head = heads[0] if heads else None
    if backend == "shared":
        why = directory_problem(path, mount_points(v.get("shared_storage_mounts")))
        if why:
            problem("checkpoint_store_path is %s with checkpoint_store_backend shared (%s); expected %s."
                    % (_json(path), why, PATH_EXPECTED))
        if head is None:
            problem("checkpoint_store_backend is \"shared\", but group ray_head has no host; expected the cluster's "
                    "head in ray_head (it leaves the marker every other node reads back).")
    if problems:
        raise PlanError(problems)

    endpoint, scheme = endpoint_parts(v["checkpoint_store_endpoint_url"]) or ("", "https")
    if backend == "shared":
        uri = path
    elif backend == "s3":
        uri = "s3://%s/%s" % (bucket, v["checkpoint_store_prefix"])
        if endpoint:
            uri += "?endpoint_override=%s&scheme=%s&region=%s" % (endpoint, scheme, v["checkpoint_store_region"])
    else:
        uri = ""
    return {
        "backend": backend,
        "uri": uri,
        "endpoint": endpoint,
        "scheme": scheme,
        "user": v.get("ray_service_user") or DEFAULT_USER,
        "group": v.get("ray_service_group") or DEFAULT_USER,
        "head": head,
        "marker_path": "%s/%s" % (path, MARKER_NAME) if backend == "shared" else None,
        "marker": marker(v.get("ray_cluster_name"), head, path) if backend == "shared" else None,
        "create_bucket": boolean(v["checkpoint_store_create_bucket"]),
        "versioning": boolean(v["checkpoint_store_versioning"]),
        "pip_args": pip_args(v),
    }


def pip_args(v):
    """pip's arguments for Ray Train's dependencies: --no-index and --find-links where set ("" for none)."""
    links = v.get("checkpoint_store_find_links")
    return " ".join((["--no-index"] if boolean(v.get("checkpoint_store_no_index", False)) else [])
                    + (["--find-links " + links] if links else []))
