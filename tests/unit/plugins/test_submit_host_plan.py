# SPDX-License-Identifier: GPL-3.0-or-later
"""The submit host plan (plugins/plugin_utils/submit_host_plan.py): the submit_host role's variables and the
inventory checked, each problem named with the host, and the names of the cluster's client computed as the role's
Jinja computed them before."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.submit_host_plan import (
    SUBMIT_HOST_VARS,
    PlanError,
    submit_host_plan,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/submit_host/defaults/main.yml").read_text())
HEADS = ("head",)
WORKERS = ("worker1", "worker2")
HEAD_VARS = {"ray_cluster_name": None, "ansible_host": "10.0.0.2"}


def settings(**extra) -> dict:
    """The variables the role passes (its defaults)."""
    return {name: DEFAULTS[name] for name in SUBMIT_HOST_VARS} | extra


def plan(host="laptop", heads=HEADS, workers=WORKERS, head_vars=None, **extra) -> dict:
    return submit_host_plan(host, settings(**extra), heads, workers,
                            head_vars=HEAD_VARS if head_vars is None else head_vars, login_user="debian")


def problems(host="laptop", heads=HEADS, workers=WORKERS, **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(host, heads, workers, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith(f"submit_host on {host}: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def one_problem(**extra) -> str:
    found = problems(**extra)
    assert len(found) == 1, found
    return found[0]


def test_defaults_pass():
    assert plan() == {
        "state": "present", "head": "head", "head_ns": "", "head_config": "/etc/rayfleet/ray-head.json",
        "preflight_state_path": "/etc/rayfleet/preflight.json", "head_ssh": "10.0.0.2", "head_ssh_port": 22,
        "known_host": "10.0.0.2", "user": "debian", "local_port": 8265,
        "unit": "rayfleet-tunnel-rayfleet.service",
        "commands": ["ray-rayfleet", "rayfleet-submit-rayfleet", "rayfleet-tunnel-rayfleet"],
    }


def test_names_as_the_jinja_had_them():
    got = plan(head_vars={"ray_cluster_name": "team-a"}, submit_host_cluster_name="team-a", submit_host_user="alice",
               submit_host_head_ssh_port="2222", submit_host_local_port="18265", submit_host_state="absent")
    assert got["head_ns"] == "-team-a"
    assert got["head_config"] == "/etc/rayfleet/ray-team-a-head.json"
    assert got["preflight_state_path"] == "/etc/rayfleet/preflight-team-a.json"
    # without ansible_host, the head's inventory name; a port other than 22 in brackets
    assert (got["head_ssh"], got["known_host"]) == ("head", "[head]:2222")
    assert (got["user"], got["local_port"], got["head_ssh_port"], got["state"]) == ("alice", 18265, 2222, "absent")
    assert got["unit"] == "rayfleet-tunnel-team-a.service"
    assert got["commands"] == ["ray-team-a", "rayfleet-submit-team-a", "rayfleet-tunnel-team-a"]


@pytest.mark.parametrize("address", ["10.0.5.1", "fd00::5", "head.example.com", "bastion-1"])
def test_the_head_address_the_submit_host_reaches(address):
    got = plan(submit_host_head_address=address, submit_host_head_ssh_port=2200)
    assert (got["head_ssh"], got["known_host"]) == (address, f"[{address}]:2200")


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("submit_host_state", "gone", 'submit_host_state is "gone"; expected present or absent.'),
    ("submit_host_cluster_name", "Team_A", 'submit_host_cluster_name is "Team_A"; expected lowercase letters, '
                                           "digits and '-', at most 40"),
    ("submit_host_cluster_name", "-a", 'submit_host_cluster_name is "-a"; expected lowercase letters'),
    ("submit_host_cluster_name", "a" * 41, "submit_host_cluster_name is \"%s\"; expected" % ("a" * 41)),
    ("submit_host_local_port", 80, "submit_host_local_port is 80; expected a port 1024-65535"),
    ("submit_host_local_port", "70000", 'submit_host_local_port is "70000"; expected a port 1024-65535'),
    ("submit_host_local_port", "8265x", 'submit_host_local_port is "8265x"; expected a port 1024-65535'),
    ("submit_host_local_port", True, "submit_host_local_port is true; expected a port 1024-65535"),
    ("submit_host_head_ssh_port", 0, "submit_host_head_ssh_port is 0; expected the head's SSH port, 1-65535."),
    ("submit_host_head_ssh_port", "ssh", 'submit_host_head_ssh_port is "ssh"; expected the head\'s SSH port'),
    ("submit_host_tunnel_user", "Tunnel", 'submit_host_tunnel_user is "Tunnel"; expected a user name'),
    ("submit_host_tunnel_user", "", 'submit_host_tunnel_user is ""; expected a user name'),
    ("submit_host_user", "alice smith", 'submit_host_user is "alice smith"; expected empty (the login user) or'),
    ("submit_host_user", None, "submit_host_user is null; expected empty"),
    ("submit_host_head_address", "ssh://head", 'submit_host_head_address is "ssh://head"; expected empty (the head\'s '
                                               "ansible_host), or the head's address"),
    ("submit_host_head_address", "[fd00::5]", 'submit_host_head_address is "[fd00::5]"; expected empty'),
    ("submit_host_head_address", " head", 'submit_host_head_address is " head"; expected empty'),
    ("submit_host_tunnel_unit", "maybe", 'submit_host_tunnel_unit is "maybe"; expected true or false.'),
    ("submit_host_install_packages", None, "submit_host_install_packages is null; expected true or false."),
    ("submit_host_ansible", 2, "submit_host_ansible is 2; expected true or false."),
])
def test_each_bad_setting_is_named(var, value, expected):
    found = one_problem(**{var: value})
    assert found.startswith("submit_host on laptop: " + expected), found


def test_every_problem_at_once():
    found = problems(submit_host_state="x", submit_host_local_port=1, submit_host_ansible="x")
    assert [p.split(": ")[1].split()[0] for p in found] == ["submit_host_state", "submit_host_local_port",
                                                            "submit_host_ansible"]


def test_the_message_of_the_submit_host_test():
    """tests/integration/test_i_submit_host.py's bad cluster name."""
    assert 'submit_host_cluster_name is "Team_A"; expected lowercase letters, digits' in one_problem(
        submit_host_cluster_name="Team_A")


@pytest.mark.parametrize(("heads", "expected"), [
    ((), 'group ray_head has []; expected exactly one host, the head a submit host submits to.'),
    (("head", "head2"), 'group ray_head has ["head", "head2"]; expected exactly one host'),
])
def test_one_head(heads, expected):
    assert problems(heads=heads)[0].startswith("submit_host on laptop: " + expected)


@pytest.mark.parametrize(("host", "groups"), [("worker1", "ray_worker"), ("head", "ray_head")])
def test_a_ray_node_is_no_submit_host(host, groups):
    found = problems(host=host)
    assert found == [f"submit_host on {host}: this host is in group {groups}; expected a machine outside the cluster, "
                     "not a Ray node itself (remove it from ray_head and ray_worker, or from ray_submit)."]


@pytest.mark.parametrize("word", [True, "no", "Yes", 0, "off"])
def test_booleans_take_ansibles_words(word):
    assert plan(submit_host_ansible=word, submit_host_tunnel_unit=word, submit_host_install_packages=word)


@pytest.mark.parametrize(("login", "shown"), [("", "unknown"), (None, "unknown"), ("Bad User", '"Bad User"')])
def test_the_login_user_must_be_known_when_submit_host_user_is_empty(login, shown):
    with pytest.raises(PlanError) as info:
        submit_host_plan("laptop", settings(), HEADS, WORKERS, head_vars=HEAD_VARS, login_user=login)
    assert info.value.problems == [
        f'submit_host on laptop: submit_host_user is "" (the login user), but the login user is {shown} (ansible_user, '
        "else the controller's $USER); expected the name of the user who submits jobs here, in submit_host_user or "
        "ansible_user."]
    assert submit_host_plan("laptop", settings(submit_host_user="alice"), HEADS, WORKERS, login_user=login)["user"] == (
        "alice")
