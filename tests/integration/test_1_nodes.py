# SPDX-License-Identifier: GPL-3.0-or-later
"""State of every node after site.yml: units, venv, library, ports, files; the cluster as Ray sees it."""

from __future__ import annotations

import json

from conftest import RAY_DEFAULTS, VENV, journal, node_ip, role_of

PORTS = {k: RAY_DEFAULTS[f"ray_{k}_port"] for k in (
    "gcs", "dashboard", "client_server", "object_manager", "node_manager", "dashboard_agent_grpc",
    "runtime_env_agent", "metrics_export", "dashboard_agent_listen")}


def test_ray_unit_enabled_and_active(host):
    unit = f"ray-{role_of(host)}.service"
    svc = host.service(unit)
    assert svc.is_enabled, f"{unit} is not enabled"
    assert svc.is_running, f"{unit} is not running; journal:\n{journal(host, unit)}"
    other = "ray-worker.service" if role_of(host) == "head" else "ray-head.service"
    assert not host.file(f"/etc/systemd/system/{other}").exists


def test_unit_restarts_always_and_disables_usage_stats(host):
    unit = host.file(f"/etc/systemd/system/ray-{role_of(host)}.service")
    assert unit.mode == 0o644 and unit.user == "root"
    assert "Restart=always" in unit.content_string
    assert "Environment=RAY_USAGE_STATS_ENABLED=0" in unit.content_string
    assert "User=rayfleet" in unit.content_string


def test_venv_has_the_pinned_ray_and_the_library(host):
    cmd = host.run(f"{VENV}/bin/python -c 'import ray, rayfleet; print(ray.__version__)'")
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.strip() == RAY_DEFAULTS["ray_version"]
    system_py = host.run("/usr/bin/python3 -c 'import platform; print(platform.python_version())'").stdout.strip()
    venv_py = host.run(f"{VENV}/bin/python -c 'import platform; print(platform.python_version())'").stdout.strip()
    assert venv_py == system_py, "the Ray venv must use the image's own Python"


def test_ray_runs_as_the_rayfleet_user(host):
    raylets = host.process.filter(comm="raylet")
    assert raylets, "no raylet process"
    assert {p.user for p in raylets} == {"rayfleet"}


def test_settings_file(host):
    role = role_of(host)
    f = host.file(f"/etc/rayfleet/ray-{role}.json")
    assert f.is_file and f.user == "root" and f.mode == 0o644
    settings = json.loads(f.content_string)
    assert settings["role"] == role
    assert settings["node_ip"] == node_ip(host)
    assert settings["ports"]["gcs"] == PORTS["gcs"]


def test_pinned_ports_listen_where_expected(host):
    ip = node_ip(host)
    listening = {s.split(":")[-1] for s in host.socket.get_listening_sockets() if s.startswith("tcp://")}
    for name in ("object_manager", "node_manager", "dashboard_agent_grpc", "runtime_env_agent", "metrics_export"):
        assert str(PORTS[name]) in listening, f"{name} port {PORTS[name]} not listening on {host.backend.host}"
    if role_of(host) == "head":
        assert host.socket(f"tcp://{PORTS['gcs']}").is_listening
        # The dashboard (state API, job submission) binds the head's loopback only (an SSH tunnel reaches it).
        assert host.socket(f"tcp://127.0.0.1:{PORTS['dashboard']}").is_listening
        assert not host.socket(f"tcp://{ip}:{PORTS['dashboard']}").is_listening
        assert not host.socket(f"tcp://0.0.0.0:{PORTS['dashboard']}").is_listening
    else:
        for name in ("gcs", "dashboard", "client_server"):
            assert str(PORTS[name]) not in listening, f"head-only port {name} listening on a worker"


def test_pip_trusts_system_ca_and_limits(host):
    assert "cert = /etc/ssl/certs/ca-certificates.crt" in host.file("/etc/pip.conf").content_string
    assert host.user("rayfleet").exists and host.user("rayfleet").home == "/var/lib/rayfleet"
    assert host.file("/etc/sysctl.d/60-rayfleet.conf").contains("vm.max_map_count")
