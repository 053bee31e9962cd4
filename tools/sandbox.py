#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Local sandbox hosts for rayfleet: podman containers that boot systemd and are reached over SSH.

Each sandbox is a podman network plus one head and N worker containers built from a local
Debian 12 image, or Ubuntu 24.04 with RAYFLEET_SANDBOX_DISTRO=ubuntu2404 (made with debootstrap: no
registry is needed). Hosts get their own SSH host
keys at first boot; the controller trusts exactly those keys (a known_hosts file per sandbox),
and logs in as ``debian`` with a key made for the sandbox, like a cloud image.

Examples:
  tools/sandbox.py image                      # build localhost/rayfleet-debian12 once
  tools/sandbox.py up --name demo --workers 2 # start head + 2 workers, print JSON
  tools/sandbox.py up --name demo --submit    # ... and a submit host (group ray_submit, not a Ray node)
  tools/sandbox.py rm --name demo --host submit  # remove one host
  tools/sandbox.py list --name demo           # Ansible inventory JSON (used by inventories/sandbox)
  tools/sandbox.py down --name demo           # remove containers, network and keys
  tools/sandbox.py node-image                 # Ray node image (images/ray-node) + archive (ray_runtime: container)
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_ROOT = Path(os.environ.get("RAYFLEET_SANDBOX_DIR", ROOT / ".sandbox"))
MIRROR = os.environ.get("RAYFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
UBUNTU_MIRROR = os.environ.get("RAYFLEET_UBUNTU_MIRROR", "http://archive.ubuntu.com/ubuntu")
# Ubuntu's archive key, from Ubuntu's own keyring package, pinned by digest (Debian 12 does not ship it)
UBUNTU_KEYRING_DEB = "pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb"
UBUNTU_KEYRING_SHA256 = "36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8"
# The host OS of the sandbox's hosts (debootstrap: no registry is needed). Debian 12 by default; Ubuntu 24.04 LTS,
# the usual OS of GPU hosts and cloud images, with RAYFLEET_SANDBOX_DISTRO=ubuntu2404.
# hostvars: the distribution's hosts' own settings, over the sandbox's group variables.
DISTROS = {
    "debian12": {"suite": "bookworm", "mirror": MIRROR, "components": "main", "script": None, "sources": [],
                 "hostvars": {}},
    "ubuntu2404": {"suite": "noble", "mirror": UBUNTU_MIRROR, "components": "main,universe", "script": "gutsy",
                   "sources": [f"deb {UBUNTU_MIRROR} noble{suffix} main restricted universe multiverse"
                               for suffix in ("", "-updates", "-security")],
                   # the wheelhouse's torch is a build for Debian 12's Python (3.11): these hosts' 3.12 takes PyPI's
                   "hostvars": {"pytorch_no_index": False}},
}
DISTRO = os.environ.get("RAYFLEET_SANDBOX_DISTRO", "debian12")
IMAGE = os.environ.get("RAYFLEET_SANDBOX_IMAGE", f"localhost/rayfleet-{DISTRO}:latest")
FACT_CACHE = ROOT / ".cache" / "facts"
# Wheels the hosts install from (make wheels: a CPU build of torch), mounted read-only where present
WHEELHOUSE = Path(os.environ.get("RAYFLEET_WHEELHOUSE", ROOT / ".cache" / "wheels"))
WHEELHOUSE_MOUNT = "/opt/rayfleet-wheels"
# A volume every host of a sandbox mounts here: the hosts have no kernel NFS client, so it stands in for an NFS mount
# (the checkpoint store's backend shared). Open to every user, sticky (like /tmp): the Ray user makes its directory.
SHARED_MOUNT = "/mnt/checkpoints"
LABEL = "io.rayfleet.sandbox"
GROUP_LABEL = "io.rayfleet.group"
LOGIN_USER = "debian"
FIRST_HOST_OFFSET = 10  # head at .10, workers at .11, .12, ... of the sandbox subnet
IMAGE_PACKAGES = "python3,openssh-server,systemd,systemd-sysv,sudo,iproute2,dbus"
# The Ray node image for containerized nodes (ray_runtime: container), built from images/ray-node on the host image,
# in two tags (the second one layer newer: an upgrade), saved in one archive the ray role loads on the hosts.
NODE_IMAGE_REPO = "localhost/rayfleet-ray"
NODE_IMAGE_KEY_LABEL = "io.rayfleet.build-key"
IMAGE_CACHE = ROOT / ".cache" / "images"

# Podman inside a container host (--container-hosts): systemd in a container does not own the cgroup v1 memory and
# pids hierarchies, so podman's systemd cgroup manager would put every nested container in one shared cgroup - and
# removing any container would kill the others. cgroupfs gives each its own (a real host's systemd does that).
NESTED_CONTAINERS_CONF = """\
# tools/sandbox.py: podman in a sandbox host (a container): cgroupfs, as systemd here does not own the cgroups
[engine]
cgroup_manager = "cgroupfs"
"""

# First-boot unit: every container gets its own SSH host keys (the image ships none).
KEYGEN_UNIT = """\
[Unit]
Description=Generate SSH host keys on first boot
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
"""


class SandboxError(RuntimeError):
    """A sandbox operation failed; the message says what and how to recover."""


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(ROOT / "sandbox" / "containers.conf"))
    return env


def podman(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    cmd = ["podman", *args]
    proc = subprocess.run(cmd, env=podman_env(), text=True, capture_output=capture, check=False)
    if check and proc.returncode != 0:
        raise SandboxError(f"{' '.join(cmd)} failed (rc={proc.returncode}): {proc.stderr.strip()}")
    return proc


def image_exists(image: str = IMAGE) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


def ubuntu_keyring(tmp: Path) -> Path:
    """Ubuntu's archive keyring, from its package in Ubuntu's archive, checked against the pinned digest."""
    deb = tmp / "ubuntu-keyring.deb"
    with urllib.request.urlopen(f"{UBUNTU_MIRROR}/{UBUNTU_KEYRING_DEB}", timeout=60) as response:
        deb.write_bytes(response.read())
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    if digest != UBUNTU_KEYRING_SHA256:
        raise SandboxError(f"{UBUNTU_KEYRING_DEB}: sha256 {digest}, expected {UBUNTU_KEYRING_SHA256}")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp / "keyring")], check=True)
    return tmp / "keyring/usr/share/keyrings/ubuntu-archive-keyring.gpg"


def build_image(force: bool = False) -> str:
    """Build the systemd host image (RAYFLEET_SANDBOX_DISTRO) with debootstrap and import it into podman."""
    if image_exists() and not force:
        return IMAGE
    if DISTRO not in DISTROS:
        raise SandboxError(f"RAYFLEET_SANDBOX_DISTRO={DISTRO}: expected one of {', '.join(DISTROS)}")
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap is not installed: run 'make deps' (apt-get install debootstrap)")
    distro = DISTROS[DISTRO]
    with tempfile.TemporaryDirectory(prefix="rayfleet-image-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        keyring = [f"--keyring={ubuntu_keyring(Path(tmp))}"] if DISTRO.startswith("ubuntu") else []
        script = [f"/usr/share/debootstrap/scripts/{distro['script']}"] if distro["script"] else []
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={IMAGE_PACKAGES}", f"--components={distro['components']}",
             *keyring, distro["suite"], str(rootfs), distro["mirror"], *script],
            check=True, stdout=subprocess.DEVNULL,
        )
        if distro["sources"]:
            (rootfs / "etc/apt/sources.list").write_text("\n".join(distro["sources"]) + "\n")
        for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
            key.unlink()
        unit = rootfs / "etc/systemd/system/ssh-hostkeys.service"
        unit.write_text(KEYGEN_UNIT)
        wants = rootfs / "etc/systemd/system/multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        (wants / "ssh-hostkeys.service").symlink_to("/etc/systemd/system/ssh-hostkeys.service")
        (rootfs / "etc/machine-id").write_text("")
        # A login user with passwordless sudo, as on Debian's cloud images.
        subprocess.run(["chroot", str(rootfs), "useradd", "--create-home", "--shell", "/bin/bash", LOGIN_USER],
                       check=True)
        sudoers = rootfs / "etc/sudoers.d" / LOGIN_USER
        sudoers.write_text(f"{LOGIN_USER} ALL=(ALL) NOPASSWD:ALL\n")
        sudoers.chmod(0o440)
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        for lists in (rootfs / "var/lib/apt/lists").glob("*_*"):
            lists.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(
            ["podman", "import", "--change", "CMD=/sbin/init", "-", IMAGE],
            stdin=tar.stdout, env=podman_env(), capture_output=True, text=True, check=False,
        )
        tar.wait()
        if imp.returncode != 0:
            raise SandboxError(f"podman import failed: {imp.stderr.strip()}")
    return IMAGE


def role_default(role: str, name: str) -> str:
    """A role's pinned default (roles/<role>/defaults/main.yml), e.g. ray_version."""
    for line in (ROOT / f"roles/{role}/defaults/main.yml").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise SandboxError(f"roles/{role}/defaults/main.yml: no {name}")


def ray_version() -> str:
    return role_default("ray", "ray_version")


def torch_wheel() -> Path:
    """The wheelhouse's CPU build of the pytorch role's pinned torch (make wheels)."""
    version = role_default("pytorch", "pytorch_version")
    found = sorted(WHEELHOUSE.glob(f"torch-{version}[-+]*.whl"))
    if not found:
        raise SandboxError(f"no torch {version} wheel in {WHEELHOUSE}: run make wheels")
    return found[0]


def node_image_archive() -> Path:
    return IMAGE_CACHE / f"rayfleet-ray-{ray_version()}.tar"


def node_image_key(version: str) -> str:
    """What the node image is built from: its Containerfile, Ray's version, the torch wheel, the host image and the CA
    certificates.
    Images and archive carry it, so a rebuild happens only when one of them changed (a fresh clone on the same
    machine reuses podman's images and only saves the archive again)."""
    digest = hashlib.sha256()
    digest.update((ROOT / "images/ray-node/Containerfile").read_bytes())
    digest.update(version.encode())
    digest.update(torch_wheel().name.encode())
    digest.update(podman("image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip().encode())
    for cert in sorted(Path("/usr/local/share/ca-certificates").glob("*.crt")):
        digest.update(cert.name.encode() + cert.read_bytes())
    return digest.hexdigest()[:16]


def image_label(image: str, label: str) -> str | None:
    proc = podman("image", "inspect", "--format", f'{{{{index .Labels "{label}"}}}}', image, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def build_node_image(force: bool = False) -> dict[str, str]:
    """Build the Ray node image (images/ray-node, on the sandbox host image, Ray at the ray role's version) and a
    second tag one layer newer, and save both in one archive; returns the tags and the archive's path.
    Skips the build when both tags carry the current build key, and the save when the archive has it too."""
    version = ray_version()
    tags = {"image": f"{NODE_IMAGE_REPO}:{version}", "next": f"{NODE_IMAGE_REPO}:{version}-r2"}
    archive = node_image_archive()
    archive_key = archive.with_name(archive.name + ".key")
    build_image()
    key = node_image_key(version)
    built = not force and all(image_label(t, NODE_IMAGE_KEY_LABEL) == key for t in tags.values())
    if built and archive.is_file() and archive_key.is_file() and archive_key.read_text().strip() == key:
        return {**tags, "archive": str(archive), "key": key}
    if not built:
        with tempfile.TemporaryDirectory(prefix="rayfleet-node-image-") as tmp:
            ctx = Path(tmp)
            shutil.copy(ROOT / "images/ray-node/Containerfile", ctx / "Containerfile")
            (ctx / "ca-certificates").mkdir()
            for cert in Path("/usr/local/share/ca-certificates").glob("*.crt"):
                shutil.copy(cert, ctx / "ca-certificates" / cert.name)
            podman("build", "--quiet", "--build-arg", f"BASE={IMAGE}", "--build-arg", f"RAY_VERSION={version}",
                   "--label", f"{NODE_IMAGE_KEY_LABEL}={key}", "--tag", tags["image"], str(ctx))
            # torch (the sandbox's CPU build, as the hosts' venvs have it): what an ML team's node image carries, and
            # what the preflight's collective needs on a container node
            wheel = torch_wheel()
            shutil.copy(wheel, ctx / wheel.name)
            (ctx / "Containerfile").write_text(
                f"FROM {tags['image']}\nCOPY {wheel.name} /tmp/\n"
                f"RUN PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/ray/bin/pip install --no-cache-dir -q "
                f"/tmp/{wheel.name} && rm /tmp/{wheel.name}\n")
            podman("build", "--quiet", "--label", f"{NODE_IMAGE_KEY_LABEL}={key}", "--tag", tags["image"], str(ctx))
            (ctx / wheel.name).unlink()  # not sent again as the next build's context
            (ctx / "Containerfile").write_text(f"FROM {tags['image']}\nLABEL io.rayfleet.revision=2\n")
            podman("build", "--quiet", "--tag", tags["next"], str(ctx))
    IMAGE_CACHE.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".tar.part")
    partial.unlink(missing_ok=True)
    archive_key.unlink(missing_ok=True)
    podman("save", "--multi-image-archive", "--output", str(partial), tags["image"], tags["next"])
    partial.rename(archive)
    archive_key.write_text(key + "\n")
    return {**tags, "archive": str(archive), "key": key}


def launch_defaults(image: str) -> dict:
    """A baked image's /etc/rayfleet/launch-defaults.json (the ray role's, at bake time)."""
    path = "/etc/rayfleet/launch-defaults.json"
    proc = podman("run", "--rm", "--network", "none", "--entrypoint", "cat", image, path, check=False)
    if proc.returncode != 0:
        raise SandboxError(f"--launch: {image} has no {path}; bake it with playbooks/bake.yml")
    return json.loads(proc.stdout)


class Sandbox:
    """One named sandbox: its network, containers and controller-side files."""

    def __init__(self, name: str):
        if not name.replace("-", "").isalnum():
            raise SandboxError(f"sandbox name {name!r}: use letters, digits and '-' only")
        self.name = name
        self.dir = STATE_ROOT / name
        self.network = f"rayfleet-{name}"
        self.key = self.dir / "id_ed25519"
        self.known_hosts = self.dir / "known_hosts"

    def container(self, host: str) -> str:
        return f"rayfleet-{self.name}-{host}"

    def forget_facts(self) -> None:
        """Drop Ansible's cached facts for this sandbox's hosts: new containers get new addresses."""
        # ansible-core names the files <host> or, since 2.19, s1_<host>.
        for pattern in (f"{self.name}-*", f"s1_{self.name}-*"):
            for cached in FACT_CACHE.glob(pattern):
                cached.unlink()

    def hosts(self) -> list[dict]:
        """Running containers of this sandbox: name, group, address."""
        proc = podman("ps", "--filter", f"label={LABEL}={self.name}", "--format", "json")
        hosts = []
        for c in json.loads(proc.stdout or "[]"):
            labels = c.get("Labels") or {}
            cname = c["Names"][0]
            hosts.append({
                "host": cname.removeprefix("rayfleet-"),
                "container": cname,
                "group": labels.get(GROUP_LABEL, "ray_worker"),
                "address": self.address(cname),
            })
        return sorted(hosts, key=lambda h: (h["group"] != "ray_head", h["host"]))

    def address(self, container: str) -> str:
        proc = podman("inspect", container, "--format", "json")
        nets = json.loads(proc.stdout)[0]["NetworkSettings"]["Networks"]
        return nets[self.network]["IPAddress"]

    def up(self, workers: int, image: str = IMAGE, launch: bool = False, submit: bool = False,
           container_hosts: tuple[str, ...] = (), *, launch_extra: dict[str, dict] | None = None,
           new_address: tuple[str, ...] = ()) -> list[dict]:
        """Start the head and N workers. ``launch``: hosts of a baked rayfleet image get their launch file and
        the cluster's token before they boot (as cloud-init's write_files would), so Ray starts at boot.
        ``submit``: also a submit host (a user's machine that is not a Ray node, group ray_submit), from the
        bare image, at the address just below the head's. ``container_hosts`` (head, worker1, ...): hosts that
        can run containers themselves (ray_runtime: container) - privileged, as nested podman needs.
        ``launch_extra`` (host -> keys): more of a host's launch file (num_gpus, ...), for hosts that start now.
        ``new_address`` (worker3, ...): hosts that start now at an address past every other host's, as a cloud's
        replacement instance gets one of its own."""
        if image == IMAGE:
            build_image()
        elif not image_exists(image):
            raise SandboxError(f"--image {image}: no such local image (podman images)")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        if not self.key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"rayfleet-sandbox-{self.name}",
                            "-f", str(self.key)], check=True)
        if podman("network", "exists", self.network, check=False).returncode != 0:
            podman("network", "create", "--label", f"{LABEL}={self.name}", self.network)
        wanted = [("head", "ray_head")] + [(f"worker{i}", "ray_worker") for i in range(1, workers + 1)]
        unknown = sorted(set(container_hosts) - {h for h, _g in wanted})
        if unknown:
            raise SandboxError(f"--container-hosts {','.join(unknown)}: not among this sandbox's hosts "
                               f"({', '.join(h for h, _g in wanted)})")
        existing = {h["container"] for h in self.hosts()}
        subnet = self.subnet()
        if len(wanted) + len(new_address) + FIRST_HOST_OFFSET >= subnet.num_addresses - 1:
            raise SandboxError(f"--workers {workers}: too many hosts for the sandbox network {subnet}")
        head_ip = str(subnet.network_address + FIRST_HOST_OFFSET)
        defaults = launch_defaults(image) if launch else {}
        moved = {host: len(wanted) + i for i, host in enumerate(new_address)}
        for index, (host, group) in enumerate(wanted):
            if self.container(host) not in existing:
                files = self.launch_files(group, head_ip, defaults, (launch_extra or {}).get(host)) if launch else {}
                address = str(subnet.network_address + FIRST_HOST_OFFSET + moved.get(host, index))
                self._run_container(host, group, address, image, files, privileged=host in container_hosts)
        if submit and self.container("submit") not in existing:
            self._run_container("submit", "ray_submit", str(subnet.network_address + FIRST_HOST_OFFSET - 1))
            wanted.append(("submit", "ray_submit"))
        for host, _group in wanted:
            if self.container(host) not in existing:
                self._prepare(self.container(host))
                if host in container_hosts:
                    podman("exec", "--env", f"CONF={NESTED_CONTAINERS_CONF}", self.container(host), "sh", "-c",
                           'install -d /etc/containers && printf "%s" "$CONF" > /etc/containers/containers.conf')
        self.forget_facts()
        self._write_known_hosts()
        return self.hosts()

    def _ipv4(self) -> dict:
        """The sandbox network's IPv4 entry (subnet, gateway) as podman reports it."""
        info = json.loads(podman("network", "inspect", self.network, "--format", "json").stdout)
        nets = info if isinstance(info, list) else [info]
        for net in nets[0].get("subnets") or []:
            if ipaddress.ip_network(net["subnet"]).version == 4:
                return net
        raise SandboxError(f"network {self.network} has no IPv4 subnet; remove it with 'podman network rm'")

    def subnet(self) -> ipaddress.IPv4Network:
        """The sandbox network's IPv4 subnet (podman picks a free one when the network is created)."""
        return ipaddress.ip_network(self._ipv4()["subnet"])

    def gateway(self) -> str:
        """The sandbox network's gateway (this machine, as the hosts see it)."""
        net = self._ipv4()
        return net.get("gateway") or str(ipaddress.ip_network(net["subnet"]).network_address + 1)

    def launch_files(self, group: str, head_ip: str, defaults: dict, extra: dict | None = None) -> dict[str, str]:
        """/etc/rayfleet/launch.json and the token for a host of a baked image (python -m rayfleet.launch -h), where
        the image's launch defaults (its cluster's name, token path and GCS port) say."""
        name = defaults.get("cluster_name") or ""
        # where the sandbox inventory's ray_auth_token_path points for this cluster
        token = self.dir / f"ray_auth_token{'-' + name if name else ''}"
        if not token.exists():
            token.write_text(secrets.token_hex(32) + "\n")
            token.chmod(0o600)
        head = f"{head_ip}:{defaults['ports']['gcs']}"
        launch = {"role": "head"} if group == "ray_head" else {"role": "worker", "head_address": head}
        launch.update(extra or {})
        files = {"/etc/rayfleet/launch.json": json.dumps(launch) + "\n"}
        if defaults.get("auth_token_path"):
            files[defaults["auth_token_path"]] = token.read_text()
        return files

    def _run_container(self, host: str, group: str, address: str, image: str = IMAGE,
                       files: dict[str, str] | None = None, *, privileged: bool = False) -> None:
        """One host with a fixed address: like a real machine, it keeps its IP across restarts.

        ``files`` (path -> content) are written into the container before it boots."""
        cname = self.container(host)
        podman("rm", "--force", "--ignore", cname)
        podman(
            "create" if files else "run", *([] if files else ["--detach"]), "--name", cname, "--hostname", cname,
            "--label", f"{LABEL}={self.name}", "--label", f"{GROUP_LABEL}={group}",
            "--network", self.network, "--ip", address, "--systemd=always", "--shm-size=1g",
            # Its own firewall (nftables) in its own network namespace, as a real host has.
            "--cap-add=NET_ADMIN",
            # The head is the sandbox's NFS server (NFS-Ganesha): its VFS back end opens files by handle, which
            # needs CAP_DAC_READ_SEARCH and a file system with file handles (a volume, not the overlay root).
            *(["--cap-add=DAC_READ_SEARCH", "--volume", f"{self.volume(host)}:/srv/rayfleet"]
              if group == "ray_head" else []),
            *(["--volume", f"{WHEELHOUSE}:{WHEELHOUSE_MOUNT}:ro"] if WHEELHOUSE.is_dir() else []),
            "--volume", f"{self.shared_volume()}:{SHARED_MOUNT}",
            # Ray's raylet needs to see its own cgroup memory; keep the default (non-privileged) container,
            # except where the host runs Ray in containers itself (podman in podman needs a privileged one).
            *(["--privileged"] if privileged else []),
            image, "/sbin/init",
        )
        if files:
            with tempfile.TemporaryDirectory(prefix="rayfleet-launch-") as tmp:
                for path, content in files.items():
                    local = Path(tmp) / Path(path).name
                    local.write_text(content)
                    local.chmod(0o600)
                    podman("cp", str(local), f"{cname}:{path}")
            podman("start", cname)

    def _prepare(self, cname: str) -> None:
        deadline = time.monotonic() + 60
        while True:
            state = podman("exec", cname, "systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise SandboxError(f"{cname}: systemd did not reach 'running' in 60 s (state {state!r})")
            time.sleep(0.5)
        # A host re-made at an address the machine knew keeps its old MAC in the machine's neighbour cache for
        # a while (SSH then times out): one packet to the gateway makes the container ARP, which updates it.
        podman("exec", cname, "python3", "-c", "import socket, sys; socket.socket(socket.AF_INET, "
               "socket.SOCK_DGRAM).sendto(b'', (sys.argv[1], 9))", self.gateway(), check=False)
        pub = self.key.with_suffix(".pub").read_text()
        ssh_dir = f"/home/{LOGIN_USER}/.ssh"
        script = (
            f"install -d -m 0700 -o {LOGIN_USER} -g {LOGIN_USER} {ssh_dir} && "
            f"printf '%s' \"$KEY\" > {ssh_dir}/authorized_keys && "
            f"chown {LOGIN_USER}: {ssh_dir}/authorized_keys && chmod 0600 {ssh_dir}/authorized_keys"
        )
        podman("exec", "--env", f"KEY={pub}", cname, "sh", "-c", script)
        podman("exec", cname, "chmod", "1777", SHARED_MOUNT)

    def _write_known_hosts(self) -> None:
        """Trust each host's real ed25519 key, read over podman's own channel (not over the network)."""
        lines = []
        for h in self.hosts():
            deadline = time.monotonic() + 30
            while True:
                proc = podman("exec", h["container"], "cat", "/etc/ssh/ssh_host_ed25519_key.pub", check=False)
                if proc.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise SandboxError(f"{h['container']}: no SSH host key after 30 s")
                time.sleep(0.5)
            keytype, key = proc.stdout.split()[:2]
            lines.append(f"{h['address']} {keytype} {key}\n")
        self.known_hosts.write_text("".join(lines))

    def remove(self, host: str) -> None:
        """Remove one host (its container; the rest of the sandbox stays)."""
        podman("rm", "--force", "--ignore", "--time", "5", self.container(host))
        self.forget_facts()
        self._write_known_hosts()

    def refresh(self) -> None:
        """Re-read addresses after a container restart (podman keeps them, but be sure)."""
        self._write_known_hosts()

    def volume(self, host: str) -> str:
        """A host's data volume (created on first use, labelled so that down removes it)."""
        name = f"{self.container(host)}-srv"
        if podman("volume", "exists", name, check=False).returncode != 0:
            podman("volume", "create", "--label", f"{LABEL}={self.name}", name)
        return name

    def shared_volume(self) -> str:
        """The volume every host of the sandbox mounts at SHARED_MOUNT (created on first use, labelled so that down
        removes it)."""
        name = f"rayfleet-{self.name}-checkpoints"
        if podman("volume", "exists", name, check=False).returncode != 0:
            podman("volume", "create", "--label", f"{LABEL}={self.name}", name)
        return name

    def down(self) -> None:
        proc = podman("ps", "--all", "--filter", f"label={LABEL}={self.name}", "--format", "{{.Names}}")
        names = proc.stdout.split()
        if names:
            podman("rm", "--force", "--time", "5", *names)
        volumes = podman("volume", "ls", "--filter", f"label={LABEL}={self.name}", "--format",
                         "{{.Name}}").stdout.split()
        if volumes:
            podman("volume", "rm", "--force", *volumes)
        podman("network", "rm", "--force", self.network, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.forget_facts()

    def ssh_command(self, address: str) -> list[str]:
        """ssh to a sandbox host as the login user, with its verified host key."""
        return ["ssh", "-i", str(self.key), "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"{LOGIN_USER}@{address}"]

    def inventory(self) -> dict:
        """Ansible dynamic-inventory JSON for this sandbox's running hosts."""
        inv: dict = {"_meta": {"hostvars": {}}, "ray_head": {"hosts": []}, "ray_worker": {"hosts": []},
                     "sandbox": {"children": ["ray_head", "ray_worker"]}, "nfs_server": {"hosts": []},
                     "gpu": {"hosts": []},  # the sandbox's hosts have no GPU
                     "ray_submit": {"hosts": []}}  # a user's machine that submits jobs (up --submit)
        ssh_args = f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes"
        for h in self.hosts():
            inv[h["group"]]["hosts"].append(h["host"])
            if h["group"] == "ray_head":  # the head also serves the sandbox's shared storage
                inv["nfs_server"]["hosts"].append(h["host"])
            inv["_meta"]["hostvars"][h["host"]] = {
                "ansible_host": h["address"],
                "ansible_user": LOGIN_USER,
                "ansible_ssh_private_key_file": str(self.key),
                "ansible_ssh_common_args": ssh_args,
                "sandbox_container": h["container"],
                **DISTROS.get(DISTRO, {}).get("hostvars", {}),
            }
        return inv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("image", help="build the Debian 12 systemd host image")
    p.add_argument("--force", action="store_true", help="rebuild even if it exists")
    p = sub.add_parser("node-image", help="build the Ray node image (images/ray-node) and save its archive")
    p.add_argument("--force", action="store_true", help="rebuild even if it exists")
    for cmd in ("up", "down", "rm", "list", "hosts"):
        p = sub.add_parser(cmd)
        p.add_argument("--name", default=os.environ.get("RAYFLEET_SANDBOX", "demo"))
        if cmd == "up":
            p.add_argument("--workers", type=int, default=2)
            p.add_argument("--image", default=IMAGE,
                           help=f"host image (default: the bare {DISTRO} image, RAYFLEET_SANDBOX_DISTRO)")
            p.add_argument("--launch", action="store_true",
                           help="baked rayfleet image: write each host's launch file and token before it boots")
            p.add_argument("--submit", action="store_true", help="also a submit host (group ray_submit)")
            p.add_argument("--container-hosts", default="",
                           help="comma-separated hosts (e.g. worker2) that run Ray in containers: privileged")
        if cmd == "rm":
            p.add_argument("--host", required=True, help="the host to remove (head, worker1, submit, ...)")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "image":
            print(build_image(force=args.force))
            return 0
        if args.cmd == "node-image":
            print(json.dumps(build_node_image(force=args.force), indent=2))
            return 0
        sb = Sandbox(args.name)
        if args.cmd == "up":
            if args.workers < 0:
                raise SandboxError(f"--workers must be >= 0, got {args.workers}")
            hosts = tuple(h for h in args.container_hosts.split(",") if h)
            print(json.dumps(sb.up(args.workers, image=args.image, launch=args.launch, submit=args.submit,
                                   container_hosts=hosts), indent=2))
        elif args.cmd == "rm":
            sb.remove(args.host)
        elif args.cmd == "down":
            sb.down()
        elif args.cmd == "hosts":
            print(json.dumps(sb.hosts(), indent=2))
        else:
            print(json.dumps(sb.inventory(), indent=2))
    except SandboxError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
