# SPDX-License-Identifier: GPL-3.0-or-later
"""Ray node settings: validation, the ``ray start`` command line, and the settings file.

A node's effective settings live in one JSON file (``/etc/rayfleet/ray-<role>.json``) written by
the ``rayfleet.cluster.ray_node`` module. The systemd unit runs ``python -m rayfleet.raynode exec
--config FILE``, which turns the file into ``ray start --block ...`` and runs it, so the file is the
single source of truth: the module restarts Ray exactly when the file's content changes.

Before it starts Ray, ``exec`` runs the node's admission checks (``rayfleet.admission``: GPUs, DCGM, NCCL, shared
storage, versions against the head's); a node they refuse exits with status 3 (the units' RestartPreventExitStatus)
and never joins. The head publishes its node library's digest in its GCS once it is up, for workers to compare.

``exec`` runs Ray as its child and stays as the unit's main process (a child subreaper): when
``ray start --block`` exits by itself (its raylet died, or the head's GCS restarted and the raylet
was refused), the Ray processes it leaves behind are killed at once, so systemd restarts the node
without waiting its stop timeout for them. A stop signal goes on to ``ray start`` alone (the host
unit's KillMode=mixed; a container's PID 1), which drains the node before it ends the rest.

Examples:
  python -m rayfleet.raynode args --config /etc/rayfleet/ray-head.json   # print the ray start line
  python -m rayfleet.raynode exec --config /etc/rayfleet/ray-head.json   # what the unit runs
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rayfleet.errors import SettingsError

if TYPE_CHECKING:  # pragma: no cover
    from rayfleet.link import LinkCheck

ROLES = ("head", "worker")
# Ray's node labels follow Kubernetes' syntax: [prefix/]name = value; the name and the value at most 63 characters,
# alphanumeric at both ends with - _ . between (an empty value is allowed), the prefix a DNS subdomain
LABEL_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")
LABEL_PREFIX = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
# Ray's own labels, and rayfleet's (the admission verdict): a node's settings cannot set them
RESERVED_LABEL_PREFIXES = ("ray.io/", "rayfleet.io/")
SETTINGS_VERSION = 1


@dataclass(frozen=True)
class RayPorts:
    """Every port Ray opens, pinned so a firewall can name them (Ray picks random ones otherwise)."""

    gcs: int = 6379
    dashboard: int = 8265
    client_server: int = 10001
    object_manager: int = 8076
    node_manager: int = 8077
    dashboard_agent_grpc: int = 8078
    runtime_env_agent: int = 8079
    metrics_export: int = 8080
    dashboard_agent_listen: int = 52365
    min_worker: int = 10002
    max_worker: int = 11999

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> RayPorts:
        data = dict(data or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SettingsError(f"ports: unknown key(s) {unknown}; expected some of {sorted(names)}")
        values = {}
        for key, value in data.items():
            if value is None:
                continue
            if isinstance(value, bool) or not _is_int(value):
                raise SettingsError(f"ports.{key}: expected an integer port 1-65535, got {value!r}")
            values[key] = int(value)
        ports = cls(**values)
        ports.validate()
        return ports

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not 1 <= value <= 65535:
                raise SettingsError(f"ports.{f.name}: expected a port 1-65535, got {value}")
        if self.min_worker > self.max_worker:
            raise SettingsError(
                f"ports.min_worker ({self.min_worker}) must not exceed ports.max_worker ({self.max_worker})")
        single = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name not in ("min_worker", "max_worker")}
        seen: dict[int, str] = {}
        for name, port in single.items():
            if port in seen:
                raise SettingsError(f"ports.{name} and ports.{seen[port]} are both {port}: every Ray port must differ")
            seen[port] = name
            if self.min_worker <= port <= self.max_worker:
                raise SettingsError(f"ports.{name} ({port}) lies inside the worker port range "
                                    f"{self.min_worker}-{self.max_worker}")


def _is_int(value: Any) -> bool:
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.strip().isdigit()


def _number(name: str, value: Any, *, integer: bool = False, minimum: float = 0) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise SettingsError(f"{name}: expected a number, got {value!r}")
    try:
        num = int(value) if integer else float(value)
    except (TypeError, ValueError):
        kind = "an integer" if integer else "a number"
        raise SettingsError(f"{name}: expected {kind}, got {value!r}") from None
    if num < minimum:
        raise SettingsError(f"{name}: expected >= {minimum}, got {value!r}")
    if not integer and float(num).is_integer():
        return int(num)
    return num


def split_address(address: str, default_port: int) -> tuple[str, int]:
    """'host[:port]' -> (host, port); IPv6 literals in brackets are accepted."""
    address = address.strip()
    if not address:
        raise SettingsError("head_address: empty; expected the head's host or IP, optionally with :port")
    if address.startswith("["):
        host, _sep, rest = address[1:].partition("]")
        port = rest.lstrip(":") or str(default_port)
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, str(default_port)
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SettingsError(f"head_address: port {port!r} in {address!r} is not a port number 1-65535")
    return host, int(port)


def resolve(host: str) -> str:
    """Resolve a host name to an address, or raise SettingsError naming it."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise SettingsError(f"head_address: host {host!r} does not resolve ({exc.strerror}); "
                            "use an IP address or a name in DNS / /etc/hosts on every node") from None
    return str(infos[0][4][0])


@dataclass(frozen=True)
class RayNodeSettings:
    """The effective settings of one Ray node (what decides whether Ray must restart)."""

    role: str
    node_ip: str
    ray_bin: str
    head_address: str | None = None
    ports: RayPorts = field(default_factory=RayPorts)
    num_cpus: int | None = None
    num_gpus: int | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    # Ray node labels (a node type's, such as {"market": "spot"}), for label selectors of tasks, actors and bundles
    labels: Mapping[str, str] = field(default_factory=dict)
    object_store_memory: int | None = None
    temp_dir: str = "/tmp/ray"
    dashboard_host: str | None = None
    include_dashboard: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    # The interface NCCL and gloo must use (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME): a name, or "auto" for the
    # one holding node_ip, resolved when Ray starts (so a baked image is right on every host it boots)
    socket_ifname: str | None = None
    auth_token_path: str | None = None
    # Head only: the cluster launcher's config, so the head runs Ray's autoscaler (ray up clusters)
    autoscaling_config: str | None = None
    # Ray's --node-name (its default is node_ip): set for each of a host's several node instances
    # (ray_node_instances), which share the host's IP, so that every check finds its own node
    node_name: str | None = None
    # A worker's admission pair-tests its link against proved nodes before it starts (rayfleet.link); None: off.
    # Read at each start only: a change here restarts no node
    link_check: LinkCheck | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RayNodeSettings:
        """Build and validate settings from plain data (module params or a settings file)."""
        data = dict(data)
        data.pop("version", None)
        role = data.get("role")
        if role not in ROLES:
            raise SettingsError(f"role: expected one of {list(ROLES)}, got {role!r}")
        node_ip = str(data.get("node_ip") or "")
        try:
            ipaddress.ip_address(node_ip)
        except ValueError:
            raise SettingsError(f"node_ip: expected this node's IP address, got {node_ip!r}") from None
        ray_bin = str(data.get("ray_bin") or "")
        if not ray_bin.startswith("/"):
            raise SettingsError(f"ray_bin: expected an absolute path to the venv's ray, got {ray_bin!r}")
        ports = RayPorts.from_mapping(data.get("ports"))
        head_address = data.get("head_address")
        if role == "worker":
            if not head_address:
                raise SettingsError("head_address: a worker needs the head's address (host or host:port)")
            host, port = split_address(str(head_address), ports.gcs)
            head_address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        elif head_address:
            raise SettingsError("head_address: only workers take a head address; the head is its own")
        resources = data.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise SettingsError(f"resources: expected a mapping of name to amount, got {resources!r}")
        clean_resources = {}
        for key, value in resources.items():
            if key in ("CPU", "GPU", "memory", "object_store_memory"):
                raise SettingsError(f"resources.{key}: set num_cpus/num_gpus/object_store_memory instead")
            clean_resources[str(key)] = _number(f"resources.{key}", value)
        labels = node_labels(data.get("labels"))
        env = data.get("env") or {}
        if not isinstance(env, Mapping) or not all(isinstance(k, str) for k in env):
            raise SettingsError(f"env: expected a mapping of variable name to value, got {env!r}")
        socket_ifname = str(data.get("socket_ifname") or "") or None
        if socket_ifname is not None and (len(socket_ifname) > 15 or not socket_ifname.isprintable()
                                          or any(c in socket_ifname for c in " /,=^")):
            raise SettingsError(f"socket_ifname: expected an interface name (e.g. eth0) or 'auto', "
                                f"got {socket_ifname!r}")
        for key in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            if socket_ifname and key in env:
                raise SettingsError(f"env.{key}: set either it or socket_ifname, not both")
        temp_dir = str(data.get("temp_dir") or "/tmp/ray")
        if not temp_dir.startswith("/"):
            raise SettingsError(f"temp_dir: expected an absolute path, got {temp_dir!r}")
        auth_token_path = data.get("auth_token_path") or None
        if auth_token_path is not None and not str(auth_token_path).startswith("/"):
            raise SettingsError(
                f"auth_token_path: expected an absolute path to the Ray token file, got {auth_token_path!r}")
        for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            if key in env:
                raise SettingsError(f"env.{key}: set auth_token_path instead (the token never goes into settings)")
        autoscaling_config = data.get("autoscaling_config") or None
        if autoscaling_config is not None:
            if role != "head":
                raise SettingsError("autoscaling_config: only the head runs the autoscaler")
            if not str(autoscaling_config).startswith("/"):
                raise SettingsError(f"autoscaling_config: expected an absolute path, got {autoscaling_config!r}")
        node_name = str(data.get("node_name") or "") or None
        if node_name is not None and (len(node_name) > 128 or not node_name.isprintable()
                                      or any(c.isspace() for c in node_name)):
            raise SettingsError(f"node_name: expected a name without spaces, at most 128 characters, got {node_name!r}")
        object_store_memory = _number("object_store_memory", data.get("object_store_memory"), integer=True)
        from rayfleet.link import LinkCheck

        link_check = LinkCheck.from_mapping(data.get("link_check"))
        if object_store_memory is not None and object_store_memory < 78643200:
            raise SettingsError(f"object_store_memory: Ray needs at least 78643200 bytes (75 MiB), "
                                f"got {object_store_memory}")
        return cls(
            role=role,
            node_ip=node_ip,
            ray_bin=ray_bin,
            head_address=head_address,
            ports=ports,
            num_cpus=_number("num_cpus", data.get("num_cpus"), integer=True),
            num_gpus=_number("num_gpus", data.get("num_gpus"), integer=True),
            resources=clean_resources,
            labels=labels,
            object_store_memory=object_store_memory,
            temp_dir=temp_dir,
            dashboard_host=(str(data["dashboard_host"]) if data.get("dashboard_host") else None),
            include_dashboard=bool(data.get("include_dashboard", True)),
            env={str(k): str(v) for k, v in env.items()},
            socket_ifname=socket_ifname,
            auth_token_path=str(auth_token_path) if auth_token_path else None,
            autoscaling_config=str(autoscaling_config) if autoscaling_config else None,
            node_name=node_name,
            link_check=link_check,
        )

    def to_dict(self) -> dict[str, Any]:
        """Canonical plain data (what the settings file holds)."""
        data = dataclasses.asdict(self)
        data["resources"] = dict(sorted(self.resources.items()))
        data["env"] = dict(sorted(self.env.items()))
        data["labels"] = dict(sorted(self.labels.items())) or None
        for key in ("autoscaling_config", "socket_ifname", "node_name", "link_check", "labels"):
            if data[key] is None:
                del data[key]  # files written before the field existed stay unchanged
        return {"version": SETTINGS_VERSION, **data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @property
    def gcs_address(self) -> str:
        """The cluster's GCS (host:port): the head's own, or the one a worker joins. Membership checks read Ray's
        node table there, so they need no dashboard (which may listen on the head's loopback only)."""
        if self.role == "head":
            host = f"[{self.node_ip}]" if ":" in self.node_ip else self.node_ip
            return f"{host}:{self.ports.gcs}"
        return str(self.head_address)

    @property
    def dashboard_url(self) -> str:
        """Where the head's dashboard (and Ray's state API) answers."""
        if self.role == "head":
            host = self.dashboard_host or self.node_ip
        else:
            host = split_address(self.head_address or "", self.ports.gcs)[0]
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.ports.dashboard}"

    def start_args(self, block: bool = True, labels: Mapping[str, str] | None = None) -> list[str]:
        """The full ``ray start`` command line for these settings."""
        p = self.ports
        args = [self.ray_bin, "start"]
        if self.role == "head":
            args += ["--head", f"--port={p.gcs}", f"--ray-client-server-port={p.client_server}"]
            if self.autoscaling_config:
                args.append(f"--autoscaling-config={self.autoscaling_config}")
            if self.include_dashboard:
                args += ["--include-dashboard=true", f"--dashboard-host={self.dashboard_host or self.node_ip}",
                         f"--dashboard-port={p.dashboard}"]
            else:
                args += ["--include-dashboard=false"]
        else:
            args += [f"--address={self.head_address}"]
        args += [
            f"--node-ip-address={self.node_ip}",
            f"--object-manager-port={p.object_manager}",
            f"--node-manager-port={p.node_manager}",
            f"--dashboard-agent-grpc-port={p.dashboard_agent_grpc}",
            f"--dashboard-agent-listen-port={p.dashboard_agent_listen}",
            f"--runtime-env-agent-port={p.runtime_env_agent}",
            f"--metrics-export-port={p.metrics_export}",
            f"--min-worker-port={p.min_worker}",
            f"--max-worker-port={p.max_worker}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]
        if self.node_name:
            args.append(f"--node-name={self.node_name}")
        if self.num_cpus is not None:
            args.append(f"--num-cpus={self.num_cpus}")
        if self.num_gpus is not None:
            args.append(f"--num-gpus={self.num_gpus}")
        if self.resources:
            args.append("--resources=" + json.dumps(dict(sorted(self.resources.items())), separators=(",", ":")))
        all_labels = {**self.labels, **(labels or {})}
        if all_labels:
            args.append("--labels=" + ",".join(f"{k}={v}" for k, v in sorted(all_labels.items())))
        if self.object_store_memory is not None:
            args.append(f"--object-store-memory={self.object_store_memory}")
        if block:
            args.append("--block")
        return args

    def auth_env(self) -> dict[str, str]:
        """What a Ray process or client needs to pass token authentication (empty when it is off)."""
        return auth_env(self.auth_token_path)

    def process_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        env.update(self.env)
        env.update(self.collective_env())
        env.update(self.auth_env())
        return env

    def collective_env(self) -> dict[str, str]:
        """NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME for socket_ifname ("auto": the interface holding node_ip)."""
        if not self.socket_ifname:
            return {}
        from rayfleet.nccl import interface_for, socket_env

        name = interface_for(self.node_ip) if self.socket_ifname == "auto" else self.socket_ifname
        return socket_env(name)

    def expected_resources(self) -> dict[str, float]:
        """Resources Ray must report for this node once it is registered."""
        want: dict[str, float] = dict(self.resources)
        if self.num_cpus is not None:
            want["CPU"] = float(self.num_cpus)
        if self.num_gpus is not None:
            want["GPU"] = float(self.num_gpus)
        return want


def node_labels(value: Any, what: str = "labels") -> dict[str, str]:
    """A node's Ray labels, checked as Ray checks them (a mapping of key to text; numbers are taken as text)."""
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise SettingsError(f"{what}: expected a mapping of label key to value, got {value!r}")
    found = {}
    for given, raw in value.items():
        key = str(given)
        prefix, _slash, name = key.rpartition("/")
        if ("/" in key and not (len(prefix) <= 253 and LABEL_PREFIX.fullmatch(prefix))) or not (
                len(name) <= 63 and LABEL_NAME.fullmatch(name)):
            raise SettingsError(f"{what}.{key}: expected a label key, [prefix/]name: the name at most 63 "
                                "characters, alphanumeric at both ends with - _ . between, the prefix a DNS subdomain")
        if key.startswith(RESERVED_LABEL_PREFIXES):
            raise SettingsError(f"{what}.{key}: the prefixes {', '.join(RESERVED_LABEL_PREFIXES)} are reserved for "
                                "Ray's and rayfleet's own labels")
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise SettingsError(f"{what}.{key}: expected a text value, got {raw!r}")
        text = str(raw)
        if text and not (len(text) <= 63 and LABEL_NAME.fullmatch(text)):
            raise SettingsError(f"{what}.{key}: expected a value of at most 63 characters, alphanumeric at both "
                                f"ends with - _ . between, got {text!r}")
        found[key] = text
    return dict(sorted(found.items()))


def auth_env(token_path: str | None) -> dict[str, str]:
    """Ray token authentication (Ray >= 2.52): the mode and the file Ray reads the token from."""
    if not token_path:
        return {}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path)}


def load_settings(path: str | Path) -> RayNodeSettings:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SettingsError(f"{path}: settings file missing; run the rayfleet.cluster.ray_node module") from None
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}: not valid JSON ({exc}); re-run the ray_node module to rewrite it") from None
    return RayNodeSettings.from_mapping(data)


def settings_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Top-level keys whose values differ (nested mappings compared per key, dotted)."""
    before = dict(before or {})
    changes: dict[str, tuple[Any, Any]] = {}
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            for sub in sorted(set(old) | set(new)):
                if old.get(sub) != new.get(sub):
                    changes[f"{key}.{sub}"] = (old.get(sub), new.get(sub))
        elif old != new:
            changes[key] = (old, new)
    return changes


PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _become_subreaper() -> bool:
    """Orphans of Ray's process tree (a dashboard agent whose raylet died) become this process's children."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def processes(proc: Path = Path("/proc")) -> list[tuple[int, str, str, int, int]]:
    """(pid, name, state, ppid, pgrp) of every process, from /proc/<pid>/stat ("pid (name) state ppid pgrp ...")."""
    found = []
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rfind(")") + 1:].split()
        if len(fields) > 2:
            found.append((int(stat.parent.name), text[text.find("(") + 1:text.rfind(")")], fields[0], int(fields[1]),
                          int(fields[2])))
    return sorted(found)


def _children(pid: int, proc: Path = Path("/proc")) -> list[tuple[int, str]]:
    """(pid, name) of the processes whose parent is pid."""
    return [(child, name) for child, name, _state, ppid, _pgrp in processes(proc) if ppid == pid]


def _reap() -> None:
    """Collect every exited child (orphans handed to this subreaper), without blocking."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_leftovers(why: str, timeout: float = 10.0, log=print) -> list[tuple[int, str]]:
    """SIGKILL this process's children until none is left (theirs come to it as they die); return whom it killed."""
    killed: list[tuple[int, str]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap()
        left = _children(os.getpid())
        if not left:
            break
        for pid, name in left:
            if (pid, name) not in killed:
                killed.append((pid, name))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    if killed:
        log(f"rayfleet.raynode: {why}; killed what was left: "
            + ", ".join(f"{name} ({pid})" for pid, name in killed), flush=True)
    return killed


def _wait_children(until, timeout: float | None) -> None:
    """Reap children until until(children) is true or timeout seconds pass (None: no limit)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while deadline is None or time.monotonic() < deadline:
        _reap()
        if until(_children(os.getpid())):
            return
        time.sleep(0.2)


def admit(config: str, python: str = sys.executable) -> int | None:
    """The node's admission checks (rayfleet.admission), in a child process whose output goes to the unit's
    journal: None when the node may start, else the exit status for this process (REFUSED: the unit does not restart
    it; 1: no verdict yet, the unit tries again)."""
    from rayfleet.admission import PASSED, REFUSED

    code = subprocess.run([python, "-m", "rayfleet.admission", "--config", config], check=False).returncode
    if code == PASSED:
        return None
    return REFUSED if code == REFUSED else 1


def publish_when_up(config: str, python: str = sys.executable) -> subprocess.Popen:
    """The head: publish its node library's digest once its GCS is up (rayfleet.admission --publish), in a child
    of its own that this process reaps with Ray's."""
    return subprocess.Popen([python, "-m", "rayfleet.admission", "--config", config, "--publish"])


def run_supervised(argv: list[str], env: Mapping[str, str], stop_grace_s: float = 3.0,
                   after_start: Callable[[], object] | None = None) -> int:
    """Run Ray as a child of this subreaper and return its exit status as a shell would (128 + signal).

    A stop signal goes to `ray start --block` alone, as Ray 2.60 expects of its PID 1: it asks the GCS to drain the
    node, waits (up to RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S) until the raylet, idle, ends itself, then ends the
    rest. The unit's KillMode=mixed sends systemd's SIGTERM to this process only; `podman stop` signals the
    container's PID 1 only. (A SIGTERM to every process at once ends the raylet before any task can finish.)

    Ray's processes outlive `ray start` (they become this process's children), and its dashboard agent has been
    seen to ignore SIGTERM once its raylet is gone, holding the unit in its stop timeout (30 s) for nothing. So:
    - when Ray exits by itself (its raylet died, or a restarted head refused it), whatever it left is killed at
      once: systemd restarts the node without waiting;
    - after a stop, what is still running stop_grace_s after the raylet ended is killed."""
    _become_subreaper()
    stopping: list[int] = []
    child: subprocess.Popen | None = None

    init = os.getpid() == 1

    def forward(signum, _frame):
        stopping.append(signum)
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, forward)
    child = subprocess.Popen(argv, env=dict(env))
    if after_start is not None:
        after_start()
    if stopping:  # a stop that came while Ray was being started
        forward(stopping[0], None)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # pragma: no cover - the child is always waited for first
            return 1
        if pid == child.pid:
            break
    child.returncode = code = os.waitstatus_to_exitcode(status)
    if stopping:
        _wait_children(lambda kids: all(name != "raylet" for _pid, name in kids), None)
        _wait_children(lambda kids: not kids, stop_grace_s)
        kill_leftovers(f"stopped; they outlived the raylet by {stop_grace_s:g} s")
    else:
        kill_leftovers("Ray exited by itself")
    if code < 0 and stopping:
        if init:  # PID 1 cannot die of its own signal
            return 1
        # Died of the stop signal: end the same way, so systemd sees the stop it asked for.
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return 128 - code if code < 0 else code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.raynode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["args", "exec", "show"],
                        help="args: print the ray start line; exec: run it (systemd ExecStart); show: settings JSON")
    parser.add_argument("--config", required=True, help="settings file written by the ray_node module")
    parser.add_argument("--no-admission", dest="admission", action="store_false",
                        help="exec: start without the admission checks (by hand, to look into a node they refuse); the "
                        "node carries no rayfleet.io/admission label, and the preflight names it")
    parser.add_argument("--ray-bin", help="run this ray instead of the settings' ray_bin: a path, or a name looked "
                        "up on PATH (a container node runs the image's ray: --ray-bin ray)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except SettingsError as exc:
        print(f"rayfleet.raynode: {exc}", file=sys.stderr)
        return 2
    if args.action == "show":
        sys.stdout.write(settings.to_json())
        return 0
    ray_bin = settings.ray_bin
    if args.ray_bin:
        found = args.ray_bin if "/" in args.ray_bin else shutil.which(args.ray_bin)
        if not found:
            print(f"rayfleet.raynode: --ray-bin {args.ray_bin}: not found on PATH ({os.environ.get('PATH', '')})",
                  file=sys.stderr)
            return 2
        ray_bin = found

    def argv_ray(labels: Mapping[str, str] | None = None) -> list[str]:
        return [ray_bin, *settings.start_args(block=True, labels=labels)[1:]]

    if args.action == "args":
        print(shlex.join(argv_ray()))
        return 0
    try:
        env = settings.process_env()
    except SettingsError as exc:
        print(f"rayfleet.raynode: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    if args.admission:
        refused = admit(args.config)
        if refused is not None:
            return refused
        from rayfleet.admission import LABEL_KEY, LABEL_PASSED

        labels = {LABEL_KEY: LABEL_PASSED}
    else:
        labels = None
    after_start = (lambda: publish_when_up(args.config)) if settings.role == "head" else None
    return run_supervised(argv_ray(labels), env, after_start=after_start)


if __name__ == "__main__":
    sys.exit(main())
