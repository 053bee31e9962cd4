#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: checkpoint_store_plan
short_description: Check the checkpoint store's settings, compute its URI and marker, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - The workers' secret key is no option. The action reads the variable C(checkpoint_store_secret_access_key) from the
    host's variables, so no task header or invocation shows it.
  - Checks the checkpoint_store role's variables and returns what the role writes - the URI Ray Train reads
    (C(RAYFLEET_CHECKPOINT_URI)), an S3-compatible endpoint's C(host:port) and scheme, and with backend C(shared)
    the Ray user and group that make the directory, the head that leaves the marker, and the marker's path and line.
  - "Checked: O(checkpoint_store_backend) C(none), C(s3) or C(shared); O(checkpoint_store_prefix) an S3 key prefix
    (letters, digits, parentheses and C(!_.*-/), not starting with C(/)); O(checkpoint_store_endpoint_url) empty or
    C(http://) or C(https://), a host and an optional port 1-65535, with nothing after them but a slash (with
    Python's C(urllib.parse));
    O(checkpoint_store_region) like C(us-east-1); O(checkpoint_store_create_bucket), O(checkpoint_store_versioning)
    and O(checkpoint_store_install_train) true or false (the words Ansible's C(bool) filter takes);
    O(checkpoint_store_access_key_id) and the variable C(checkpoint_store_secret_access_key) strings without blanks,
    both set or both empty (the secret is never shown); O(checkpoint_store_find_links) empty, an absolute path or an
    C(http), C(https) or C(file) URL, without blanks; O(checkpoint_store_no_index) true or false, and true only with
    O(checkpoint_store_find_links) set where Ray Train's dependencies are installed (a backend and
    O(checkpoint_store_install_train)); O(checkpoint_store_venv_dir) an absolute path without blanks;
    O(ray_service_user) and O(ray_service_group) names."
  - "With backend C(s3): O(checkpoint_store_bucket) follows S3's bucket naming rules - 3-63 lowercase letters, digits,
    dots and hyphens, a letter or digit at each end, no C(..), C(.-) or C(-.), not an IP address, none of the
    prefixes C(xn--), C(sthree-), C(amzn-s3-demo-) and suffixes C(-s3alias), C(--ol-s3), C(.mrap), C(--x-s3),
    C(--table-s3) S3 reserves."
  - "With backend C(shared): O(checkpoint_store_path) is absolute and normalized (no trailing C(/), no C(.) or C(..)
    parts, no line breaks), not C(/), not a mount point of O(shared_storage_mounts) itself, and not in a system
    directory or the collection's own (C(/bin), C(/boot), C(/dev), C(/etc), C(/lib), C(/lib32), C(/lib64),
    C(/libx32), C(/opt/rayfleet), C(/proc), C(/root), C(/run), C(/sbin), C(/sys), C(/tmp), C(/usr),
    C(/var/lib/rayfleet)); group C(ray_head) has a host."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The checkpoint_store role runs it in its validate step and registers the result; its tasks and templates read it.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  checkpoint_store_backend:
    description: C(none), C(s3) or C(shared).
    type: raw
    required: true
  checkpoint_store_path:
    description: Backend C(shared) - the checkpoint directory on a filesystem every Ray node mounts.
    type: raw
    required: true
  checkpoint_store_bucket:
    description: Backend C(s3) - the bucket.
    type: raw
    required: true
  checkpoint_store_prefix:
    description: Key prefix for this cluster's runs.
    type: raw
    required: true
  checkpoint_store_endpoint_url:
    description: Empty for AWS S3; else the S3-compatible endpoint.
    type: raw
    required: true
  checkpoint_store_region:
    description: The bucket's region.
    type: raw
    required: true
  checkpoint_store_create_bucket:
    description: Make the bucket from the controller when it does not exist.
    type: raw
    required: true
  checkpoint_store_versioning:
    description: Keep object versions.
    type: raw
    required: true
  checkpoint_store_install_train:
    description: Install Ray Train's dependencies into the Ray venv.
    type: raw
    required: true
  checkpoint_store_access_key_id:
    description: The workers' access key; empty on AWS with an instance profile.
    type: raw
    required: true
  checkpoint_store_find_links:
    description: A wheel directory on the nodes (or a URL) searched first; may be empty.
    type: raw
  checkpoint_store_no_index:
    description:
      - Install Ray Train's dependencies from O(checkpoint_store_find_links) alone (C(--no-index)); needs
        O(checkpoint_store_find_links) with a backend and O(checkpoint_store_install_train).
    type: raw
    default: false
  checkpoint_store_venv_dir:
    description: The Ray venv.
    type: raw
    required: true
  ray_cluster_name:
    description: The ray role's C(ray_cluster_name), named in the marker (empty - C(default)).
    type: raw
  ray_service_user:
    description: The Ray user, who makes and reads the shared directory.
    type: raw
    default: rayfleet
  ray_service_group:
    description: The Ray user's group, the shared directory's group.
    type: raw
    default: rayfleet
  shared_storage_mounts:
    description: The shared_storage role's mounts (the checkpoint directory is none of their mount points).
    type: raw
    default: []
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the checkpoint store settings
  rayfleet.cluster.checkpoint_store_plan:
    checkpoint_store_backend: s3
    checkpoint_store_path: ""
    checkpoint_store_bucket: acme-ray-checkpoints
    checkpoint_store_prefix: rayfleet
    checkpoint_store_endpoint_url: https://s3.storage.internal:7480
    checkpoint_store_region: us-east-1
    checkpoint_store_create_bucket: true
    checkpoint_store_versioning: true
    checkpoint_store_install_train: true
    checkpoint_store_access_key_id: "{{ vault_ckpt_key }}"
    checkpoint_store_find_links: ""
    checkpoint_store_venv_dir: /opt/rayfleet/venv
  register: store

- name: Show where Ray Train writes its checkpoints
  ansible.builtin.debug:
    msg: "{{ store.uri }}"
"""

RETURN = r"""
backend:
  description: The backend, O(checkpoint_store_backend).
  returned: success
  type: str
  sample: s3
uri:
  description: The storage_path for C(ray.train.RunConfig) - the shared directory, or C(s3://<bucket>/<prefix>) with
    C(endpoint_override), C(scheme) and C(region) query parameters for an S3-compatible endpoint; empty with backend
    C(none).
  returned: success
  type: str
  sample: s3://acme-ray-checkpoints/rayfleet?endpoint_override=s3.storage.internal:7480&scheme=https&region=us-east-1
endpoint:
  description: The S3-compatible endpoint's C(host[:port]); empty for AWS S3.
  returned: success
  type: str
  sample: s3.storage.internal:7480
scheme:
  description: The endpoint's scheme, C(http) or C(https) (C(https) for AWS S3).
  returned: success
  type: str
user:
  description: The Ray user, who makes and reads the shared directory (O(ray_service_user)).
  returned: success
  type: str
group:
  description: The shared directory's group (O(ray_service_group)).
  returned: success
  type: str
head:
  description: The first host of group C(ray_head), which leaves the marker; null without one.
  returned: success
  type: str
marker_path:
  description: Backend C(shared) - the marker's path, C(<checkpoint_store_path>/.rayfleet-shared-check); else null.
  returned: success
  type: str
marker:
  description: Backend C(shared) - the marker's line, naming the cluster, the head and a token of the three with the
    directory; else null.
  returned: success
  type: str
create_bucket:
  description: O(checkpoint_store_create_bucket) as a boolean.
  returned: success
  type: bool
versioning:
  description: O(checkpoint_store_versioning) as a boolean.
  returned: success
  type: bool
pip_args:
  description:
    - pip's arguments for Ray Train's dependencies - C(--no-index) with O(checkpoint_store_no_index), and
      C(--find-links) with O(checkpoint_store_find_links); empty for neither.
  returned: success
  type: str
  sample: --no-index --find-links /opt/rayfleet-wheels
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
