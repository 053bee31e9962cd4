# SPDX-License-Identifier: GPL-3.0-or-later
"""The Ray ports (and node exporter, and the ephemeral ports NCCL and gloo listen on) answer the cluster's hosts (and
the controller, the sandbox's submit host) and reset everyone else: probed for real, from a container on the same
network that is not in the cluster."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from conftest import RAY_DEFAULTS, head_host, inventory_ips, node_ip, stranger

HEAD_PORTS = ["gcs", "dashboard", "client_server", "object_manager", "node_manager", "metrics_export"]
WORKER_PORTS = ["object_manager", "node_manager", "metrics_export"]
NODE_EXPORTER_PORT = 9100  # the monitoring role's, restricted like Ray's
HEAD_METRICS_PORTS = [44217, 44227]  # Ray's autoscaler and dashboard metrics on the head


def _probe(ip: str, port: int) -> str:
    return f"timeout 3 bash -c '</dev/tcp/{ip}/{port}' && echo {port}:open || echo {port}:closed"


def _targets(request) -> list[tuple[str, int]]:
    ips = inventory_ips(request)
    out = []
    for name, ip in sorted(ips.items()):
        for port_name in HEAD_PORTS if name.endswith("head") else WORKER_PORTS:
            out.append((ip, RAY_DEFAULTS[f"ray_{port_name}_port"]))
        out.append((ip, NODE_EXPORTER_PORT))
        if name.endswith("head"):
            out += [(ip, port) for port in HEAD_METRICS_PORTS]
    return out


def test_ray_ports_closed_to_a_host_outside_the_cluster(request):
    head_ip = node_ip(head_host(request))
    targets = _targets(request)
    script = "; ".join(f"echo -n '{ip} '; {_probe(ip, port)}" for ip, port in targets)
    with stranger(head_ip.rsplit(".", 1)[0] + ".250") as run:
        proc = run(["bash", "-c", script])
        ssh = run(["bash", "-c", _probe(head_ip, 22)])
    lines = proc.stdout.split("\n")
    assert len([ln for ln in lines if ln.strip()]) == len(targets), proc.stdout + proc.stderr
    opened = [ln for ln in lines if ln.endswith(":open")]
    assert not opened, f"Ray ports reachable from outside the cluster: {opened}"
    assert ssh.stdout.strip() == "22:open", "SSH must stay reachable (no firewall_ssh_allowed_sources set)"


def test_ray_ports_open_between_cluster_hosts(request):
    worker = next(ip for name, ip in inventory_ips(request).items() if not name.endswith("head"))
    head = head_host(request)
    script = "; ".join(_probe(ip, port) for ip, port in _targets(request) if ip != node_ip(head))
    out = head.run(f"bash -c \"{script}\"").stdout
    assert ":closed" not in out and out.count(":open") == (len(WORKER_PORTS) + 1) * (len(inventory_ips(request)) - 1), (
        worker, out)


LISTEN = ("import socket, time; s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(8); "
          "open('/tmp/rayfleet-ephemeral-port', 'w').write(str(s.getsockname()[1])); time.sleep(60)")


@contextlib.contextmanager
def ephemeral_listener(host) -> Iterator[int]:
    """A socket bound to port 0 on the host (as NCCL's and gloo's are): its port, from the host's ephemeral range."""
    lo, hi = map(int, host.file("/proc/sys/net/ipv4/ip_local_port_range").content_string.split())
    host.run("rm -f /tmp/rayfleet-ephemeral-port")
    host.run(f"nohup python3 -c \"{LISTEN}\" >/dev/null 2>&1 &")
    try:
        port = ""
        for _attempt in range(50):
            port = host.run("cat /tmp/rayfleet-ephemeral-port").stdout.strip()
            if port:
                break
            time.sleep(0.2)
        assert port and lo <= int(port) <= hi, f"no listener in {lo}-{hi}: {port!r}"
        yield int(port)
    finally:
        host.run("pkill -f rayfleet-ephemeral-port")


def test_ephemeral_ports_where_nccl_and_gloo_listen_are_the_clusters_only(request):
    """A port-0 listener on a worker: the head reaches it, a host outside the cluster is reset."""
    from testinfra import get_host

    ips = inventory_ips(request)
    name = sorted(n for n in ips if not n.endswith("head"))[0]
    worker = get_host(f"ansible://{name}", ansible_inventory=request.config.option.ansible_inventory)
    head = head_host(request)
    with ephemeral_listener(worker) as port:
        assert head.run(_probe(ips[name], port)).stdout.strip() == f"{port}:open"
        with stranger(node_ip(head).rsplit(".", 1)[0] + ".250") as run:
            outside = run(["bash", "-c", _probe(ips[name], port)]).stdout.strip()
        assert outside == f"{port}:closed", f"{name}'s ephemeral port {port} answers a host outside the cluster"
