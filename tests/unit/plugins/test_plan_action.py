# SPDX-License-Identifier: GPL-3.0-or-later
"""The one plan action (rayfleet.cluster.plan): every role's task names its role and gives only what its plan takes,
each plan reads only the variables its role's argument spec (and its declared reads) names, and the action renders
them in the host's context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.rayfleet.cluster.plugins.modules import plan as plan_module
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import (
    PLANS,
    Call,
    Undeclared,
    Variables,
    owner_default,
    plan_variables,
    role_options,
    run_plan,
)

ROOT = Path(__file__).resolve().parents[3]


def plan_tasks():
    """(file, task) of every task of the roles that asks for a plan."""
    found = []
    for path in sorted(ROOT.glob("roles/*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            if isinstance(task, dict) and "rayfleet.cluster.plan" in task:
                found.append((str(path.relative_to(ROOT)), task))
    return found


def test_every_plan_task_names_its_role_and_gives_only_what_the_plan_takes():
    tasks = plan_tasks()
    assert {task["rayfleet.cluster.plan"]["role"] for _path, task in tasks} == set(PLANS)
    for path, task in tasks:
        args = task["rayfleet.cluster.plan"]
        assert set(args) <= {"role", "given"}, path
        assert path.startswith(f"roles/{args['role']}/"), path
        assert set(args.get("given") or {}) <= set(PLANS[args["role"]].given), path


def test_the_module_documents_the_action_and_its_roles():
    doc = yaml.safe_load(plan_module.DOCUMENTATION)
    assert set(doc["options"]) == {"role", "given"}
    assert doc["options"]["role"]["choices"] == list(PLANS)


@pytest.mark.parametrize("role", sorted(PLANS))
def test_a_role_reads_its_argument_spec_and_declared_reads_each_with_a_default(role):
    """The reads of other roles are declared in their argument specs, and have a default there (a host that sets
    none reads it); a read no role declares is the apex role's retired apex_source_checksum, refused when set."""
    assert plan_variables(role) >= set(role_options(role))
    for var in PLANS[role].reads:
        assert var not in role_options(role), var
        found, _default = owner_default(var)
        assert found or var == "apex_source_checksum", var


def _raw_defaults():
    defaults = {}
    for path in sorted(ROOT.glob("roles/*/defaults/main.yml")):
        defaults.update(yaml.safe_load(path.read_text()) or {})
    return defaults


@pytest.mark.parametrize("role", sorted(PLANS))
def test_each_plan_reads_only_declared_variables(role):
    """Every roles' defaults as the host's variables (unrendered): a plan that reads a variable its role's argument
    spec and its reads do not declare raises Undeclared, which a change to that variable would otherwise reach no
    stage's inputs with."""
    groups = ("ray_head", "nfs_server", "gpu", "monitoring", "ray_submit", "all")
    task_vars = {**_raw_defaults(), "groups": {**{group: ["node7"] for group in groups}, "ray_worker": []},
                 "group_names": list(groups), "hostvars": {}}
    variables = Variables(plan_variables(role), task_vars, lambda value: value)
    try:
        run_plan(role, Call("node7", variables, {}, task_vars))
    except Undeclared:
        raise
    except (PlanError, TypeError, ValueError, AttributeError, KeyError):  # unrendered defaults: read, then refused
        pass


def test_a_variable_the_plan_does_not_declare_is_refused():
    variables = Variables(frozenset({"pytorch_version"}), {"pytorch_version": "2.5.1", "ray_version": "2"}, str)
    assert variables.get("pytorch_version") == "2.5.1"
    with pytest.raises(Undeclared, match="ray_version"):
        variables.get("ray_version")


def test_the_action_renders_the_hosts_variables_and_a_reads_owner_default():
    """The inventory's values over the role's defaults, templates rendered in the host's context; a read of another
    role the host does not set is that role's default (nfs_server_port 2049)."""
    task_vars = {"firewall_ssh_allowed_sources": trust_as_template("{{ admin_net }}"), "admin_net": ["10.9.0.0/16"]}
    variables = Variables(plan_variables("firewall"), task_vars, Templar(loader=DataLoader(), variables=task_vars)
                          .template)
    assert variables["firewall_ssh_allowed_sources"] == ["10.9.0.0/16"]
    assert variables["nfs_server_port"] == 2049
    # a read that no role's defaults give is unset where the host sets none
    assert "apex_source_checksum" not in Variables(plan_variables("apex"), {}, str)


def test_a_role_or_a_given_the_plan_does_not_take_is_named():
    with pytest.raises(PlanError, match=r'plan on node7: role is "nope"; expected one of ray, '):
        run_plan("nope", Call("node7", {}))
    with pytest.raises(PlanError, match="the pytorch role's task gives venv; expected only nothing"):
        run_plan("pytorch", Call("node7", {}, {"venv": {}}))


def test_every_stage_that_runs_a_plan_has_its_variables_as_inputs():
    """What a plan reads is an input of each stage whose roles run it (the run options, such as how long a reboot
    may take, aside): a change to it runs that stage."""
    from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
        RUN_OPTIONS,
        STAGES,
        collection_root,
        stage_variables,
    )

    inputs = stage_variables(collection_root())
    for stage in STAGES:
        for role in stage.roles + stage.uses:
            if role in PLANS:
                missing = plan_variables(role) - RUN_OPTIONS - {"apex_source_checksum"} - inputs[stage.name]
                assert not missing, (stage.name, role, sorted(missing))
