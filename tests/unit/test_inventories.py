# SPDX-License-Identifier: GPL-3.0-or-later
"""Shipped inventories keep the group contract site.yml checks (one ray_head, ray_worker, no overlap)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_example_inventory_keeps_the_group_contract():
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    inventory_cmd = str(Path(sys.executable).parent / "ansible-inventory")
    proc = subprocess.run([inventory_cmd, "-i", "inventories/example", "--list"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    inv = json.loads(proc.stdout)
    head, workers = inv["ray_head"]["hosts"], inv["ray_worker"]["hosts"]
    assert len(head) == 1 and workers and not set(head) & set(workers)
    assert "StrictHostKeyChecking=yes" in inv["_meta"]["hostvars"][head[0]]["ansible_ssh_common_args"]


def test_example_inventory_puts_its_gpu_hosts_in_gpu_and_no_run_warns_about_a_missing_group():
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run([str(bin_dir / "ansible-inventory"), "-i", "inventories/example", "--list"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=True)
    inv = json.loads(proc.stdout)
    assert sorted(inv["gpu"]["hosts"]) == sorted(inv["ray_head"]["hosts"] + inv["ray_worker"]["hosts"])
    listed = subprocess.run([str(bin_dir / "ansible-playbook"), "site.yml", "-i", "inventories/example",
                             "--list-hosts"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert listed.returncode == 0, listed.stderr
    assert "Could not match supplied host pattern" not in listed.stderr + listed.stdout, listed.stderr


def test_the_cloud_inventories_define_the_optional_groups_so_that_no_run_warns_about_a_missing_one():
    """Each cloud inventory directory holds, beside its plugin's file, the contract's optional groups, empty (the
    plugin fills them from tags, where an instance has one), so site.yml's plays match them with no warning. The
    directory is read as Ansible reads it, with the cloud plugins left out (they would call the cloud)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_INVENTORY_ENABLED="yaml")
    bin_dir = Path(sys.executable).parent
    for cloud, plugin in (("aws", "aws_ec2.yml"), ("gcp", "gcp_compute.yml"), ("azure", "azure_rm.yml")):
        listed = subprocess.run([str(bin_dir / "ansible-inventory"), "-i", f"inventories/{cloud}", "--list"],
                                cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        assert {"gpu", "ray_submit", "nfs_server"} <= set(json.loads(listed.stdout)["all"]["children"]), (
            cloud, listed.stdout, listed.stderr)
        text = (ROOT / "inventories" / cloud / plugin).read_text()
        assert "\n  nfs_server: " in text and "\n  gpu: " in text, f"{plugin} puts no instance in nfs_server or gpu"


def test_a_run_without_an_inventory_reaches_no_host():
    """ansible.cfg names no default inventory: a site.yml whose -i was forgotten matches no host (it would otherwise
    converge whatever inventory the checkout defaulted to)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    env.pop("ANSIBLE_INVENTORY", None)
    bin_dir = Path(sys.executable).parent
    listed = subprocess.run([str(bin_dir / "ansible-playbook"), "site.yml", "--list-hosts"], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False)
    assert listed.returncode == 0, listed.stderr
    hosts = [line.strip() for line in listed.stdout.splitlines() if line.startswith("      ")]
    assert hosts == [], listed.stdout
    assert "provided hosts list is empty" in listed.stderr + listed.stdout, listed.stderr
