"""NCCL on this node, read from the library itself: which libnccl loads, its version, the address its bootstrap
picks (the interface NCCL_SOCKET_IFNAME selects) and the network settings it was given.

Nothing here needs a GPU: ``ncclGetVersion`` and ``ncclGetUniqueId`` (which initialises NCCL's bootstrap network
from NCCL_SOCKET_IFNAME, exactly as a job's first communicator does) run on any host that has the library. So a
mis-set interface is found on the node, and named, before a multi-node job hangs on it.

Examples:
  python -m rayfleet.nccl                           # library, version, bootstrap address (JSON)
  python -m rayfleet.nccl --config /etc/rayfleet/ray-worker.json
        # the same under the environment the Ray node's processes get (NCCL_SOCKET_IFNAME resolved as Ray's
        # start does), and fail unless NCCL bootstraps on the node's Ray address
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import fcntl
import importlib.util
import ipaddress
import json
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

from rayfleet.errors import SettingsError

SIOCGIFADDR = 0x8915
# Where NVIDIA's wheels (nvidia-nccl-cu12 / -cu13, the ones torch depends on) put the library
WHEEL_LIBRARY = ("nvidia", "nccl", "lib", "libnccl.so.2")


def interface_addresses() -> dict[str, str]:
    """IPv4 address of every interface that has one (stdlib: if_nameindex + SIOCGIFADDR)."""
    found: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _index, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            found[name] = socket.inet_ntoa(raw[20:24])
    return found


def interface_for(ip: str) -> str:
    """The interface that holds ``ip`` (the node's Ray address): the one NCCL and gloo must use."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        raise SettingsError(f"node_ip: expected an IP address, got {ip!r}") from None
    if addr.version == 6:
        raise SettingsError(f"socket_ifname: auto needs an IPv4 node_ip, got {ip}; set the interface name")
    addresses = interface_addresses()
    for name, value in sorted(addresses.items()):
        if value == ip:
            return name
    raise SettingsError(f"socket_ifname: auto found no interface holding the node's address {ip} "
                        f"(interfaces: {', '.join(f'{n}={a}' for n, a in sorted(addresses.items())) or 'none'}); "
                        "set the interface name, or node_ip to an address of this host")


def socket_env(ifname: str) -> dict[str, str]:
    """NCCL and gloo bound to exactly one interface (NCCL's '=' means exact, not a name prefix)."""
    return {"NCCL_SOCKET_IFNAME": f"={ifname}", "GLOO_SOCKET_IFNAME": ifname}


def find_library() -> str | None:
    """The libnccl a process here would use: NVIDIA's wheel in this Python's environment (what torch loads),
    else the system's (the CUDA repository's libnccl2)."""
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base).joinpath(*WHEEL_LIBRARY[1:])
        if candidate.is_file():
            return str(candidate)
    name = ctypes.util.find_library("nccl")
    return name  # a soname for dlopen, or None


def _version_string(code: int) -> str:
    # NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9 (major*1000 + minor*100 + patch before)
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def decode_unique_id(raw: bytes) -> dict[str, Any]:
    """The bootstrap address inside an ncclUniqueId (ncclBootstrapHandle: u64 magic, then a sockaddr)."""
    family = struct.unpack_from("<H", raw, 8)[0]
    port = struct.unpack_from(">H", raw, 10)[0]
    if family == socket.AF_INET:
        return {"address": socket.inet_ntop(socket.AF_INET, raw[12:16]), "port": port}
    if family == socket.AF_INET6:
        return {"address": socket.inet_ntop(socket.AF_INET6, raw[16:32]), "port": port}
    return {"address": None, "port": None, "family": family}


def probe(library: str | None = None) -> dict[str, Any]:
    """Load libnccl in this process and read it. Environment (NCCL_SOCKET_IFNAME...) is this process's."""
    library = library or find_library()
    if not library:
        return {"available": False, "reason": "no libnccl found (no nvidia-nccl wheel in this Python, "
                                              "no libnccl.so.2 on the system)"}
    try:
        lib = ctypes.CDLL(library)
    except OSError as exc:
        return {"available": False, "library": library, "reason": f"libnccl does not load: {exc}"}
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    code = ctypes.c_int()
    rc = lib.ncclGetVersion(ctypes.byref(code))
    if rc != 0:
        return {"available": False, "library": library,
                "reason": f"ncclGetVersion failed: {lib.ncclGetErrorString(rc).decode()}"}
    result: dict[str, Any] = {"available": True, "library": library, "version": _version_string(code.value),
                              "version_code": code.value,
                              "socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME"),
                              "net": os.environ.get("NCCL_NET"), "net_plugin": os.environ.get("NCCL_NET_PLUGIN")}
    uid = ctypes.create_string_buffer(128)
    rc = lib.ncclGetUniqueId(uid)
    if rc != 0:
        lib.ncclGetLastError.restype = ctypes.c_char_p
        last = (lib.ncclGetLastError(None) or b"").decode(errors="replace").strip()
        result["bootstrap"] = {"error": f"{lib.ncclGetErrorString(rc).decode()}"
                                        + (f": {last}" if last else "")}
    else:
        result["bootstrap"] = decode_unique_id(uid.raw)
    return result


def probe_as_node(config: str, python: str = sys.executable) -> dict[str, Any]:
    """Probe in a child process under the environment the Ray node's processes get, and compare the bootstrap
    address with the node's Ray address."""
    from rayfleet.raynode import load_settings

    settings = load_settings(config)
    env = settings.process_env()
    child = subprocess.run([python, "-m", "rayfleet.nccl", "--json"], env=env, capture_output=True, text=True,
                           timeout=60, check=False)
    try:
        result = json.loads(child.stdout)
    except json.JSONDecodeError:
        return {"available": False, "ok": False, "reason": probe_failure(child)}
    result["node_ip"] = settings.node_ip
    result.update(verdict(result, settings.node_ip))
    return result


def probe_failure(child: subprocess.CompletedProcess) -> str:
    """Why a probe's child gave no result, in words: its exit status and the end of what it printed."""
    said = child.stderr.strip()[-500:] or child.stdout.strip()[-500:] or "it printed nothing"
    return f"the NCCL probe ({' '.join(map(str, child.args[1:]))}) gave no result (exit {child.returncode}): {said}"


def _result_stream() -> TextIO:
    """Where the result goes: the process's stdout. NCCL writes its own lines there too (NCCL_DEBUG=INFO, the first
    setting anyone debugging NCCL tries), so from here on file descriptor 1 is stderr, for NCCL and everything else
    this process loads, and the result alone is written to the real stdout."""
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(real, "w")


def verdict(result: dict[str, Any], node_ip: str) -> dict[str, Any]:
    """ok, and why not: NCCL must bootstrap on the node's Ray address."""
    if not result.get("available"):
        return {"ok": False, "reason": result.get("reason", "libnccl not available")}
    boot = result.get("bootstrap") or {}
    if "error" in boot:
        return {"ok": False, "reason": f"NCCL bootstrap failed with NCCL_SOCKET_IFNAME="
                                       f"{result.get('socket_ifname')!r}: {boot['error']}"}
    if boot.get("address") != node_ip:
        return {"ok": False, "reason": f"NCCL bootstraps on {boot.get('address')} (NCCL_SOCKET_IFNAME="
                                       f"{result.get('socket_ifname')!r}), not on the node's Ray address {node_ip}"}
    return {"ok": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.nccl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="a Ray node's settings file: probe under its environment and check")
    parser.add_argument("--library", help="libnccl to load (default: the wheel's, else the system's)")
    parser.add_argument("--json", action="store_true", help="JSON only (the default prints it indented)")
    args = parser.parse_args(argv)
    out = _result_stream()
    try:
        result = probe_as_node(args.config) if args.config else probe(args.library)
    except SettingsError as exc:
        print(f"rayfleet.nccl: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True, indent=None if args.json else 2), file=out, flush=True)
    if args.config:
        return 0 if result["ok"] else 1
    return 0 if result.get("available") else 1


if __name__ == "__main__":
    sys.exit(main())
