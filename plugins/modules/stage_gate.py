#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stage_gate
short_description: Decide whether a rayfleet stage runs on a host, from the run's drift check
version_added: "0.1.0"
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - A stage runs on a host when the host has no record of it, its inputs changed, an item it manages drifted (see
    M(rayfleet.cluster.drift_check), registered as C(__rayfleet_drift) earlier in the run), or what a stage it reads
    manages on the host changed since (the ray stage reads what the gpu, nccl and checkpoint_store stages wrote; a
    stage that ran earlier in this run and recorded a change counts). A stage it reads applied again with other
    inputs, leaving the same files, units and packages behind, does not make it run. The SSH trust stage runs on
    every host when it runs on one; the ray stage runs on every node when it runs on the head.
  - Without a drift check in the run (a stage's playbook run alone), or with C(rayfleet_full=true), it runs.
  - The stage's play ends the host with C(ansible.builtin.meta) C(end_host) when RV(skip) is true.
  - With O(stage=select), run once for the drift check's play (C(run_once)), it returns the groups each host of the
    play goes in (RV(groups)), for C(ansible.builtin.add_host). C(site.yml)'s stage plays target those groups, so a
    host where no stage can run in this run (settled) is in no stage's play.
author:
  - rayfleet authors (@rayfleet)
options:
  stage:
    description:
      - The stage (common, gpu, nccl, firewall, ssh_trust, nfs_server, shared_storage, checkpoint_store, ray, ml,
        monitoring, submit_host).
      - V(validate), the gate of the validate plays - a host is checked where any stage runs.
      - V(select), every host's groups for the run (RV(groups)).
    type: str
    required: true
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Run the firewall stage only where something drifted
  rayfleet.cluster.stage_gate:
    stage: firewall
  register: __rayfleet_gate

- name: Leave the hosts where nothing drifted
  ansible.builtin.meta: end_host
  when: __rayfleet_gate.skip
"""

RETURN = r"""
run:
  description: Whether the stage runs on this host.
  returned: success, except with O(stage=select)
  type: bool
skip:
  description: The opposite of RV(run).
  returned: success, except with O(stage=select)
  type: bool
roles:
  description:
    - With O(stage=validate), the roles whose variables are checked on this host - those of the stages that run
      that may run there (every role without a drift check or with C(rayfleet_full)).
  returned: with O(stage=validate)
  type: list
  elements: str
groups:
  description:
    - With O(stage=select), host -> the groups it goes in for this run. C(rayfleet_stage_<stage>) for each stage that
      may run on it. A stage counts while it may still run - its own verdict, an upstream stage that may run on the
      host and change its record, or (by the stage's scope) the head where it may run - so every host a gate will run
      a stage on is in that stage's group, whatever the earlier stages do. With C(rayfleet_full), every stage of its
      inventory groups.
    - C(rayfleet_stage_validate) on a Ray node where any stage may run, and C(rayfleet_stage_selected) on every host
      (the stage plays target the selection's groups while it exists).
  returned: with O(stage=select)
  type: dict
  sample: {"worker1": ["rayfleet_stage_firewall", "rayfleet_stage_validate", "rayfleet_stage_selected"],
           "worker2": ["rayfleet_stage_selected"]}
drifted:
  description:
    - With O(stage=select), host -> one line per stage that would run there by the host's own records, the stage
      and why (an item drifted, new inputs, no record, a stage it reads changed). A settled host is not named.
  returned: with O(stage=select)
  type: dict
  sample: {"worker1": ["common: drifted: file:/etc/sysctl.d/60-rayfleet.conf (sha256 3f2a... -> 9c1e...)"]}
supersede:
  description:
    - Whether the stage's record on this host is set aside before the stage runs (M(rayfleet.cluster.stage_record)
      with O(rayfleet.cluster.stage_record#module:state=aside)) - the stage runs and applies inputs other than
      those recorded (or runs without a drift check), and the run selects some of its tasks (no C(--tags), or one
      naming the stage's). A run that stops part way then leaves no record vouching for the old inputs, and the
      next run applies the stage in full.
  returned: success, except with O(stage=validate)
  type: bool
drifted_items:
  description:
    - The keys of this stage's items the drift check found changed on this host (C(nft_table:inet rayfleet), ...),
      for roles whose tasks alone would not see the change (a table flushed under a unit that stays active).
  returned: success, except with O(stage=select)
  type: list
  elements: str
installed_packages:
  description:
    - The packages the drift check found installed on this host (RV(rayfleet.cluster.drift_check#module:packages)).
      A role's package task is skipped where every package it installs is among them (C(state=present) asks no
      more), and the role declares its packages with M(rayfleet.cluster.stage_items) so that the record covers them
      either way.
    - Absent without a drift check on the host; the package tasks then ask apt or dnf.
  returned: success, where the drift check ran on the host
  type: list
  elements: str
stage:
  description: The stage.
  returned: success
  type: str
msg:
  description: Why.
  returned: success, except with O(stage=select)
  type: str
  sample: "runs: drifted: file:/etc/rayfleet/ray-worker.json (sha256 3f2a... -> 9c1e...)"
"""
