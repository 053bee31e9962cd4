#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stage_record
short_description: Record what a rayfleet stage applied on a host, for the next drift check
version_added: "0.1.0"
description:
  - Captures the state of the items a stage managed on the host (the action plugin passes the items the stage's
    tasks reported, collected by the C(rayfleet.cluster.stage_items) callback) and writes them, with the digest of
    the stage's inputs and the digests of its upstream stages' records, to C(<directory>/<stage>.json) (mode 0600,
    root only).
  - When the host's previous record of the stage has the same inputs digest, its items are kept too, so an item
    whose task skipped this time (nothing to do) stays watched.
  - Writing the record is bookkeeping, not a change to the host's configuration, so the task reports C(changed=false)
    and says in RV(written) whether the record's content changed.
  - A stage about to apply inputs other than those it recorded moves its record aside first (O(state=aside)). If the
    run stops part way, the copy stays aside and the next run finds no record and applies the stage in full. A run
    that applies only part of the stage (C(--tags)) writes no record; at the stage's end the action puts the copy
    back when none of the stage's tasks changed anything on the host (O(state=restored)), and removes it otherwise
    (O(state=discarded)), so a later run with the old inputs does not trust a record the host no longer matches.
  - On a node booted from a baked image, setting aside also stops the image's record of the stage from standing in
    for the cluster's (O(image_directory)); putting the copy back trusts it again.
author:
  - rayfleet authors (@rayfleet)
options:
  stage:
    description: The stage's name.
    type: str
    required: true
  inputs:
    description: The digest of the stage's inputs (computed on the controller). Required with O(state=present).
    type: str
  state:
    description:
      - V(present) writes the record (and removes a copy set aside); V(aside) moves the record aside; V(restored)
        puts the copy set aside back where no record was written since; V(discarded) removes the copy set aside.
      - The action plugin takes V(present) or V(aside) from the task. At the end of a run that applies only part of
        the stage (C(--tags)), it turns V(present) into V(restored) or V(discarded), by whether the stage changed
        anything on the host.
    type: str
    choices: [present, aside, restored, discarded]
    default: present
  items:
    description: The items the stage managed (dicts with a C(kind); see M(rayfleet.cluster.drift_check)).
    type: list
    elements: dict
    default: []
  image:
    description:
      - Write the record to O(image_directory) rather than O(directory) - C(playbooks/bake.yml) records the stages
        it applied on the builder for the nodes booted from its image. Only with O(state=present).
    type: bool
    default: false
  upstream:
    description:
      - The stages whose records' digests this record keeps (a change there makes this stage run). A record's digest
        covers its items' states, not its inputs.
      - "C(<stage>:<kind>[,<kind>]) keeps the digest of the states of those kinds of the stage's items alone
        (C(ray:pip), the packages of the Ray venv)."
    type: list
    elements: str
    default: []
  views:
    description:
      - What downstream stages read of this stage (C(<stage>:<kind>) as in O(upstream)); the result's RV(digests)
        holds each one's digest of the record written.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - rayfleet.cluster.stage_records
attributes:
  check_mode:
    support: full
    description: Captures the states and writes nothing.
  diff_mode:
    support: none
    description: Writes only its own record.
"""

EXAMPLES = r"""
- name: Record what the firewall stage applied
  rayfleet.cluster.stage_record:
    stage: firewall
    inputs: "{{ firewall_inputs_digest }}"
    items:
      - {kind: file, path: /etc/rayfleet/firewall.nft}
      - {kind: unit, name: rayfleet-firewall.service}
      - {kind: nft_table, family: inet, name: rayfleet}

- name: Set aside the ray stage's record before it applies other inputs
  rayfleet.cluster.stage_record:
    stage: ray
    state: aside
"""

RETURN = r"""
digest:
  description: The digest of the record's items' states (what its downstream stages keep).
  returned: when O(state=present)
  type: str
digests:
  description: Each of O(views) -> its digest of the record written (what the downstream stages reading it keep).
  returned: when O(state=present)
  type: dict
  sample: {"ray:pip": 3f0c...}
written:
  description: Whether the record's content changed (false in check mode).
  returned: when O(state=present)
  type: bool
state:
  description: What was done - V(present), V(aside), V(restored) or V(discarded).
  returned: always
  type: str
moved:
  description: Whether a record was moved aside, put back, or removed (false in check mode).
  returned: unless O(state=present)
  type: bool
items:
  description: How many items the record holds.
  returned: when O(state=present)
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayfleet.cluster.plugins.module_utils.stage_state import (
    IMAGE_RECORD_DIR,
    RECORD_FORMAT,
    capture,
    discard_aside,
    effective_record,
    item_key,
    read_record,
    record_digest,
    restore_aside,
    set_aside,
    supersede_image_record,
    trust_image_record_again,
    upstream_digest,
    upstream_spec,
    write_record,
)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            stage=dict(type="str", required=True),
            inputs=dict(type="str"),
            state=dict(type="str", choices=["present", "aside", "restored", "discarded"], default="present"),
            items=dict(type="list", elements="dict", default=[]),
            upstream=dict(type="list", elements="str", default=[]),
            views=dict(type="list", elements="str", default=[]),
            directory=dict(type="path", default="/var/lib/rayfleet/stages"),
            image_directory=dict(type="path", default=IMAGE_RECORD_DIR),
            image=dict(type="bool", default=False),
        ),
        required_if=[("state", "present", ("inputs",))],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    directory, name, image_dir = params["directory"], params["stage"], params["image_directory"]
    if params["image"]:
        if params["state"] != "present":
            module.fail_json(msg="stage %s: image=true writes the image's record; state is %s, expected present"
                             % (name, params["state"]))
        directory = image_dir
    if params["state"] != "present":
        action = {"aside": set_aside, "restored": restore_aside, "discarded": discard_aside}[params["state"]]
        if module.check_mode:
            module.exit_json(changed=False, state=params["state"], moved=False)
        try:
            moved = action(directory, name)
            if params["state"] == "aside":
                supersede_image_record(directory, image_dir, name)
            elif params["state"] == "restored":
                trust_image_record_again(directory, name)
        except OSError as exc:
            module.fail_json(msg="stage %s: cannot %s its record in %s: %s"
                             % (name, {"aside": "set aside", "restored": "restore",
                                       "discarded": "remove the copy set aside of"}[params["state"]], directory, exc))
        module.exit_json(changed=False, state=params["state"], moved=moved)
    for item in params["items"]:
        try:
            item_key(item)
        except KeyError as exc:
            module.fail_json(msg="stage %s: item %r has no %s" % (name, item, exc))
    items = {item_key(item): item for item in params["items"]}
    previous = read_record(directory, name)
    if previous is not None and previous.get("inputs") == params["inputs"]:
        for item in previous.get("items") or []:
            items.setdefault(item_key(item), item)
    ordered = [items[key] for key in sorted(items)]
    upstream = {}
    for up in params["upstream"]:
        upstream[up] = upstream_digest(effective_record(directory, image_dir, upstream_spec(up)[0])[0], up)
    record = {
        "format": RECORD_FORMAT,
        "stage": name,
        "inputs": params["inputs"],
        "items": ordered,
        "state": capture(module, ordered),
        "upstream": upstream,
    }
    written = False
    if not module.check_mode:
        written = write_record(directory, name, record)
        discard_aside(directory, name)
    module.exit_json(changed=False, state="present", written=written, digest=record_digest(record), items=len(ordered),
                     digests={view: upstream_digest(record, view) for view in params["views"]})


if __name__ == "__main__":
    main()
