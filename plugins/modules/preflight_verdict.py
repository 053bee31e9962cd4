#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight_verdict
short_description: Write the preflight's verdict on the head, stamped with the head's clock
version_added: "0.1.0"
description:
  - Builds the verdict of a preflight (C(rayfleet.gate.build_verdict)) from the node checks' problems, the alive
    Ray node ids and the result of M(rayfleet.cluster.collective_check), and writes it as JSON to O(path) (mode
    0644, the directory created if missing).
  - The verdict's C(time) and C(epoch) are this host's clock at the moment it is written. C(python -m rayfleet.gate),
    which C(playbooks/submit.yml) runs on the same head, compares them with the same clock, so the verdict's age
    does not depend on the controller's clock.
  - The verdict records what the bandwidth check measured - C(bandwidth_measured), C(backend), C(ranks),
    C(peak_busbw_gbps), C(min_busbw_gbps), and in C(bandwidth_note) why nothing was measured (the check did not
    run, could not run, or ran on one rank). The gate refuses a verdict that measured no bandwidth.
  - Must run with the Ray venv's interpreter on the head (it holds the rayfleet library that the gate reads the
    verdict with).
author:
  - rayfleet authors (@rayfleet)
options:
  path:
    description: The verdict file on this host.
    type: path
    required: true
  problems:
    description: What the node checks found (GPUs, SSH, shared storage), each naming its node.
    type: list
    elements: str
    default: []
  node_ids:
    description: The Ray node ids alive when the preflight checked the cluster (the gate compares them with the
      nodes alive at submission).
    type: list
    elements: str
    default: []
  collective:
    description:
      - The registered result of M(rayfleet.cluster.collective_check); empty, or a skipped task's result, when the
        bandwidth check did not run. Its problems, or why it could not run, join O(problems).
    type: dict
    default: {}
  not_run_reason:
    description: Why the bandwidth check did not run, recorded as C(bandwidth_note) when O(collective) is empty or
      skipped (e.g. C(preflight_collective is false)).
    type: str
    default: ""
  missing:
    description:
      - The inventory's Ray nodes the preflight went on without (not alive; C(preflight_allow_missing)), by name,
        recorded as C(missing_nodes). The gate refuses such a verdict unless C(submit_allow_missing) allows as many.
    type: list
    elements: str
    default: []
  admitted:
    description: The alive Ray nodes that passed their admission checks before their Ray started
      (RV(rayfleet.cluster.ray_cluster_info#module:admitted_nodes)), recorded as C(admitted_nodes).
    type: list
    elements: str
    default: []
  unadmitted:
    description: The alive Ray nodes started without the admission checks, recorded as C(unadmitted_nodes).
    type: list
    elements: str
    default: []
  joined:
    description: The alive Ray nodes from outside the inventory (RV(rayfleet.cluster.ray_cluster_info#module:joined)),
      recorded as C(joined_nodes).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Builds and returns the verdict, writes nothing.
  diff_mode:
    support: full
    description: The verdict file's JSON before and after.
seealso:
  - module: rayfleet.cluster.collective_check
"""

EXAMPLES = r"""
- name: Record the verdict on the head
  rayfleet.cluster.preflight_verdict:
    path: /etc/rayfleet/preflight.json
    problems: "{{ node_problems }}"
    node_ids: "{{ ray_cluster_state.nodes | selectattr('state', 'eq', 'ALIVE') | map(attribute='node_id') | list }}"
    collective: "{{ collective_result }}"
    not_run_reason: preflight_collective is false
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python
  become: true
"""

RETURN = r"""
verdict:
  description: The verdict written (or, in check mode, that would be written).
  returned: always
  type: dict
  contains:
    ok:
      description: Whether the preflight passed (no problem found, and the bandwidth check passed if it ran).
      type: bool
    time:
      description: When the verdict was written, UTC, on this host's clock.
      type: str
      sample: "2026-11-25T08:00:00Z"
    epoch:
      description: The same instant in seconds since the epoch.
      type: int
    problems:
      description: Every problem found, each naming its node, pair or setting.
      type: list
      elements: str
    node_ids:
      description: The alive Ray node ids that were checked, sorted.
      type: list
      elements: str
    missing_nodes:
      description: The inventory's Ray nodes the preflight went on without, sorted.
      type: list
      elements: str
    admitted_nodes:
      description: The alive Ray nodes proved at admission (their admission checks passed before their Ray started),
        sorted.
      type: list
      elements: str
    unadmitted_nodes:
      description: The alive Ray nodes started without the admission checks, sorted.
      type: list
      elements: str
    joined_nodes:
      description: The alive Ray nodes from outside the inventory (the autoscaler's, spot replacements), sorted.
      type: list
      elements: str
    bandwidth_measured:
      description: Whether the all-reduce bandwidth was measured across two ranks or more.
      type: bool
    backend:
      description: C(nccl) or C(gloo); null when the bandwidth check did not run.
      type: str
    ranks:
      description: The all-reduce's ranks; null when the bandwidth check did not run.
      type: int
    peak_busbw_gbps:
      description: The peak bus bandwidth (GB/s); null when not measured.
      type: float
    min_busbw_gbps:
      description: The floor the peak was checked against; null when none.
      type: float
    bandwidth_note:
      description: Why the bandwidth was not measured (empty when it was).
      type: str
path:
  description: The verdict file.
  returned: always
  type: str
"""

import json
import os
import sys
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.rayfleet.cluster.plugins.module_utils.rayfleet_common import (
    require_rayfleet,
)

try:
    from rayfleet.gate import build_verdict
except ImportError:
    build_verdict = None  # reported by require_rayfleet()


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            problems=dict(type="list", elements="str", default=[]),
            node_ids=dict(type="list", elements="str", default=[]),
            collective=dict(type="dict", default={}),
            not_run_reason=dict(type="str", default=""),
            missing=dict(type="list", elements="str", default=[]),
            admitted=dict(type="list", elements="str", default=[]),
            unadmitted=dict(type="list", elements="str", default=[]),
            joined=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )


def read_text(path):
    try:
        with open(path) as fh:
            return fh.read()
    except (FileNotFoundError, NotADirectoryError):
        return ""


def write_text(module, path, content):
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix=".preflight-", dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(content)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main():
    module = build_module()
    require_rayfleet(module)
    if build_verdict is None:
        module.fail_json(msg="the rayfleet library of %s has no rayfleet.gate.build_verdict: it is older than this "
                         "collection; run the ray stage (site.yml --tags ray) to update the Ray venv"
                         % sys.executable)
    p = module.params
    verdict = build_verdict(p["problems"], p["node_ids"], p["collective"], time.time(), p["not_run_reason"],
                            missing=p["missing"], admitted=p["admitted"], unadmitted=p["unadmitted"],
                            joined=p["joined"])
    content = json.dumps(verdict, indent=4, sort_keys=True) + "\n"
    before = read_text(p["path"])
    result = dict(changed=content != before, verdict=verdict, path=p["path"])
    if module._diff:
        result["diff"] = dict(before=before, after=content, before_header=p["path"], after_header=p["path"])
    if result["changed"] and not module.check_mode:
        try:
            write_text(module, p["path"], content)
        except OSError as exc:
            module.fail_json(msg="cannot write the preflight verdict to %s on this host: %s (expected a writable "
                             "path; run the task as root)" % (p["path"], to_native(exc)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
