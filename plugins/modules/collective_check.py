#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: collective_check
short_description: Measure all-reduce bus bandwidth across the Ray cluster and fail on a slow node or link
version_added: "0.1.0"
description:
  - Runs C(python -m rayfleet.collective) on the head. One Ray actor per GPU (per node on CPU-only
    clusters), placed with a C(STRICT_SPREAD) placement group, forms a C(torch.distributed) group (NCCL on
    GPUs, gloo on CPUs) and sweeps message sizes like nccl-tests' C(all_reduce_perf), reporting time,
    algorithm bandwidth and bus bandwidth (busbw = algbw x 2(n-1)/n) per size, with a correctness check.
  - Then pair tests name a slow node or link. First a ring of node pairs runs the same all-reduce two nodes at a
    time; the ring never pairs two Ray nodes of one host (O(hosts) by Ray node name, C(<ip>/<instance>) for each of
    a host's several nodes), whose pair would measure the host's loopback, and a cluster on one host is not
    pair-tested. A pair below O(pair_ratio) of the best pair (or below O(min_busbw_gbps)) is slow; a node in slow
    pairs only is a suspect.
  - Each suspect is then re-tested paired with a node that passed, and only a node slow again is named, so a
    node that one noisy measurement pointed at is not. Beyond O(pair_ring_max) nodes the ring pairs blocks of
    nodes instead, and a suspect block is halved, each half tested with a node that passed, until the slow nodes
    are left (one slow node among n in log2(n) rounds). A round's pair tests, no host in two, run at once unless
    O(pair_concurrent=false).
  - Fails when the values are wrong, when the peak bus bandwidth at the large sizes is below
    O(min_busbw_gbps), when a node is confirmed slow, when slow pairs cannot be pinned on a node (no node
    passed to re-test them with), or when NCCL did not use a network in O(expect_network) (for example it fell
    back to sockets on an EFA or InfiniBand cluster). The message names the nodes.
  - Must run on a cluster node with the Ray venv's interpreter, as the Ray service user; PyTorch must be
    installed in that venv on every node (the C(pytorch) role does it).
author:
  - rayfleet authors (@rayfleet)
options:
  address:
    description: The head's GCS address, C(ip:port), or C(auto) on a cluster node.
    type: str
    default: auto
  backend:
    description: C(nccl) (GPUs), C(gloo) (CPUs) or C(auto) (NCCL when Ray reports GPUs).
    type: str
    choices: [auto, nccl, gloo]
    default: auto
  min_bytes:
    description: Smallest message, like nccl-tests' C(-b). Bytes, or with a binary unit (C(64K), C(16M), C(1G)).
    type: str
    default: "8"
  max_bytes:
    description: Largest message (C(-e)). Default C(1G) with NCCL and C(16M) with gloo.
    type: str
  warmup_iters:
    description: Untimed all-reduces per size before timing (C(-w)).
    type: int
    default: 5
  iters:
    description: Timed all-reduces per size (C(-n)); the time is the slowest rank's mean.
    type: int
    default: 20
  large_bytes:
    description:
      - Sizes from this one up count for the peak bus bandwidth compared with O(min_busbw_gbps)
        (small messages measure latency, not the link). Default O(max_bytes) / 8.
    type: str
  min_busbw_gbps:
    description: Fail when the peak bus bandwidth (GB/s) is below this. Unset, bandwidth is reported, not gated.
    type: float
  pairwise:
    description: Run the ring of node pairs after the all-nodes sweep.
    type: bool
    default: true
  pair_bytes:
    description: Message size of the pair test. Default the largest swept size.
    type: str
  pair_iters:
    description: Timed iterations per pair.
    type: int
    default: 10
  pair_ratio:
    description: A pair below this share of the best pair's bus bandwidth is slow.
    type: float
    default: 0.75
  pair_ring_max:
    description:
      - Most members of the first-pass ring. Up to this many nodes, each node is a member (a ring of node pairs);
        a larger cluster is split into this many blocks of neighbouring nodes, and a slow block is bisected.
      - At least 3.
    type: int
    default: 32
  pair_concurrent:
    description:
      - Run the pair tests of a round at once (no node and no host is in two tests of a round). V(false) runs
        them one after another, for a network that cannot carry them together without slowing them.
    type: bool
    default: true
  expect_network:
    description:
      - NCCL networks of which one must be used, matched against NCCL's C(Using network) line, e.g. C(IB) or
        C(Libfabric) (aws-ofi-nccl on EFA). Ignored with gloo.
    type: list
    elements: str
    default: []
  env:
    description: Environment for the ranks, e.g. C(NCCL_SOCKET_IFNAME), C(FI_PROVIDER), C(NCCL_NET).
    type: dict
    default: {}
  hosts:
    description:
      - Node to name (normally the inventory host name), used in results and messages. Keys are Ray node names,
        the node's IP for a host's one node and C(<ip>/<instance>) for each of a host's several nodes
        (C(ray_node_instances)); a key that is a host's IP also names its instances, as C(<name>/<instance>).
    type: dict
    default: {}
  nodes:
    description: Number of nodes to use; C(0) uses every alive node with the needed resources.
    type: int
    default: 0
  gpus_per_node:
    description: Ranks per node with NCCL; C(0) uses the smallest GPU count among the nodes.
    type: int
    default: 0
  intra_node:
    description: Run all ranks on one node (C(PACK)) instead of across nodes.
    type: bool
    default: false
  timeout:
    description: Seconds the whole check may take; a rank stuck on a broken link fails the check after this.
    type: int
    default: 600
  auth_token_path:
    description: File holding the cluster's Ray token, for clusters with Ray token authentication.
    type: path
attributes:
  check_mode:
    support: full
    description: Changes nothing on the hosts (it loads the network for the duration of the test); runs in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
seealso:
  - module: rayfleet.cluster.ray_cluster_info
  - name: nccl-tests performance notes (algbw and busbw)
    description: How bus bandwidth is computed, so figures compare across cluster sizes.
    link: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
"""

EXAMPLES = r"""
- name: All-reduce bandwidth gate on 2 x p5.48xlarge (EFA)
  rayfleet.cluster.collective_check:
    address: "{{ ansible_default_ipv4.address }}:6379"
    max_bytes: 1G
    min_busbw_gbps: 380
    expect_network: [Libfabric]
    env:
      FI_PROVIDER: efa
    auth_token_path: /etc/rayfleet/auth-token
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python
  become: true
  become_user: rayfleet
  register: allreduce

- name: Show the nccl-tests style table
  ansible.builtin.debug:
    var: allreduce.table
"""

RETURN = r"""
ok:
  description: Whether every check passed.
  returned: success or check failure
  type: bool
problems:
  description: What failed, each naming the node, pair or setting.
  returned: success or check failure
  type: list
  elements: str
table:
  description: The result as nccl-tests prints it, plus the pairs and the verdict.
  returned: success or check failure
  type: str
backend:
  description: C(nccl) or C(gloo).
  returned: success or check failure
  type: str
world_size:
  description: Number of ranks.
  returned: success or check failure
  type: int
nodes:
  description: The nodes used, with their ranks, IP, name and GPU ids.
  returned: success or check failure
  type: list
  elements: dict
rows:
  description: Per message size - size, count, type, redop, time_us, algbw_gbps, busbw_gbps, wrong.
  returned: success or check failure
  type: list
  elements: dict
peak_busbw_gbps:
  description: Best bus bandwidth among the sizes >= C(large_bytes).
  returned: success or check failure
  type: float
avg_busbw_gbps:
  description: Mean bus bandwidth over all sizes (nccl-tests' "Avg bus bandwidth").
  returned: success or check failure
  type: float
pairs:
  description:
    - Bus bandwidth of each pair of two single nodes tested, the ring's and the re-tests', in the order they ran,
      with C(phase) (C(ring) or C(confirm)), C(round) and C(slow).
  returned: success or check failure
  type: list
  elements: dict
pair_findings:
  description:
    - The pair tests' findings. C(suspects) are the slow nodes, each confirmed by a re-test with a node that
      passed; C(slow_pairs), C(best_gbps) and C(slowest) are the first-pass ring's.
    - C(first_pass_suspects) (nodes the ring pointed at), C(cleared) (of those, the ones a re-test cleared) and
      C(unresolved) (suspects with no node that passed to re-test them with).
    - C(tests) (every test with its C(round), C(phase) C(ring), C(bisect) or C(confirm), both C(sides) and C(slow)),
      C(rounds), C(pair_tests), C(threshold_gbps) and C(first_pass).
    - C(skipped_same_host) (ring neighbours on one host, not tested), C(single_host) (the host's address when
      every node is on it and no pair was tested) and C(hosts) (for each host with several Ray nodes, its address,
      name and each node's verdict C(ok), C(slow), C(unresolved) or C(untested)).
  returned: success or check failure
  type: dict
transport:
  description: The network NCCL selected, whether GPUDirect RDMA was used, plugin errors (NCCL only).
  returned: success or check failure
  type: dict
versions:
  description: Versions of torch, NCCL and Ray used.
  returned: success or check failure
  type: dict
"""

import json
import os
import sys
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.rayfleet.cluster.plugins.module_utils.rayfleet_common import (
    require_rayfleet,
)

try:
    from rayfleet.collective import Options, parse_size
    from rayfleet.errors import SettingsError
except ImportError:
    pass  # reported by require_rayfleet()

_SIZE_OPTIONS = ("min_bytes", "max_bytes", "large_bytes", "pair_bytes")


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            address=dict(type="str", default="auto"),
            backend=dict(type="str", default="auto", choices=["auto", "nccl", "gloo"]),
            min_bytes=dict(type="str", default="8"),
            max_bytes=dict(type="str"),
            warmup_iters=dict(type="int", default=5),
            iters=dict(type="int", default=20),
            large_bytes=dict(type="str"),
            min_busbw_gbps=dict(type="float"),
            pairwise=dict(type="bool", default=True),
            pair_bytes=dict(type="str"),
            pair_iters=dict(type="int", default=10),
            pair_ratio=dict(type="float", default=0.75),
            pair_ring_max=dict(type="int", default=32),
            pair_concurrent=dict(type="bool", default=True),
            expect_network=dict(type="list", elements="str", default=[]),
            env=dict(type="dict", default={}),
            hosts=dict(type="dict", default={}),
            nodes=dict(type="int", default=0),
            gpus_per_node=dict(type="int", default=0),
            intra_node=dict(type="bool", default=False),
            timeout=dict(type="int", default=600),
            auth_token_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )


def options_from_params(params):
    """Module parameters -> rayfleet.collective.Options (raises SettingsError naming the parameter)."""
    data = {k: v for k, v in params.items() if k not in (*_SIZE_OPTIONS, "timeout")}
    for name in _SIZE_OPTIONS:
        if params.get(name) not in (None, ""):
            data[name] = parse_size(params[name], name)
    data["timeout_s"] = params["timeout"]
    data["env"] = dict((str(k), str(v)) for k, v in (params.get("env") or {}).items())
    data["hosts"] = dict((str(k), str(v)) for k, v in (params.get("hosts") or {}).items())
    return Options.from_dict(data)


def main():
    module = build_module()
    require_rayfleet(module)
    try:
        opts = options_from_params(module.params)
    except SettingsError as exc:
        module.fail_json(msg="collective_check: %s" % to_native(exc))
    if opts.auth_token_path and not os.access(opts.auth_token_path, os.R_OK):
        module.fail_json(msg="auth_token_path: %s is not readable by this user (run as the Ray service user)"
                         % opts.auth_token_path)
    workdir = tempfile.mkdtemp(prefix="rayfleet-collective-")
    options_file = os.path.join(workdir, "options.json")
    result_file = os.path.join(workdir, "result.json")
    try:
        with open(options_file, "w") as fh:
            json.dump(opts.__dict__, fh)
        # A child process: Ray's driver prints to stdout/stderr, which must not mix with the module's JSON.
        rc, out, err = module.run_command(
            [sys.executable, "-m", "rayfleet.collective", "--options-file", options_file, "--json-out", result_file],
            cwd=workdir)
        try:
            with open(result_file) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = {}
    finally:
        for path in (options_file, result_file):
            if os.path.exists(path):
                os.unlink(path)
        os.rmdir(workdir)
    if "error" in data or not data:
        module.fail_json(msg="the collective check could not run: %s" % (data.get("error") or err.strip()[-2000:]),
                         rc=rc, stderr=err[-4000:])
    data["table"] = out.strip()
    if not data["ok"]:
        module.fail_json(msg="collective check failed: " + "; ".join(data["problems"]), **data)
    module.exit_json(changed=False, **data)


if __name__ == "__main__":
    main()
