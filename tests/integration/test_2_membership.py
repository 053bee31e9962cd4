# SPDX-License-Identifier: GPL-3.0-or-later
"""Ray's own view of the cluster, read on the head: every inventory node alive, nothing else."""

from __future__ import annotations

from conftest import RAY, RAY_DEFAULTS, alive_ips, inventory_ips, node_ip, ray_nodes

testinfra_hosts = ["ansible://ray_head"]


def test_ray_list_nodes_shows_every_inventory_node_alive(host, request):
    nodes = ray_nodes(host, node_ip(host))
    assert alive_ips(nodes) == sorted(inventory_ips(request).values())
    heads = [n for n in nodes if n["state"] == "ALIVE" and n["is_head_node"]]
    assert [n["node_ip"] for n in heads] == [node_ip(host)]


def test_ray_status_counts_every_node_active(host, request):
    status = host.run(f"cd /tmp && {RAY} status --address {node_ip(host)}:{RAY_DEFAULTS['ray_gcs_port']}")
    assert status.rc == 0, status.stderr
    active = status.stdout.split("Active:")[1].split("Pending:")[0]
    assert active.count("node_") == len(inventory_ips(request)), status.stdout


def test_each_node_offers_the_configured_cpus(host, request):
    want = host.ansible.get_variables().get("ray_num_cpus")
    nodes = [n for n in ray_nodes(host, node_ip(host)) if n["state"] == "ALIVE"]
    assert want is not None, "the sandbox inventory pins ray_num_cpus"
    assert {n["resources_total"]["CPU"] for n in nodes} == {float(want)}
