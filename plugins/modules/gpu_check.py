#!/usr/bin/python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_check
short_description: Read a node's GPUs through NVML and check them against what Ray reports for the node
version_added: "0.1.0"
description:
  - Reads every GPU through NVML (C(nvidia-ml-py), no C(nvidia-smi) parsing) - UUID, name, PCI bus id, memory,
    persistence mode, ECC mode and uncorrected ECC errors since boot, row remapping, PCIe link width.
  - Fails, naming the GPU by index, UUID and bus id, when the node has fewer GPUs than O(expect_gpus), another model
    than O(expect_model), a driver older than O(min_driver), when Ray's GPU count for this node (read from Ray's state
    API at O(ray_address)) differs from NVML's or Ray's C(accelerator_type:<model>) resource is not this GPU's model,
    when two GPUs share a UUID, on uncorrected ECC errors, failed or pending row remapping, a PCIe link narrower than
    the slot allows, an NVLink link down, or an NVML library that is not the running driver's (upgrade, no reboot).
  - On a host without an NVIDIA driver it returns C(available=false) with the reason and does not fail, unless
    O(required) or O(expect_gpus) asks for GPUs, or Ray reports GPUs there.
  - Must run with the Ray venv's interpreter (it holds C(nvidia-ml-py) and the rayfleet library).
author:
  - rayfleet authors (@rayfleet)
options:
  expect_gpus:
    description: The number of GPUs this node must have. Unset, any number (including none) is accepted.
    type: int
  required:
    description: Fail when NVML cannot be read (no driver, module not loaded).
    type: bool
    default: false
  ray_address:
    description:
      - The cluster's GCS (C(host:port), reachable from every node) or the head's dashboard URL (C(http://...));
        when set, Ray's GPU count for O(node_ip) is compared with NVML's.
    type: str
  node_ip:
    description: This node's IP as Ray knows it (with O(ray_address)).
    type: str
  node_names:
    description:
      - Ray node names (C(--node-name)) of this host's nodes in the cluster, for a host that runs several (the ray
        role's C(ray_node_instances), C(<node_ip>/<instance>)) - Ray's GPU count is then their sum, and each must be
        alive. Empty, the one node with O(node_ip).
    type: list
    elements: str
    default: []
  ray_gpus_expected:
    description:
      - The GPU count Ray must report for this host's node(s) - the GPUs given to the cluster's containers here
        (C(ray_container_gpus), C(ray_node_instances)), which may be fewer than the host has. Unset, NVML's count of
        all the host's GPUs.
    type: int
  auth_token_path:
    description: File holding the cluster's Ray token, for clusters with Ray token authentication.
    type: path
  check_pcie:
    description: Fail on a PCIe link running narrower than its maximum width.
    type: bool
    default: true
  expect_model:
    description: A part of the model name every GPU must have (C(H100), C(A100-SXM4-80GB)), case-insensitive.
    type: str
  min_driver:
    description: The oldest driver version accepted (C(535.104), C(570.86.15)).
    type: str
  fail_on_ecc:
    description: Fail on uncorrected ECC errors since boot (false - report them as warnings).
    type: bool
    default: true
  check_nvlink:
    description: Fail on a GPU with fewer NVLink links up than its peers.
    type: bool
    default: true
  vendor:
    description:
      - C(nvidia) reads NVML; C(amd) reads AMD's SMI tool (C(amd-smi static --json), or C(rocm-smi --json) on older
        ROCm) for the count, model, UUID, PCI bus id, memory and driver version, compared with Ray the same way.
      - C(auto) reads NVML, and AMD's tool where NVML is absent and the tool is installed.
    type: str
    choices: [auto, nvidia, amd]
    default: auto
  check_xid:
    description:
      - Read this boot's kernel log (C(journalctl -k)) for the driver's Xid error reports and tie each to its GPU.
      - Without journald (some VMs and minimal images), the kernel's ring buffer is read from C(/dev/kmsg) instead
        (root); a warning says when the buffer has already dropped the oldest messages of the boot.
      - Xids in O(fail_on_xid) fail the check; any other Xid is reported as a warning.
    type: bool
    default: true
  fail_on_xid:
    description:
      - Xid codes that make the node unfit - by default the hardware ones of NVIDIA's Xid catalog (48 double-bit
        ECC, 61/62 micro-controller, 63/64 row remapping, 74 NVLink, 79 fallen off the bus, 92 high single-bit ECC
        rate, 94/95 contained/uncontained ECC, 119/120 GSP, 140 unrecovered ECC).
    type: list
    elements: int
  dcgm_diag_level:
    description:
      - Also run NVIDIA DCGM's active diagnostic at this level (C(dcgmi diag -r LEVEL -j); 0 - not run) on NVIDIA GPU
        hosts, and fail on any test it fails, naming the GPU (index and UUID), the test and DCGM's own words; tests
        it skips are warnings. Level 1 takes seconds (deployment checks), 2 about two minutes, 3 about fifteen, 4
        longer; 2 and up load the GPUs, so run them before jobs start, not under them.
      - Needs DCGM and its host engine (C(nvidia-dcgm.service); the monitoring role installs DCGM on GPU nodes).
      - A diagnostic that returns no test result, or skips every test, checked nothing and fails the check.
    type: int
    choices: [0, 1, 2, 3, 4]
    default: 0
  dcgm_diag_required:
    description:
      - With O(dcgm_diag_level) above 0, fail on an NVIDIA GPU host where DCGM is not installed (C(dcgmi) not
        found). False, such a host is reported with a warning that the diagnostic was not run, and C(dcgm_diag.ran)
        is false; a DCGM that is installed but cannot run the diagnostic (host engine down) fails either way.
    type: bool
    default: true
  dcgm_diag_timeout:
    description: Seconds the diagnostic may take (default 120 at level 1, 600 at 2, 1800 at 3, 7200 at 4).
    type: int
  container_name:
    description:
      - A Ray node's container on this host (C(ray_runtime=container) of the M(rayfleet.cluster.ray_node) role's
        nodes). NVML is also read inside it (C(python -m rayfleet.gpu), the library is mounted there), and the check
        fails unless it sees exactly O(container_gpus), and unless no other running rayfleet container on this host
        (label C(io.rayfleet.node)) sees any of them.
    type: str
  container_engine:
    description: The engine running O(container_name).
    type: str
    choices: [podman, docker]
    default: podman
  container_python:
    description: The Python in the container's image that runs the rayfleet library.
    type: str
    default: python
  container_gpus:
    description: The UUIDs of the GPUs O(container_name) was given.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - rayfleet.cluster.attributes.info_module
seealso:
  - module: rayfleet.cluster.collective_check
  - name: NVML API reference
    description: The library this module reads.
    link: https://docs.nvidia.com/deploy/nvml-api/
"""

EXAMPLES = r"""
- name: Every GPU visible, healthy, and counted by Ray
  rayfleet.cluster.gpu_check:
    expect_gpus: 8
    ray_address: "{{ hostvars[groups['ray_head'][0]].ansible_default_ipv4.address }}:6379"
    node_ip: "{{ ansible_default_ipv4.address }}"
    auth_token_path: /etc/rayfleet/auth-token
  vars:
    ansible_python_interpreter: /opt/rayfleet/venv/bin/python
"""

RETURN = r"""
available:
  description: Whether NVML could be read.
  returned: always
  type: bool
reason:
  description: Why NVML could not be read (empty when it could).
  returned: always
  type: str
  sample: no NVIDIA driver on this host (libnvidia-ml.so.1 not found)
count:
  description: Number of GPUs NVML sees.
  returned: always
  type: int
gpus:
  description: Per GPU - index, uuid, name, pci_bus_id, memory_total_mib, persistence_mode, ecc_enabled,
    ecc_uncorrected_volatile, remap_failure, remap_pending, pcie_width, pcie_max_width, pcie_gen, mig_mode,
    nvlink_up, nvlink_total.
  returned: always
  type: list
  elements: dict
driver_version:
  description: NVIDIA driver version.
  returned: always
  type: str
cuda_driver_version:
  description: The CUDA version the driver supports.
  returned: always
  type: str
ray_gpus:
  description: GPUs Ray reports for this node (with O(ray_address)).
  returned: when ray_address is set
  type: float
ray_accelerator_types:
  description: The C(accelerator_type:<type>) resources Ray reports for this node (with O(ray_address)).
  returned: when ray_address is set
  type: list
  elements: str
nvml_version:
  description: The NVML library's version (ends with the driver version when they match).
  returned: always
  type: str
vendor:
  description: Whose GPUs were read - C(nvidia) (NVML) or C(amd) (AMD's SMI tool).
  returned: always
  type: str
xid_events:
  description: The driver's Xid reports in this boot's kernel log (bus_id, xid, detail), when O(check_xid).
  returned: when GPUs were read and the kernel log could be read
  type: list
  elements: dict
  sample: [{"bus_id": "0000:18:00", "xid": 79, "detail": "pid=1234, name=python, GPU has fallen off the bus."}]
problems:
  description: What makes the node unfit (the module fails when this is not empty).
  returned: always
  type: list
  elements: str
container_gpus_seen:
  description: The UUIDs NVML lists inside O(container_name), and inside each other rayfleet container on the host.
  returned: when container_name is set
  type: dict
  sample: {"ray-worker": ["GPU-5f2c..."], "ray-teamb-worker": ["GPU-81aa..."]}
dcgm_diag:
  description: What DCGM's diagnostic found (with O(dcgm_diag_level) above 0, on a host whose NVML could be read).
  returned: when dcgm_diag_level is above 0
  type: dict
  contains:
    level:
      description: The level run.
      type: int
    version:
      description: DCGM's version, as the diagnostic reports it.
      type: str
    failed:
      description: >-
        Failed tests - category, test, gpu (DCGM's GPU id, NVML's index; null - not tied to a GPU), status,
        messages.
      type: list
      elements: dict
    skipped:
      description: Tests skipped (their names).
      type: list
      elements: str
    error:
      description: Why the diagnostic could not run (empty when it ran).
      type: str
    ran:
      description: Whether the diagnostic ran and returned results (false - DCGM missing or the run failed).
      type: bool
warnings_found:
  description: Findings that do not fail the check (persistence mode off, ECC off).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.rayfleet.cluster.plugins.module_utils.rayfleet_common import (
    require_rayfleet,
)

try:
    from rayfleet.cluster import fetcher, get_state
    from rayfleet.dcgm import TIMEOUTS, diag_findings, run_diag
    from rayfleet.dcgm import installed as dcgm_installed
    from rayfleet.errors import RayfleetError
    from rayfleet.gpu import (
        HARDWARE_XIDS,
        container_gpu_problems,
        container_gpus,
        problems,
        read_gpus,
        read_kernel_xids,
        xid_findings,
    )
    from rayfleet.raynode import auth_env
except ImportError:
    pass  # reported by require_rayfleet()


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            expect_gpus=dict(type="int"),
            required=dict(type="bool", default=False),
            ray_address=dict(type="str"),
            node_ip=dict(type="str"),
            node_names=dict(type="list", elements="str", default=[]),
            ray_gpus_expected=dict(type="int"),
            auth_token_path=dict(type="path"),
            check_pcie=dict(type="bool", default=True),
            expect_model=dict(type="str"),
            min_driver=dict(type="str"),
            fail_on_ecc=dict(type="bool", default=True),
            check_nvlink=dict(type="bool", default=True),
            check_xid=dict(type="bool", default=True),
            vendor=dict(type="str", default="auto", choices=["auto", "nvidia", "amd"]),
            fail_on_xid=dict(type="list", elements="int"),
            container_name=dict(type="str"),
            container_engine=dict(type="str", default="podman", choices=["podman", "docker"]),
            container_python=dict(type="str", default="python"),
            container_gpus=dict(type="list", elements="str", default=[]),
            dcgm_diag_level=dict(type="int", default=0, choices=[0, 1, 2, 3, 4]),
            dcgm_diag_timeout=dict(type="int"),
            dcgm_diag_required=dict(type="bool", default=True),
        ),
        required_together=[("ray_address", "node_ip")],
        supports_check_mode=True,
    )


def ray_node_resources(address, node_ip, auth_token_path, node_names=()):
    """The resources Ray reports for the alive node with this IP, or summed over the alive nodes with these names
    (a host's node instances); (resources or None, what Ray does not list alive)."""
    os.environ.update(auth_env(auth_token_path))
    state = get_state(fetcher(address, auth_token_path=auth_token_path))
    if not node_names:
        node = state.alive_node(node_ip)
        return (None, ["IP %s" % node_ip]) if node is None else (dict(node.resources), [])
    by_name = state.alive_by_name()
    missing = ["name %s" % name for name in node_names if name not in by_name]
    total = {}
    for name in node_names:
        for key, value in (by_name[name].resources if name in by_name else {}).items():
            total[key] = total.get(key, 0.0) + value
    return (None if missing else total), missing


def containers_seen(module, engine, name, python):
    """NVML's UUIDs inside the named container and inside every other running rayfleet node container here."""
    rc, out, err = module.run_command([engine, "ps", "--filter", "label=io.rayfleet.node", "--format",
                                       "{{.Names}}"])
    if rc != 0:
        module.fail_json(msg="%s ps failed: %s" % (engine, err.strip()))
    names = [n.strip() for n in out.splitlines() if n.strip()]
    if name not in names:
        module.fail_json(msg="container %s is not running (%s ps lists %s)" % (name, engine, names or "none"))
    return dict((n, container_gpus(engine, n, python)) for n in names)


def dcgm_diag(level, timeout, report, required=True):
    """DCGM's diagnostic at this level: (problems, warnings, the result's dcgm_diag)."""
    if not required and not dcgm_installed():
        why_not = "dcgmi not found (DCGM is not installed: the monitoring role installs it on GPU nodes)"
        return ([], ["DCGM diag -r %d not run: %s" % (level, why_not)],
                dict(level=level, version="", failed=[], skipped=[], error=why_not, ran=False))
    diag, why_not = run_diag(level, timeout or TIMEOUTS[level])
    if diag is None:
        return (["DCGM diag -r %d was asked for (dcgm_diag_level), but %s" % (level, why_not)], [],
                dict(level=level, version="", failed=[], skipped=[], error=why_not, ran=False))
    bad, warn = diag_findings(diag, dict((g.index, g.uuid) for g in report.gpus), level)
    failed = [dict(category=r.category, test=r.test, gpu=r.gpu, status=r.status, messages=list(r.messages))
              for r in diag.failed]
    return bad, warn, dict(level=level, version=diag.version, failed=failed,
                           skipped=sorted(set(r.test for r in diag.skipped)), error=diag.runtime_error,
                           ran=not diag.runtime_error and bool(diag.results))


def main():
    module = build_module()
    require_rayfleet(module)
    p = module.params
    vendor, report = read_gpus(p["vendor"])
    result = dict(changed=False, vendor=vendor, **report.to_dict())
    ray_gpus = ray_types = None
    if p["ray_address"]:
        try:
            resources, missing = ray_node_resources(p["ray_address"], p["node_ip"], p["auth_token_path"],
                                                    p["node_names"])
        except Exception as exc:  # the state API is down or refuses us
            msg = "cannot read Ray's view of %s at %s: %s" % (p["node_ip"], p["ray_address"], to_native(exc))
            module.fail_json(msg=msg, **result)
        if resources is None:
            module.fail_json(msg="Ray lists no alive node with %s at %s" % (", ".join(missing), p["ray_address"]),
                             **result)
        ray_gpus = float(resources.get("GPU", 0.0))
        ray_types = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
        result.update(ray_gpus=ray_gpus, ray_accelerator_types=ray_types)
    bad, warn = problems(report, expect=p["expect_gpus"], check_pcie=p["check_pcie"],
                         ray_gpus=ray_gpus if report.available else None, expect_model=p["expect_model"],
                         min_driver=p["min_driver"], fail_on_ecc=p["fail_on_ecc"], check_nvlink=p["check_nvlink"],
                         ray_accelerator_types=ray_types if report.available else None,
                         ray_gpus_expected=p["ray_gpus_expected"])
    if p["check_xid"] and vendor == "nvidia" and report.available and report.gpus:
        events, why_not = read_kernel_xids()
        if events is None:
            warn.append("Xid events not read: " + why_not)
        else:
            if why_not:
                warn.append("Xid events " + why_not)
            fail_on = set(p["fail_on_xid"]) if p["fail_on_xid"] is not None else set(HARDWARE_XIDS)
            xid_bad, xid_warn = xid_findings(report, events, fail_on)
            bad += xid_bad
            warn += xid_warn
            result["xid_events"] = [dict(bus_id=e.bus_id, xid=e.xid, detail=e.detail) for e in events]
    if p["dcgm_diag_level"] and vendor == "nvidia" and report.available and report.gpus:
        diag_bad, diag_warn, result["dcgm_diag"] = dcgm_diag(p["dcgm_diag_level"], p["dcgm_diag_timeout"], report,
                                                             p["dcgm_diag_required"])
        bad += diag_bad
        warn += diag_warn
    if p["container_name"]:
        try:
            seen = containers_seen(module, p["container_engine"], p["container_name"], p["container_python"])
        except RayfleetError as exc:
            module.fail_json(msg="cannot read the GPUs inside the container: %s" % to_native(exc), **result)
        result["container_gpus_seen"] = seen
        others = dict((k, v) for k, v in seen.items() if k != p["container_name"])
        bad += container_gpu_problems(p["container_name"], p["container_gpus"], seen[p["container_name"]], others)
    if not report.available and p["required"] and not bad:
        bad.append("GPUs are required here, but " + report.reason)
    if not report.available and ray_gpus:
        bad.append("Ray reports %g GPU(s) on this node, but %s" % (ray_gpus, report.reason))
    result.update(problems=bad, warnings_found=warn)
    if bad:
        module.fail_json(msg="GPU check failed: " + "; ".join(bad), **result)
    if not report.available:
        result["msg"] = "no GPU checked: " + report.reason
    module.exit_json(**result)


if __name__ == "__main__":
    main()
