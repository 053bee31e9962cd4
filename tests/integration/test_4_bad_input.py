# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad inventory input fails site.yml before anything changes, naming the variable and the host.

Each case runs the real site.yml against the running cluster with one bad variable and checks the
message, then that Ray was left alone: same node ids, settings files untouched.
"""

from __future__ import annotations

import pytest
from conftest import SANDBOX, drifted_stages, node_ip, ray_nodes, run_drift, run_site

testinfra_hosts = ["ansible://ray_head"]


def _settings_mtimes(host) -> str:
    """The settings site.yml writes (not the health timer's results, which it rewrites on its own every run)."""
    listed = host.run("stat -c '%n %Y' /etc/rayfleet/*.json").stdout.splitlines()
    return "\n".join(line for line in listed if not line.startswith("/etc/rayfleet/health"))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["-e", "ray_gcs_port=sixty"], ["ray_gcs_port", "sixty"]),
        (["-e", "ray_node_role=boss"], ["ray_node_role", "boss", "head", "worker"]),
        (["-e", "ray_head_address=no-such-head.invalid"],
         ["ray_head_address on {sandbox}-worker1", "no-such-head.invalid", "does not resolve"]),
        (["-e", '{"ray_dashboard_port": 6379}'],
         ["ray on {sandbox}-head: ray_gcs_port and ray_dashboard_port are both 6379; expected each Ray port "
          "different."]),
        (["-e", '{"ray_client_server_port": 70000}'],
         ["ray on {sandbox}-worker1: ray_client_server_port is 70000; expected a port number 1024-65535"]),
        (["-e", '{"common_nofile_limit": -1}'],
         ["common on {sandbox}-worker2: common_nofile_limit is -1; expected open files, a whole number"]),
        (["-e", '{"ray_pip_extras": ["default", "dashbord"]}'],
         ["ray on {sandbox}-head: ray_pip_extras is", "declares no extra dashbord (pip would install Ray without "
          "it)"]),
        (["-e", '{"ssh_trust_sshd_settings": {"PasswordAuthentication": "no", "ClientAliveInterval": "often"}}'],
         ["ssh_trust on {sandbox}-worker1: ssh_trust_sshd_settings is", "which this host's sshd refuses"]),
        (["-e", "pytorch_version=latest"],
         ['pytorch on {sandbox}-head: pytorch_version is "latest"; expected a torch release like 2.13.0']),
        (["-e", '{"shared_storage_mounts": [{"path": "mnt/data", "server": "10.0.0.1", "export": "/x"}]}'],
         ["shared_storage on {sandbox}-head", "shared_storage_mounts", "absolute", '["mnt/data"]']),
        # A TEST-NET-1 address (RFC 5737): routed nowhere, so nothing answers on the NFS port.
        (["-e", '{"shared_storage_mounts": [{"path": "/mnt/data", "server": "192.0.2.1", "export": "/x"}]}'],
         ["shared_storage on {sandbox}-worker1", "/mnt/data (server \"192.0.2.1\": no answer on port 2049"]),
        (["-e", "nfs_server_implementation=zfs"],
         ["fatal: [{sandbox}-head]", "nfs_server_implementation must be one of: kernel, ganesha, got: zfs"]),
        (["-e", '{"nfs_server_exports": [{"path": "/srv/rayfleet/shared", "clients": ["999.1.1.1", "10.0.0.0/33"]}]}'],
         ['nfs_server on {sandbox}-head: nfs_server_exports[0] (/srv/rayfleet/shared): clients has [\\"999.1.1.1\\", '
          '\\"10.0.0.0/33\\"]; expected IP addresses or CIDRs']),
        (["-e", '{"ray_node_instances": [{"name": "a"}, {"name": "a"}, {"name": "Head"}]}'],
         ["ray on {sandbox}-worker1: ray_node_instances", "the name a is given twice", 'item 3 has the name \\"Head\\"',
          "ray_runtime is host (instances run in containers)", "this host is the head (instances are workers)"]),
        (["-e", '{"ray_node_instance_slots": 5, "ray_node_instances": [{"name": "a", "slot": 5}, {"name": "b", '
                '"slot": 0}, {"name": "c", "slot": "x"}, {"name": "d", "slot": 0}]}'],
         ["ray on {sandbox}-worker1: ray_node_instances", "a: slot 5, but the host has 5 slots (0 to 4",
          'c: slot \\"x\\" is not a whole number >= 0', "d: slot 0 is taken by another instance too"]),
        (["-e", '{"ray_node_instance_slots": 1, "ray_node_instances": [{"name": "a"}, {"name": "b"}]}'],
         ["ray on {sandbox}-worker1: ray_node_instances", "ray_node_instance_slots is 1 (null, or a whole number "
          ">= the 2 instances)"]),
        (["-e", "ray_node_ip=cafe"],
         ['ray_node_ip on {sandbox}-worker1 is \\"cafe\\"; expected this host\'s IP address']),
        (["-e", "ray_version=2.51.1"],
         ["ray on {sandbox}-head: ray_version 2.51.1 with ray_auth_mode token", "Expected ray_version >= 2.52"]),
        # the settings checked besides the nodes' shape: one message per variable, every one at once
        (["-e", '{"ray_stop_drain_s": -1, "ray_preemption_metadata_url": "http://meta data", '
                '"ray_dashboard_grafana_url": "grafana:3000"}'],
         ["ray on {sandbox}-head: ray_stop_drain_s is -1; expected whole seconds, at least 0.",
          'ray on {sandbox}-worker1: ray_preemption_metadata_url is \\"http://meta data\\"; expected empty for the '
          "provider's own endpoint, or http(s)://host[:port].",
          'ray on {sandbox}-head: ray_dashboard_grafana_url is \\"grafana:3000\\"; expected an http(s):// URL']),
        (["-e", "checkpoint_store_backend=shared", "-e", "checkpoint_store_path=mnt/checkpoints"],
         ['checkpoint_store on {sandbox}-worker1: checkpoint_store_path is \\"mnt/checkpoints\\" with '
          "checkpoint_store_backend shared (not an absolute path); expected an absolute, normalized path"]),
        (["-e", "checkpoint_store_backend=shared", "-e", "checkpoint_store_path=/etc/rayfleet/checkpoints"],
         ['checkpoint_store on {sandbox}-head: checkpoint_store_path is \\"/etc/rayfleet/checkpoints\\" with '
          "checkpoint_store_backend shared (in /etc); expected", "not in /bin, /boot, /dev, /etc,"]),
        (["-e", '{"firewall_ray_allowed_sources": ["10.0.0.0/33", "cafe"], "firewall_ray_port_range": "11999-10002"}'],
         ['firewall on {sandbox}-worker2: firewall_ray_allowed_sources has [\\"10.0.0.0/33\\", \\"cafe\\"]',
          'firewall_ray_port_range is \\"11999-10002\\": expected low-high']),
        (["-e", "monitoring_prometheus_listen=0.0.0.0:99999"],
         # the head's dashboard reads Prometheus at the URL built from it: the cluster plan, first, names both
         ['ray on {sandbox}-head: ray_dashboard_prometheus_url is \\"http://0.0.0.0:99999\\"; expected an http(s)://',
          "by default it is built from monitoring_prometheus_listen"]),
    ],
    ids=["non-numeric-port", "role-boss", "unresolvable-head", "port-clash", "port-out-of-range",
         "negative-limit", "unknown-ray-extra", "sshd-value-sshd-refuses",
         "torch-unpinned", "relative-mount",
         "unreachable-nfs-server", "nfs-implementation", "nfs-export-clients", "node-instances", "node-instance-slots",
         "node-instance-slots-too-few", "node-ip-not-an-ip", "token-auth-needs-ray-2.52", "ray-settings",
         "checkpoint-path-relative", "checkpoint-path-system-dir", "firewall-sources-and-range",
         "monitoring-listen-port"],
)
def test_bad_variable_fails_before_changes(host, extra, expected):
    ip = node_ip(host)
    before_ids = {n["node_id"] for n in ray_nodes(host, ip) if n["state"] == "ALIVE"}
    before_files = _settings_mtimes(host)
    proc = run_site(*extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"site.yml accepted {extra}:\n{out[-3000:]}"
    for text in expected:
        assert text.format(sandbox=SANDBOX) in out, f"{text!r} not in the failure output:\n{out[-3000:]}"
    assert "changed=0" in out and "changed=1" not in out, f"something changed:\n{out[-2000:]}"
    assert {n["node_id"] for n in ray_nodes(host, ip) if n["state"] == "ALIVE"} == before_ids
    assert _settings_mtimes(host) == before_files


def test_gpu_host_without_a_driver_stops_the_ray_stage_by_name(host, tmp_path):
    """A host put in group gpu whose NVML cannot be read must not join Ray with 0 GPUs, silently."""
    ip = node_ip(host)
    before_ids = {n["node_id"] for n in ray_nodes(host, ip) if n["state"] == "ALIVE"}
    victim = f"{SANDBOX}-worker2"
    extra_inventory = tmp_path / "gpu.yml"
    extra_inventory.write_text(f"gpu:\n  hosts:\n    {victim}: {{}}\n")
    proc = run_site("-i", str(extra_inventory), "--tags", "ray")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert f"ray on {victim}: this host is in group gpu, but NVML cannot be read here" in out, out[-3000:]
    assert "no NVIDIA driver on this host (libnvidia-ml.so.1 not found)" in out, out[-3000:]
    assert "changed=0" in out and "changed=1" not in out, f"something changed:\n{out[-2000:]}"
    assert {n["node_id"] for n in ray_nodes(host, ip) if n["state"] == "ALIVE"} == before_ids
    # The ray stage stopped part way on worker2 with other inputs, so its record there stays set aside (and the ml
    # stage, which reads it, follows): the next run applies both there in full, changes nothing, and records them.
    # On the other nodes the stage ran with these inputs too, changed nothing, and its records were put back.
    left = drifted_stages(run_drift().stdout)
    assert left == {victim: ["ray: no record of this stage", "ml: the ray stage's pip items changed"]}, left
    again = run_site()
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert "changed=0" in out and "changed=1" not in out, f"something changed:\n{out[-2000:]}"
    assert {n["node_id"] for n in ray_nodes(host, ip) if n["state"] == "ALIVE"} == before_ids


@pytest.mark.parametrize("name", ["team a", "team/a"])
def test_a_bad_cluster_name_is_named_itself(host, name):
    """Not through the ray_temp_dir (or any other path) the ray role derives from it."""
    ip = node_ip(host)
    before_ids = {n["node_id"] for n in ray_nodes(host, ip) if n["state"] == "ALIVE"}
    proc = run_site("-e", f'{{"ray_cluster_name": "{name}"}}')
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert f'ray on {SANDBOX}-head: ray_cluster_name is \\"{name}\\"; expected lowercase letters, digits' in out, (
        out[-3000:])
    assert "ray_temp_dir" not in out, out[-3000:]
    assert "changed=0" in out and "changed=1" not in out, out[-2000:]
    assert {n["node_id"] for n in ray_nodes(host, ip) if n["state"] == "ALIVE"} == before_ids
