#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: drift_check
short_description: Compare a host with what each rayfleet stage last applied there, in one round trip
version_added: "0.1.0"
description:
  - Reads every stage record on the host (written by M(rayfleet.cluster.stage_record) when a stage finished there),
    captures the current state of every item the records name (files, units, packages, pip packages, mounts, users,
    groups, kernel modules, nftables tables) in a few commands for all of them, and compares.
  - For each stage in O(stages) it returns whether the host has a record, the inputs digest the record holds, and
    which items drifted, each named with what changed.
  - With O(gather_subset), it gathers the host's facts in the same round trip, as M(ansible.builtin.setup) does,
    so a converge's first contact with a host costs one module call.
  - Changes nothing. C(site.yml) runs it first. The stages' inputs need the cluster's plan, which needs the facts,
    so M(rayfleet.cluster.stage_gate) compares each record's RV(stages.inputs) with the inputs digest now on the
    controller afterwards. Each stage then runs only where something drifted or an input changed.
author:
  - rayfleet authors (@rayfleet)
options:
  stages:
    description:
      - The stages to compare, by name.
    type: list
    elements: str
    required: true
  gather_subset:
    description:
      - The facts to gather in this round trip, as M(ansible.builtin.setup)'s
        O(ansible.builtin.setup#module:gather_subset) takes them (C([min, network, virtual])). Empty, none are
        gathered.
    type: list
    elements: str
    default: []
  views:
    description:
      - "What stages read of the records of their upstream stages, C(<stage>:<kind>[,<kind>]) (C(ray:pip), the
        packages of the Ray venv); RV(records) holds each one's digest too."
    type: list
    elements: str
    default: []
  lock:
    description:
      - The cluster's converge lock (M(rayfleet.cluster.converge_lock)), taken in this round trip on the head, so a
        converge's first contact with the head costs one module call. C(site.yml) sets it; on every other host, and
        where O(lock.take) is false, no lock is taken.
      - When another run holds the lock, the action waits for it or takes it over as M(rayfleet.cluster.converge_lock)
        does, then compares the head again.
    type: dict
    suboptions:
      take:
        description: Take the converge lock (on the head only).
        type: bool
        default: false
      wait:
        description: Seconds to wait for a lock another run holds (C(rayfleet_lock_wait)).
        type: int
        default: 0
      stale_after:
        description:
          - Seconds after which the lock of a run on another controller is taken over (C(rayfleet_lock_stale_after)).
        type: int
        default: 7200
      break_lock:
        description: Take the lock over whoever holds it (C(rayfleet_lock_break)).
        type: bool
        default: false
  lock_owner:
    description: Set by the action, not by the task - this run, taking the converge lock on the head.
    type: dict
  lock_path:
    description: The converge lock's file on the head (O(rayfleet.cluster.converge_lock#module:path)).
    type: path
    default: /var/lib/rayfleet/converge.lock
extends_documentation_fragment:
  - rayfleet.cluster.stage_records
attributes:
  check_mode:
    support: full
    description: Changes nothing; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""

EXAMPLES = r"""
- name: Compare the host with what each stage last applied
  rayfleet.cluster.drift_check:
    stages: [common, ray]
  register: drift
"""

RETURN = r"""
stages:
  description: Per stage, what the comparison found.
  returned: always
  type: dict
  contains:
    recorded:
      description: Whether the host has a record of the stage.
      type: bool
    inputs:
      description: The inputs digest the record holds (null without a record).
      type: str
    drifted:
      description: The items whose state differs from the record, each with what changed.
      type: list
      elements: str
    drifted_items:
      description: The keys of the items that drifted (C(file:/etc/x), C(unit:x.service), C(nft_table:inet x), ...).
      type: list
      elements: str
    upstream:
      description: The digests of the upstream stages' records when this stage recorded.
      type: dict
    digest:
      description: The digest of this stage's record (null without a record).
      type: str
    from_image:
      description:
        - Whether the record compared is the baked image's (O(image_directory)) - the cluster has no record of the
          stage on the host yet.
      type: bool
  sample:
    ray:
      recorded: true
      inputs: "77c0..."
      drifted: ["file:/etc/rayfleet/ray-worker.json (sha256 3f2a... -> 9c1e...)"]
      drifted_items: ["file:/etc/rayfleet/ray-worker.json"]
      upstream: {nccl: "5b0c..."}
      digest: "a41f..."
      from_image: false
records:
  description: Stage name to the digest of its record's items' states on the host, for every record there, and each
    of O(views) to its digest of its stage's record.
  returned: always
  type: dict
packages:
  description:
    - The names of the packages installed on the host (fully installed ones with dpkg; rpm), sorted.
    - A stage's package task is skipped where every package it installs is among them, so apt or dnf is not asked
      again about packages already there
      (M(rayfleet.cluster.stage_gate) passes them on as RV(rayfleet.cluster.stage_gate#module:installed_packages)).
  returned: always
  type: list
  elements: str
  sample: [curl, nftables, openssh-server]
items:
  description: How many items the records name.
  returned: always
  type: int
ansible_facts:
  description: The host's facts, as M(ansible.builtin.setup) returns them, with O(gather_subset).
  returned: when O(gather_subset) is not empty
  type: dict
lock:
  description:
    - What taking the converge lock found or did, as M(rayfleet.cluster.converge_lock) returns it
      (RV(rayfleet.cluster.converge_lock#module:lock), C(owner), C(waited)).
  returned: on the head, when O(lock.take) is true
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts import ansible_collector, default_collectors
from ansible.module_utils.facts.collector import CollectorNotFoundError, CycleFoundInFactDeps, UnresolvedFactDep
from ansible.module_utils.facts.namespace import PrefixFactNamespace
from ansible_collections.rayfleet.cluster.plugins.module_utils.converge_lock import LOCK_PATH, take_on_host
from ansible_collections.rayfleet.cluster.plugins.module_utils.stage_state import (
    IMAGE_RECORD_DIR,
    capture,
    check_stage,
    effective_record,
    installed_packages,
    record_digest,
    upstream_digest,
    upstream_spec,
)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            stages=dict(type="list", elements="str", required=True),
            directory=dict(type="path", default="/var/lib/rayfleet/stages"),
            image_directory=dict(type="path", default=IMAGE_RECORD_DIR),
            views=dict(type="list", elements="str", default=[]),
            gather_subset=dict(type="list", elements="str", default=[]),
            lock=dict(type="dict", options=dict(
                take=dict(type="bool", default=False),
                wait=dict(type="int", default=0),
                stale_after=dict(type="int", default=7200),
                break_lock=dict(type="bool", default=False),
            )),
            lock_owner=dict(type="dict"),
            lock_path=dict(type="path", default=LOCK_PATH),
        ),
        supports_check_mode=True,
    )


# what ansible.builtin.setup gathers whatever the subset names
MINIMAL_SUBSET = frozenset(("apparmor", "caps", "cmdline", "date_time", "distribution", "dns", "env", "fips", "local",
                            "lsb", "pkg_mgr", "platform", "python", "selinux", "service_mgr", "ssh_pub_keys", "user"))


def gather_facts(module, subset):
    """The host's facts for subset, collected as ansible.builtin.setup collects them."""
    try:
        collector = ansible_collector.get_ansible_collector(
            all_collector_classes=default_collectors.collectors,
            namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
            filter_spec=[], gather_subset=subset, gather_timeout=10, minimal_gather_subset=MINIMAL_SUBSET)
    except (TypeError, CollectorNotFoundError, CycleFoundInFactDeps, UnresolvedFactDep) as exc:  # a bad subset
        module.fail_json(msg="gather_subset %s: %s" % (subset, exc))
    return collector.collect(module=module)


def main():
    module = build_module()
    taken = {}
    if module.params["gather_subset"]:
        taken["ansible_facts"] = gather_facts(module, module.params["gather_subset"])
    if module.params["lock_owner"]:
        taken["lock"] = take_on_host(module.params["lock_path"], module.params["lock_owner"],
                                     check_mode=module.check_mode)
    directory = module.params["directory"]
    names = set(module.params["stages"])
    if os.path.isdir(directory):
        names |= {f[:-5] for f in os.listdir(directory) if f.endswith(".json") and not f.startswith(".")}
    effective = {name: effective_record(directory, module.params["image_directory"], name) for name in sorted(names)}
    records = {name: record for name, (record, _image) in effective.items()}
    items = {}
    for record in records.values():
        for item in (record or {}).get("items") or []:
            items[repr(sorted(item.items()))] = item
    states = capture(module, list(items.values()))
    stages = {
        name: dict(check_stage(records[name], states), from_image=effective[name][1])
        for name in module.params["stages"]
    }
    digests = {name: record_digest(record) for name, record in records.items() if record is not None}
    for view in module.params["views"]:
        record = records.get(upstream_spec(view)[0])
        if record is not None:
            digests[view] = upstream_digest(record, view)
    module.exit_json(
        changed=False,
        stages=stages,
        records=digests,
        items=len(items),
        packages=installed_packages(module),
        **taken,
    )


if __name__ == "__main__":
    main()
