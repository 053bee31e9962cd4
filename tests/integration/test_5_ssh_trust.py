# SPDX-License-Identifier: GPL-3.0-or-later
"""SSH trust between the nodes: the head reaches every node as the Ray user with strict host key
checking; the key is useless from a host outside the cluster; rotation removes the old key everywhere."""

from __future__ import annotations

import subprocess

import pytest
from conftest import (
    ROOT,
    SANDBOX,
    container,
    converge_again,
    head_host,
    inventory_ips,
    node_ip,
    podman,
    role_of,
    run_site,
    stranger,
)

USER = "rayfleet"
HOME = "/var/lib/rayfleet"
KEY = ROOT / ".sandbox" / SANDBOX / "cluster_ed25519"


def ssh_as_ray_user(host, target: str, command: str = "hostname"):
    return host.run(f"sudo -u {USER} ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 "
                    f"{USER}@{target} {command}")


@pytest.fixture(scope="module", autouse=True)
def converged_afterwards():
    """The key rotation and the failed run below leave the SSH trust stage to converge again: a plain site.yml
    does, so later modules find the sandbox as this one found it."""
    yield
    converge_again()


def test_controller_key_is_private():
    assert KEY.is_file(), f"no cluster key at {KEY}"
    assert oct(KEY.stat().st_mode & 0o777) == "0o600"
    assert oct(KEY.parent.stat().st_mode & 0o777) == "0o700"


def test_key_files_modes_and_owners(host):
    with host.sudo():
        _check_key_files(host)


def _check_key_files(host):
    ssh_dir = host.file(f"{HOME}/.ssh")
    assert ssh_dir.is_directory and ssh_dir.user == USER and ssh_dir.mode == 0o700
    auth = host.file(f"{HOME}/.ssh/authorized_keys")
    assert auth.user == USER and auth.mode == 0o600
    lines = [ln for ln in auth.content_string.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith('from="') and "rayfleet-cluster" in lines[0]
    private = host.file(f"{HOME}/.ssh/id_ed25519")
    if role_of(host) == "head":
        assert private.is_file and private.user == USER and private.mode == 0o600
    else:
        assert not private.exists, "the cluster's private key must live on the head only"
    config = host.file(f"{HOME}/.ssh/config").content_string
    assert "StrictHostKeyChecking yes" in config and "StrictHostKeyChecking no" not in config


def test_known_hosts_hold_the_real_host_keys(host, request):
    with host.sudo():
        known = host.file(f"{HOME}/.ssh/known_hosts").content_string
    for name, ip in inventory_ips(request).items():
        real = podman("exec", container(name), "cat", "/etc/ssh/ssh_host_ed25519_key.pub").split()[1]
        entry = next((ln for ln in known.splitlines() if ln.split(" ")[0].split(",").count(ip)), "")
        assert entry.endswith(f"ssh-ed25519 {real}"), f"known_hosts on {host.backend.host} lacks {name}'s real key"


@pytest.mark.parametrize("target", ["worker1", "worker2", "head"])
def test_head_reaches_every_node_with_strict_checking(request, target):
    ips = inventory_ips(request)
    head = head_host(request)
    name = f"{SANDBOX}-{target}"
    if name not in ips:
        pytest.skip(f"this sandbox has no {name}")
    cmd = ssh_as_ray_user(head, ips[name])
    assert cmd.rc == 0, f"head -> {name} ({ips[name]}) failed: {cmd.stderr}"
    assert cmd.stdout.strip() == container(name)


def _stranger_ssh(address: str, key: str, known_hosts: str, target: str) -> subprocess.CompletedProcess:
    """A host on the cluster network but not in the cluster, holding a copy of the cluster key."""
    script = (f"mkdir -p /root/.ssh && printf '%s\\n' \"$KEY\" > /root/.ssh/id && chmod 600 /root/.ssh/id && "
              f"printf '%s\\n' \"$KNOWN\" > /root/.ssh/known_hosts && "
              f"ssh -i /root/.ssh/id -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 "
              f"{USER}@{target} true")
    with stranger(address) as run:
        return run(["sh", "-c", script], {"KEY": key, "KNOWN": known_hosts})


def test_cluster_key_is_refused_from_outside_the_cluster(request):
    host = head_host(request)
    ip = node_ip(host)
    stranger_ip = ip.rsplit(".", 1)[0] + ".250"
    with host.sudo():
        known = host.file(f"{HOME}/.ssh/known_hosts").content_string
    proc = _stranger_ssh(stranger_ip, KEY.read_text().strip(), known, ip)
    assert proc.returncode == 255 and "Permission denied" in proc.stderr, (proc.returncode, proc.stderr)
    # The same key from inside the cluster works (so the refusal is the from= restriction, not a broken key).
    assert ssh_as_ray_user(host, ip, "true").rc == 0


def test_rotation_replaces_the_key_everywhere(request):
    host = head_host(request)
    old_pub = (KEY.parent / (KEY.name + ".pub")).read_text().split()[1]
    proc = run_site("--tags", "ssh", "-e", "ssh_trust_rotate=true")
    assert proc.returncode == 0, proc.stdout[-3000:]
    new_pub = (KEY.parent / (KEY.name + ".pub")).read_text().split()[1]
    assert new_pub != old_pub
    for name, ip in inventory_ips(request).items():
        auth = podman("exec", container(name), "cat", f"{HOME}/.ssh/authorized_keys")
        assert old_pub not in auth and new_pub in auth, f"{name} still trusts the old key or lacks the new one"
        cmd = ssh_as_ray_user(host, ip, "true")
        assert cmd.rc == 0, f"head -> {name} with the new key failed: {cmd.stderr}"


def _trusted_everywhere(request, pub):
    head = head_host(request)
    for name, ip in inventory_ips(request).items():
        auth = podman("exec", container(name), "cat", f"{HOME}/.ssh/authorized_keys")
        assert pub in auth, f"{name} does not trust the controller's cluster key"
        cmd = ssh_as_ray_user(head, ip, "true")
        assert cmd.rc == 0, f"head -> {name} failed: {cmd.stderr}"


def test_a_key_pair_made_anew_or_restored_on_the_controller_reaches_every_node(request):
    """The controller's public keys are inputs of the SSH trust stage on every host. With the key pair lost (a new
    checkout, lost credentials/) and one worker's SSH config edited, the next run makes a new pair and every node
    trusts it, not only the worker; the old pair restored from a backup is trusted everywhere again by the run
    after."""
    worker = next(name for name in inventory_ips(request) if not name.endswith("head"))
    files = [KEY.with_name(KEY.name + suffix) for suffix in ("", ".pub")]
    backup = {path: path.read_bytes() for path in files}
    old_pub = backup[files[1]].split()[1].decode()
    podman("exec", container(worker), "sh", "-c", f"echo '# edited' >> {HOME}/.ssh/config")
    for path in files:
        path.unlink()
    proc = run_site()
    assert proc.returncode == 0, proc.stdout[-3000:]
    new_pub = files[1].read_text().split()[1]
    assert new_pub != old_pub
    _trusted_everywhere(request, new_pub)
    assert "# edited" not in podman("exec", container(worker), "cat", f"{HOME}/.ssh/config")
    for path, content in backup.items():
        path.write_bytes(content)
    proc = run_site()
    assert proc.returncode == 0, proc.stdout[-3000:]
    _trusted_everywhere(request, old_pub)


def test_password_logins_are_off(host):
    """sshd's effective settings, and a real password attempt: the server offers public keys only."""
    import paramiko

    with host.sudo():
        effective = host.check_output("sshd -T -C user=rayfleet,host=localhost,addr=127.0.0.1").lower().splitlines()
    for line in ("passwordauthentication no", "kbdinteractiveauthentication no", "permitemptypasswords no",
                 "permitrootlogin without-password"):
        assert line in effective, f"sshd -T lacks {line!r}"
    known = paramiko.HostKeys(str(ROOT / ".sandbox" / SANDBOX / "known_hosts"))
    address = node_ip(host)
    with paramiko.Transport((address, 22)) as transport:
        transport.start_client(timeout=10)
        key = transport.get_remote_server_key()
        assert known.check(address, key), "the host key is not the one in known_hosts"
        with pytest.raises(paramiko.BadAuthenticationType) as refused:
            transport.auth_password("debian", "not-a-password")
        assert refused.value.allowed_types == ["publickey"]


def test_password_login_left_on_elsewhere_is_named():
    """An image that turns passwords on before the drop-ins are read (top of sshd_config): site.yml says so."""
    victim = container(f"{SANDBOX}-worker1")
    podman("exec", victim, "sed", "-i", "1i PasswordAuthentication yes", "/etc/ssh/sshd_config")
    try:
        proc = run_site("--tags", "ssh")
    finally:
        podman("exec", victim, "sed", "-i", "1d", "/etc/ssh/sshd_config")
    assert proc.returncode != 0
    assert (f'sshd on {SANDBOX}-worker1 does not have \\"passwordauthentication no\\" in effect' in proc.stdout
            and 'passwordauthentication yes' in proc.stdout), proc.stdout[-3000:]
