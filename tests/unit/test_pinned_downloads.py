# SPDX-License-Identifier: GPL-3.0-or-later
"""Every download the roles make as root is pinned: files by sha256, repository signing keys by fingerprint, git
checkouts by commit. Scans roles/*/tasks/*.yml (blocks included) and names the file and task of each download that
is not:

- get_url without a checksum;
- a package installed straight from a URL (apt deb:, package/dnf/yum name:), or an archive unpacked from one;
- a repository module told to fetch its key itself (deb822_repository signed_by, yum_repository gpgkey, apt_key,
  rpm_key given a URL): the module would trust whatever it gets;
- a signing key fetched (uri/get_url of a key), or handed to apt/dnf (signed_by, gpgkey), in a file with no
  fingerprint check: an assert on the key's `rayfleet.cluster.openpgp_fingerprints`;
- a git checkout whose version is not a full commit (a 40-hex literal or a *_commit variable).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

_KEY_URL = re.compile(r"gpg|key|\.pub\b|\.asc\b", re.I)
_URL = re.compile(r"://|_url\b")
# a package file on the host: an absolute path, or a variable named for a file or path
_LOCAL = re.compile(r"^(/|\{\{\s*\w+_(file|path)\s*\}\}$)")
_COMMIT = re.compile(r"^([0-9a-f]{40}|\{\{\s*\w+_commit\s*\}\})$")
_REPO_KEY_OPTIONS = {"deb822_repository": "signed_by", "yum_repository": "gpgkey", "apt_key": "url", "rpm_key": "key"}
_PACKAGES = {"package", "dnf", "yum"}
_MODULES = {"get_url", "uri", "unarchive", "apt", "git", "assert", "fail", *_PACKAGES, *_REPO_KEY_OPTIONS}


class _Loader(yaml.SafeLoader):
    """Task files may carry Ansible's tags (!unsafe, !vault): read them as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node)
                              if isinstance(node, yaml.ScalarNode) else None)


def _tasks(items):
    for item in items or []:
        if not isinstance(item, dict):
            continue
        yield item
        for section in ("block", "rescue", "always"):
            yield from _tasks(item.get(section))


def _module(task) -> tuple[str, dict | str | None]:
    for key, value in task.items():
        short = key.rsplit(".", 1)[-1]
        if (key.startswith(("ansible.builtin.", "ansible.legacy.")) or "." not in key) and short in _MODULES:
            return short, value
    return "", None


def _text(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value)
    return "" if value is None else str(value)


def problems(root: Path) -> list[str]:
    """'<file>: task <name>: <what>' for each unpinned download under root/roles/*/tasks/*.yml."""
    found = []
    for path in sorted(root.glob("roles/*/tasks/*.yml")):
        rel = path.relative_to(root)
        tasks = list(_tasks(yaml.load(path.read_text(), Loader=_Loader)))
        keys, checked = [], False
        for task in tasks:
            module, args = _module(task)
            args = args if isinstance(args, dict) else {}
            where = f"{rel}: task '{task.get('name', '(unnamed)')}'"
            if module == "get_url" and (not _text(args.get("checksum")).strip() or "omit" in _text(args.get(
                    "checksum"))):
                found.append(f"{where}: get_url without a checksum (or one that may be omitted)")
            if module in ("get_url", "uri") and _KEY_URL.search(_text(args.get("url"))):
                keys.append(where)
            if module == "apt" and args.get("deb") is not None and not _LOCAL.match(_text(args.get("deb")).strip()):
                found.append(f"{where}: installs a .deb that is not a checked file on the host (download it with "
                             "get_url and a checksum)")
            names = args.get("name") if isinstance(args.get("name"), list) else [args.get("name")]
            if module in _PACKAGES and any(_URL.search(_text(n)) or (_text(n).strip().endswith((".rpm", ".deb"))
                                                                     and not _LOCAL.match(_text(n).strip()))
                                           for n in names):
                found.append(f"{where}: installs a package that is not a checked file on the host (download it with "
                             "get_url and a checksum)")
            if module == "unarchive" and _URL.search(_text(args.get("src"))):
                found.append(f"{where}: unpacks an archive straight from a URL (download it with get_url and a "
                             "checksum)")
            if module in _REPO_KEY_OPTIONS and args.get(_REPO_KEY_OPTIONS[module]) is not None:
                value = _text(args.get(_REPO_KEY_OPTIONS[module]))
                if _URL.search(value) and not value.startswith("file://"):
                    found.append(f"{where}: {module} fetches its signing key itself ({_REPO_KEY_OPTIONS[module]}: "
                                 f"{value}), unchecked")
                keys.append(where)
            if module == "git" and not _COMMIT.match(_text(args.get("version")).strip()):
                found.append(f"{where}: git checkout not pinned to a commit (version: {args.get('version')!r})")
            if module in ("assert", "fail") and "openpgp_fingerprints" in _text(
                    [args.get("that"), task.get("vars"), task.get("when")]):
                checked = True
        if keys and not checked:
            found.extend(f"{where}: a repository signing key without a fingerprint check in the same file" for where
                         in keys)
    return found


def test_every_download_of_the_roles_is_pinned():
    assert problems(ROOT) == []


def test_the_roles_are_scanned():
    # a scan that read nothing would pass anything
    paths = list(ROOT.glob("roles/*/tasks/*.yml"))
    assert len(paths) > 50
    assert any("ansible.builtin.get_url" in p.read_text() for p in paths)


UNPINNED = """
- name: Fetch the tool
  ansible.builtin.get_url:
    url: https://example.com/tool.tar.gz
    dest: /tmp/tool.tar.gz
- name: Fetch the other tool
  ansible.builtin.get_url:
    url: https://example.com/other.tar.gz
    dest: /tmp/other.tar.gz
    checksum: "{{ other_checksum | default(omit, true) }}"
- name: Install the vendor package
  ansible.builtin.apt:
    deb: "{{ vendor_deb_url }}"
- name: Install the keyring
  ansible.builtin.apt:
    deb: "{{ vendor_repo_base }}/vendor-keyring_1.1-1_all.deb"
- name: Inside a block
  block:
    - name: Install the rpm
      ansible.builtin.package:
        name: https://example.com/vendor.rpm
    - name: Unpack the release
      ansible.builtin.unarchive:
        src: https://example.com/release.tar.gz
        dest: /opt
        remote_src: true
- name: Add the repository
  ansible.builtin.deb822_repository:
    name: vendor
    uris: https://example.com/apt
    signed_by: https://example.com/gpg.key
- name: Add the rpm repository
  yum_repository:
    name: vendor
    baseurl: https://example.com/rpm
    gpgkey: "{{ vendor_key_url }}"
- name: Check out the source
  ansible.builtin.git:
    repo: https://example.com/src.git
    dest: /src
    version: main
"""

KEY_UNCHECKED = """
- name: Fetch the vendor key
  ansible.builtin.uri:
    url: https://example.com/gpg.key
    return_content: true
  register: vendor_key
- name: Install it
  ansible.builtin.copy:
    dest: /etc/apt/keyrings/vendor.asc
    content: "{{ vendor_key.content }}"
- name: Add the repository
  ansible.builtin.deb822_repository:
    name: vendor
    uris: https://example.com/apt
    signed_by: /etc/apt/keyrings/vendor.asc
"""

CHECK = """
- name: Check it is the pinned key
  ansible.builtin.assert:
    that: __found == [vendor_key_fingerprint]
  vars:
    __found: "{{ vendor_key.content | rayfleet.cluster.openpgp_fingerprints }}"
"""

PINNED = """
- name: Fetch the tool
  get_url:
    url: https://example.com/tool.tar.gz
    dest: /tmp/tool.tar.gz
    checksum: "{{ tool_checksum }}"
- name: Install it
  ansible.builtin.apt:
    deb: /tmp/vendor.deb
- name: Install the checked download
  ansible.builtin.apt:
    deb: "{{ vendor_deb_file }}"
- name: Install packages by name
  ansible.builtin.package:
    name: [curl, "{{ vendor_packages }}"]
- name: Check out the source
  ansible.builtin.git:
    repo: https://example.com/src.git
    dest: /src
    version: "{{ tool_commit }}"
- name: Another checkout
  ansible.builtin.git:
    repo: https://example.com/src.git
    dest: /src2
    version: 810ffae374a2b9cb4b5c5e28eaeca7d7998fca0c
- name: Something else
  ansible.builtin.uri:
    url: http://127.0.0.1:9090/-/ready
"""


def _role(tmp_path: Path, name: str, text: str) -> Path:
    tasks = tmp_path / "roles" / name / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(text)
    return tmp_path


def test_each_unpinned_download_is_named_by_file_and_task(tmp_path):
    found = problems(_role(tmp_path, "bad", UNPINNED))
    for task, what in [
        ("Fetch the tool", "get_url without a checksum"),
        ("Fetch the other tool", "get_url without a checksum (or one that may be omitted)"),
        ("Install the vendor package", "installs a .deb that is not a checked file on the host"),
        ("Install the keyring", "installs a .deb that is not a checked file on the host"),
        ("Install the rpm", "installs a package that is not a checked file on the host"),
        ("Unpack the release", "unpacks an archive straight from a URL"),
        ("Add the repository", "deb822_repository fetches its signing key itself"),
        ("Add the rpm repository", "yum_repository fetches its signing key itself"),
        ("Add the repository", "a repository signing key without a fingerprint check in the same file"),
        ("Check out the source", "git checkout not pinned to a commit"),
    ]:
        prefix = f"roles/bad/tasks/main.yml: task '{task}': "
        assert any(line.startswith(prefix) and what in line for line in found), (task, what, found)
    # and the rpm repository's key, which no check in that file covers either
    assert len(found) == 11, found


def test_a_fetched_key_needs_a_fingerprint_check_in_its_file(tmp_path):
    found = problems(_role(tmp_path, "keys", KEY_UNCHECKED))
    assert found == [
        f"roles/keys/tasks/main.yml: task '{task}': a repository signing key without a fingerprint check in the "
        "same file" for task in ("Fetch the vendor key", "Add the repository")]
    (tmp_path / "roles/keys/tasks/main.yml").write_text(KEY_UNCHECKED + CHECK)
    assert problems(tmp_path) == []


def test_pinned_downloads_pass(tmp_path):
    assert problems(_role(tmp_path, "good", PINNED)) == []


@pytest.mark.parametrize("version", ["main", "v1.2.3", "810ffae", "{{ apex_branch }}", ""])
def test_a_checkout_of_anything_but_a_full_commit_is_named(tmp_path, version):
    text = f"- name: Check out\n  ansible.builtin.git:\n    repo: /r\n    dest: /d\n    version: '{version}'\n"
    assert problems(_role(tmp_path, "git", text)) == [
        f"roles/git/tasks/main.yml: task 'Check out': git checkout not pinned to a commit (version: {version!r})"]
