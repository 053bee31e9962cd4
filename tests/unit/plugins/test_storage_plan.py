# SPDX-License-Identifier: GPL-3.0-or-later
"""The storage plan (plugins/plugin_utils/storage_plan.py) as a Python function: the mounts it resolves for the
shared_storage role (the same as the role's Jinja computed before), and every bad input it names."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.storage_plan import (
    MOUNT_KEYS,
    PlanError,
    check_hostname,
    storage_plan,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/shared_storage/defaults/main.yml").read_text())
NFS_OPTIONS = DEFAULTS["shared_storage_nfs_options"]
BOOT_OPTIONS = DEFAULTS["shared_storage_boot_options"]
# The hosts of group nfs_server and their addresses (ansible_host, else the name)
SERVERS = {"nfs1": "10.9.9.9", "nfs2": "nfs2", "nfs6": "fd00::9"}


def inputs(mounts, **extra) -> dict:
    """The shared_storage role's variables as the plan gets them (the role's defaults, rendered)."""
    return {**DEFAULTS, "shared_storage_efs_region": "", "common_user": "rayfleet", "common_group": "rayfleet",
            "shared_storage_mounts": mounts, **extra}


def plan(mounts, **extra) -> dict:
    return storage_plan("node7", inputs(mounts, **extra), list(SERVERS), SERVERS.get)


def problems(mounts, **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(mounts, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    return info.value.problems


def nfs(path="/mnt/a", server="10.0.0.5", export="/srv/a", **extra) -> dict:
    """A mount as the Jinja of the role resolved it, by default an nfs mount of a server given by address."""
    return {"path": path, "type": "nfs", "server": server, "export": export, "server_host": "", "fstype": "nfs4",
            "src": f"{server}:{export}", "opts": f"{NFS_OPTIONS},{BOOT_OPTIONS}", "owner": "rayfleet",
            "group": "rayfleet", "mode": "0775", "state": "mounted", **extra}


EFS_ID = "fs-0123456789abcdef0"
EFS_SERVER = f"{EFS_ID}.efs.us-east-1.amazonaws.com"


@pytest.mark.parametrize(("mounts", "extra", "resolved"), [
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.5", "export": "/srv/a"}], {}, [nfs()], id="nfs-server"),
    pytest.param([{"path": "/mnt/a", "server": "nfs.example.com"}], {},
                 [nfs(server="nfs.example.com", export="/")], id="nfs-dns-name-default-export"),
    pytest.param([{"path": "/mnt/a", "server_host": "nfs1", "export": "/srv/a"},
                  {"path": "/mnt/b", "type": "nfs", "server_host": "nfs2", "export": "/srv/b"}], {},
                 [nfs(server="10.9.9.9", server_host="nfs1"),
                  nfs(path="/mnt/b", server="nfs2", export="/srv/b", server_host="nfs2")], id="nfs-server-host"),
    pytest.param([{"path": "/mnt/a", "server": "fd00::5", "export": "/srv/a"}], {},
                 [nfs(server="fd00::5", src="[fd00::5]:/srv/a")], id="ipv6-server-in-brackets"),
    pytest.param([{"path": "/mnt/a", "server_host": "nfs6", "export": "/srv/a"}], {},
                 [nfs(server="fd00::9", server_host="nfs6", src="[fd00::9]:/srv/a")], id="ipv6-server-host"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": EFS_ID, "region": "us-east-1"}], {},
                 [nfs(path="/mnt/efs", type="efs", server=EFS_SERVER, export="/", fstype="efs", src=f"{EFS_ID}:/",
                      opts=f"tls,{BOOT_OPTIONS}")], id="efs-tls"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": "fs-01234567"}],
                 {"shared_storage_efs_region": "eu-west-1"},
                 [nfs(path="/mnt/efs", type="efs", server="fs-01234567.efs.eu-west-1.amazonaws.com", export="/",
                      fstype="efs", src="fs-01234567:/", opts=f"tls,{BOOT_OPTIONS}")], id="efs-role-region"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": EFS_ID, "region": "us-east-1", "tls": False}], {},
                 [nfs(path="/mnt/efs", type="efs", server=EFS_SERVER, export="/")], id="efs-without-tls"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": EFS_ID, "region": "us-east-1"}],
                 {"shared_storage_efs_tls": False},
                 [nfs(path="/mnt/efs", type="efs", server=EFS_SERVER, export="/")], id="efs-role-without-tls"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": EFS_ID, "region": "us-east-1", "tls": "yes"}],
                 {"shared_storage_efs_tls": "no"},
                 [nfs(path="/mnt/efs", type="efs", server=EFS_SERVER, export="/", fstype="efs", src=f"{EFS_ID}:/",
                      opts=f"tls,{BOOT_OPTIONS}")], id="efs-tls-words"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.5", "export": "/", "options": "nfsvers=4.2,ro", "owner": "alice",
                   "group": "staff", "mode": "0755"},
                  {"path": "/mnt/efs", "type": "efs", "efs_id": EFS_ID, "region": "us-east-1", "options": "tls,iam"}],
                 {},
                 [nfs(export="/", opts=f"nfsvers=4.2,ro,{BOOT_OPTIONS}", owner="alice", group="staff", mode="0755"),
                  nfs(path="/mnt/efs", type="efs", server=EFS_SERVER, export="/", fstype="efs", src=f"{EFS_ID}:/",
                      opts=f"tls,iam,{BOOT_OPTIONS}")], id="options-owner-group-mode"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.5", "export": "/srv/a", "state": "absent"},
                  {"path": "/mnt/b", "server": "10.0.0.6", "export": "/srv/a", "state": "mounted"}], {},
                 [nfs(state="absent"), nfs(path="/mnt/b", server="10.0.0.6")], id="absent"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.5", "export": "/srv/a"}],
                 {"common_user": "ray", "common_group": "ml", "shared_storage_nfs_options": "nfsvers=4.1",
                  "shared_storage_boot_options": "_netdev"},
                 [nfs(owner="ray", group="ml", opts="nfsvers=4.1,_netdev")], id="role-user-and-options"),
    pytest.param([], {}, [], id="none"),
])
def test_the_mounts_resolve_as_the_role_mounts_them(mounts, extra, resolved):
    out = plan(mounts, **extra)
    assert out["mounts"] == resolved
    assert out["wanted"] == [m for m in resolved if m["state"] == "mounted"]


def test_the_default_owner_is_the_ray_user_when_the_role_passes_none():
    v = inputs([{"path": "/mnt/a", "server": "10.0.0.5"}])
    del v["common_user"], v["common_group"]
    assert storage_plan("node7", v)["mounts"][0]["owner"] == "rayfleet"


def test_a_server_host_without_an_address_is_its_name():
    assert storage_plan("node7", inputs([{"path": "/mnt/a", "server_host": "nfs1"}]), ["nfs1"])["mounts"][0][
        "src"] == "nfs1:/"


PREFIX = "shared_storage on node7: "


@pytest.mark.parametrize(("mounts", "words"), [
    pytest.param([{"path": "mnt/data", "server": "10.0.0.1", "export": "/x"}],
                 ["shared_storage_mounts[0]: path is \"mnt/data\"; expected an absolute path", '["mnt/data"]'],
                 id="relative-path"),
    pytest.param([{"path": "/mnt/data/", "server": "10.0.0.1"}],
                 ['shared_storage_mounts[0]: path is "/mnt/data/"; expected an absolute path', "trailing slash"],
                 id="trailing-slash"),
    pytest.param([{"path": "/mnt/my data", "server": "10.0.0.1"}],
                 ['path is "/mnt/my data"; expected an absolute path, starting with /, without blanks'],
                 id="path-with-a-space"),
    pytest.param([{"path": "/", "server": "10.0.0.1"}], ['path is "/"; expected an absolute path'], id="root"),
    pytest.param([{"server": "10.0.0.1"}], ["shared_storage_mounts[0]: path is not set", '["<no path>"]'],
                 id="no-path"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1"}, {"path": "/mnt/a", "server": "10.0.0.2"}],
                 ["shared_storage_mounts[1] (/mnt/a): path /mnt/a is also the path of shared_storage_mounts[0]; "
                  'expected each path once (the paths given: ["/mnt/a", "/mnt/a"])'], id="duplicate-path"),
    pytest.param([{"path": "/mnt/a", "type": "nfs3", "server": "10.0.0.1"}],
                 ['shared_storage_mounts[0] (/mnt/a): type is "nfs3"; expected nfs or efs.'], id="type"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "state": "present"}],
                 ['shared_storage_mounts[0] (/mnt/a): state is "present"; expected mounted or absent.'], id="state"),
    pytest.param([{"path": "/mnt/a", "export": "/x"}],
                 ["shared_storage_mounts[0] (/mnt/a): an nfs mount needs server (an IP address or DNS name) or "
                  'server_host (a host of group nfs_server, now ["nfs1", "nfs2", "nfs6"]); neither is given.'],
                 id="no-server"),
    pytest.param([{"path": "/mnt/a", "server": ""}], ["an nfs mount needs server"], id="empty-server"),
    pytest.param([{"path": "/mnt/a", "server_host": "nfs9"}],
                 ['shared_storage_mounts[0] (/mnt/a): server_host is "nfs9"; expected a host of group nfs_server '
                  '(now ["nfs1", "nfs2", "nfs6"]).'], id="server-host-outside-nfs-server"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "server_host": "nfs1"}],
                 ['shared_storage_mounts[0] (/mnt/a): server "10.0.0.1" and server_host "nfs1" are both given; '
                  "expected one of them"], id="server-and-server-host"),
    pytest.param([{"path": "/mnt/a", "server": "http://x"}],
                 ['shared_storage_mounts[0] (/mnt/a): server is "http://x"; expected the NFS server\'s IP address or '
                  "DNS name"], id="server-url"),
    pytest.param([{"path": "/mnt/a", "server": "a b"}], ['server is "a b"; expected the NFS server'],
                 id="server-with-a-space"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.256"}], ['server is "10.0.0.256"; expected'],
                 id="server-bad-ipv4"),
    pytest.param([{"path": "/mnt/a", "server": "[fd00::5]"}], ['server is "[fd00::5]"', "without brackets"],
                 id="server-ipv6-in-brackets"),
    pytest.param([{"path": "/mnt/a", "server": "nfs1:2049"}], ['server is "nfs1:2049"'], id="server-with-port"),
    pytest.param([{"path": "/mnt/a", "server": 10}], ["server is 10; expected"], id="server-a-number"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "export": "srv/a"}],
                 ['shared_storage_mounts[0] (/mnt/a): export is "srv/a"; expected the absolute path the server '
                  "exports"], id="relative-export"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": "fs-XYZ", "region": "us-east-1"}],
                 ['shared_storage_mounts[0] (/mnt/efs): efs_id is "fs-XYZ"; expected an EFS file system id'],
                 id="efs-id"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "region": "us-east-1"}],
                 ["shared_storage_mounts[0] (/mnt/efs): efs_id is not set; expected an EFS file system id"],
                 id="efs-without-id"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": "fs-01234567"}],
                 ["shared_storage_mounts[0] (/mnt/efs): an efs mount needs a region; region is not set and "
                  'shared_storage_efs_region is ""'], id="efs-without-region"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": "fs-01234567", "region": "US East"}],
                 ['shared_storage_mounts[0] (/mnt/efs): region is "US East"; expected an AWS region such as '
                  "us-east-1."], id="efs-bad-region"),
    pytest.param([{"path": "/mnt/efs", "type": "efs", "efs_id": "fs-01234567", "region": "us-east-1", "tls": "maybe"}],
                 ['shared_storage_mounts[0] (/mnt/efs): tls is "maybe"; expected true or false.'], id="tls"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "sever": "10.0.0.2"}],
                 ['shared_storage_mounts[0] (/mnt/a): unknown key "sever" (did you mean server?); expected only '
                  + ", ".join(MOUNT_KEYS) + "."], id="unknown-key"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "mode": 509}],
                 ["shared_storage_mounts[0] (/mnt/a): mode is 509; expected the mount point's mode as a quoted octal "
                  "string such as '0775'."], id="mode-a-number"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "mode": "0789"}], ['mode is "0789"; expected'],
                 id="mode-not-octal"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "options": "ro, hard"}],
                 ['shared_storage_mounts[0] (/mnt/a): options is "ro, hard"; expected mount options, comma-separated, '
                  "without blanks"], id="options-with-a-blank"),
    pytest.param([{"path": "/mnt/a", "server": "10.0.0.1", "owner": "", "group": "a b"}],
                 ['owner is ""; expected a user or group name', 'group is "a b"; expected a user or group name'],
                 id="owner-group"),
    pytest.param(["/mnt/a"], ['shared_storage_mounts[0] is "/mnt/a"; expected a dict. Each mount of '
                              "shared_storage_mounts is a dict of path, type, server"], id="item-not-a-dict"),
    pytest.param("/mnt/a", ['shared_storage_mounts is "/mnt/a"; expected a list of mounts.'], id="not-a-list"),
    pytest.param(None, ["shared_storage_mounts is null; expected a list of mounts."], id="null"),
])
def test_bad_mounts_are_named_with_the_host_the_variable_and_what_was_expected(mounts, words):
    found = problems(mounts)
    assert all(p.startswith(PREFIX) for p in found), found
    text = " ".join(found)
    for word in words:
        assert word in text, f"{word!r} not in {text!r}"


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("shared_storage_on_degraded", "maybe", 'shared_storage_on_degraded is "maybe"; expected warn or fail.'),
    ("shared_storage_probe_timeout", 0, "shared_storage_probe_timeout is 0; expected seconds, a number > 0."),
    ("shared_storage_probe_timeout", "soon", 'shared_storage_probe_timeout is "soon"; expected seconds'),
    ("shared_storage_probe_timeout", True, "shared_storage_probe_timeout is true; expected seconds"),
    ("shared_storage_efs_tls", "maybe", 'shared_storage_efs_tls is "maybe"; expected true or false.'),
    ("shared_storage_nfs_options", "", 'shared_storage_nfs_options is ""; expected mount options'),
    ("shared_storage_boot_options", "_netdev nofail", 'shared_storage_boot_options is "_netdev nofail"; expected'),
    ("common_user", "a:b", 'common_user is "a:b"; expected a user or group name'),
])
def test_bad_role_settings_are_named(var, value, expected):
    found = problems([], **{var: value})
    assert len(found) == 1 and found[0].startswith(PREFIX + expected), found


@pytest.mark.parametrize("timeout", [5, 0.5, "2", "2.5"])
def test_a_probe_timeout_is_any_number_of_seconds_above_zero(timeout):
    assert plan([], shared_storage_probe_timeout=timeout)["mounts"] == []


def test_every_problem_is_reported_at_once():
    found = problems([{"path": "mnt/a", "type": "nfs3"}, {"path": "/mnt/b", "server_host": "nfs9"}],
                     shared_storage_on_degraded="never", shared_storage_probe_timeout=-1)
    assert len(found) == 5, found
    for part in ("shared_storage_on_degraded", "shared_storage_probe_timeout", "shared_storage_mounts[0]: path",
                 "shared_storage_mounts[0]: type", "shared_storage_mounts[1] (/mnt/b): server_host"):
        assert any(part in p for p in found), (part, found)


@pytest.mark.parametrize(("name", "ok"), [("nfs1", True), ("nfs.example.com", True), ("nfs.example.com.", True),
                                          ("fs-0123.efs.us-east-1.amazonaws.com", True), ("a_b", False),
                                          ("-nfs", False), ("nfs-", False), ("10.0.0.1", False), ("a..b", False),
                                          ("", False), ("a" * 64, False), ("http://x", False)])
def test_a_dns_name_is_labels_of_letters_digits_and_hyphens(name, ok):
    assert bool(check_hostname(name)) is ok


def test_the_known_keys_are_those_the_role_documents():
    """The mount keys the plan accepts are those defaults/main.yml and meta/argument_specs.yml describe."""
    defaults = (ROOT / "roles/shared_storage/defaults/main.yml").read_text()
    block = defaults[defaults.index("# The mounts, per inventory group"):defaults.index("shared_storage_mounts: []")]
    documented = {key for keys in re.findall(r"^#\s{3,}(?:- )?([a-z_]+(?:/[a-z_]+)*)[: ]", block, re.M)
                  for key in keys.split("/")}
    assert documented == set(MOUNT_KEYS)
    spec = yaml.safe_load((ROOT / "roles/shared_storage/meta/argument_specs.yml").read_text())
    described = " ".join(spec["argument_specs"]["main"]["options"]["shared_storage_mounts"]["description"])
    assert [key for key in MOUNT_KEYS if f"C({key})" not in described] == []


# ---- where an efs mount's amazon-efs-utils comes from (given the host's OS family) ----

EFS_TLS = [{"path": "/mnt/efs", "type": "efs", "efs_id": EFS_ID, "region": "us-east-1"}]
EFS_PLAIN = [{**EFS_TLS[0], "tls": False}]
RELEASE = "/srv/efs-utils-2.3.1.tar.gz"
RELEASE_SHA = "ab" * 32


def efs_plan(mounts, os_family="Debian", **extra) -> dict:
    return storage_plan("node7", inputs(mounts, shared_storage_efs_region="us-east-1", **extra), list(SERVERS),
                        SERVERS.get, os_family=os_family, distribution="Ubuntu" if os_family == "Debian" else None,
                        is_file=lambda path: path == RELEASE, sha256_of=lambda path: RELEASE_SHA)


def efs_problems(mounts, os_family="Debian", **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        efs_plan(mounts, os_family, **extra)
    assert all(p.startswith(PREFIX) for p in info.value.problems), info.value.problems
    return [p[len(PREFIX):] for p in info.value.problems]


@pytest.mark.parametrize(("mounts", "os_family", "extra"), [
    (EFS_TLS, "RedHat", {}),
    (EFS_PLAIN, "Debian", {}),
    ([], "Debian", {}),
    (EFS_TLS, "Debian", {"shared_storage_efs_utils_deb": "/opt/debs/amazon-efs-utils_2.3.1_amd64.deb"}),
    (EFS_TLS, "Debian", {"shared_storage_efs_utils_deb": "https://mirror/amazon-efs-utils.deb",
                         "shared_storage_efs_utils_deb_checksum": "sha256:" + RELEASE_SHA}),
    (EFS_TLS, "Debian", {"shared_storage_efs_utils_source": RELEASE}),
    (EFS_TLS, "Debian", {"shared_storage_efs_utils_source": RELEASE,
                         "shared_storage_efs_utils_source_checksum": "sha256:" + RELEASE_SHA}),
    (EFS_TLS, "Debian", {"shared_storage_efs_utils_source": "https://github.com/aws/efs-utils/archive/v2.3.1.tar.gz",
                         "shared_storage_efs_utils_source_checksum": "sha256:" + RELEASE_SHA}),
    # the source release is read only where it is built: a .deb given, or RedHat
    (EFS_TLS, "Debian", {"shared_storage_efs_utils_deb": "/opt/x.deb", "shared_storage_efs_utils_source": "junk"}),
    (EFS_TLS, "RedHat", {"shared_storage_efs_utils_source": "junk", "shared_storage_efs_utils_version": "x"}),
])
def test_amazon_efs_utils_from_a_package_a_deb_or_its_source_release(mounts, os_family, extra):
    assert efs_plan(mounts, os_family, **extra)["wanted"][:1] == efs_plan(mounts, "RedHat")["wanted"][:1]


def test_without_the_os_family_amazon_efs_utils_is_not_checked():
    assert plan(EFS_TLS, shared_storage_efs_region="us-east-1")["wanted"][0]["fstype"] == "efs"


def test_an_efs_mount_with_tls_needs_amazon_efs_utils_from_somewhere():
    assert efs_problems(EFS_TLS) == [
        "shared_storage_mounts has an efs mount with tls (/mnt/efs), which needs amazon-efs-utils, which Ubuntu does "
        "not package; expected shared_storage_efs_utils_deb, a .deb built with efs-utils' ./build-deb.sh, or "
        "shared_storage_efs_utils_source (with shared_storage_efs_utils_source_checksum), efs-utils' source release "
        "to build it here, or tls=false on the mount (the NFS client with AWS's recommended options)."]


def test_a_deb_given_as_a_url_needs_its_checksum():
    url = "https://mirror/amazon-efs-utils.deb"
    assert efs_problems(EFS_TLS, shared_storage_efs_utils_deb=url) == [
        f'shared_storage_efs_utils_deb_checksum is "", but shared_storage_efs_utils_deb is the URL {url}; expected '
        'its sha256 ("sha256:<64 hex digits>", sha256sum of the .deb you built), or the .deb as a path on the host.']
    # on every Debian host, as the role read it: with or without an efs mount
    assert len(efs_problems([], shared_storage_efs_utils_deb=url, shared_storage_efs_utils_deb_checksum="abc")) == 1
    assert efs_plan([], "RedHat", shared_storage_efs_utils_deb=url)["wanted"] == []


@pytest.mark.parametrize(("extra", "expected"), [
    ({"shared_storage_efs_utils_source": RELEASE, "shared_storage_efs_utils_source_checksum": "sha256:" + "0" * 64},
     [f"shared_storage_efs_utils_source {RELEASE} has sha256 {RELEASE_SHA}, but "
      f"shared_storage_efs_utils_source_checksum is sha256:{'0' * 64}; expected the release that checksum pins."]),
    ({"shared_storage_efs_utils_source": "https://example.invalid/efs-utils.tar.gz"},
     ['shared_storage_efs_utils_source is "https://example.invalid/efs-utils.tar.gz" and '
      'shared_storage_efs_utils_source_checksum is ""; expected efs-utils\' source release as an https URL with its '
      "checksum (sha256:<64 hex digits>), or as an absolute path of a file on the controller."]),
    ({"shared_storage_efs_utils_source": "http://example.invalid/efs-utils.tar.gz",
      "shared_storage_efs_utils_source_checksum": "sha256:" + RELEASE_SHA},
     ['shared_storage_efs_utils_source is "http://example.invalid/efs-utils.tar.gz"; expected efs-utils\' source '
      "release as an https URL with its checksum (sha256:<64 hex digits>), or as an absolute path of a file on the "
      "controller."]),
    ({"shared_storage_efs_utils_source": "efs-utils.tar.gz"},
     ['shared_storage_efs_utils_source is "efs-utils.tar.gz"; expected efs-utils\' source release as an https URL '
      "with its checksum (sha256:<64 hex digits>), or as an absolute path of a file on the controller."]),
    ({"shared_storage_efs_utils_source": "/srv/missing.tar.gz"},
     ['shared_storage_efs_utils_source is "/srv/missing.tar.gz"; expected efs-utils\' source release as an https '
      "URL with its checksum (sha256:<64 hex digits>), or as an absolute path of a file on the controller."]),
    ({"shared_storage_efs_utils_source": RELEASE, "shared_storage_efs_utils_version": "v2.3.1",
      "shared_storage_efs_utils_source_checksum": "SHA256:AB"},
     ['shared_storage_efs_utils_version is "v2.3.1"; expected efs-utils\' release, like 2.3.1.',
      'shared_storage_efs_utils_source_checksum is "SHA256:AB"; expected empty, or the release\'s sha256: '
      "sha256:<64 lower-case hex digits>."]),
    ({"shared_storage_efs_utils_source": 5},
     ["shared_storage_efs_utils_source is 5; expected empty, a path or a URL."]),
])
def test_efs_utils_source_release_problems(extra, expected):
    assert efs_problems(EFS_TLS, **extra) == expected


def test_the_controller_file_is_hashed(tmp_path):
    release = tmp_path / "efs-utils.tar.gz"
    release.write_bytes(b"release")
    v = inputs(EFS_TLS, shared_storage_efs_region="us-east-1", shared_storage_efs_utils_source=str(release),
               shared_storage_efs_utils_source_checksum="sha256:" + hashlib.sha256(b"release").hexdigest())
    assert storage_plan("node7", v, os_family="Debian")["wanted"][0]["path"] == "/mnt/efs"
    with pytest.raises(PlanError, match="has sha256 "):
        storage_plan("node7", {**v, "shared_storage_efs_utils_source_checksum": "sha256:" + "0" * 64},
                     os_family="Debian")
