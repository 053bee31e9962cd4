# SPDX-License-Identifier: GPL-3.0-or-later
"""The change matrix: for every role site.yml applies to the sandbox, a setting changed in the inventory reaches the
hosts after a plain site.yml, and reverting it (a plain site.yml without it) brings every host back to what it had.

Each change names the hosts it must reach and a probe that reads its effect on a host (a file, sshd's or nftables'
view, Ray's own node table). Before, after and after the revert the probe runs on every host: after the change the
output differs exactly on the hosts named (and shows the new value), after the revert it is what it was everywhere.
A change that never reaches a host, or a revert that leaves it behind, fails here - the stage machinery's inputs
(which variables, plan keys and other hosts each stage reads) are what this module guards.

Changes go in batches, two site.yml runs each: the changes of one batch belong to stages that do not run one another
(no stage of a batch is upstream of another's), so a missed input cannot hide behind another change's run, and before
each batch the drift check must find nothing to do (a stage that runs anyway would apply a change it missed). A batch
names the hosts whose Ray nodes may restart; the others must keep their Ray node ids.

The GPU stack's roles (nvidia_driver, cuda, rocm) need hosts in group gpu: the gpu-stack scenario applies their
settings. The submit host's and Apex's settings are applied by their extended modules (make test-full)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

import pytest
from conftest import SANDBOX, container, drifted_stages, podman, ray_nodes, run_drift, run_site

testinfra_hosts = [f"ansible://{SANDBOX}-head"]
# about 20 minutes on two CPUs: make test-full runs it
pytestmark = pytest.mark.extended
HEAD, WORKER1, WORKER2 = f"{SANDBOX}-head", f"{SANDBOX}-worker1", f"{SANDBOX}-worker2"
HOSTS = (HEAD, WORKER1, WORKER2)
SSHD_DEFAULTS = {"PasswordAuthentication": "no", "KbdInteractiveAuthentication": "no", "PermitEmptyPasswords": "no",
                 "PermitRootLogin": "prohibit-password"}


@dataclass(frozen=True)
class Change:
    role: str
    what: str
    # the inventory variables: {"all": {...}} for every host, {host: {...}} for one host's own (host_vars)
    values: dict
    # the hosts the change must reach (every other host keeps what the probe read before)
    reaches: tuple[str, ...]
    # a shell script run as root on each host: what it prints is the setting's effect there
    probe: str
    # what the probe prints after the change, on the hosts it reaches
    shows: str


@dataclass(frozen=True)
class Batch:
    name: str
    changes: tuple[Change, ...]
    # the hosts whose Ray nodes may restart; the others keep their node ids
    restarts: tuple[str, ...]


RAY_SETTINGS = "cat /etc/rayfleet/ray-head.json /etc/rayfleet/ray-worker.json 2>/dev/null"
SYSCTL = {"net.core.somaxconn": 8192, "net.ipv4.tcp_max_syn_backlog": 4096, "vm.max_map_count": 262144,
          "fs.inotify.max_user_instances": 8192}
# on the volume every sandbox host mounts (tools/sandbox.py), as a shared filesystem
CHECKPOINTS = "/mnt/checkpoints/matrix"
NFS_OPTIONS = "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,actimeo=7"
PIP = "/opt/rayfleet/venv/bin/python -m pip list --format freeze --disable-pip-version-check"

BATCHES = (
    Batch("group-wide values", (
        Change("common", "a kernel parameter", {"all": {"common_sysctl": SYSCTL}},
               HOSTS, "grep somaxconn /etc/sysctl.d/60-rayfleet.conf", "net.core.somaxconn = 8192"),
        Change("ssh_trust", "an sshd setting written as a YAML integer",
               {"all": {"ssh_trust_sshd_settings": {**SSHD_DEFAULTS, "ClientAliveInterval": 60}}},
               HOSTS, "/usr/sbin/sshd -T -C user=rayfleet,host=localhost,addr=127.0.0.1 | grep ^clientaliveinterval",
               "clientaliveinterval 60"),
        Change("firewall", "a host port opened", {"all": {"firewall_host_ports": [9100, 9400, 9123]}},
               HOSTS, "nft list ruleset | grep -q 9123 && echo open || echo closed", "open"),
        Change("nccl", "NCCL's debug output (NCCL_DEBUG=INFO), read by its own readiness check",
               {"all": {"nccl_env": {"NCCL_DEBUG": "INFO"}}},
               HOSTS, RAY_SETTINGS + " | python3 -c 'import json,sys; print(json.load(sys.stdin)"
                                     "[\"env\"].get(\"NCCL_DEBUG\"))'", "INFO"),
        Change("shared_storage", "an NFS mount option", {"all": {"shared_storage_nfs_options": NFS_OPTIONS}},
               HOSTS, "grep ' /mnt/shared ' /etc/fstab", "actimeo=7"),
        Change("nfs_server", "an extra NFS client, on the NFS server alone",
               {"all": {"nfs_server_extra_clients": ["192.0.2.7"]}},
               (HEAD,), "grep -c 192.0.2.7 /etc/ganesha/ganesha.conf 2>/dev/null || true", "1"),
    ), restarts=HOSTS),
    Batch("one host's values (host_vars)", (
        Change("common", "the Ray user's open-files limit on one worker", {WORKER1: {"common_nofile_limit": 70000}},
               (WORKER1,), "grep 'soft nofile' /etc/security/limits.d/60-rayfleet.conf", "rayfleet soft nofile 70000"),
        Change("ray", "one worker's CPUs as Ray sees them", {WORKER2: {"ray_num_cpus": 1}},
               (WORKER2,), RAY_SETTINGS + " | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"num_cpus\"])'",
               "1"),
        Change("monitoring", "Prometheus's retention, which only the head's Prometheus reads",
               {HEAD: {"monitoring_prometheus_retention": "30d"}},
               (HEAD,), "grep -o 'retention.time=[0-9a-z]*' /etc/default/prometheus 2>/dev/null || true",
               "retention.time=30d"),
    ), restarts=(WORKER2,)),
    Batch("Ray's group-wide values", (
        Change("ray", "an environment variable of every Ray node", {"all": {"ray_env": {"RAYFLEET_MATRIX": "1"}}},
               HOSTS, RAY_SETTINGS + " | python3 -c 'import json,sys; print(json.load(sys.stdin)"
                                     "[\"env\"].get(\"RAYFLEET_MATRIX\"))'", "1"),
        Change("pytorch", "an extra package in the Ray venv, from the wheelhouse",
               {"all": {"pytorch_extra_packages": ["tzdata==2026.6"]}},
               HOSTS, PIP + " | grep -ci '^tzdata==' || true", "1"),
    ), restarts=HOSTS),
    Batch("Ray node labels on one worker", (
        Change("ray", "one worker's Ray node labels (ray start --labels, fixed at start: that node restarts)",
               {WORKER1: {"ray_labels": {"team": "matrix"}}},
               (WORKER1,), RAY_SETTINGS + " | python3 -c 'import json,sys; print(json.load(sys.stdin)"
                                          ".get(\"labels\", {}).get(\"team\"))'", "matrix"),
    ), restarts=(WORKER1,)),
    Batch("the checkpoint store on the hosts' shared volume", (
        Change("checkpoint_store", "a shared-filesystem store, whose settings reach every Ray node",
               {"all": {"checkpoint_store_backend": "shared", "checkpoint_store_path": CHECKPOINTS,
                        "checkpoint_store_install_train": False}},
               HOSTS, "grep -v '^#' /etc/rayfleet/checkpoint.env 2>/dev/null || true",
               f"RAYFLEET_CHECKPOINT_URI={CHECKPOINTS}"),
    ), restarts=HOSTS),
    Batch("a head-only value the workers depend on", (
        Change("ray", "the GCS port, set for the head alone: the workers follow it",
               {HEAD: {"ray_gcs_port": 6390}},
               HOSTS, RAY_SETTINGS + " | python3 -c 'import json,sys; s = json.load(sys.stdin); "
                                     "print(s.get(\"head_address\") or s[\"ports\"][\"gcs\"])'",
               "6390"),
    ), restarts=HOSTS),
)


def probe(host: str, script: str) -> str:
    try:
        return podman("exec", container(host), "sh", "-c", script).strip()
    except subprocess.CalledProcessError as exc:
        return f"probe failed (exit {exc.returncode}): {exc.stdout}{exc.stderr}".strip()


def read_all(batch: Batch) -> dict[tuple[str, str], str]:
    return {(change.what, host): probe(host, change.probe) for change in batch.changes for host in HOSTS}


def inventory(batch: Batch) -> dict:
    """The batch's values as an inventory file: host variables for each host (they win over the sandbox's
    group_vars), every host's "all" values and its own."""
    hosts: dict[str, dict] = {host: {} for host in HOSTS}
    for change in batch.changes:
        for where, values in change.values.items():
            for host in (HOSTS if where == "all" else (where,)):
                hosts[host].update(values)
    return {"all": {"hosts": hosts}}


def node_ids(head) -> dict[str, str]:
    return {n["node_ip"]: n["node_id"] for n in ray_nodes(head, "") if n["state"] == "ALIVE"}


def ip_of(host: str) -> str:
    return podman("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container(host)).strip()


@pytest.mark.parametrize("batch", BATCHES, ids=[b.name for b in BATCHES])
def test_a_change_reaches_the_hosts_and_its_revert_brings_them_back(host, batch, tmp_path):
    extra = tmp_path / "matrix.json"
    extra.write_text(json.dumps(inventory(batch)))
    ips = {name: ip_of(name) for name in HOSTS}
    kept = {ips[name] for name in HOSTS if name not in batch.restarts}
    # a stage that would run anyway (a host drifted, the code changed) would apply a change whose input it missed
    drift = run_drift()
    assert drift.returncode == 0 and not drifted_stages(drift.stdout), (
        f"the sandbox is not converged before {batch.name}: {drifted_stages(drift.stdout)}")
    before, ids_before = read_all(batch), node_ids(host)
    assert len(ids_before) == len(HOSTS), f"not every node alive before the change: {ids_before}"
    reverted = False
    try:
        proc = run_site("-i", str(extra))
        assert proc.returncode == 0, f"site.yml with {batch.name}:\n{proc.stdout[-5000:]}{proc.stderr[-2000:]}"
        after, ids_after = read_all(batch), node_ids(host)
        assert len(ids_after) == len(HOSTS), f"not every node alive after the change: {ids_after}"
        assert {ip: ids_after.get(ip) for ip in kept} == {ip: ids_before[ip] for ip in kept}, (
            f"Ray restarted on a host the change does not touch ({sorted(kept)})")
        missed = []
        for change in batch.changes:
            for name in HOSTS:
                now, was = after[(change.what, name)], before[(change.what, name)]
                if name in change.reaches:
                    if now == was or change.shows not in now:
                        missed.append(f"{change.role} ({change.what}) did not reach {name}: {was!r} -> {now!r}, "
                                      f"expected {change.shows!r}")
                elif now != was:
                    missed.append(f"{change.role} ({change.what}) changed {name}, which it must not: {was!r} -> "
                                  f"{now!r}")
        assert not missed, "\n".join(missed)
        proc = run_site()
        assert proc.returncode == 0, f"the revert of {batch.name}:\n{proc.stdout[-5000:]}{proc.stderr[-2000:]}"
        reverted = True
        left = {key: (before[key], value) for key, value in read_all(batch).items() if value != before[key]}
        assert not left, f"the revert left these behind (change, host): (before, now) {left}"
        assert len(node_ids(host)) == len(HOSTS), "not every node alive after the revert"
    finally:
        if not reverted:
            run_site()
        podman("exec", container(HEAD), "rm", "-rf", CHECKPOINTS)
