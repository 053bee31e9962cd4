# SPDX-License-Identifier: GPL-3.0-or-later
"""Prometheus scrape targets of a cluster's node and DCGM exporters, discovered from Ray's node table (file service
discovery), for a cluster with network membership: the monitoring host's Prometheus follows the nodes that join and
leave (the autoscaler's, spot replacements) without a run of the monitoring stage, and no host's configuration lists
another.

Every alive Ray node is a node exporter target (at the cluster's node exporter port); every alive node on which Ray
counts NVIDIA GPUs (a ``GPU`` resource, and no AMD or Intel accelerator type) is a DCGM exporter target. The files are
Prometheus's file_sd format, replaced whole (written beside, then renamed), and left as they are while the GCS does
not answer, so a head restart does not empty Prometheus's targets.

Examples:
  python -m rayfleet.targets --node /etc/rayfleet/ray-node.json --dir /var/lib/rayfleet/targets \\
      --node-exporter-port 9100 --dcgm-exporter-port 9400            # every 15 s, until stopped
  python -m rayfleet.targets --node /etc/rayfleet/ray-node.json --dir /tmp/t --node-exporter-port 9100 --once
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# Ray's resource names for an accelerator's type ("accelerator_type:H100"); AMD's and Intel's carry their vendor
ACCELERATOR_TYPE = "accelerator_type:"
NOT_NVIDIA = ("AMD-", "Intel-")
NODE_FILE = "node.json"
DCGM_FILE = "dcgm.json"


def _address(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def nvidia_gpus(node: Mapping[str, Any]) -> bool:
    """Whether Ray counts NVIDIA GPUs on node (a GCS node table entry, rayfleet.cluster.gcs_node)."""
    resources = node.get("resources_total") or {}
    if float(resources.get("GPU", 0) or 0) <= 0:
        return False
    kinds = [key[len(ACCELERATOR_TYPE):] for key in resources if key.startswith(ACCELERATOR_TYPE)]
    return not any(kind.startswith(NOT_NVIDIA) for kind in kinds)


def targets(nodes: Iterable[Mapping[str, Any]], node_port: int | None, dcgm_port: int | None,
            cluster: str = "") -> dict[str, list[dict[str, Any]]]:
    """{file name: file_sd groups} from the node table: one target per alive node's IP (a host's several node
    instances share it), labelled with the node's Ray node id and the cluster. A port of None: that exporter is off
    (its file has no targets)."""
    alive = {}
    for node in sorted(nodes, key=lambda n: int(n.get("start_time_ms") or 0)):
        if node.get("state") == "ALIVE" and node.get("node_ip"):
            alive.setdefault(str(node["node_ip"]), []).append(node)

    def groups(port, wanted):
        if port is None:
            return []
        return [{"targets": [_address(ip, port)],
                 "labels": {"rayfleet_cluster": cluster or "default", "ray_node_ip": ip}}
                for ip, found in sorted(alive.items()) if any(wanted(n) for n in found)]

    return {NODE_FILE: groups(node_port, lambda n: True), DCGM_FILE: groups(dcgm_port, nvidia_gpus)}


def write(directory: Path, files: Mapping[str, Any]) -> list[str]:
    """Replace each file whose content differs (written beside it, then renamed: Prometheus never reads half a
    file). Returns the names of those written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, groups in files.items():
        path = directory / name
        text = json.dumps(groups, indent=2, sort_keys=True) + "\n"
        try:
            if path.read_text() == text:
                continue
        except FileNotFoundError:
            pass
        handle, tmp = tempfile.mkstemp(dir=directory, prefix="." + name)
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        written.append(name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.targets",
                                     description=__doc__.split("\n\n", maxsplit=1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node", required=True, help="this host's Ray node settings file (its GCS address, token)")
    parser.add_argument("--dir", required=True, type=Path, help="where the file_sd files go")
    parser.add_argument("--node-exporter-port", type=int, help="the node exporters' port (unset: none)")
    parser.add_argument("--dcgm-exporter-port", type=int, help="the DCGM exporters' port (unset: none)")
    parser.add_argument("--cluster", default="", help="ray_cluster_name (the targets' rayfleet_cluster label)")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between reads of the node table")
    parser.add_argument("--once", action="store_true", help="read and write once, then exit")
    args = parser.parse_args(argv)

    from rayfleet.health import gcs_nodes
    from rayfleet.raynode import load_settings

    settings = load_settings(args.node)
    while True:
        try:
            files = targets(gcs_nodes(settings), args.node_exporter_port, args.dcgm_exporter_port, args.cluster)
            written = write(args.dir, files)
            if written:
                counts = "; ".join(f"{name}: {len(files[name])} targets" for name in written)
                print(f"rayfleet.targets: {counts}", flush=True)
        except Exception as exc:  # Ray raises its own RPC errors while the GCS restarts: the last targets stay
            print(f"rayfleet.targets: the node table could not be read ({exc}); the targets stay as they are",
                  file=sys.stderr, flush=True)
            if args.once:
                return 75
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
