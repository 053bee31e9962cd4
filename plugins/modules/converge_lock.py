#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: converge_lock
short_description: One converge of a cluster at a time - a lock on the head that names its owner
version_added: "0.1.0"
description:
  - C(site.yml) takes this lock on the head before its first change and gives it back after its last play, so two
    runs against one cluster never interleave. The lock is a file on the head (O(path)) that names its owner - the
    user, the controller, the C(ansible-playbook) process and when it was taken.
  - A second run finds the lock held and, by default, stops at once naming the owner. With O(wait) it waits that many
    seconds for the owner's run to end first.
  - A lock left by a run that died is taken over, and the run says so in a warning - at once when the owner ran on
    this controller and its C(ansible-playbook) process is gone; after O(stale_after) seconds when it ran elsewhere
    (its process cannot be seen from here); at once with O(break_lock).
  - The action runs on the controller (who owns the lock, whether its process is alive, waiting) and sends the
    module to the host for the file itself, which is created atomically (C(O_EXCL)).
  - In check mode nothing is written - the result says whether the lock would be taken.
  - It never reports a change - the lock is the run's own bookkeeping, not the host's state, so a run that changes
    nothing else stays C(changed=0).
author:
  - rayfleet authors (@rayfleet)
options:
  state:
    description:
      - V(present) takes the lock for this run (held by this run already - nothing to do); V(absent) gives back the
        lock this run holds (a lock another run holds is left as it is).
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The lock file on the host.
    type: path
    default: /var/lib/rayfleet/converge.lock
  wait:
    description:
      - Seconds to wait for a held lock before giving up; V(0) gives up at once. C(site.yml) passes
        C(rayfleet_lock_wait).
    type: int
    default: 0
  stale_after:
    description:
      - Seconds after which a lock whose owner cannot be seen from this controller is taken over (a run that died
        on another controller). C(site.yml) passes C(rayfleet_lock_stale_after).
    type: int
    default: 7200
  break_lock:
    description:
      - Take the lock over whoever holds it (C(site.yml)'s C(rayfleet_lock_break)) - for a lock whose run is known
        to be gone. The owner it replaced is named in a warning.
    type: bool
    default: false
  owner:
    description:
      - Set by the action, not by the task - who takes the lock (run, user, controller, pid, started).
    type: dict
  take_over:
    description:
      - Set by the action, not by the task - replace the lock only while the run named here still holds it.
    type: str
  reason:
    description: Set by the action, not by the task - why the lock is taken over.
    type: str
attributes:
  action:
    support: full
    description: The owner, the waiting and the take-over of a dead run are decided on the controller.
  check_mode:
    support: full
    description: Reports whether the lock would be taken; writes nothing.
  diff_mode:
    support: none
    description: No diff.
"""

EXAMPLES = r"""
- name: Take the cluster's converge lock on the head
  rayfleet.cluster.converge_lock:
    wait: "{{ rayfleet_lock_wait | default(0) }}"
  delegate_to: "{{ groups['ray_head'][0] }}"
  run_once: true

- name: Give the converge lock back
  rayfleet.cluster.converge_lock:
    state: absent
  delegate_to: "{{ groups['ray_head'][0] }}"
  run_once: true
"""

RETURN = r"""
lock:
  description: What the module found or did - V(taken), V(held) (by this run already), V(busy) (another run holds
    it), V(taken_over), V(released), V(not_held) (nothing of this run's to give back).
  returned: always
  type: str
  sample: taken
owner:
  description: The lock's owner now (this run's after V(taken) or V(taken_over)).
  returned: when a lock is held
  type: dict
  sample: {run: "ctl01:41233:918273", user: ops, controller: ctl01, pid: 41233, started: "2026-12-06T12:00:00Z"}
replaced:
  description: The owner whose lock this run took over, and why.
  returned: when RV(lock) is V(taken_over)
  type: dict
waited:
  description: Seconds the run waited for the lock.
  returned: state=present
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayfleet.cluster.plugins.module_utils.converge_lock import LOCK_PATH, release, take_on_host


def build_module():
    return AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "path": {"type": "path", "default": LOCK_PATH},
            "wait": {"type": "int", "default": 0},
            "stale_after": {"type": "int", "default": 7200},
            "break_lock": {"type": "bool", "default": False},
            "owner": {"type": "dict"},
            "take_over": {"type": "str"},
            "reason": {"type": "str"},
        },
        required_if=[("state", "absent", ("owner",)), ("state", "present", ("owner",))],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    path = params["path"]
    owner = params["owner"]
    if not str(owner.get("run") or ""):
        module.fail_json(msg="converge_lock: owner.run is empty; expected the run's id (the action sets it).")
    if params["state"] == "absent":
        module.exit_json(**release(path, owner, module.check_mode))
    module.exit_json(**take_on_host(path, owner, params["take_over"], params["reason"], module.check_mode))


if __name__ == "__main__":
    main()
