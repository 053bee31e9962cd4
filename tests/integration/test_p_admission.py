# SPDX-License-Identifier: GPL-3.0-or-later
"""Admission on real hosts: every Ray node was proved before its raylet started, and a worker whose checks fail is
refused - it never joins, its unit stays stopped, and the journal, its admission file and the health metric name why.

Each fault is injected on one worker with podman (a settings file that gives the node a GPU this host does not have,
an edited node library), the unit is restarted as any restart would, and the worker is put back as it was.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time

import pytest
from conftest import (
    PYTHON_AS_RAY,
    RAY_DEFAULTS,
    SANDBOX,
    TOKEN_PATH,
    alive_ips,
    container,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    ray_nodes,
    wait,
    wait_for_cluster,
)

testinfra_hosts = ["ansible://ray_head", "ansible://ray_worker"]

RECORD = "/tmp/ray/rayfleet-admission.json"  # <ray_temp_dir>/rayfleet-admission.json of the unnamed cluster
SETTINGS = "/etc/rayfleet/ray-worker.json"
UNIT = "ray-worker.service"
LIBRARY_FILE = "/opt/rayfleet/lib/rayfleet/errors.py"  # one of the node library's files
PROM = f"{RAY_DEFAULTS['ray_health_textfile_dir']}/rayfleet-health.prom"
WORKER = f"{SANDBOX}-worker1"


def on(worker: str, command: str) -> str:
    return podman("exec", container(worker), "sh", "-c", command)


def record_of(worker: str) -> dict:
    return json.loads(on(worker, f"cat {RECORD}"))


def unit_state(worker: str) -> tuple[str, int]:
    out = on(worker, f"systemctl show --property=ActiveState --property=NRestarts {UNIT}")
    props = dict(line.split("=", 1) for line in out.split())
    return props["ActiveState"], int(props["NRestarts"])


def test_every_node_was_admitted_before_its_ray_started(host):
    record = json.loads(host.file(RECORD).content_string)
    checks = {c["name"]: c for c in record["checks"]}
    assert record["ok"] is True, record
    assert list(checks) == ["gpu", "dcgm", "nccl", "storage", "versions", "link"]
    assert checks["gpu"]["state"] == "n/a" and checks["nccl"]["state"] == "n/a", checks
    # the sandbox's hosts mount the head's NFS share: mounted and writable as the Ray user before Ray started
    assert checks["storage"]["state"] in ("ok", "n/a"), checks["storage"]
    role = host.ansible.get_variables()["group_names"]
    if "ray_head" in role:
        assert checks["versions"]["state"] == "n/a", checks["versions"]
        assert checks["link"] == {"name": "link", "ok": True, "state": "n/a",
                                  "reason": "the head is the cluster's first proved node"}
    else:
        # pair-tested, or said why not: a first start, before the pytorch role put torch into the Ray venv, or a
        # start with the whole cluster, before the head's node registered
        assert checks["link"]["state"] == "ok" or checks["link"]["reason"].startswith((
            "torch is not installed", "no proved node on another host to pair with yet")), checks
        # the head published its node library: the worker compared it, and Ray's and Python's versions
        assert checks["versions"]["state"] == "ok", checks["versions"]
        assert checks["versions"]["reason"].startswith(f"Ray {RAY_DEFAULTS['ray_version']}, Python 3."), checks
        assert "published no node library" not in checks["versions"]["reason"], checks["versions"]
    assert host.file(RECORD).mode == 0o644


def test_every_alive_node_carries_the_admission_label(request):
    """Ray's own node table (the GCS, read on the head): each node started with rayfleet.io/admission=passed."""
    head = head_host(request)
    cmd = head.run(f"{PYTHON_AS_RAY} -m rayfleet.cluster --json --auth-token-path {TOKEN_PATH} "
                   f"--address {node_ip(head)}:{RAY_DEFAULTS['ray_gcs_port']}")
    assert cmd.rc == 0, cmd.stderr
    state = json.loads(cmd.stdout)
    alive = [n for n in state["nodes"] if n["state"] == "ALIVE"]
    assert sorted(n["node_ip"] for n in alive) == sorted(inventory_ips(request).values())
    assert all(n["labels"].get("rayfleet.io/admission") == "passed" for n in alive), alive
    assert state["admitted_nodes"] == sorted(inventory_ips(request).values()) and state["unadmitted_nodes"] == []


@contextlib.contextmanager
def refused_worker(request, inject: str, restore: str):
    """Inject a fault on the worker, restart its unit; afterwards put it back, start it and wait for the cluster."""
    head = head_host(request)
    ips = inventory_ips(request)
    before = time.time()
    on(WORKER, inject)
    try:
        on(WORKER, f"systemctl restart {UNIT} || true")
        wait("the worker's unit refused (failed, not restarting)", lambda: unit_state(WORKER)[0] == "failed", 90)
        yield ips[WORKER], before
    finally:
        on(WORKER, restore)
        on(WORKER, f"systemctl reset-failed {UNIT}; systemctl start {UNIT}")
        wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=120)


def test_a_worker_given_a_gpu_it_does_not_have_is_refused_and_named(request):
    backup = f"{SETTINGS}.admission-test"
    edit = (f"import json; p = {SETTINGS!r}; d = json.load(open(p)); d['num_gpus'] = 1; "
            "open(p, 'w').write(json.dumps(d, indent=2, sort_keys=True) + '\\n')")
    inject = f"cp -p {SETTINGS} {backup} && python3 -c {shlex.quote(edit)}"
    with refused_worker(request, inject, f"mv {backup} {SETTINGS}") as (ip, before):
        record = record_of(WORKER)
        assert record["timestamp"] >= before - 1 and record["ok"] is False, record
        gpu = next(c for c in record["checks"] if c["name"] == "gpu")
        assert gpu["state"] == "failed" and gpu["reason"].startswith("the node is given 1 GPU(s) (num_gpus), but "), gpu
        journal = on(WORKER, f"journalctl --no-pager -n 80 -u {UNIT}")
        assert f"rayfleet.admission: {ip} refused: gpu: the node is given 1 GPU(s)" in journal, journal[-3000:]
        # Ray never started there: the cluster lists the worker's address dead or not at all
        assert ip not in wait_for_cluster_without(head_host(request), ip)
        # refused for good: systemd does not restart it (RestartPreventExitStatus), whatever the restart delay
        restarts = unit_state(WORKER)[1]
        time.sleep(RAY_DEFAULTS["ray_restart_sec"] * 2 + 1)
        assert unit_state(WORKER) == ("failed", restarts)
        # the unit's failure started the health check, which exports the verdict at once
        metric = f'rayfleet_admission_ok{{check="gpu",node="{ip}",rayfleet_cluster="default"}} 0'
        wait("the admission metric in the textfile collector", lambda: metric in on(WORKER, f"cat {PROM} || :"), 60)


def wait_for_cluster_without(head, ip: str) -> list[str]:
    """Ray's alive nodes once ip is not among them."""
    def alive():
        ips = alive_ips(ray_nodes(head, node_ip(head)))
        return ips if ip not in ips else None

    return wait(f"{ip} gone from Ray's alive nodes", alive, 60)


def test_a_worker_whose_node_library_is_not_the_heads_is_refused(request):
    backup = "/root/admission-test-errors.py"
    inject = f"cp -p {LIBRARY_FILE} {backup} && echo '# edited on this node' >> {LIBRARY_FILE}"
    with refused_worker(request, inject, f"cp -p {backup} {LIBRARY_FILE} && rm -f {backup}") as (ip, before):
        record = record_of(WORKER)
        assert record["timestamp"] >= before - 1 and record["ok"] is False, record
        versions = next(c for c in record["checks"] if c["name"] == "versions")
        assert versions["state"] == "failed", versions
        assert " here, " in versions["reason"] and "on the head (a different rayfleet release, or an edited " \
            "library" in versions["reason"], versions
        assert [c["name"] for c in record["checks"] if not c["ok"]] == ["versions"], record
        journal = on(WORKER, f"journalctl --no-pager -n 80 -u {UNIT}")
        assert f"rayfleet.admission: {ip} refused: versions: node library" in journal, journal[-3000:]


def test_a_worker_pair_tests_its_link_against_proved_nodes_before_it_starts(request):
    """A plain restart: before its raylet starts, worker1 runs the all-reduce with a proved node of another host,
    through a Ray client connection, and the same all-reduce between two proved nodes is its reference."""
    head = head_host(request)
    ips = inventory_ips(request)
    others = sorted(ip for name, ip in ips.items() if name != WORKER)
    before = time.time()
    on(WORKER, f"systemctl restart {UNIT}")
    wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=120)
    record = record_of(WORKER)
    assert record["timestamp"] >= before - 1 and record["ok"] is True, record
    link = next(c for c in record["checks"] if c["name"] == "link")
    figures = record["link"]
    settings = json.loads(on(WORKER, f"cat {SETTINGS}"))["link_check"]
    assert link["state"] == "ok", link
    # the peer is the other worker (workers before the head); the reference pair is the two other hosts
    assert figures["peer"] == ips[f"{SANDBOX}-worker2"] and sorted(figures["reference_pair"]) == others, figures
    assert figures["bytes"] == settings["bytes"] and figures["reference_gbps"] > 0, figures
    assert figures["floor_gbps"] == pytest.approx(settings["ratio"] * figures["reference_gbps"], rel=1e-3)
    assert figures["busbw_gbps"] >= figures["floor_gbps"], figures
    assert f"all-reduce with {figures['peer']} at " in link["reason"] and "at least " in link["reason"], link
    journal = on(WORKER, f"journalctl --no-pager -n 40 -u {UNIT}")
    assert "link: ok - all-reduce with" in journal, journal[-3000:]


def test_a_worker_whose_link_is_throttled_is_refused_and_named(request):
    # 100 Mbit/s out of the worker's interface (a NIC negotiated down, a bad cable), set before its unit restarts
    inject = "tc qdisc add dev eth0 root tbf rate 100mbit burst 64kb latency 50ms"
    with refused_worker(request, inject, "tc qdisc del dev eth0 root") as (ip, before):
        record = record_of(WORKER)
        assert record["timestamp"] >= before - 1 and record["ok"] is False, record
        assert [c["name"] for c in record["checks"] if not c["ok"]] == ["link"], record
        link = next(c for c in record["checks"] if c["name"] == "link")
        figures = record["link"]
        assert figures["busbw_gbps"] < figures["floor_gbps"], figures
        assert "bus bandwidth, below " in link["reason"] and "(a slow NIC, cable or link on this node)" in \
            link["reason"], link
        journal = on(WORKER, f"journalctl --no-pager -n 80 -u {UNIT}")
        assert f"rayfleet.admission: {ip} refused: link: all-reduce with {figures['peer']}" in journal, \
            journal[-3000:]
        # it never ran a task: Ray lists the worker dead or not at all, and systemd leaves it stopped
        assert ip not in wait_for_cluster_without(head_host(request), ip)
        assert unit_state(WORKER)[0] == "failed"
        metric = f'rayfleet_admission_ok{{check="link",node="{ip}",rayfleet_cluster="default"}} 0'
        wait("the admission metric in the textfile collector", lambda: metric in on(WORKER, f"cat {PROM} || :"), 60)
