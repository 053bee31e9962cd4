# SPDX-License-Identifier: GPL-3.0-or-later
"""The checkpoint store plan (plugins/plugin_utils/checkpoint_store_plan.py): the checkpoint_store role's variables
checked, each bad one named with the host, and the URI, endpoint and marker computed as the role's Jinja computed
them before."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.checkpoint_store_plan import (
    CHECKPOINT_STORE_VARS,
    SYSTEM_DIRS,
    PlanError,
    checkpoint_store_plan,
    endpoint_parts,
)

ROOT = Path(__file__).resolve().parents[3]
RAW_DEFAULTS = yaml.safe_load((ROOT / "roles/checkpoint_store/defaults/main.yml").read_text())
# The role's defaults as the task renders them (the find-links from pytorch_find_links, the venv from ray_venv_dir)
DEFAULTS = {name: jinja2.Template(value).render(**RAW_DEFAULTS) if isinstance(value, str) else value
            for name, value in RAW_DEFAULTS.items()}
HEADS = ("head1", "head2")
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
S3 = {"checkpoint_store_backend": "s3", "checkpoint_store_bucket": "acme-ray-checkpoints"}
SHARED = {"checkpoint_store_backend": "shared", "checkpoint_store_path": "/mnt/shared/checkpoints"}
MOUNTS = [{"path": "/mnt/shared", "server_host": "nfs1", "export": "/srv/rayfleet/shared"}]

# vars/main.yml's Jinja before the plan, rendered here to compare with the plan's values
OLD_VARS = {
    "endpoint": "{{ checkpoint_store_endpoint_url | regex_replace('^https?://', '') | regex_replace('/+$', '') }}",
    "scheme": "{{ 'http' if checkpoint_store_endpoint_url is match('^http://') else 'https' }}",
    "uri": "{% if checkpoint_store_backend == 'shared' %}{{ checkpoint_store_path }}{% else %}s3://{{ "
           "checkpoint_store_bucket }}/{{ checkpoint_store_prefix }}{{ ('?endpoint_override=' ~ endpoint ~ "
           "'&scheme=' ~ scheme ~ '&region=' ~ checkpoint_store_region) if checkpoint_store_endpoint_url else '' }}"
           "{% endif %}",
    "marker": "rayfleet shared-filesystem check: cluster {{ ray_cluster_name | default('', true) or 'default' }}, "
              "written by the head {{ head }}, token {{ [ray_cluster_name | default('', true), head, "
              "checkpoint_store_path] | join('|') | hash('sha256') }}",
}


def _old(name, v, **extra):
    """One of vars/main.yml's old values, rendered with Jinja (regex_replace, match and hash as Ansible's)."""
    env = jinja2.Environment()
    env.filters["regex_replace"] = lambda value, pattern, repl: re.sub(pattern, repl, value)
    env.filters["hash"] = lambda value, algorithm: hashlib.new(algorithm, value.encode()).hexdigest()
    env.tests["match"] = lambda value, pattern: re.match(pattern, value) is not None
    return env.from_string(OLD_VARS[name]).render(**v, **extra)


def settings(**extra) -> dict:
    """The variables the role passes (its defaults, rendered, and the ray role's)."""
    v = {name: DEFAULTS[name] for name in CHECKPOINT_STORE_VARS if name in DEFAULTS}
    return v | {"ray_cluster_name": "", "ray_service_user": "rayfleet", "ray_service_group": "rayfleet",
                "shared_storage_mounts": MOUNTS} | extra


def plan(heads=HEADS, **extra) -> dict:
    return checkpoint_store_plan("node1", settings(**extra), heads)


def problems(heads=HEADS, **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(heads, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("checkpoint_store on node1: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def one_problem(heads=HEADS, **extra) -> str:
    found = problems(heads, **extra)
    assert len(found) == 1, found
    return found[0]


def test_defaults_are_rendered_and_pass():
    assert DEFAULTS["checkpoint_store_venv_dir"] == "/opt/rayfleet/venv"
    assert DEFAULTS["checkpoint_store_find_links"] == ""
    assert plan() == {"backend": "none", "uri": "", "endpoint": "", "scheme": "https", "user": "rayfleet",
                      "group": "rayfleet", "head": "head1", "marker_path": None, "marker": None,
                      "create_bucket": True, "versioning": True, "pip_args": ""}


def test_s3_on_aws():
    got = plan(**S3)
    old = _old("uri", settings(**S3), endpoint="", scheme="https")
    assert got["uri"] == "s3://acme-ray-checkpoints/rayfleet" == old
    assert (got["endpoint"], got["scheme"]) == ("", "https")


@pytest.mark.parametrize("url", ["https://s3.storage.internal:7480", "http://10.0.0.5:9000/", "http://[fd00::5]:9000",
                                 "https://s3.example.com"])
def test_s3_compatible_endpoint_as_the_jinja_had_it(url):
    v = settings(**S3, checkpoint_store_endpoint_url=url, checkpoint_store_prefix="team/a",
                 checkpoint_store_region="eu-central-1")
    got = checkpoint_store_plan("node1", v, HEADS)
    endpoint, scheme = _old("endpoint", v), _old("scheme", v)
    assert (got["endpoint"], got["scheme"]) == (endpoint, scheme)
    assert got["uri"] == _old("uri", v, endpoint=endpoint, scheme=scheme)
    assert got["uri"].startswith("s3://acme-ray-checkpoints/team/a?endpoint_override=")


@pytest.mark.parametrize("cluster", ["", "team-a", None])
def test_shared_marker_as_the_jinja_had_it(cluster):
    v = settings(**SHARED, ray_cluster_name=cluster)
    got = checkpoint_store_plan("node1", v, HEADS)
    assert got["uri"] == "/mnt/shared/checkpoints"
    assert got["marker_path"] == "/mnt/shared/checkpoints/.rayfleet-shared-check"
    assert got["head"] == "head1"
    assert got["marker"] == _old("marker", {**v, "ray_cluster_name": cluster}, head="head1")
    assert ("cluster %s," % (cluster or "default")) in got["marker"]


def test_the_ray_users_account_makes_the_shared_directory():
    got = plan(**SHARED, ray_service_user="ray", ray_service_group="ml")
    assert (got["user"], got["group"]) == ("ray", "ml")
    assert "ray_service_user is \"bad user\"; expected the Ray service account's name" in one_problem(
        **SHARED, ray_service_user="bad user")


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("checkpoint_store_backend", "nfs", 'checkpoint_store_backend is "nfs"; expected none, s3 or shared.'),
    ("checkpoint_store_backend", None, "checkpoint_store_backend is null; expected none, s3 or shared."),
    ("checkpoint_store_prefix", "/runs", 'checkpoint_store_prefix is "/runs"; expected an S3 key prefix'),
    ("checkpoint_store_prefix", "my runs", 'checkpoint_store_prefix is "my runs"; expected an S3 key prefix'),
    ("checkpoint_store_endpoint_url", "s3.internal:7480", 'checkpoint_store_endpoint_url is "s3.internal:7480"; '
                                                          "expected empty for AWS S3, or an S3-compatible endpoint"),
    ("checkpoint_store_endpoint_url", "https://s3.internal/bucket", "checkpoint_store_endpoint_url is "
                                                                    '"https://s3.internal/bucket"; expected empty'),
    ("checkpoint_store_endpoint_url", "https://s3.internal:99999", "checkpoint_store_endpoint_url is "
                                                                   '"https://s3.internal:99999"; expected empty'),
    ("checkpoint_store_endpoint_url", "https://key:secret@s3.internal", "checkpoint_store_endpoint_url is"),
    ("checkpoint_store_endpoint_url", "https://s3.internal/?x=1", "checkpoint_store_endpoint_url is"),
    ("checkpoint_store_endpoint_url", "https://", 'checkpoint_store_endpoint_url is "https://"; expected empty'),
    ("checkpoint_store_region", "us-east", 'checkpoint_store_region is "us-east"; expected a region like us-east-1.'),
    ("checkpoint_store_region", "US-EAST-1", 'checkpoint_store_region is "US-EAST-1"; expected a region'),
    ("checkpoint_store_create_bucket", "maybe", 'checkpoint_store_create_bucket is "maybe"; expected true or false.'),
    ("checkpoint_store_versioning", 2, "checkpoint_store_versioning is 2; expected true or false."),
    ("checkpoint_store_install_train", None, "checkpoint_store_install_train is null; expected true or false."),
    ("checkpoint_store_find_links", "wheels/", 'checkpoint_store_find_links is "wheels/"; expected empty, an '
                                               "absolute path on the nodes or an http://, https:// or file:// URL"),
    ("checkpoint_store_find_links", "/srv/my wheels", 'checkpoint_store_find_links is "/srv/my wheels"; expected'),
    ("checkpoint_store_venv_dir", "opt/venv", 'checkpoint_store_venv_dir is "opt/venv"; expected an absolute path '
                                              "without blanks (the Ray venv)."),
    ("checkpoint_store_access_key_id", "AKIA EXAMPLE", 'checkpoint_store_access_key_id is "AKIA EXAMPLE"; expected '
                                                       "an access key id without blanks"),
    ("ray_service_group", 1000, "ray_service_group is 1000; expected the Ray service account's name"),
])
def test_each_bad_setting_is_named(var, value, expected):
    found = one_problem(**{var: value})
    assert expected in found, found


def test_every_problem_at_once():
    found = problems(checkpoint_store_backend="s4", checkpoint_store_region="mars", checkpoint_store_versioning="x")
    assert [p.split(":")[1].split()[0] for p in found] == ["checkpoint_store_backend", "checkpoint_store_region",
                                                           "checkpoint_store_versioning"]


@pytest.mark.parametrize("word", [True, "yes", "False", 0, "on"])
def test_booleans_take_ansibles_words(word):
    assert plan(checkpoint_store_create_bucket=word)["create_bucket"] is (word in (True, "yes", "on"))


def test_keys_both_set_or_both_empty_and_the_secret_never_shown():
    assert plan(checkpoint_store_access_key_id="AKIAEXAMPLE", checkpoint_store_secret_access_key=SECRET)
    only_id = one_problem(checkpoint_store_access_key_id="AKIAEXAMPLE")
    assert only_id == ('checkpoint_store on node1: checkpoint_store_access_key_id is "AKIAEXAMPLE" and '
                       "checkpoint_store_secret_access_key is empty; expected both set or both empty (empty: the "
                       "instance profile's or the AWS chain's credentials).")
    only_secret = one_problem(checkpoint_store_secret_access_key=SECRET)
    assert "checkpoint_store_secret_access_key is set (its value is not shown)" in only_secret
    for bad in (SECRET + "\n", "two words", 12345):
        found = one_problem(checkpoint_store_access_key_id="AKIAEXAMPLE", checkpoint_store_secret_access_key=bad)
        assert "checkpoint_store_secret_access_key is " in found and "its value is not shown" in found
        assert str(bad).strip() not in found


def test_bucket_checked_with_backend_s3_only():
    assert plan(checkpoint_store_bucket="Ray_Checkpoints")["backend"] == "none"
    found = one_problem(checkpoint_store_backend="s3", checkpoint_store_bucket="Ray_Checkpoints")
    assert found.startswith('checkpoint_store on node1: checkpoint_store_bucket is "Ray_Checkpoints" (other '
                            "characters than lowercase letters, digits, dots and hyphens, or not a letter or digit at "
                            "an end); expected a bucket name S3 accepts: 3-63 characters of lowercase letters")
    assert "(two adjacent dots" in one_problem(**S3 | {"checkpoint_store_bucket": "ray..ckpt"})
    assert "(0 characters)" in one_problem(**S3 | {"checkpoint_store_bucket": ""})


@pytest.mark.parametrize("path", ["/mnt/shared/checkpoints", "/mnt/shared/ckpt/run 1", "/data/ckpt", "/var/lib/ckpt",
                                  "/optional/ckpt", "/mnt/sharedx", "/etcetera"])
def test_good_shared_directories(path):
    assert plan(**SHARED | {"checkpoint_store_path": path})["uri"] == path


@pytest.mark.parametrize(("path", "why"), [
    ("", "not an absolute path"),
    ("mnt/checkpoints", "not an absolute path"),
    ("/", "the root directory"),
    ("//mnt/ckpt", "not normalized: it starts with //"),
    ("/mnt/shared/ckpt/", "not normalized: /mnt/shared/ckpt"),
    ("/mnt/shared/./ckpt", "not normalized: /mnt/shared/ckpt"),
    ("/mnt/shared/../ckpt", "not normalized: /mnt/ckpt"),
    ("/mnt//ckpt", "not normalized: /mnt/ckpt"),
    ("/mnt/shared/ckpt\n", "a line break or another control character"),
    ("/mnt/shared", "a mount point of shared_storage_mounts"),
    ("/etc/rayfleet/checkpoints", "in /etc"),
    ("/tmp", "in /tmp"),
    ("/opt/rayfleet/ckpt", "in /opt/rayfleet"),
    ("/var/lib/rayfleet", "in /var/lib/rayfleet"),
    (None, "not an absolute path"),
])
def test_bad_shared_directories(path, why):
    found = one_problem(**SHARED | {"checkpoint_store_path": path})
    shown = "null" if path is None else '"{}"'.format(path.replace("\n", "\\n"))
    assert found.startswith(f"checkpoint_store on node1: checkpoint_store_path is {shown} with "
                            f"checkpoint_store_backend shared ({why}); expected an absolute, normalized path"), found
    assert found.endswith(f"and not in {', '.join(SYSTEM_DIRS)}.")


def test_shared_directory_checked_with_backend_shared_only():
    assert plan(checkpoint_store_path="/etc")["backend"] == "none"
    assert plan(**S3, checkpoint_store_path="/etc")["backend"] == "s3"


def test_shared_needs_a_head():
    found = one_problem(heads=(), **SHARED)
    assert "group ray_head has no host" in found


def test_the_messages_of_the_bad_input_test():
    """tests/integration/test_4_bad_input.py's checkpoint cases, on a host of the sandbox."""
    found = one_problem(**SHARED | {"checkpoint_store_path": "mnt/checkpoints"})
    assert ('checkpoint_store_path is "mnt/checkpoints" with checkpoint_store_backend shared (not an absolute path); '
            "expected an absolute, normalized path") in found
    found = one_problem(**SHARED | {"checkpoint_store_path": "/etc/rayfleet/checkpoints"})
    assert 'checkpoint_store_path is "/etc/rayfleet/checkpoints"' in found
    assert "not in /bin, /boot, /dev, /etc," in found


@pytest.mark.parametrize(("url", "parts"), [
    ("https://s3.internal:7480", ("s3.internal:7480", "https")),
    ("http://s3.internal/", ("s3.internal", "http")),
    ("http://s3.internal#x", None),
    ("https://s3.internal:0", None),
    ("https://s3.internal:port", None),
    ("", None),
])
def test_endpoint_parts(url, parts):
    assert endpoint_parts(url) == parts


def test_the_secret_key_is_no_task_argument_and_the_plan_reads_it_from_the_hosts_variables():
    """A task's arguments can be shown (ANSIBLE_DISPLAY_ARGS_TO_STDOUT, -vvv): the secret never is one."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import (
        Call,
        Variables,
        plan_variables,
        run_plan,
    )

    task = yaml.safe_load((ROOT / "roles/checkpoint_store/tasks/validate.yml").read_text())[0]
    assert "secret" not in json.dumps(task["rayfleet.cluster.plan"])

    def planned(**extra):
        task_vars = {**{name: DEFAULTS[name] for name in CHECKPOINT_STORE_VARS if name in DEFAULTS}, **S3, **extra,
                     "vault_secret": SECRET, "groups": {"ray_head": ["head1"]},
                     "checkpoint_store_secret_access_key": trust_as_template("{{ vault_secret }}")}
        templar = Templar(loader=DataLoader(), variables=task_vars)
        variables = Variables(plan_variables("checkpoint_store"), task_vars, templar.template)
        return run_plan("checkpoint_store", Call("w1", variables, {}, task_vars))

    with pytest.raises(PlanError) as failure:  # a secret without its key id, named but never shown
        planned()
    assert "checkpoint_store_secret_access_key is set (its value is not shown)" in str(failure.value.problems)
    assert SECRET not in str(failure.value.problems)
    assert SECRET not in str(planned(checkpoint_store_access_key_id="AKIAEXAMPLE"))


def test_ray_trains_dependencies_from_a_wheel_directory_alone():
    """checkpoint_store_no_index (default pytorch_no_index): pip asks no index, so it needs the wheel directory."""
    links = {"checkpoint_store_find_links": "/opt/rayfleet-wheels"}
    assert plan(**S3, **links)["pip_args"] == "--find-links /opt/rayfleet-wheels"
    assert plan(**S3, **links, checkpoint_store_no_index="yes")["pip_args"] == (
        "--no-index --find-links /opt/rayfleet-wheels")
    assert one_problem(**S3, checkpoint_store_no_index=True) == (
        "checkpoint_store on node1: checkpoint_store_no_index is true and checkpoint_store_find_links is empty; "
        "expected a wheel directory in checkpoint_store_find_links that holds ray[train] at the installed Ray's "
        "version and its dependencies (pip asks no index).")
    assert "checkpoint_store_no_index is \"often\"; expected true or false" in one_problem(
        checkpoint_store_no_index="often")
    # nothing is installed without a backend, or with checkpoint_store_install_train false: no directory needed
    assert plan(checkpoint_store_no_index=True)["pip_args"] == "--no-index"
    assert plan(**S3, checkpoint_store_no_index=True, checkpoint_store_install_train=False)["backend"] == "s3"
    assert RAW_DEFAULTS["checkpoint_store_no_index"] == "{{ pytorch_no_index | default(false) }}"
