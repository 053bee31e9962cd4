#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_work
short_description: Read the work a Ray restart would end, and stop before a change that would end it
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
description:
  - Reads from the cluster's GCS (Ray's job, actor and resource tables) the running jobs, the live actors and the
    resources tasks hold - of the whole cluster, or of one node (O(node_ip)). Ray's own bookkeeping (the dashboard's
    job, the Jobs API's supervisors) and rayfleet's own checks are not counted.
  - With O(running_work=refuse) it fails when there is any, naming it, so a change that restarts Ray (a new Ray in
    the node's venv) stops before anything changes. The M(rayfleet.cluster.ray_node) module guards its own restarts
    the same way.
  - A GCS that does not answer has no work to report; a warning says so.
options:
  gcs_address:
    description: The cluster's GCS, C(host:port). One of O(gcs_address) and O(settings) is required.
    type: str
  settings:
    description:
      - Instead of O(gcs_address), the settings files of this host's Ray nodes (the M(rayfleet.cluster.ray_node)
        module's, shell patterns such as C(/etc/rayfleet/ray*.json)), for the work a reboot of this host would end, for
        a head node the cluster's, for a worker its own node's. Files that are not a node's settings are passed over.
    type: list
    elements: str
  node_ip:
    description: Only the work of the node with this IP (a worker's restart). Omit for the whole cluster's.
    type: str
  node_name:
    description: Find the node by its Ray node name instead (a host's node instances share its IP).
    type: str
  auth_token_path:
    description: File holding the cluster's Ray token, with token authentication.
    type: path
  running_work:
    description:
      - V(report) only returns the work. V(refuse) fails when there is any.
      - V(wait) waits up to O(timeout) seconds for it to end, then fails.
    type: str
    default: report
    choices: [report, refuse, wait]
  timeout:
    description: Seconds O(running_work=wait) waits.
    type: int
    default: 600
  reason:
    description: What would end the work (for the failure's message), e.g. the Ray upgrade.
    type: str
    default: a restart of Ray
  hint:
    description: What the user can do instead, the failure message's last sentence.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads only; in check mode it warns instead of failing or waiting.
  diff_mode:
    support: none
    description: It changes nothing, so it has no diff.
seealso:
  - module: rayfleet.cluster.ray_node
"""

EXAMPLES = r"""
- name: List what runs on the cluster before maintenance
  rayfleet.cluster.ray_work:
    gcs_address: 10.0.0.10:6379
    auth_token_path: /etc/rayfleet/auth-token
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python
  register: work

- name: Stop before a reboot would end the work of this host's Ray nodes
  rayfleet.cluster.ray_work:
    settings: [/etc/rayfleet/ray*.json]
    running_work: refuse
    reason: the reboot
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python

- name: Stop unless this worker is idle
  rayfleet.cluster.ray_work:
    gcs_address: 10.0.0.10:6379
    node_ip: 10.0.0.11
    running_work: refuse
    reason: the kernel upgrade
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python
"""

RETURN = r"""
idle:
  description: Whether nothing runs in the scope.
  returned: always
  type: bool
jobs:
  description: The running jobs (job id, submission id, entrypoint, the driver's IP).
  returned: always
  type: list
  elements: dict
actors:
  description: The live actors (actor id, name, class, job id, node IP).
  returned: always
  type: list
  elements: dict
held:
  description: CPU and GPU held by tasks and actors on the node (O(node_ip) only).
  returned: always
  type: dict
summary:
  description: The work in words.
  returned: always
  type: str
  sample: "job train-42 ('python train.py' on 10.0.0.10); actor Trainer of job 02000000 on 10.0.0.11"
"""

import glob

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.rayfleet.cluster.plugins.module_utils.rayfleet_common import require_rayfleet

try:
    from rayfleet.errors import RayfleetError
    from rayfleet.work import Work, merged, read_work, settings_work, wait_idle
except ImportError:
    pass  # reported by require_rayfleet()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gcs_address=dict(type="str"),
            settings=dict(type="list", elements="str"),
            node_ip=dict(type="str"),
            node_name=dict(type="str"),
            auth_token_path=dict(type="path", no_log=False),
            running_work=dict(type="str", default="report", choices=["report", "refuse", "wait"]),
            timeout=dict(type="int", default=600),
            reason=dict(type="str", default="a restart of Ray"),
            hint=dict(type="str", default=""),
        ),
        required_one_of=[("gcs_address", "settings")],
        mutually_exclusive=[("gcs_address", "settings")],
        supports_check_mode=True,
    )
    require_rayfleet(module)
    p = module.params

    def read():
        try:
            if p["settings"]:
                return merged(settings_work(path for pattern in p["settings"] for path in glob.glob(pattern)))
            return read_work(p["gcs_address"], p["node_ip"] or "", p["node_name"], timeout=10,
                             auth_token_path=p["auth_token_path"])
        except RayfleetError as exc:
            module.warn("could not read the running work: %s" % to_native(exc))
            return Work(node_ip=p["node_ip"] or "")

    work = read()
    if work and p["running_work"] == "wait" and not module.check_mode:
        work = wait_idle(read, p["timeout"])
    result = dict(changed=False, **work.to_dict())
    if work and p["running_work"] != "report":
        scope = ("this host's Ray nodes" if p["settings"] else ("node %s" % p["node_ip"]) if p["node_ip"]
                 else "the cluster")
        if module.check_mode:
            module.warn("%s would end running work on %s: %s" % (p["reason"], scope, work.describe()))
        else:
            module.fail_json(
                msg="not going on with %s: it would end running work on %s: %s.%s Nothing was changed.%s" % (
                    p["reason"], scope, work.describe(),
                    (" It was still running after %d s." % p["timeout"]) if p["running_work"] == "wait" else "",
                    (" " + p["hint"]) if p["hint"] else ""),
                **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
