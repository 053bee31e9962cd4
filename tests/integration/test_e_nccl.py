# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL on the sandbox nodes (role nccl): NVIDIA's nvidia-nccl-cu13 wheel pinned in every Ray venv, Ray's processes
bound to the interface holding the node's Ray address, NCCL's own bootstrap (ncclGetUniqueId: no GPU needed)
landing on that address inside Ray, and a node whose Ray is given the wrong interface named by the preflight's
engine and by the role's check. The sandbox has no GPU and no EFA: those paths run on GPU/AWS hosts only."""

from __future__ import annotations

import json
import subprocess

import yaml
from conftest import (
    PYTHON_AS_RAY,
    ROOT,
    SANDBOX,
    VENV,
    ansible_env,
    container,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    ray_nodes,
    role_of,
    run_site,
    wait_for_cluster,
)

PINNED = yaml.safe_load((ROOT / "inventories/sandbox/group_vars/all/nccl.yml").read_text())["nccl_wheel_version"]


def interface_of(host, address: str) -> str:
    """The interface holding address, read with iproute2's JSON output on the host."""
    for link in json.loads(host.check_output("ip -j -4 addr show")):
        if any(a.get("local") == address for a in link.get("addr_info", [])):
            return link["ifname"]
    raise AssertionError(f"no interface of {host.backend.hostname} holds {address}")


def test_the_pinned_wheel_is_in_the_ray_venv(host):
    version = host.check_output(f"{VENV}/bin/python -c 'import importlib.metadata as m; "
                                f"print(m.version(\"nvidia-nccl-cu13\"))'")
    assert version == PINNED
    state = json.loads(host.file("/etc/rayfleet/nccl.json").content_string)
    assert state["source"] == "wheel" and state["socket_ifname"] == "auto" and state["efa"] is False


def test_ray_processes_carry_the_interface_of_the_node_address(host):
    ifname = interface_of(host, node_ip(host))
    pid = host.check_output("pgrep -o -x raylet")
    # as the raylet's own user: reading another user's environ needs CAP_SYS_PTRACE, which the containers lack
    environ = host.check_output(f"sudo -u rayfleet cat /proc/{pid}/environ | tr '\\0' '\\n'")
    env = dict(line.split("=", 1) for line in environ.splitlines() if "=" in line)
    assert env["NCCL_SOCKET_IFNAME"] == f"={ifname}" and env["GLOO_SOCKET_IFNAME"] == ifname
    settings = json.loads(host.file(f"/etc/rayfleet/ray-{role_of(host)}.json").content_string)
    assert settings["socket_ifname"] == "auto"


def test_nccl_bootstraps_on_the_ray_address_under_rays_environment(host):
    cmd = host.run(f"{VENV}/bin/python -m rayfleet.nccl --json --config /etc/rayfleet/ray-{role_of(host)}.json")
    assert cmd.rc == 0, cmd.stdout + cmd.stderr
    found = json.loads(cmd.stdout)
    assert found["ok"] and found["version"] == PINNED
    assert found["bootstrap"]["address"] == node_ip(host) and found["library"].endswith("nvidia/nccl/lib/libnccl.so.2")


def collective_by_hand(head, ips: dict[str, str]) -> subprocess.CompletedProcess:
    return head.run(f"{PYTHON_AS_RAY} -m rayfleet.collective --address {node_ip(head)}:6379 --backend gloo "
                    f"--max-bytes 64K --warmup-iters 1 --iters 2 --no-pairwise --json "
                    + " ".join(f"--host {ip}={name}" for name, ip in ips.items()))


def test_inside_ray_every_node_bootstraps_nccl_on_its_own_address(request):
    head = head_host(request)
    ips = inventory_ips(request)
    cmd = collective_by_hand(head, ips)
    assert cmd.rc == 0, cmd.stdout[-3000:] + cmd.stderr[-3000:]
    nodes = json.loads(cmd.stdout)["nodes"]
    assert sorted(n["name"] for n in nodes) == sorted(ips)
    for node in nodes:
        assert node["nccl"]["version"] == PINNED, node
        assert node["nccl"]["bootstrap"]["address"] == node["ip"], node


def test_a_node_given_the_wrong_interface_is_named(request):
    """worker2's Ray is restarted with socket_ifname lo (as a mistyped NCCL_SOCKET_IFNAME would do): the engine
    and the nccl role's check both name it; site.yml puts it right again."""
    head = head_host(request)
    ips = inventory_ips(request)
    worker = f"{SANDBOX}-worker2"
    settings = "/etc/rayfleet/ray-worker.json"
    old_ids = {n["node_id"] for n in ray_nodes(head, node_ip(head)) if n["node_ip"] == ips[worker]}
    podman("exec", container(worker), "python3", "-c",
           "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['socket_ifname']='lo'; "
           "open(p,'w').write(json.dumps(d, indent=2, sort_keys=True) + '\\n')", settings)
    podman("exec", container(worker), "systemctl", "restart", "ray-worker.service")
    try:
        wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=120, exclude_ids=old_ids)
        cmd = collective_by_hand(head, ips)
        assert cmd.rc != 0, cmd.stdout[-2000:]
        problems = json.loads(cmd.stdout)["problems"]
        assert problems == [f"node {worker}: NCCL bootstraps on 127.0.0.1 (NCCL_SOCKET_IFNAME='=lo'), not on the "
                            f"node's Ray address {ips[worker]}"], problems
        ml = subprocess.run(["ansible-playbook", "playbooks/ml.yml", "-i", "inventories/sandbox"], cwd=ROOT,
                            env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)
        assert ml.returncode != 0
        assert (f"nccl on {worker}: NCCL bootstraps on 127.0.0.1 (NCCL_SOCKET_IFNAME='=lo'), not on the node's Ray "
                f"address {ips[worker]}") in ml.stdout, ml.stdout[-3000:]
        assert "failed=1" in ml.stdout and ml.stdout.count("failed=0") == 2, ml.stdout[-1500:]
    finally:
        # whole: ml.yml stopped part way on the worker, so the ml stage has no record there until a run applies it
        fixed = run_site("--limit", worker)
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    assert '"socket_ifname": "auto"' in podman("exec", container(worker), "cat", settings)


def test_an_interface_the_host_lacks_is_refused_before_anything_changes(request):
    head = head_host(request)
    ips = inventory_ips(request)
    before = head.file("/etc/rayfleet/nccl.json").content_string
    proc = run_site("-e", "nccl_socket_ifname=ib0")
    assert proc.returncode != 0
    for name in ips:
        assert (f"nccl on {name}: nccl_socket_ifname is \"ib0\", but this host has no such interface (it has: "
                "eth0, lo); expected auto, empty, or one of those") in proc.stdout, proc.stdout[-3000:]
    assert "PLAY [Base of every node]" not in proc.stdout
    assert proc.stdout.count("changed=0 ") == len(ips), proc.stdout[-1500:]
    assert head.file("/etc/rayfleet/nccl.json").content_string == before
