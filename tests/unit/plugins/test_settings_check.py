# SPDX-License-Identifier: GPL-3.0-or-later
"""The settings checks (plugins/plugin_utils/settings_check.py) of the roles that derive nothing from their
variables - common, image_cleanup, preflight, bake: each bad variable named with the role, the host, its value and
what was expected, all at once; the roles' defaults pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import Call, run_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.settings_check import (
    ROLE_VARS,
    PlanError,
    settings_check,
    size_bytes,
    size_text,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = {role: yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text()) for role in ROLE_VARS}
# bake's AWS values as inventories/aws and the environment give them
AWS = {"bake_aws_region": "us-east-1", "bake_aws_instance_id": "i-0123456789abcdef0", "bake_subnet_id": "subnet-0abc",
       "bake_security_group_id": "sg-0abc", "bake_key_name": "team-a", "bake_ssh_private_key": "~/.ssh/team-a.pem"}
CA = "/etc/ssl/proxy/ca.pem"


def settings(role, **extra) -> dict:
    """The role's checked variables: its defaults (bake's AWS ones filled in), then extra."""
    base = {name: DEFAULTS[role][name] for name in ROLE_VARS[role]} if role != "bake" else {
        **{name: DEFAULTS["bake"].get(name) for name in ROLE_VARS["bake"]}, **AWS}
    return {**base, **extra}


def check(role, nodes=3, **extra) -> dict:
    return settings_check(role, "node7", settings(role, **extra), inventory_nodes=nodes,
                          is_file=lambda path: path.startswith("/etc/ssl/"))


def problems(role, nodes=3, **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        check(role, nodes, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith(f"{role} on node7: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def one(role, **extra) -> str:
    (problem,) = problems(role, **extra)
    return problem[len(f"{role} on node7: "):]


def jinja(template, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(template))


@pytest.mark.parametrize("role", sorted(ROLE_VARS))
def test_the_defaults_pass(role):
    assert check(role) == {"role": role, "checked": list(ROLE_VARS[role])}


# ---- common ----

@pytest.mark.parametrize(("var", "value", "expected"), [
    ("common_nofile_limit", -1, "common_nofile_limit is -1; expected open files, a whole number 1-1073741816"),
    ("common_nofile_limit", 0, "common_nofile_limit is 0; expected open files"),
    ("common_nofile_limit", 2**31, "common_nofile_limit is 2147483648; expected open files, a whole number 1-"),
    ("common_nproc_limit", -5, "common_nproc_limit is -5; expected processes, a whole number >= 1"),
    ("common_apt_cache_valid_time", -1, "common_apt_cache_valid_time is -1; expected seconds, a whole number >= 0."),
    ("common_user_uid", 0, "common_user_uid is 0; expected null (the system picks one) or a uid 1-4294967294 (0 is "
                           "root's)."),
    ("common_group_gid", -3, "common_group_gid is -3; expected null (the system picks one) or a gid"),
    ("common_sysctl", ["vm.max_map_count=1"], 'common_sysctl is ["vm.max_map_count=1"]; expected a mapping'),
    ("common_sysctl", {"vm max map count": 1, "net.core.somaxconn": "4096\nkernel.x = 1"},
     'the names ["vm max map count"] are no kernel parameter names; the values ["4096\\nkernel.x = 1"] are no '
     "sysctl values; expected kernel parameter names"),
])
def test_common_numbers_are_checked_against_what_takes_them(var, value, expected):
    """A negative limit would be written into limits.d on every host: each number common writes is checked against
    what reads it (PAM's setrlimit, apt, useradd, sysctl) before anything changes."""
    assert expected in one("common", **{var: value})


def test_common_numbers_that_fit_pass():
    check("common", common_nofile_limit="1048576", common_nproc_limit=1, common_apt_cache_valid_time=0,
          common_user_uid=2000, common_group_gid="2000", common_sysctl={"net.ipv4.ip_local_port_range": "20000 60000",
                                                                        "kernel/pid_max": 4194304})


@pytest.mark.parametrize("value", ["auto", True, False, "true", "no", 1, 0, "off"])
def test_common_sysctl_apply_is_auto_or_a_boolean(value):
    check("common", common_sysctl_apply=value)


@pytest.mark.parametrize(("value", "shown"), [
    ("maybe", '"maybe"'), ("Auto", '"Auto"'), (None, "null"), (2, "2"), ("", '""'),
])
def test_common_sysctl_apply_refused(value, shown):
    assert one("common", common_sysctl_apply=value) == (
        f"common_sysctl_apply is {shown}; expected auto (yes except inside containers), true or false.")


def test_the_extra_cas_are_files_on_the_controller():
    check("common", common_extra_ca_certificates=[CA, "/etc/ssl/proxy/other.crt"])
    assert one("common", common_extra_ca_certificates=[CA, "/nope/ca.crt", "", 5]) == (
        'common_extra_ca_certificates has ["/nope/ca.crt", "", 5], not a file on the controller; expected the paths of '
        "PEM CA certificates on the controller.")
    assert one("common", common_extra_ca_certificates=CA) == (
        f'common_extra_ca_certificates is "{CA}"; expected a list of paths of PEM CA certificates on the controller.')


def test_two_extra_cas_the_hosts_would_get_under_one_name_are_refused():
    assert one("common", common_extra_ca_certificates=[CA, "/etc/ssl/other/ca.crt"]) == (
        f'common_extra_ca_certificates has ["{CA}", "/etc/ssl/other/ca.crt"], which the hosts would all get as '
        "rayfleet-ca.crt (one replacing the other); expected certificates with different file names.")
    # the same file twice is one certificate
    check("common", common_extra_ca_certificates=[CA, CA])


# ---- image_cleanup ----

@pytest.mark.parametrize("path", ["/var/lib/myapp", "/etc/myapp.conf", "/opt/vendor/cache", "/srv", "/tmp/x",
                                  "/home/ubuntu/.cache"])
def test_paths_below_a_top_level_directory_may_be_removed(path):
    check("image_cleanup", image_cleanup_extra_paths=[path])


@pytest.mark.parametrize("path", ["/etc", "/etc/", "/usr//", "/", "//", "/.", "/usr/../etc", "//var", "relative/x",
                                  "", None, "/home/.."])
def test_a_whole_system_directory_or_a_relative_path_is_refused(path):
    shown = json.dumps(path)
    assert one("image_cleanup", image_cleanup_extra_paths=["/srv/ok", path]).startswith(
        f"image_cleanup_extra_paths has [{shown}]; expected absolute paths below a top-level directory, never / or a "
        "whole /etc, /usr, ... (/bin, /boot,")


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("image_cleanup_extra_paths", "/srv/x", 'image_cleanup_extra_paths is "/srv/x"; expected a list'),
    ("image_cleanup_max_log_bytes", -1, "image_cleanup_max_log_bytes is -1; expected bytes, a whole number >= 0."),
    ("image_cleanup_max_log_bytes", "1M", 'image_cleanup_max_log_bytes is "1M"; expected bytes'),
    ("image_cleanup_hold_packages", ["nvidia-*", "bad pkg"],
     'image_cleanup_hold_packages is ["nvidia-*", "bad pkg"]; expected a list of package names or globs'),
    ("image_cleanup_hold_packages", "nvidia-*", 'image_cleanup_hold_packages is "nvidia-*"; expected a list'),
    ("image_cleanup_verify", "sometimes", 'image_cleanup_verify is "sometimes"; expected true or false.'),
    ("image_cleanup_remove_authorized_keys", None, "image_cleanup_remove_authorized_keys is null; expected true or "
                                                   "false."),
])
def test_image_cleanup_bad_variables(var, value, expected):
    assert one("image_cleanup", **{var: value}).startswith(expected)


def test_image_cleanup_takes_a_log_size_from_the_command_line():
    check("image_cleanup", image_cleanup_max_log_bytes="2048", image_cleanup_verify="no",
          image_cleanup_hold_packages=["libnccl*", "cuda-?-*", "nvidia-driver-550:amd64"])


# ---- preflight ----

# The message sizes as the role's Jinja read them (tasks/validate.yml before the settings check)
JINJA_BYTES = ("{{ (size | string | trim | upper | regex_replace('[^0-9].*$', '') | int) * units[((size | string "
               "| trim | upper) | regex_replace('^[0-9]+', '') ~ ' ')[0] | trim] }}")
UNITS = {"": 1, "K": 1024, "M": 1048576, "G": 1073741824, "T": 1099511627776}


@pytest.mark.parametrize("size", ["8", 8, "64K", "64k", "16M", "16MiB", "1G", "1gB", "2TB", "0"])
def test_sizes_are_read_as_the_role_read_them(size):
    assert size_text(size) is not None
    assert size_bytes(size_text(size)) == int(jinja(JINJA_BYTES, {"size": size, "units": UNITS}))


@pytest.mark.parametrize("size", ["1.5G", "1 G", " 8", "8 ", "-8", -8, "1Q", "K", True, None, 8.0, "1KIB", "1gb"])
def test_sizes_refused(size):
    assert size_text(size) is None


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("preflight_backend", "mpi", 'preflight_backend is "mpi"; expected auto (NCCL when Ray reports GPUs, else gloo), '
                                 "nccl or gloo."),
    ("preflight_min_bytes", "1.5G", 'preflight_min_bytes is "1.5G"; expected a message size like 8, 64K, 16M or 1G'),
    ("preflight_pair_bytes", "12Q", 'preflight_pair_bytes is "12Q"; expected a message size'),
    ("preflight_min_bytes", "2", 'preflight_min_bytes is "2"; expected a message size of at least 4 bytes (one float32 '
                                 "element), or empty."),
    ("preflight_pair_bytes", 0, "preflight_pair_bytes is 0; expected a message size of at least 4 bytes"),
    ("preflight_iters", 0, "preflight_iters is 0; expected a whole number >= 1."),
    ("preflight_iters", "3.7", 'preflight_iters is "3.7"; expected a whole number >= 1.'),
    ("preflight_warmup_iters", "x", 'preflight_warmup_iters is "x"; expected a whole number >= 0.'),
    ("preflight_nodes", -1, "preflight_nodes is -1; expected a whole number >= 0 (0: every alive node)."),
    ("preflight_pair_ring_max", 2, "preflight_pair_ring_max is 2; expected a whole number >= 3."),
    ("preflight_pair_ratio", 1.5, "preflight_pair_ratio is 1.5; expected a number in (0, 1]"),
    ("preflight_pair_ratio", 0, "preflight_pair_ratio is 0; expected a number in (0, 1]"),
    ("preflight_min_busbw_gbps", "-5", 'preflight_min_busbw_gbps is "-5"; expected null (the floor of '
                                       "preflight_instance_type from the data file) or GB/s >= 0 (0: no floor)."),
    ("preflight_min_busbw_gbps", "fast", 'preflight_min_busbw_gbps is "fast"; expected null'),
    ("preflight_expect_network", "EFA", 'preflight_expect_network is "EFA"; expected null (the network of '
                                        "preflight_instance_type from the data file) or a list of NCCL networks"),
    ("preflight_nccl_env", ["NCCL_DEBUG=INFO"], 'preflight_nccl_env is ["NCCL_DEBUG=INFO"]; expected a mapping'),
    ("preflight_timeout", 10, "preflight_timeout is 10; expected whole seconds, at least 30."),
    ("preflight_allow_missing", "one", 'preflight_allow_missing is "one"; expected a count of nodes'),
    ("preflight_allow_missing", -1, "preflight_allow_missing is -1; expected a count of nodes"),
    ("preflight_dcgm_diag_level", 5, "preflight_dcgm_diag_level is 5; expected 0 (off) or a dcgmi diag level 1-4."),
    ("preflight_dcgm_diag_level", True, "preflight_dcgm_diag_level is true; expected 0 (off)"),
    ("preflight_dcgm_required", "sometimes", 'preflight_dcgm_required is "sometimes"; expected null (required at a '
                                             "burn-in level, 2 and up), true or false."),
    ("preflight_expect_gpus", -8, "preflight_expect_gpus is -8; expected null (any number) or the GPUs each node must "
                                  "have"),
    ("preflight_collective", "maybe", 'preflight_collective is "maybe"; expected true or false.'),
    ("preflight_ssh_check", None, "preflight_ssh_check is null; expected true or false."),
])
def test_preflight_bad_variables(var, value, expected):
    assert one("preflight", **{var: value}).startswith(expected)


@pytest.mark.parametrize("extra", [
    {"preflight_min_bytes": "1K", "preflight_max_bytes": "1K"},
    {"preflight_min_bytes": "", "preflight_max_bytes": "8"},
    {"preflight_min_bytes": "1M", "preflight_max_bytes": ""},
    {"preflight_nodes": "3", "preflight_iters": "5", "preflight_timeout": "300", "preflight_pair_ratio": "0.3",
     "preflight_min_busbw_gbps": "0", "preflight_dcgm_diag_level": "4", "preflight_allow_missing": "1",
     "preflight_expect_gpus": "8", "preflight_dcgm_required": "yes", "preflight_pairwise": "false"},
    {"preflight_expect_network": [], "preflight_min_busbw_gbps": 12.5, "preflight_pair_ratio": 1},
])
def test_preflight_good_values_from_the_command_line_or_the_inventory(extra):
    check("preflight", **extra)


def test_an_instance_type_the_data_file_does_not_know_is_refused_unless_the_floor_is_given():
    """A typo in preflight_instance_type would run the preflight with no bandwidth floor, and pass: refused, listing
    the known types; a type of its own with preflight_min_busbw_gbps given (0 included) is the operator's floor."""
    text = one("preflight", preflight_instance_type="p5.48xlarg")
    assert text.startswith('preflight_instance_type is "p5.48xlarg", which the preflight\'s data file '
                           "(busbw_thresholds.yml) has no bandwidth floor for: the preflight would run with none. "
                           "Expected one of ")
    known = yaml.safe_load((ROOT / "roles/preflight/files/busbw_thresholds.yml").read_text())["instance_types"]
    assert "p5.48xlarge" in known and all(name in text for name in known)
    check("preflight", preflight_instance_type="p5.48xlarge")
    check("preflight", preflight_instance_type="")
    check("preflight", preflight_instance_type="lab-rig-7", preflight_min_busbw_gbps=40)
    check("preflight", preflight_instance_type="lab-rig-7", preflight_min_busbw_gbps=0)


def test_the_size_range_and_the_node_count_are_checked_together():
    found = problems("preflight", preflight_min_bytes="1M", preflight_max_bytes="1K", preflight_nodes=5)
    assert found == [
        "preflight on node7: preflight_min_bytes 1M (1048576 bytes) is larger than preflight_max_bytes 1K (1024 "
        "bytes): the size range is empty.",
        "preflight on node7: preflight_nodes is 5, but the inventory has 3 node(s) in ray_head and ray_worker: the "
        "all-reduce cannot span more nodes than the cluster has.",
    ]
    check("preflight", nodes=5, preflight_nodes=5)


def test_every_preflight_problem_is_named_at_once():
    found = problems("preflight", preflight_backend="mpi", preflight_iters=0, preflight_timeout=1,
                     preflight_pairwise="x")
    assert [p.split(" ")[3] for p in found] == ["preflight_backend", "preflight_iters", "preflight_timeout",
                                                "preflight_pairwise"]


# ---- bake ----

@pytest.mark.parametrize(("var", "value", "expected"), [
    ("bake_backend", "gcp", 'bake_backend is "gcp"; expected aws (an AMI) or podman (an image of a sandbox builder).'),
    ("bake_image_name", "Rayfleet", 'bake_image_name is "Rayfleet"; expected lower-case letters, digits'),
    ("bake_image_tag", "-x", 'bake_image_tag is "-x"; expected empty (a UTC timestamp), or a tag'),
    ("bake_tags", ["team=a"], 'bake_tags is ["team=a"]; expected a mapping'),
    ("bake_aws_region", "", 'bake_aws_region is ""; expected the builder\'s AWS region, such as us-east-1 (set it, or '
                            "AWS_REGION on the controller)."),
    ("bake_aws_region", "US-East-1", 'bake_aws_region is "US-East-1"; expected the builder\'s AWS region'),
    ("bake_aws_instance_id", "", 'bake_aws_instance_id is ""; expected the builder\'s instance id, i- and 8 to 17 hex '
                                 "digits (inventories/aws sets it from rayfleet_instance_id)."),
    ("bake_aws_terminate_builder", "maybe", 'bake_aws_terminate_builder is "maybe"; expected true or false.'),
    ("bake_aws_wait_timeout", 0, "bake_aws_wait_timeout is 0; expected whole seconds, at least 1"),
    ("bake_cluster_yaml", "sometimes", 'bake_cluster_yaml is "sometimes"; expected true or false.'),
    ("bake_subnet_id", "", 'bake_subnet_id is ""; the cluster YAML needs it: expected a value, or '
                           "bake_cluster_yaml=false."),
    ("bake_ssh_private_key", None, "bake_ssh_private_key is null; the cluster YAML needs it"),
    ("bake_max_workers", "two", 'bake_max_workers is "two"; expected a whole number of workers >= 0'),
    ("bake_min_workers", 3, "bake_min_workers 3 is more than bake_max_workers 2; expected min <= max"),
])
def test_bake_bad_variables(var, value, expected):
    assert one("bake", **{var: value}).startswith(expected)


def test_bake_without_the_cluster_yaml_needs_none_of_its_values():
    check("bake", bake_cluster_yaml=False, bake_subnet_id="", bake_key_name="", bake_min_workers=9)
    check("bake", bake_cluster_yaml="no", bake_subnet_id="")


@pytest.mark.parametrize("tag", ["", "ci", "2026.11.27", "v1_2-3", 20261127])
def test_bake_image_tags(tag):
    check("bake", bake_image_tag=tag)


def test_bake_with_podman_reads_no_aws_value():
    check("bake", bake_backend="podman", bake_aws_region="", bake_aws_instance_id="", bake_subnet_id="")
    assert one("bake", bake_backend="podman", bake_podman_remove_builder="maybe") == (
        'bake_podman_remove_builder is "maybe"; expected true or false.')


def test_every_bake_problem_is_named_at_once():
    found = problems("bake", bake_image_name="X", bake_aws_region="", bake_aws_instance_id="i-1", bake_subnet_id="")
    assert [p.split(" ")[3] for p in found] == ["bake_image_name", "bake_aws_region", "bake_aws_instance_id",
                                                "bake_subnet_id"]


# ---- the dispatch, the action, the module's documentation and the roles' tasks ----

def test_an_unknown_role_or_other_variables_are_named():
    with pytest.raises(PlanError, match=r'settings_check on node7: role is "ray"; expected one of common, '):
        settings_check("ray", "node7", {})
    with pytest.raises(PlanError, match=r'the common role\'s task gives \["common_sysctl_apply"\]; expected exactly'):
        settings_check("common", "node7", {"common_sysctl_apply": "auto"})
    with pytest.raises(PlanError, match=r"expected exactly the role's variables"):
        settings_check("common", "node7", {**settings("common"), "common_user": "ray"})


def test_the_action_counts_the_inventorys_ray_nodes_once():
    task_vars = {"groups": {"ray_head": ["h0"], "ray_worker": ["h0", "h1"]}}
    assert run_plan("preflight", Call("h0", settings("preflight", preflight_nodes=2), {}, task_vars))["role"] == (
        "preflight")
    with pytest.raises(PlanError, match="the inventory has 2 node"):
        run_plan("preflight", Call("h0", settings("preflight", preflight_nodes=3), {}, task_vars))
