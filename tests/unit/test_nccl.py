# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.nccl, the socket interface in Ray's settings, and the nccl role's plugin-name reader.

The ctypes code runs against small libraries compiled here with the NCCL entry points it calls (gcc), so the
loading, version decoding and bootstrap-handle parsing are exercised for real; the real libnccl (NVIDIA's wheel)
is exercised on the sandbox hosts by the Molecule scenario.
"""

import importlib.util
import json
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from rayfleet import nccl
from rayfleet.errors import SettingsError
from rayfleet.raynode import RayNodeSettings

ROOT = Path(__file__).resolve().parents[2]
HEAD = {"role": "head", "node_ip": "127.0.0.1", "ray_bin": "/opt/ray/bin/ray"}
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler on this host to build the fakes")

FAKE_NCCL = r"""
#include <string.h>
#include <stdlib.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <netinet/in.h>
typedef struct { char internal[128]; } ncclUniqueId;
#include <stdio.h>
int ncclGetVersion(int *v) {
    /* NCCL_DEBUG=INFO: NCCL's own lines on stdout, as the real library writes them */
    const char *debug = getenv("NCCL_DEBUG");
    if (debug && strcmp(debug, "INFO") == 0) { printf("host:1:1 [0] NCCL INFO NCCL version 2.30.7\n"); fflush(stdout); }
    *v = 23007; return 0;
}
const char *ncclGetErrorString(int rc) { return rc == 2 ? "unhandled system error" : "no error"; }
const char *ncclGetLastError(void *comm) { return "Bootstrap : no socket interface found"; }
int ncclGetUniqueId(ncclUniqueId *id) {
    const char *ifname = getenv("NCCL_SOCKET_IFNAME");
    if (ifname && strcmp(ifname, "=nosuch0") == 0) return 2;
    struct sockaddr_in sa; memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET; sa.sin_port = htons(44671); inet_pton(AF_INET, "192.0.2.2", &sa.sin_addr);
    uint64_t magic = 0x1234; memset(id, 0, sizeof *id);
    memcpy(id->internal, &magic, 8); memcpy(id->internal + 8, &sa, sizeof sa);
    return 0;
}
"""

FAKE_PLUGIN = r"""
typedef struct { const char *name; void *init; void *devices; } ncclNet_v8_t;
ncclNet_v8_t ncclNetPlugin_v8 = { "Libfabric", 0, 0 };
"""


def _build(tmp_path, source, name):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return str(out)


def test_loopback_address_is_on_lo():
    assert nccl.interface_for("127.0.0.1") == "lo"
    assert nccl.interface_addresses()["lo"] == "127.0.0.1"


def test_an_address_no_interface_holds_is_named():
    with pytest.raises(SettingsError, match=r"no interface holding the node's address 203\.0\.113\.9"):
        nccl.interface_for("203.0.113.9")


def test_ipv6_node_ip_needs_a_name():
    with pytest.raises(SettingsError, match="IPv4"):
        nccl.interface_for("fd00::2")


def test_socket_env_is_an_exact_match_for_nccl():
    assert nccl.socket_env("eth1") == {"NCCL_SOCKET_IFNAME": "=eth1", "GLOO_SOCKET_IFNAME": "eth1"}


@pytest.mark.parametrize("code, text", [(23007, "2.30.7"), (21903, "2.19.3"), (2708, "2.7.8")])
def test_version_codes(code, text):
    assert nccl._version_string(code) == text


def test_unique_id_decoding_ipv4_and_ipv6():
    v4 = struct.pack("<Q", 7) + struct.pack("<H", socket.AF_INET) + struct.pack(">H", 4000) \
        + socket.inet_aton("10.1.2.3") + bytes(112)
    assert nccl.decode_unique_id(v4) == {"address": "10.1.2.3", "port": 4000}
    v6 = struct.pack("<Q", 7) + struct.pack("<H", socket.AF_INET6) + struct.pack(">H", 4001) + bytes(4) \
        + socket.inet_pton(socket.AF_INET6, "fd00::5") + bytes(96)
    assert nccl.decode_unique_id(v6) == {"address": "fd00::5", "port": 4001}


@needs_gcc
def test_probe_reads_version_and_bootstrap_address(tmp_path, monkeypatch):
    lib = _build(tmp_path, FAKE_NCCL, "libnccl_fake")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "=eth0")
    result = nccl.probe(lib)
    assert result["available"] and result["version"] == "2.30.7" and result["socket_ifname"] == "=eth0"
    assert result["bootstrap"] == {"address": "192.0.2.2", "port": 44671}
    assert nccl.verdict(result, "192.0.2.2") == {"ok": True}
    bad = nccl.verdict(result, "10.0.0.5")
    assert not bad["ok"] and "bootstraps on 192.0.2.2" in bad["reason"] and "10.0.0.5" in bad["reason"]


@needs_gcc
def test_probe_reports_a_failed_bootstrap_with_nccls_words(tmp_path, monkeypatch):
    lib = _build(tmp_path, FAKE_NCCL, "libnccl_fake")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "=nosuch0")
    result = nccl.probe(lib)
    assert result["bootstrap"]["error"] == "unhandled system error: Bootstrap : no socket interface found"
    assert "NCCL bootstrap failed with NCCL_SOCKET_IFNAME='=nosuch0'" in nccl.verdict(result, "192.0.2.2")["reason"]


@needs_gcc
def test_nccls_debug_lines_do_not_break_the_probes_json(tmp_path):
    """NCCL_DEBUG=INFO (nccl_env), the first thing anyone sets to debug NCCL, makes NCCL print on stdout: the probe's
    stdout holds its JSON alone, and NCCL's lines go to stderr."""
    lib = _build(tmp_path, FAKE_NCCL, "libnccl_fake")
    env = {"PYTHONPATH": str(ROOT / "library_py"), "NCCL_DEBUG": "INFO", "PATH": "/usr/bin:/bin"}
    child = subprocess.run([sys.executable, "-m", "rayfleet.nccl", "--json", "--library", lib], env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout)["version"] == "2.30.7"
    assert "NCCL INFO NCCL version 2.30.7" in child.stderr


def test_a_probe_that_gives_no_result_says_what_it_printed():
    quiet = subprocess.CompletedProcess(["python", "-m", "rayfleet.nccl", "--json"], 0, stdout="NCCL INFO x\n",
                                        stderr="")
    assert nccl.probe_failure(quiet) == ("the NCCL probe (-m rayfleet.nccl --json) gave no result (exit 0): "
                                         "NCCL INFO x")
    dead = subprocess.CompletedProcess(["python", "-m", "rayfleet.nccl"], -11, stdout="", stderr="")
    assert nccl.probe_failure(dead).endswith("(exit -11): it printed nothing")


def test_probe_without_a_library_says_so(tmp_path):
    result = nccl.probe(str(tmp_path / "missing.so"))
    assert result["available"] is False and "does not load" in result["reason"]


def test_settings_resolve_auto_to_the_interface_of_node_ip():
    settings = RayNodeSettings.from_mapping({**HEAD, "socket_ifname": "auto"})
    env = settings.process_env(base={})
    assert env["NCCL_SOCKET_IFNAME"] == "=lo" and env["GLOO_SOCKET_IFNAME"] == "lo"
    assert settings.to_dict()["socket_ifname"] == "auto"


def test_settings_without_socket_ifname_stay_as_before():
    settings = RayNodeSettings.from_mapping(HEAD)
    assert "socket_ifname" not in settings.to_dict()
    assert "NCCL_SOCKET_IFNAME" not in settings.process_env(base={})


def test_settings_auto_on_a_foreign_address_fails_naming_it():
    settings = RayNodeSettings.from_mapping({**HEAD, "node_ip": "203.0.113.9", "socket_ifname": "auto"})
    with pytest.raises(SettingsError, match=r"203\.0\.113\.9"):
        settings.process_env(base={})


@pytest.mark.parametrize("bad", ["eth0,eth1", "=eth0", "^docker", "a" * 16, "eth 0"])
def test_settings_reject_what_is_not_an_interface_name(bad):
    with pytest.raises(SettingsError, match="socket_ifname: expected an interface name"):
        RayNodeSettings.from_mapping({**HEAD, "socket_ifname": bad})


def test_settings_refuse_both_socket_ifname_and_the_variable():
    with pytest.raises(SettingsError, match=r"env\.NCCL_SOCKET_IFNAME: set either it or socket_ifname"):
        RayNodeSettings.from_mapping({**HEAD, "socket_ifname": "eth0", "env": {"NCCL_SOCKET_IFNAME": "eth1"}})


def test_raynode_exec_refuses_to_start_when_auto_finds_nothing(tmp_path, capsys):
    from rayfleet.raynode import main

    config = tmp_path / "ray-head.json"
    config.write_text(json.dumps({**HEAD, "node_ip": "203.0.113.9", "socket_ifname": "auto"}))
    assert main(["exec", "--config", str(config)]) == 2
    assert "no interface holding the node's address 203.0.113.9" in capsys.readouterr().err


@needs_gcc
def test_role_reads_the_plugins_name_from_its_exported_struct(tmp_path):
    plugin = _build(tmp_path, FAKE_PLUGIN, "libnccl-net-ofi")
    spec = importlib.util.spec_from_file_location("nccl_plugin_name",
                                                  ROOT / "roles" / "nccl" / "files" / "nccl_plugin_name.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.plugin_name(plugin) == "Libfabric"
    not_plugin = _build(tmp_path, "int x = 1;", "libother")
    with pytest.raises(LookupError, match="not a NCCL net plugin"):
        mod.plugin_name(not_plugin)
