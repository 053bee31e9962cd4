#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ssh_trust_plan
short_description: Check the SSH trust's settings and decide who holds the cluster key, on the controller
description:
  - Runs on the controller only (an action plugin); nothing is sent to the host.
  - Checks the ssh_trust role's variables and returns whether this host holds the cluster's private key (the
    head of C(ray_head), or every host of C(ray_head) and C(ray_worker) with
    O(ssh_trust_private_key_on=all)), the booleans, and with O(ssh_trust_sshd_harden) the lines C(sshd -T) must print
    for O(ssh_trust_sshd_settings) (C(keyword value) in lower case, C(prohibit-password) by its old name
    C(without-password)).
  - "Checked: O(ssh_trust_key_path) an absolute path on the controller, without a trailing C(/), neither it nor
    C(<path>.pub) a directory; O(ssh_trust_key_comment) a string on one line; O(ssh_trust_private_key_on) C(head) or
    C(all); O(ssh_trust_user) a user name (no blanks or colons); O(ssh_trust_rotate), O(ssh_trust_restrict_source)
    and O(ssh_trust_sshd_harden) true or false (the words Ansible's C(bool) filter takes);
    O(ssh_trust_extra_authorized_keys) a list of non-empty strings on one line."
  - "With O(ssh_trust_sshd_harden): O(ssh_trust_sshd_settings) a dict of sshd keywords (a letter, then letters and
    digits, each once in any case) mapped to non-empty values on one line (strings; numbers, written as their
    digits; booleans, written as sshd's C(yes) and C(no)); and Ansible does not connect to the host with a password
    (C(ansible_password), C(ansible_ssh_pass) or C(ansible_ssh_password) set - only their names are read), which
    key-only logins would lock out."
  - Every problem found fails the task at once, each naming the host, the variable, the bad value and what was
    expected, before anything changes on any host.
  - The ssh_trust role runs it in its validate step and registers the result; its tasks and templates read it. Whether
    every member reported an ed25519 host key is the role's own check, after this one.
version_added: "0.1.0"
author:
  - rayfleet authors (@rayfleet)
options:
  ssh_trust_key_path:
    description: Controller path of the cluster private key (public key at C(<path>.pub)).
    type: raw
    required: true
  ssh_trust_key_comment:
    description: Comment of the cluster public key.
    type: raw
    required: true
  ssh_trust_private_key_on:
    description: Nodes that hold the private key - C(head) or C(all).
    type: raw
    required: true
  ssh_trust_user:
    description: The account that trusts and is trusted on every node.
    type: raw
    required: true
  ssh_trust_rotate:
    description: Make a new key pair now.
    type: raw
    required: true
  ssh_trust_restrict_source:
    description: Accept the cluster key only from the cluster hosts' addresses.
    type: raw
    required: true
  ssh_trust_extra_authorized_keys:
    description: More authorized_keys lines for the user.
    type: raw
    required: true
  ssh_trust_sshd_harden:
    description: Turn password and keyboard-interactive SSH logins off.
    type: raw
    required: true
  ssh_trust_sshd_settings:
    description: The sshd keywords and values the drop-in sets.
    type: raw
    required: true
  ssh_trust_ca_key_path:
    description: >-
      Controller path of the cluster's SSH certificate authority's private key (checked with
      O(membership=network)).
    type: raw
    required: true
  ssh_trust_ca_rotate:
    description: Make a new certificate authority now.
    type: raw
    required: true
  ssh_trust_cert_validity:
    description: How long a certificate is valid, as ssh-keygen's relative time (C(+52w)).
    type: raw
    required: true
  ssh_trust_cert_renew_before:
    description: >-
      How long before its end a certificate is signed again, as ssh-keygen's relative time, less than
      O(ssh_trust_cert_validity).
    type: raw
    required: true
  membership:
    description:
      - The cluster plan's membership. V(network) trusts by certificate (the cluster's SSH certificate authority signs
        host keys and the cluster key); V(static) by list.
    type: str
    default: static
  node_ip:
    description: >-
      The host's cluster IP (the cluster plan's), a principal of its host certificate with its names and other
      addresses.
    type: str
extends_documentation_fragment:
  - rayfleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the SSH trust settings
  rayfleet.cluster.ssh_trust_plan:
    ssh_trust_key_path: "{{ inventory_dir }}/credentials/ssh_trust_ed25519"
    ssh_trust_key_comment: rayfleet-cluster
    ssh_trust_private_key_on: head
    ssh_trust_user: rayfleet
    ssh_trust_rotate: false
    ssh_trust_restrict_source: true
    ssh_trust_extra_authorized_keys: []
    ssh_trust_sshd_harden: true
    ssh_trust_sshd_settings: {PasswordAuthentication: "no"}
    ssh_trust_ca_key_path: "{{ inventory_dir }}/credentials/ssh_trust_ca_ed25519"
    ssh_trust_ca_rotate: false
    ssh_trust_cert_validity: "+52w"
    ssh_trust_cert_renew_before: "+4w"
    membership: "{{ __ray_plan_result.cluster.membership }}"
    node_ip: "{{ __ray_plan_result.host.node_ip }}"
  register: trust

- name: Show whether this host holds the cluster key
  ansible.builtin.debug:
    msg: "{{ trust.holds_key }}"
"""

RETURN = r"""
ca:
  description: Whether the host trusts by certificate (O(membership=network)).
  returned: success
  type: bool
ca_rotate:
  description: O(ssh_trust_ca_rotate) as a boolean.
  returned: success
  type: bool
principals:
  description: The names and addresses the host's certificate is signed for (empty without RV(ca)).
  returned: success
  type: list
  elements: str
  sample: [worker1, 10.0.0.2]
host_certificate:
  description: Where the host keeps its host key's certificate.
  returned: success
  type: str
  sample: /etc/ssh/ssh_host_ed25519_key-cert.pub
user_ca_keys:
  description: Where the host keeps the authority its sshd trusts for user certificates (C(TrustedUserCAKeys)).
  returned: success
  type: str
  sample: /etc/ssh/rayfleet_user_ca.pub
sshd_dropin:
  description: Whether the role writes its sshd drop-in (hardening, or the certificate settings).
  returned: success
  type: bool
holds_key:
  description: Whether this host holds the cluster's private key (the head, or every member with
    O(ssh_trust_private_key_on=all)).
  returned: success
  type: bool
rotate:
  description: O(ssh_trust_rotate) as a boolean.
  returned: success
  type: bool
restrict_source:
  description: O(ssh_trust_restrict_source) as a boolean.
  returned: success
  type: bool
sshd_harden:
  description: O(ssh_trust_sshd_harden) as a boolean.
  returned: success
  type: bool
sshd_settings:
  description: O(ssh_trust_sshd_settings) as the drop-in writes them, each value a string (empty without
    O(ssh_trust_sshd_harden)).
  returned: success
  type: dict
  sample: {PasswordAuthentication: "no", ClientAliveInterval: "60"}
sshd_options:
  description: The same settings as C(sshd) command-line options, C(-oKeyword=value) (the role's validate step has the
    host's C(sshd -T) check them).
  returned: success
  type: list
  elements: str
  sample: ["-oPasswordAuthentication=no", "-oClientAliveInterval=60"]
sshd_keywords:
  description: The keywords of O(ssh_trust_sshd_settings) (empty without O(ssh_trust_sshd_harden)).
  returned: success
  type: list
  elements: str
sshd_expected:
  description: The lines C(sshd -T) prints when the settings are in effect (empty without O(ssh_trust_sshd_harden)).
  returned: success
  type: list
  elements: str
  sample: ["passwordauthentication no", "permitrootlogin without-password"]
problems:
  description: Every problem found, each naming the host and the variable.
  returned: failure
  type: list
  elements: str
"""
