#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: settings_check
short_description: Check one role's variables on the controller (the roles that derive nothing from them)
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the variables of one of the roles that derive nothing from them, named by O(role), given in O(settings)
    (every one of the role's checked variables, no other). The roles that also work something out from their
    variables have a plan of their own (M(rayfleet.cluster.pytorch_plan), M(rayfleet.cluster.apex_plan),
    M(rayfleet.cluster.nccl_plan), ...).
  - "C(common): C(common_sysctl_apply) is C(auto), true or false (the words Ansible's C(bool) filter takes);
    C(common_extra_ca_certificates) a list of files on the controller, no two installed under one name; the limits
    C(common_nofile_limit) (1 to the kernel's ceiling, 1073741816) and C(common_nproc_limit) (>= 1) whole numbers;
    C(common_apt_cache_valid_time) whole seconds >= 0; C(common_user_uid) and C(common_group_gid) null or 1 to
    4294967294 (not root's 0); C(common_sysctl) kernel parameter names mapped to values on one line."
  - "C(image_cleanup): C(image_cleanup_extra_paths) a list of absolute paths below a top-level directory (never C(/),
    C(/etc), C(/usr), ..., normalized first); C(image_cleanup_max_log_bytes) a whole number >= 0;
    C(image_cleanup_hold_packages) a list of package names or globs; C(image_cleanup_disable_auto_upgrades),
    C(image_cleanup_remove_authorized_keys) and C(image_cleanup_verify) true or false."
  - "C(preflight): the backend C(auto), C(nccl) or C(gloo); the message sizes like C(8), C(64K), C(16M) or C(1G), at
    least 4 bytes (or empty), C(preflight_min_bytes) no larger than C(preflight_max_bytes); the iterations, node
    count, ring size, pair ratio in (0, 1], floor, timeout (>= 30 s), missing-node count, DCGM level (0-4) and the
    expected GPUs; the NCCL network a list and the ranks' environment a mapping; the booleans; C(preflight_nodes) no
    more than the hosts of C(ray_head) and C(ray_worker); C(preflight_instance_type) empty or a type the floors' data
    file knows, unless C(preflight_min_busbw_gbps) gives the floor."
  - "C(bake): the backend C(aws) or C(podman), the image's name and tag and C(bake_tags) a mapping; with C(aws), the
    region (like C(us-east-1)), the builder's instance id (C(i-) and 8 to 17 hex digits), the booleans, the AMI's
    wait and, with C(bake_cluster_yaml), every value the cluster YAML needs and C(bake_min_workers) <=
    C(bake_max_workers). What needs the controller's podman or AWS (the builder exists, the credentials work) stays
    the role's check."
  - Every problem found fails the task at once, each naming the role, the host, the variable, the bad value and what
    was expected, before anything changes on any host.
  - The common, image_cleanup, preflight and bake roles run it in their validate step.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  role:
    description: The role whose variables O(settings) holds.
    type: str
    required: true
    choices: [common, image_cleanup, preflight, bake]
  settings:
    description: The role's variables, by name, as the host has them (each one the role checks, no other).
    type: dict
    required: true
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the common settings
  rayfleet.cluster.settings_check:
    role: common
    settings:
      common_sysctl_apply: auto
      common_extra_ca_certificates: [/etc/pki/proxy-ca.pem]
      common_nofile_limit: 65536
      common_nproc_limit: 65536
      common_apt_cache_valid_time: 3600
      common_user_uid: null
      common_group_gid: null
      common_sysctl: {net.core.somaxconn: 4096}
"""

RETURN = r"""
role:
  description: The role whose variables were checked.
  returned: success
  type: str
  sample: common
checked:
  description: The variables checked.
  returned: success
  type: list
  elements: str
  sample: ["common_sysctl_apply", "common_extra_ca_certificates"]
problems:
  description: Every problem found, each naming the role, the host and the variable.
  returned: failure
  type: list
  elements: str
"""
