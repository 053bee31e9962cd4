# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""The PyTorch plan: the pytorch role's variables checked, and what pip installs into the Ray venv and with which
arguments, on the controller.

Pure Python (the ``rayfleet.cluster.plan`` action calls it); the pytorch role's tasks read the result. Every
problem is collected, each naming the host, the variable and the bad value, and saying what was expected: the action
fails before anything changes.
"""

from __future__ import annotations

import re

from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import (
    PlanError,
    Problems,
    _json,
    boolean,
    is_url,
)

PYTORCH_VARS = ("pytorch_version", "pytorch_index_url", "pytorch_find_links", "pytorch_no_index", "pytorch_venv_dir",
                "pytorch_extra_packages")
# A torch release, optionally with a local build tag (2.13.0, 2.13, 2.13.0+cpu, 2.13.0+cu128)
VERSION = re.compile(r"^[0-9]+[.][0-9]+([.][0-9]+)?([+][A-Za-z0-9.]+)?$")
# A pinned requirement: a name, its extras, then a version comparison
PINNED = re.compile(r"^[A-Za-z0-9_.-]+(\[[A-Za-z0-9_,.-]+\])?\s*(==|>=|<=|~=|!=|<|>)")


def _path(value):
    """True when value is an absolute path without blanks (pip's arguments are split at blanks)."""
    return isinstance(value, str) and value.startswith("/") and not any(c.isspace() for c in value)


def pytorch_plan(host, v):
    """What pip installs into the Ray venv from the pytorch role's variables (v, PYTORCH_VARS), checked; raises
    PlanError naming every problem.

    Returns the requirements (torch pinned to pytorch_version, then pytorch_extra_packages) and pip's extra
    arguments (--find-links and --index-url when set, --no-index with pytorch_no_index; empty when none is)."""
    found = Problems("pytorch", host, v)
    problems, bad = found.problems, found.bad

    version = v.get("pytorch_version")
    if not (isinstance(version, str) and VERSION.match(version)):
        bad("pytorch_version", "a torch release like 2.13.0 (quoted), optionally with a local build tag such as "
            "+cpu")
    index = v.get("pytorch_index_url")
    if index != "" and not is_url(index):
        bad("pytorch_index_url", "empty (PyPI) or an http://, https:// or file:// URL, without blanks, such as "
            "https://download.pytorch.org/whl/cu128")
    links = v.get("pytorch_find_links")
    if links != "" and not (_path(links) or is_url(links)):
        bad("pytorch_find_links", "empty, an absolute path on the nodes or an http://, https:// or file:// URL, "
            "without blanks")
    no_index = boolean(v.get("pytorch_no_index"))
    if no_index is None:
        bad("pytorch_no_index", "true or false")
    elif no_index and links == "":
        problems.append("pytorch on %s: pytorch_no_index is true and pytorch_find_links is empty; expected a wheel "
                        "directory in pytorch_find_links that holds torch and its dependencies (pip asks no index)."
                        % host)
    elif no_index and index:
        problems.append("pytorch on %s: pytorch_no_index is true and pytorch_index_url is %s; expected one of them "
                        "(pip asks no index with pytorch_no_index)." % (host, _json(index)))
    venv = v.get("pytorch_venv_dir")
    if not (isinstance(venv, str) and venv.startswith("/")):
        bad("pytorch_venv_dir", "an absolute path (the Ray venv)")
    extra = v.get("pytorch_extra_packages")
    if not isinstance(extra, (list, tuple)):
        bad("pytorch_extra_packages", "a list of pinned requirements, like torchvision==0.29.1")
    else:
        unpinned = [item for item in extra if not (isinstance(item, str) and PINNED.match(item))]
        if unpinned:
            problems.append("pytorch on %s: pytorch_extra_packages has %s; expected each pinned to match torch, like "
                            "torchvision==0.29.1." % (host, _json(unpinned)))
    if problems:
        raise PlanError(problems)
    args = ((["--no-index"] if no_index else []) + (["--find-links " + links] if links else [])
            + (["--index-url " + index] if index else []))
    return {
        "packages": ["torch==" + version, *extra],
        # the names of pytorch_extra_packages, normalized (PEP 503): what the role records in the venv, so that one
        # taken out of the list is removed from the venv
        "extra_names": sorted({re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", item).group(0)).lower()
                               for item in extra}),
        "pip_args": " ".join(args),
    }
