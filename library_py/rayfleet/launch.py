# SPDX-License-Identifier: GPL-3.0-or-later
"""First boot of a node made from a baked rayfleet image: turn the launch file into a running Ray node.

The contract (what a launcher writes; everything else is baked into the image):

  /etc/rayfleet/launch.json   written at launch (cloud-init ``write_files`` in user-data, a ``ray up``
                              start command, or by hand), root-owned:
      {"role": "head"}                                         the head
      {"role": "worker", "head_address": "10.0.0.10:6379"}    a worker (host or host:port)
      optional: "node_ip" (default: this host's default-route address),
                "num_gpus", "num_cpus" (default: the baked ones; the GPUs the node's admission expects),
                "resources" (custom resources, such as a node type's {"trainer": 1}; default: the baked ones),
                "labels" (Ray node labels, such as a node type's {"market": "spot"}; default: the baked ones),
                "autoscaling_config" (head only: ray up's bootstrap config, to run the autoscaler)
  /etc/rayfleet/auth-token    the cluster's Ray token, mode 0600, owned by the Ray user, when the image was
                              baked with token authentication (ray_auth_mode: token). Never in the image.

The image holds ``/etc/rayfleet/launch-defaults.json`` (ports, paths, resources: what the ray role was given
at bake time) and ``rayfleet-launch.service``, a oneshot that runs ``python -m rayfleet.launch`` at boot when
the launch file exists. It writes the node's settings file (the same file the ``ray_node`` module writes, so a
later ``site.yml`` run finds nothing to change), then enables and starts ``ray-<role>.service``. The unit proves the
node before its Ray starts (``rayfleet.admission``: GPUs, DCGM, NCCL, shared storage, versions against the head's);
a node it refuses does not join, and ``<temp_dir>/rayfleet-admission.json`` and the unit's journal say why.

A ``ray up`` start command writes the launch file with ``--write``: the role, the head's address, and the node
type's resources as Ray's cluster launcher hands them to the start commands (``RAY_OVERRIDE_RESOURCES``, JSON: its
CPU and GPU counts become num_cpus and num_gpus, its custom resources the node's resources; memory, object store
memory and the accelerator type are left to Ray's own reading of the host), and its labels (``RAY_OVERRIDE_LABELS``,
JSON).

Examples:
  python -m rayfleet.launch                 # what the unit runs
  python -m rayfleet.launch --dry-run       # print the settings it would write
  python -m rayfleet.launch --write worker --head-address "$RAY_HEAD_IP:6379" \
      --override-resources "$RAY_OVERRIDE_RESOURCES" --override-labels "$RAY_OVERRIDE_LABELS"
                                            # a ray up worker start command
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rayfleet.errors import SettingsError
from rayfleet.raynode import RayNodeSettings, node_labels

LAUNCH_FILE = Path("/etc/rayfleet/launch.json")
DEFAULTS_FILE = Path("/etc/rayfleet/launch-defaults.json")
LAUNCH_KEYS = {"role", "head_address", "node_ip", "num_gpus", "num_cpus", "resources", "labels",
               "autoscaling_config"}
BAKE_ONLY_KEYS = {"units", "config_paths", "service_user", "cluster_name"}
# Resources of a node type the node leaves to Ray's own reading of the host (the cluster launcher fills them in
# from the instance type: memory, and the accelerator_type:<GPU model> Ray sets itself)
HOST_READ_RESOURCES = {"memory", "object_store_memory"}
HOST_READ_PREFIX = "accelerator_type:"


def default_route_ip() -> str:
    """The source address of this host's default route (a UDP connect sends no packet)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only the routing decision is made
        except OSError as exc:
            raise SettingsError(f"node_ip: no default route to pick this node's address from ({exc}); "
                                "set node_ip in the launch file") from None
        return s.getsockname()[0]


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{what} is not valid JSON ({exc}): {text[:200]!r}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{what} must be a JSON object, got {type(data).__name__}")
    return data


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SettingsError(f"{path}: {what} missing") from None
    return _json_object(text, f"{path}: {what}")


def plan(launch: Mapping[str, Any], defaults: Mapping[str, Any], *, node_ip: str | None = None) -> tuple[
        RayNodeSettings, str, Path]:
    """Settings, unit and settings path for this node, from the launch file and the baked defaults."""
    unknown = sorted(set(launch) - LAUNCH_KEYS)
    if unknown:
        raise SettingsError(f"launch file: unknown keys {unknown}; expected some of {sorted(LAUNCH_KEYS)}")
    role = launch.get("role")
    units = defaults.get("units") or {}
    configs = defaults.get("config_paths") or {}
    if role not in units or role not in configs:
        raise SettingsError(f"role: expected one of {sorted(units)}, got {role!r}")
    data = {k: v for k, v in defaults.items() if k not in BAKE_ONLY_KEYS}
    data.update(launch)
    if not data.get("node_ip"):
        data["node_ip"] = node_ip or default_route_ip()
    settings = RayNodeSettings.from_mapping(data)
    return settings, str(units[role]), Path(configs[role])


def launch_file(role: str, *, head_address: str | None = None, autoscaling_config: str | None = None,
                override_resources: str | None = None, override_labels: str | None = None) -> dict[str, Any]:
    """The launch file a ray up start command writes (override_resources: RAY_OVERRIDE_RESOURCES, override_labels:
    RAY_OVERRIDE_LABELS; JSON, or empty)."""
    launch: dict[str, Any] = {"role": role}
    if role == "worker" and not head_address:
        raise SettingsError("head_address: a worker needs the head's host:port (--head-address \"$RAY_HEAD_IP:6379\")")
    if head_address:
        launch["head_address"] = head_address
    if autoscaling_config:
        launch["autoscaling_config"] = autoscaling_config
    if override_labels:
        labels = node_labels(_json_object(override_labels, "RAY_OVERRIDE_LABELS (the node type's labels)"),
                             "RAY_OVERRIDE_LABELS")
        if labels:
            launch["labels"] = labels
    if not override_resources:
        return launch
    resources = _json_object(override_resources, "RAY_OVERRIDE_RESOURCES (the node type's resources)")
    custom = {}
    for name, value in resources.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SettingsError(f"RAY_OVERRIDE_RESOURCES.{name}: expected a number >= 0, got {value!r}")
        if name in ("CPU", "GPU"):
            if not float(value).is_integer():
                raise SettingsError(f"RAY_OVERRIDE_RESOURCES.{name}: expected a whole number, got {value!r}")
            launch["num_cpus" if name == "CPU" else "num_gpus"] = int(value)
        elif name not in HOST_READ_RESOURCES and not name.startswith(HOST_READ_PREFIX):
            custom[name] = value
    if custom:
        launch["resources"] = custom
    return launch


def secure_token(path: str, user: str | None) -> None:
    """The launcher may write the token as root: make it the Ray user's, mode 0600, before Ray reads it."""
    if not os.path.isfile(path):
        raise SettingsError(f"auth_token_path: {path} is missing; the image was baked with token authentication, "
                            "so the launcher must write the cluster's token there before this runs")
    os.chmod(path, 0o600)
    if user:
        pw = pwd.getpwnam(user)
        os.chown(path, pw.pw_uid, pw.pw_gid)


def write_if_changed(path: Path, content: str) -> bool:
    """Atomic write (0644, root): the unit reads this file at every start."""
    try:
        if path.read_text() == content:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(content)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.launch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launch-file", type=Path, default=LAUNCH_FILE)
    parser.add_argument("--defaults-file", type=Path, default=DEFAULTS_FILE)
    parser.add_argument("--dry-run", action="store_true", help="print the settings; write and start nothing")
    parser.add_argument("--write", choices=("head", "worker"), metavar="ROLE",
                        help="write the launch file for this role (a ray up start command) and start nothing")
    parser.add_argument("--head-address", help="with --write worker: the head's host:port")
    parser.add_argument("--autoscaling-config", help="with --write head: ray up's bootstrap config")
    parser.add_argument("--override-resources", help="with --write: the node type's resources (RAY_OVERRIDE_RESOURCES)")
    parser.add_argument("--override-labels", help="with --write: the node type's labels (RAY_OVERRIDE_LABELS)")
    args = parser.parse_args(argv)
    if args.write:
        try:
            launch = launch_file(args.write, head_address=args.head_address,
                                 autoscaling_config=args.autoscaling_config,
                                 override_resources=args.override_resources,
                                 override_labels=args.override_labels)
        except SettingsError as exc:
            print(f"rayfleet.launch: {exc}", file=sys.stderr)
            return 2
        write_if_changed(args.launch_file, json.dumps(launch, sort_keys=True) + "\n")
        print(f"rayfleet.launch: {args.launch_file}: {json.dumps(launch, sort_keys=True)}", flush=True)
        return 0
    try:
        launch = _read_json(args.launch_file, "launch file (written at launch: see python -m rayfleet.launch -h)")
        defaults = _read_json(args.defaults_file, "baked launch defaults (bake the image with the ray role)")
        settings, unit, config = plan(launch, defaults)
        if settings.auth_token_path and not args.dry_run:
            secure_token(settings.auth_token_path, defaults.get("service_user"))
    except (SettingsError, KeyError) as exc:
        print(f"rayfleet.launch: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        sys.stdout.write(settings.to_json())
        return 0
    changed = write_if_changed(config, settings.to_json())
    print(f"rayfleet.launch: {settings.role} at {settings.node_ip}; {config} "
          f"{'written' if changed else 'unchanged'}; starting {unit}", flush=True)
    for verb in (["enable", unit], ["restart" if changed else "start", "--no-block", unit]):
        proc = subprocess.run(["systemctl", *verb], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"rayfleet.launch: systemctl {' '.join(verb)} failed: {proc.stderr.strip()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
