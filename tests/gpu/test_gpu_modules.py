# SPDX-License-Identifier: GPL-3.0-or-later
"""The product's own path on a real GPU host: a Ray head started the way the ray role's unit starts it
(`python -m rayfleet.raynode exec` with the settings the ray_node module writes: NVML's GPU count, token auth,
NCCL's interface resolved from the node's address), then the Ansible modules the preflight runs -
gpu_hardware_info, gpu_check against Ray's view of the node, collective_check with NCCL - through ansible-core.

Needs Ray and ansible-core in this Python (`make gpu-wheels` makes wheels to carry to a host without network); each
test skips, saying which is missing, where they are not installed."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT
from rayfleet import gpu
from rayfleet.nccl import interface_addresses
from rayfleet.raynode import RayNodeSettings, auth_env, processes

LIB = str(ROOT / "library_py")


def node_address() -> str:
    """The address a real node would give Ray: the first non-loopback IPv4, else loopback (no packet is sent)."""
    for ip in interface_addresses().values():
        if not ip.startswith("127.") and ":" not in ip:
            return ip
    return "127.0.0.1"


def lib_env(**extra: str) -> dict[str, str]:
    """This process's environment with the rayfleet library first on PYTHONPATH (as the node venv has it)."""
    return dict(os.environ, **extra,
                PYTHONPATH=os.pathsep.join(p for p in (LIB, os.environ.get("PYTHONPATH", "")) if p))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run_module(name: str, args: dict, timeout: int = 600) -> dict:
    """One rayfleet.cluster module on localhost through ansible-core (local connection, this Python)."""
    pytest.importorskip("ansible", reason="ansible-core is not installed in this Python (make gpu-wheels: README)")
    with tempfile.TemporaryDirectory(prefix="rf-ansible-") as tree:
        # ansible-core's own tree callback writes each host's result as JSON (the json callback is ansible.posix's)
        env = lib_env(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                      ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.tree", ANSIBLE_CALLBACK_TREE_DIR=tree,
                      ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"))
        cmd = [sys.executable, "-m", "ansible", "adhoc", "-i", "localhost,", "-c", "local",
               "-e", f"ansible_python_interpreter={sys.executable}", "localhost",
               "-m", f"rayfleet.cluster.{name}"] + (["-a", json.dumps(args)] if args else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout, check=False)
        result = Path(tree, "localhost")
        if not result.is_file():
            raise AssertionError(f"ansible {name}: no result (rc {proc.returncode})\n{proc.stdout[-3000:]}\n"
                                 f"{proc.stderr[-3000:]}")
        out = json.loads(result.read_text())
        out.setdefault("failed", proc.returncode != 0)  # the result file leaves out the task's own failed flag
        return out


@pytest.fixture(scope="session")
def ray_bin(tmp_path_factory) -> str:
    """Ray's command line on this Python (the venv's `ray`, as the ray role's unit runs it)."""
    pytest.importorskip("ray", reason="ray is not installed in this Python (make gpu-wheels: README)")
    wrapper = tmp_path_factory.mktemp("bin") / "ray"
    wrapper.write_text(f"#!{sys.executable}\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, name) of the live processes in process group pgid."""
    return [(pid, name) for pid, name, state, _ppid, pgrp in processes() if pgrp == pgid and state != "Z"]


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> list[tuple[int, str]]:
    """Stop a node as systemd stops the ray role's unit (KillMode=mixed): SIGTERM to the main process alone, then,
    after TimeoutStopSec (a head's: 10 s), SIGKILL to all that is left. Returns what of the node's process group
    was still running when the main process had ended (or the timeout had passed): nothing, when the stop works."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    left = group_members(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    return left


@contextlib.contextmanager
def ray_head(ray_bin: str, min_gpus: int, ports: dict[str, int], **settings_extra):
    """A Ray head as the ray role's unit runs it (`python -m rayfleet.raynode exec` on the settings file the
    ray_node module writes, token auth on); stopped, with every process it started, on leaving."""
    base = Path(tempfile.mkdtemp(prefix="rf-gpu-", dir="/tmp"))  # short: Ray's socket paths have a length limit
    token = base / "auth-token"
    token.write_text(secrets.token_hex(32) + "\n")
    token.chmod(0o600)
    ip = node_address()
    gcs = free_port()
    settings = RayNodeSettings.from_mapping({
        "role": "head", "node_ip": ip, "ray_bin": ray_bin, "include_dashboard": False,
        "temp_dir": str(base / "ray"), "socket_ifname": "auto", "auth_token_path": str(token),
        "ports": {**ports, "gcs": gcs}, **settings_extra})
    env = lib_env()
    with ray_node(settings, base, "head.log") as proc:
        address = f"{ip}:{gcs}"
        started = time.monotonic()
        # rayfleet.cluster's wait in its own process, as the modules run (Ray reads the token mode once)
        wait = subprocess.Popen([sys.executable, "-m", "rayfleet.cluster", "--address", address, "--min-nodes",
                                 "1", "--min-gpus", str(min_gpus), "--timeout", "90", "--json",
                                 "--auth-token-path", str(token)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        while wait.poll() is None and proc.poll() is None:
            time.sleep(0.5)
        if wait.returncode != 0:
            wait.kill()
            _out, err = wait.communicate()
            raise AssertionError(f"the head did not register (ray start: {proc.poll()}): {err[-2000:]}\n"
                                 f"{(base / 'head.log').read_text()[-4000:]}")
        state = json.loads(wait.stdout.read())
        print(f"\nRay head up in {time.monotonic() - started:.1f} s at {address}: "
              f"{shlex.join(settings.start_args())}")
        yield {"address": address, "ip": ip, "token": str(token), "state": state, "proc": proc,
               "log": base / "head.log"}


@contextlib.contextmanager
def ray_node(settings: RayNodeSettings, base: Path, log_name: str, stop_timeout: float = 10.0):
    """`python -m rayfleet.raynode exec` on these settings (the ray role's ExecStart), in a session of its own, its
    output in base/log_name; stopped as its unit stops it on leaving."""
    config = base / f"{log_name}.settings.json"
    config.write_text(json.dumps(settings.to_dict()))
    with (base / log_name).open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rayfleet.raynode", "exec", "--config", str(config)],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=lib_env())
        try:
            yield proc
        finally:
            stop(proc, timeout=stop_timeout)


@pytest.fixture(scope="session")
def head(nvml, ray_bin):
    """The head the module tests share: Ray told NVML's GPU count, as the ray role does on group `gpu`."""
    with ray_head(ray_bin, len(nvml.gpus), {}, num_gpus=len(nvml.gpus)) as info:
        yield info


def test_gpu_hardware_info_finds_nvmls_gpus_on_the_pci_bus(nvml):
    result = run_module("gpu_hardware_info", {})
    assert not result.get("failed"), result.get("msg")
    print(json.dumps({k: result[k] for k in ("nvidia_gpus", "nvswitches", "nvidia_module", "flavor_required",
                                             "secure_boot", "kernel") if k in result}, indent=1))
    on_bus = {g["bus_id"].lower() for g in result["nvidia_gpus"]}
    for g in nvml.gpus:
        # NVML's bus id has a 32-bit domain (00000000:18:00.0), the PCI bus's a 16-bit one (0000:18:00.0)
        assert g.pci_bus_id.lower()[-12:] in on_bus, (g.pci_bus_id, sorted(on_bus))
    arch = {g["architecture"] for g in result["nvidia_gpus"]}
    assert "unknown" not in arch, result["nvidia_gpus"]
    if any(m in nvml.gpus[0].name for m in ("H100", "H200", "H800", "GH200")):
        assert arch == {"hopper"} and result["flavor_required"] == "open", result
    assert result["nvidia_module"]["loaded"], result["nvidia_module"]


def test_head_gets_nvmls_gpu_count_and_model_from_the_product_path(nvml, head):
    alive = [n for n in head["state"]["nodes"] if n["state"] == "ALIVE"]
    assert len(alive) == 1 and alive[0]["is_head"], head["state"]
    resources = alive[0]["resources"]
    print("Ray's resources for the head:", resources)
    assert resources.get("GPU", 0.0) == float(len(nvml.gpus))
    types = [k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")]
    assert types and all(gpu.accelerator_type_matches(t, nvml.gpus[0].name) for t in types), (types, nvml.gpus[0])


def test_ray_cluster_info_waits_for_the_head_and_its_gpus_through_the_gcs(nvml, head):
    """ray_cluster_info against the GCS (no dashboard on this head), as any node can reach it."""
    result = run_module("ray_cluster_info", {"address": head["address"], "auth_token_path": head["token"],
                                             "timeout": 60, "wait_for": {"min_nodes": 1, "min_gpus": len(nvml.gpus),
                                                                         "hosts": {head["ip"]: "gpu-host"}}})
    assert not result.get("failed"), result.get("msg")
    print({k: result[k] for k in ("alive_nodes", "gpus", "cpus", "ray_version")})
    assert result["alive_nodes"] == 1 and result["gpus"] == float(len(nvml.gpus))


def test_gpu_check_module_agrees_with_ray(nvml, head):
    result = run_module("gpu_check", {"ray_address": head["address"], "node_ip": head["ip"],
                                      "auth_token_path": head["token"], "expect_gpus": len(nvml.gpus),
                                      "expect_model": nvml.gpus[0].name.replace("NVIDIA ", "")})
    shown = ("msg", "available", "count", "ray_gpus", "ray_accelerator_types", "driver_version", "warnings_found",
             "problems")
    print(json.dumps({k: result.get(k) for k in shown}, indent=1))
    assert not result.get("failed"), result.get("msg")
    assert result["ray_gpus"] == float(len(nvml.gpus))
    assert [g["uuid"] for g in result["gpus"]] == [g.uuid for g in nvml.gpus]


def test_gpu_check_module_fails_naming_the_gap(nvml, head):
    """The same check asked for one GPU more than the host has: it must fail, and say what it found."""
    result = run_module("gpu_check", {"ray_address": head["address"], "node_ip": head["ip"],
                                      "auth_token_path": head["token"], "expect_gpus": len(nvml.gpus) + 1})
    print("msg:", result.get("msg"))
    assert result.get("failed"), result
    assert f"NVML sees {len(nvml.gpus)} GPU(s), expected {len(nvml.gpus) + 1}" in result["msg"], result["msg"]


def test_collective_check_module_runs_nccl_on_the_local_gpus(nvml, head):
    """collective_check as the preflight runs it, inside one node (PACK): NCCL, one rank per GPU, every size
    checked for a correct sum. One GPU makes a one-rank group: NCCL runs, but bus bandwidth is 0 by definition
    (2(n-1)/n) and no link is crossed, so the number says nothing about NVLink or the network."""
    result = run_module("collective_check", {"address": head["address"], "auth_token_path": head["token"],
                                             "backend": "nccl", "intra_node": True, "min_bytes": "8",
                                             "max_bytes": "1G", "iters": 20, "warmup_iters": 5,
                                             "hosts": {head["ip"]: "gpu-host"}})
    assert not result.get("failed"), result.get("msg")
    print(result.get("table") or json.dumps(result.get("rows"), indent=1))
    print("transport:", json.dumps(result.get("transport")), "versions:", json.dumps(result.get("versions")))
    assert result["backend"] == "nccl" and result["world_size"] == len(nvml.gpus)
    rows = result["rows"]
    assert rows[-1]["size"] == 1 << 30 and all(r["wrong"] == 0 for r in rows), rows
    assert all(r["time_us"] > 0 for r in rows)
    nodes = result["nodes"]
    assert len(nodes) == 1 and len(nodes[0]["gpu_ids"]) == len(nvml.gpus), nodes
    assert nodes[0]["nccl"]["available"], nodes[0]["nccl"]
    if len(nvml.gpus) > 1:
        assert result["peak_busbw_gbps"] > 0, result
    else:  # the report must say that one rank measures no bandwidth, not print a fantasy figure unqualified
        assert "One rank" in result["table"] and result["peak_busbw_gbps"] == 0, result["table"]


def test_gpu_check_runs_dcgms_diagnostic_level_1(nvml):
    """gpu_check's deeper check (dcgm_diag_level) against DCGM itself, where DCGM is installed."""
    if shutil.which("dcgmi") is None:
        pytest.skip("DCGM is not installed on this host (no dcgmi): its diagnostic cannot run here")
    result = run_module("gpu_check", {"dcgm_diag_level": 1, "check_xid": False}, timeout=300)
    print(json.dumps(result.get("dcgm_diag"), indent=1), "msg:", result.get("msg"))
    assert "dcgm_diag" in result, result
    assert result["dcgm_diag"]["level"] == 1
    assert not result.get("failed"), result.get("msg")


def test_gpu_check_names_a_ray_node_started_with_a_stray_cuda_visible_devices(nvml, ray_bin, head):
    """The fault gpu_check exists for: Ray started with CUDA_VISIBLE_DEVICES empty (and no --num-gpus) sees no
    GPU while NVML sees them all; the check must fail and say so. A second head, on ports of its own."""
    ports = {"dashboard": 8365, "client_server": 20001, "object_manager": 20076, "node_manager": 20077,
             "dashboard_agent_grpc": 20078, "runtime_env_agent": 20079, "metrics_export": 20080,
             "dashboard_agent_listen": 52465, "min_worker": 20100, "max_worker": 20999}
    with ray_head(ray_bin, 0, ports, env={"CUDA_VISIBLE_DEVICES": ""}) as blind:
        alive = [n for n in blind["state"]["nodes"] if n["state"] == "ALIVE"]
        assert alive[0]["resources"].get("GPU", 0.0) == 0.0, alive
        result = run_module("gpu_check", {"ray_address": blind["address"], "node_ip": blind["ip"],
                                          "auth_token_path": blind["token"]})
    print("msg:", result.get("msg"))
    assert result["failed"], result
    assert f"Ray reports 0 GPU(s) on this node, NVML {len(nvml.gpus)}" in result["msg"], result["msg"]


HOLD_A_GPU = """
import os, sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)

@ray.remote(num_gpus=1)
class Holder:
    def hold(self, mib):
        import torch
        self.block = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        return os.getpid()

holder = Holder.options(name="gpu-holder", lifetime="detached").remote()
print(ray.get(holder.hold.remote(1024)))
"""


def gpu_process_pids() -> set[int]:
    """The pids NVML lists as holding a compute context on any GPU of this host."""
    import pynvml

    pynvml.nvmlInit()
    try:
        return {p.pid for i in range(pynvml.nvmlDeviceGetCount())
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(i))}
    finally:
        pynvml.nvmlShutdown()


def test_a_stopped_head_frees_its_gpus_and_leaves_no_process(nvml, ray_bin, torch_cuda):
    """A node stopped as its unit is stopped (SIGTERM to rayfleet.raynode's supervisor alone) must end within the
    unit's stop timeout, by the stop signal, with none of Ray's processes left - above all none holding GPU memory
    that the next start of the node would find taken. A detached actor holds 1 GiB on GPU 0 when the stop comes."""
    ports = {"dashboard": 8465, "client_server": 21001, "object_manager": 21076, "node_manager": 21077,
             "dashboard_agent_grpc": 21078, "runtime_env_agent": 21079, "metrics_export": 21080,
             "dashboard_agent_listen": 52565, "min_worker": 21100, "max_worker": 21999}
    with ray_head(ray_bin, len(nvml.gpus), ports, num_gpus=len(nvml.gpus),
                  env={"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}) as node:  # the head unit's setting
        driver = subprocess.run([sys.executable, "-c", HOLD_A_GPU, node["address"]], capture_output=True,
                                text=True, timeout=180, env=lib_env(**auth_env(node["token"])), check=False)
        assert driver.returncode == 0, driver.stderr[-3000:]
        holder = int(driver.stdout.split()[-1])
        assert holder in gpu_process_pids(), (holder, gpu_process_pids())
        in_group = group_members(node["proc"].pid)
        started = time.monotonic()
        left = stop(node["proc"])
        took = time.monotonic() - started
        print(f"\nstopped in {took:.1f} s (exit {node['proc'].returncode}); Ray's processes before the stop: "
              f"{len(in_group)}; left: {left}")
        print("".join(line for line in node["log"].read_text().splitlines(True) if "rayfleet.raynode" in line))
        assert not left, f"outlived the supervisor: {left}"
        # what the unit counts as a stop: Ray's exit 1 after its SIGTERM handler (SuccessExitStatus=1), or the signal
        assert node["proc"].returncode in (1, -signal.SIGTERM), node["proc"].returncode
        for _try in range(50):  # NVML drops a process's context shortly after it ends
            if holder not in gpu_process_pids():
                break
            time.sleep(0.1)
        assert holder not in gpu_process_pids(), f"the actor's process {holder} still holds a GPU after the stop"
        assert not Path(f"/proc/{holder}").exists(), f"the actor's process {holder} outlived the stop"


@contextlib.contextmanager
def ray_worker(ray_bin: str, head: dict, name: str, ports: dict[str, int], **settings_extra):
    """A second Ray node on this host joining `head`, named `name` (Ray's --node-name), as the ray role runs each of
    a host's node instances (ray_node_instances); stopped as its unit stops it on leaving."""
    base = Path(tempfile.mkdtemp(prefix="rf-gpu-w-", dir="/tmp"))
    settings = RayNodeSettings.from_mapping({
        "role": "worker", "node_ip": head["ip"], "ray_bin": ray_bin, "head_address": head["address"],
        "node_name": name, "temp_dir": str(base / "ray"), "socket_ifname": "auto", "auth_token_path": head["token"],
        "ports": ports, **settings_extra})
    with ray_node(settings, base, "worker.log", stop_timeout=30) as proc:
        yield {"proc": proc, "log": base / "worker.log"}


def test_a_named_node_beside_the_head_is_found_by_its_name(nvml, ray_bin, head):
    """Two Ray nodes of one cluster on one GPU host share its IP (ray_node_instances): each is found by its Ray node
    name <ip>/<instance>. ray_cluster_info waits for the named node; gpu_check sums Ray's GPUs over the named nodes
    only (not the head beside them) against the GPUs given to them, and names an instance Ray does not list."""
    name = f"{head['ip']}/gpu0"
    ports = {"object_manager": 22076, "node_manager": 22077, "dashboard_agent_grpc": 22078,
             "runtime_env_agent": 22079, "metrics_export": 22080, "dashboard_agent_listen": 52665,
             "min_worker": 22100, "max_worker": 22999}
    with ray_worker(ray_bin, head, name, ports, num_gpus=len(nvml.gpus)) as worker:
        waited = run_module("ray_cluster_info", {
            "address": head["address"], "auth_token_path": head["token"], "timeout": 90,
            "wait_for": {"min_nodes": 2, "hosts": {head["ip"]: "gpu-host", name: "gpu-host/gpu0"}}})
        assert not waited.get("failed"), (waited.get("msg"), worker["log"].read_text()[-3000:])
        names = sorted(n.get("node_name") for n in waited["nodes"] if n["state"] == "ALIVE")
        print("alive nodes:", names, "GPUs:", waited["gpus"])
        assert waited["alive_nodes"] == 2 and name in names and head["ip"] in names, names
        ok = run_module("gpu_check", {"ray_address": head["address"], "node_ip": head["ip"],
                                      "auth_token_path": head["token"], "node_names": [name],
                                      "ray_gpus_expected": len(nvml.gpus)})
        assert not ok.get("failed"), ok.get("msg")
        assert ok["ray_gpus"] == float(len(nvml.gpus))  # the named node's alone: the head has as many besides
        missing = run_module("gpu_check", {"ray_address": head["address"], "node_ip": head["ip"],
                                           "auth_token_path": head["token"], "ray_gpus_expected": len(nvml.gpus),
                                           "node_names": [name, f"{head['ip']}/gpu1"]})
        print("msg:", missing.get("msg"))
        assert missing.get("failed") and f"Ray lists no alive node with name {head['ip']}/gpu1" in missing["msg"]


GPU_TASK_NODES = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)

@ray.remote(num_gpus=1)
def where():
    return ray.get_runtime_context().get_node_id()

print(" ".join(ray.get([where.remote() for _ in range(4)], timeout=120)))
"""

# One run of rayfleet.health in a process of its own, as the node's timer runs it (Ray's client reads a cluster's
# token once per process). The units' systemd state is taken as active, and a restart is written to a file for the
# test to carry out: these nodes have no systemd units. Prints the state and the GCS's node table.
HEALTH_RUN = """
import json, sys
from pathlib import Path
from rayfleet import health
from rayfleet.raynode import load_settings

spec = json.loads(sys.argv[1])
nodes = [health.Node(config, unit, load_settings(config)) for config, unit in spec["nodes"]]

def restart(unit):
    with open(spec["restarts"], "a") as out:
        out.write(unit + "\\n")
    return True, ""

env = health.Environment(unit_active=lambda unit: True, restart=restart)
options = health.Options(health_dir=Path(spec["dir"]), script_timeout=30, drain=True)
state = health.run(nodes, options, env, spec["previous"], log=lambda msg: print("health:", msg, file=sys.stderr))
table = [dict(entry) for entry in health.gcs_nodes(nodes[0].settings)]
print(json.dumps({"state": state, "table": table}, default=str))
"""


def test_health_drains_a_failing_gpu_node_and_brings_it_back(nvml, ray_bin, head, tmp_path):
    """rayfleet.health on the head and a named GPU node beside it: NVML's GPUs against Ray's GPU count for each
    node, the node table read from the GCS, the drain through Ray's GCS client. A failing site script in health.d
    drains the named node (Ray then places no GPU task there) and never the head; with the script gone the node is
    restarted (by the test, as systemctl would restart its unit) and comes back with a new node id."""
    n = len(nvml.gpus)
    name = f"{head['ip']}/gpu1"
    base = Path(tempfile.mkdtemp(prefix="rf-gpu-h-", dir="/tmp"))
    settings = RayNodeSettings.from_mapping({
        "role": "worker", "node_ip": head["ip"], "ray_bin": ray_bin, "head_address": head["address"],
        "node_name": name, "temp_dir": str(base / "ray"), "socket_ifname": "auto", "auth_token_path": head["token"],
        "num_gpus": n, "ports": {"object_manager": 23076, "node_manager": 23077, "dashboard_agent_grpc": 23078,
                                 "runtime_env_agent": 23079, "metrics_export": 23080,
                                 "dashboard_agent_listen": 52765, "min_worker": 23100, "max_worker": 23999}})
    checks = tmp_path / "health.d"
    checks.mkdir(mode=0o755)
    restarts = tmp_path / "restarts"
    spec = {"nodes": [[str(head["log"].with_name("head.log.settings.json")), "ray-head.service"],
                      [str(base / "worker.log.settings.json"), "ray-worker-gpu1.service"]],
            "dir": str(checks), "restarts": str(restarts), "previous": None}

    def check(previous):
        proc = subprocess.run([sys.executable, "-c", HEALTH_RUN, json.dumps(dict(spec, previous=previous))],
                              capture_output=True, text=True, timeout=120, env=lib_env(), check=False)
        print(proc.stderr.strip())
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        return out["state"], {node["name"]: node for node in out["state"]["nodes"]}, {
            e["node_id"]: e for e in out["table"]}

    def until(what, ready, timeout=90.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = ready()
            if found:
                return found
            time.sleep(2)
        raise AssertionError(f"{what}: not within {timeout:g} s\n{(base / 'worker.log').read_text()[-3000:]}")

    with contextlib.ExitStack() as stack:
        stack.enter_context(ray_node(settings, base, "worker.log", stop_timeout=30))
        state, by_name, _table = until("the named node alive in Ray", lambda: (s := check(None))[0]["ok"] and s)
        for node in by_name.values():
            gpu = next(c for c in node["checks"] if c["name"] == "gpu")
            print(node["name"], json.dumps(node["checks"]))
            assert gpu["state"] == "ok" and gpu["reason"].startswith(f"nvidia {n} GPU(s), Ray {n}"), gpu
        old_id, head_id = by_name[name]["node_id"], by_name[head["ip"]]["node_id"]
        assert old_id and head_id and old_id != head_id

        script = checks / "50-ecc"
        script.write_text("#!/bin/sh\necho 'uncorrected ECC errors over the site limit'\nexit 3\n")
        script.chmod(0o755)
        state, by_name, table = check(state)
        worker, head_node = by_name[name], by_name[head["ip"]]
        assert not state["ok"] and worker["drained"]["node_id"] == old_id, worker
        assert "script:50-ecc: exit 3: uncorrected ECC errors over the site limit" in worker["drained"]["reason"]
        assert head_node["drained"] is None and "the head is never drained" in head_node["action"], head_node
        print("drained:", worker["action"], "; Ray:", table[old_id].get("state"), table[old_id].get("draining"))
        placed = subprocess.run([sys.executable, "-c", GPU_TASK_NODES, head["address"]], capture_output=True,
                                text=True, timeout=180, env=lib_env(**auth_env(head["token"])), check=False)
        assert placed.returncode == 0, placed.stderr[-3000:]
        assert set(placed.stdout.split()) == {head_id}, (placed.stdout, old_id)

        script.unlink()
        state, by_name, _table = until("a restart once Ray lists the drained node dead",
                                       lambda: (s := check(state))[1][name]["restarted"] and s)
        assert restarts.read_text().split() == ["ray-worker-gpu1.service"], by_name[name]
        print("back:", by_name[name]["action"])
        stack.close()  # the unit's restart: stop the node, start it again
        stack.enter_context(ray_node(settings, base, "worker.log", stop_timeout=30))
        state, by_name, _table = until("the restarted node alive with a new id",
                                       lambda: (s := check(state))[0]["ok"] and s)
        worker = by_name[name]
        assert worker["node_id"] not in (None, old_id) and worker["drained"] is None, worker
        assert worker["restarted"]["drained_node_id"] == old_id, worker
        raylet = next(c for c in worker["checks"] if c["name"] == "raylet")
        assert raylet["reason"] == f"node {worker['node_id'][:12]} alive", raylet  # alive, and not draining
