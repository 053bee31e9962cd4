# SPDX-License-Identifier: GPL-3.0-or-later
"""The stage_items callback: a stage's items between its gate and its record, per host, read from results as
ansible-core 2.19 shapes them and as earlier releases do; a result it cannot read leaves the stage unrecorded."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from ansible_collections.rayfleet.cluster.plugins.callback import stage_items
from ansible_collections.rayfleet.cluster.plugins.plugin_utils import stages
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import SPOOL_ENV, spooled_changed, spooled_items


class Host:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


def new_style(host, action, result, args=None):
    return SimpleNamespace(host=Host(host), task=SimpleNamespace(action=action),
                           task_fields={"action": action, "args": args or {}}, result=result)


def old_style(host, action, result, args=None):
    return SimpleNamespace(_host=Host(host), _task=SimpleNamespace(action=action),
                           _task_fields={"action": action, "args": args or {}}, _result=result)


@pytest.fixture
def callback(monkeypatch):
    monkeypatch.delenv(SPOOL_ENV, raising=False)
    cb = stage_items.CallbackModule()
    yield cb
    cb.v2_playbook_on_stats(None)


@pytest.mark.parametrize("shape", [new_style, old_style])
def test_items_between_the_gate_and_the_record_go_to_the_open_stage(callback, shape):
    spool = callback._spool
    callback.v2_runner_on_ok(shape("w1", "ansible.builtin.copy", {"dest": "/etc/before-the-gate"}))
    callback.v2_runner_on_ok(shape("w1", "rayfleet.cluster.stage_gate", {"stage": "common", "run": True}))
    callback.v2_runner_on_ok(shape("w2", "rayfleet.cluster.stage_gate", {"stage": "common", "run": False}))
    callback.v2_runner_on_ok(shape("w1", "ansible.builtin.template", {"dest": "/etc/a.conf"}))
    callback.v2_runner_on_ok(shape("w2", "ansible.builtin.template", {"dest": "/etc/a.conf"}))
    callback.v2_runner_on_ok(shape("w1", "rayfleet.cluster.stage_record", {"digest": "x"}))
    callback.v2_runner_on_ok(shape("w1", "ansible.builtin.copy", {"dest": "/etc/after-the-record"}))
    assert spooled_items("w1", "common", spool=spool) == [{"kind": "file", "path": "/etc/a.conf"}]
    assert spooled_items("w2", "common", spool=spool) == []


def test_a_result_it_cannot_read_leaves_the_stage_without_a_record(callback):
    callback.v2_runner_on_ok(new_style("w1", "rayfleet.cluster.stage_gate", {"stage": "ray", "run": True}))
    broken = SimpleNamespace(host=Host("w1"), _host=Host("w1"), task=None, _task=None, task_fields=None,
                             _task_fields=None, result={"dest": "/etc/x"})
    callback.v2_runner_on_ok(broken)
    callback.v2_runner_on_ok(new_style("w1", "ansible.builtin.copy", {"dest": "/etc/y"}))
    assert spooled_items("w1", "ray", spool=callback._spool) is None


def test_the_workers_find_the_spool_and_it_is_gone_at_the_end(monkeypatch):
    monkeypatch.delenv(SPOOL_ENV, raising=False)
    cb = stage_items.CallbackModule()
    assert os.environ[SPOOL_ENV] == cb._spool and os.path.isdir(cb._spool)
    cb.v2_playbook_on_stats(None)
    assert not os.path.exists(cb._spool)


def test_the_stages_that_changed_something_are_spooled_and_setting_a_record_aside_keeps_the_stage_open(callback):
    spool = callback._spool
    callback.v2_runner_on_ok(new_style("w1", "rayfleet.cluster.stage_gate", {"stage": "ray", "run": True}))
    callback.v2_runner_on_ok(new_style("w1", "rayfleet.cluster.stage_record", {"state": "aside", "moved": True}))
    callback.v2_runner_on_ok(new_style("w1", "ansible.builtin.template", {"dest": "/etc/r.json", "changed": False}))
    assert spooled_changed("w1", "ray", spool=spool) is False
    callback.v2_runner_on_ok(new_style("w1", "ansible.builtin.copy", {"dest": "/etc/w.json", "changed": True}))
    assert spooled_changed("w1", "ray", spool=spool) is True
    both = [{"kind": "file", "path": "/etc/r.json"}, {"kind": "file", "path": "/etc/w.json"}]
    assert spooled_items("w1", "ray", spool=spool) == both
    callback.v2_runner_on_ok(new_style("w1", "rayfleet.cluster.stage_record", {"state": "present", "digest": "x"}))
    callback.v2_runner_on_ok(new_style("w1", "ansible.builtin.copy", {"dest": "/etc/after", "changed": True}))
    assert spooled_items("w1", "ray", spool=spool) == both
    # the stage's next run starts unchanged
    callback.v2_runner_on_ok(new_style("w1", "rayfleet.cluster.stage_gate", {"stage": "ray", "run": True}))
    assert spooled_changed("w1", "ray", spool=spool) is False


def test_a_result_it_cannot_read_counts_as_a_change(callback):
    callback.v2_runner_on_ok(new_style("w1", "rayfleet.cluster.stage_gate", {"stage": "ray", "run": True}))
    broken = SimpleNamespace(host=Host("w1"), _host=Host("w1"), task=None, _task=None, task_fields=None,
                             _task_fields=None, result={"dest": "/etc/x"})
    callback.v2_runner_on_ok(broken)
    assert spooled_changed("w1", "ray", spool=callback._spool) is True


@pytest.mark.parametrize(
    ("supersede", "changed", "settled"),
    [(True, False, "restored"), (True, True, "discarded"), (False, True, None)],
)
def test_a_partial_run_puts_back_the_record_it_set_aside_only_if_the_stage_changed_nothing(
        callback, monkeypatch, supersede, changed, settled):
    """--tags ray: no record is written; the copy this run set aside goes back where the stage changed nothing, and
    is removed where it changed something (the old record no longer describes the host)."""
    from ansible.plugins.action import ActionBase
    from ansible_collections.rayfleet.cluster.plugins.action.stage_record import ActionModule

    callback.v2_runner_on_ok(new_style("w1", "rayfleet.cluster.stage_gate", {"stage": "ray", "run": True}))
    callback.v2_runner_on_ok(new_style("w1", "ansible.builtin.copy", {"dest": "/etc/w.json", "changed": changed}))
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    calls = []
    action = object.__new__(ActionModule)
    action._task = SimpleNamespace(args={"stage": "ray"})
    action._execute_module = lambda module_name, task_vars, module_args: (
        calls.append(module_args) or {"changed": False, "state": module_args["state"], "moved": True})
    task_vars = {"inventory_hostname": "w1", "hostvars": {"w1": {}}, "ansible_run_tags": ["ray"],
                 "__rayfleet_gate": {"supersede": supersede}}
    result = action.run(task_vars=task_vars)
    assert result["written"] is False and "--tags ray" in result["skip_reason"]
    assert [call["state"] for call in calls] == ([settled] if settled else [])


def test_the_collections_code_is_read_once_in_the_main_process_for_every_worker(callback, monkeypatch):
    """At the playbook's start the callback computes the code digest and what each stage reads: the worker processes
    forked for each task (the drift check, the stage records) inherit them instead of reading the collection again."""
    from ansible_collections.rayfleet.cluster.plugins.plugin_utils import stages

    calls = []
    stage_code = stages.stage_code
    monkeypatch.setattr(stages, "_CODE", {})
    monkeypatch.setattr(stages, "stage_code", lambda root: calls.append(root) or stage_code(root))
    callback.v2_playbook_on_start(None)
    root = stages.collection_root()
    assert calls == [root] and set(stages._CODE) == {root}
    code, variables = stages.collection_code(root)
    assert calls == [root], "computed again after the callback did"
    assert code == stage_code(root) and code["submit_host"] == stages.code_digest(root)
    assert set(code) == set(variables) == {s.name for s in stages.STAGES} and "ray_version" in variables["ray"]


def declare(args):
    """The stage_items action's result for these arguments."""
    from ansible_collections.rayfleet.cluster.plugins.action.stage_items import ActionModule

    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action="rayfleet.cluster.stage_items",
                           get_validated_value=None)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp"))
    action = ActionModule(task, connection, SimpleNamespace(), None, None, None)
    return action.run(task_vars={})


def test_pip_requirements_are_declared_by_the_names_a_pip_tasks_result_gives():
    """A pip task skipped on a re-run (the venv holds the packages) reports nothing: the role declares what it
    installs, so a record written then watches the same items as the first run's."""
    venv = "/opt/rayfleet/venv"
    specs = ["ray[default]==2.60.0", "nvidia-ml-py==13.580.82", "Torch_Vision >= 0.29", "./local.whl"]
    result = {"invocation": {"module_args": {"name": specs, "virtualenv": venv}}}
    installed = stages.items_of_task_result("pip", result, {})
    declared = declare({"pip": {"venv": venv, "requirements": specs}, "items": [{"kind": "unit", "name": "x.service"}]})
    assert not declared.get("failed"), declared
    assert declared["rayfleet_managed"] == [{"kind": "unit", "name": "x.service"}, *installed]
    assert [item["name"] for item in installed] == ["ray", "nvidia-ml-py", "torch-vision"]
    bad = declare({"pip": {"venv": "venv", "requirements": specs}})
    assert bad["failed"] and "pip needs venv (an absolute path) and requirements (a list)" in bad["msg"]


def test_files_and_units_are_declared_as_the_tasks_results_name_them():
    declared = declare({"files": ["/etc/rayfleet", "/opt/rayfleet/venv/.rayfleet-requirements"],
                        "items": [{"kind": "unit", "name": "ssh"}]})
    reloaded = stages.items_of_task_result("systemd_service", {"name": "ssh", "state": "reloaded"}, {})
    assert declared["rayfleet_managed"] == [*reloaded, {"kind": "file", "path": "/etc/rayfleet"},
                                            {"kind": "file", "path": "/opt/rayfleet/venv/.rayfleet-requirements"}]
    assert reloaded == [{"kind": "unit", "name": "ssh.service"}]
    assert declare({"files": ["etc/rayfleet"]})["failed"]


def test_packages_are_declared_as_a_package_tasks_result_names_them():
    """A package task skipped where the drift check found its packages installed reports nothing: the role declares
    them, named as the task's result would name them."""
    specs = ["nftables", "nfs-common=1:2.6.2-4", "libc6:amd64"]
    installed = stages.items_of_task_result("apt", {"invocation": {"module_args": {"name": specs}}}, {})
    declared = declare({"packages": specs})
    assert not declared.get("failed"), declared
    assert declared["rayfleet_managed"] == installed == [
        {"kind": "package", "name": "nftables"}, {"kind": "package", "name": "nfs-common"},
        {"kind": "package", "name": "libc6"}]
    bad = declare({"packages": ["nftables", "/tmp/x.deb"]})
    assert bad["failed"] and "packages names a package by name" in bad["msg"] and "x.deb" in bad["msg"]
    assert declare({"packages": "nftables"})["failed"]


def gate(stage, task_vars):
    """The stage_gate action's result on host h1 with these variables."""
    from ansible_collections.rayfleet.cluster.plugins.action.stage_gate import ActionModule

    task = SimpleNamespace(args={"stage": stage}, async_val=0, check_mode=False, action="rayfleet.cluster.stage_gate",
                           get_validated_value=None)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp"))
    action = ActionModule(task, connection, SimpleNamespace(), None, None, None)
    host_vars = {"inventory_hostname": "h1", "ansible_play_hosts_all": ["h1"], "groups": {"ray_head": ["h1"]},
                 **task_vars}
    return action.run(task_vars=dict(host_vars, hostvars={"h1": host_vars}))


def test_the_gate_passes_on_the_packages_the_drift_check_found_installed():
    verdict = {"recorded": True, "inputs_changed": True, "drifted": [], "drifted_items": [], "upstream": {}}
    drift = {"stages": {"firewall": verdict}, "records": {}, "packages": ["curl", "nftables"]}
    opened = gate("firewall", {"__rayfleet_drift": drift})
    assert opened["run"] and opened["installed_packages"] == ["curl", "nftables"]
    # without a drift check on the host the package tasks ask apt or dnf
    assert "installed_packages" not in gate("firewall", {})


@pytest.mark.parametrize("watching", [True, False])
def test_the_drift_check_says_in_the_runs_first_seconds_when_the_callback_is_not_enabled(monkeypatch, watching):
    """Without the callback no stage is recorded and every stage runs every time: the drift check, the run's first
    look at each host, says so and how to enable it, rather than leave the user to wonder why nothing is skipped."""
    from ansible.plugins.action import ActionBase
    from ansible_collections.rayfleet.cluster.plugins.action.drift_check import ActionModule

    if watching:
        monkeypatch.setenv(SPOOL_ENV, "/tmp/spool")
    else:
        monkeypatch.delenv(SPOOL_ENV, raising=False)
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    action = object.__new__(ActionModule)
    action._task = SimpleNamespace(args={})
    action._templar = None
    action._execute_module = lambda module_name, module_args, task_vars: {"stages": {}, "records": {}}
    hostvars = {"h": {"group_names": ["ray_head"]}}
    result = action.run(task_vars={"inventory_hostname": "h", "hostvars": _HostVars(hostvars),
                                   "groups": {"ray_head": ["h"]}})
    warnings = result.get("warnings") or []
    if watching:
        assert warnings == []
    else:
        assert len(warnings) == 1
        assert "records no stage, so every stage runs on every host on every run" in warnings[0]
        assert "callbacks_enabled = rayfleet.cluster.stage_items" in warnings[0]


class _HostVars(dict):
    def raw_get(self, host):
        return self[host]


def _beside_the_playbooks():
    """The copy Ansible loads from playbooks/callback_plugins/ (a plain file there, not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "playbooks/callback_plugins/rayfleet_stage_items.py"
    spec = importlib.util.spec_from_file_location("rayfleet_stage_items_beside", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("configured", [(), ("ansible.posix.profile_tasks",)])
def test_the_copy_beside_the_playbooks_loads_unasked_and_watches_the_run(monkeypatch, configured):
    """Ansible loads a callback found beside a playbook, with no configuration, when it does not ask to be
    enabled: the collection's playbooks get their stage records from a Galaxy install with no ansible.cfg."""
    module = _beside_the_playbooks()
    monkeypatch.delenv(SPOOL_ENV, raising=False)
    monkeypatch.setattr(module.C, "CALLBACKS_ENABLED", list(configured))
    assert module.CallbackModule.CALLBACK_NEEDS_ENABLED is False
    cb = module.CallbackModule()
    try:
        assert not cb.disabled and os.environ[SPOOL_ENV] == cb._spool
    finally:
        cb.v2_playbook_on_stats(None)


def test_the_copy_beside_the_playbooks_stands_aside_for_the_configured_callback(monkeypatch):
    module = _beside_the_playbooks()
    monkeypatch.delenv(SPOOL_ENV, raising=False)
    monkeypatch.setattr(module.C, "CALLBACKS_ENABLED", ["rayfleet.cluster.stage_items"])
    cb = module.CallbackModule()
    # Ansible never calls a disabled callback, and it made no spool the workers would find
    assert cb.disabled and SPOOL_ENV not in os.environ


def test_the_selection_compares_each_hosts_inputs_once_and_the_gates_use_it(monkeypatch):
    """The drift check reads the records with no digests (the plan needs the facts it gathers); the selection then
    compares each host's inputs now with its records', and every later gate of the run reads that comparison."""
    from ansible_collections.rayfleet.cluster.plugins.action import stage_gate
    from ansible_collections.rayfleet.cluster.plugins.action.stage_gate import ActionModule

    now = {"h1": {"common": "c1", "ray": "r2"}, "w1": {"common": "c1", "ray": "r1"}}
    asked = []

    def inputs_now(hostvars, host, groups, template=None, memo=None):
        asked.append(host)
        return now[host]

    monkeypatch.setattr(stage_gate, "host_inputs", inputs_now)
    monkeypatch.setattr(stage_gate, "renderer", lambda templar: None)
    recorded = {"recorded": True, "inputs_changed": False, "drifted": [], "drifted_items": [], "upstream": {},
                "digest": "d"}
    drift = {"stages": {"common": dict(recorded, inputs="c1"), "ray": dict(recorded, inputs="r1")},
             "records": {"common": "d", "ray": "d"}}
    groups = {"ray_head": ["h1"], "ray_worker": ["w1"]}
    hostvars = {host: {"inventory_hostname": host, "group_names": [group], "__rayfleet_drift": drift}
                for group, (host,) in groups.items()}

    def run(stage, host, **extra):
        task = SimpleNamespace(args={"stage": stage}, async_val=0, check_mode=False,
                               action="rayfleet.cluster.stage_gate", get_validated_value=None)
        connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp"))
        action = ActionModule(task, connection, SimpleNamespace(), None,
                              SimpleNamespace(copy_with_new_env=lambda **kw: None), None)
        task_vars = dict(hostvars[host], groups=groups, ansible_play_hosts=["h1", "w1"],
                         ansible_play_hosts_all=["h1", "w1"], hostvars=hostvars, **extra)
        return action.run(task_vars=task_vars)

    selected = run("select", "h1")
    assert selected["inputs_changed"] == {"h1": ["ray"], "w1": []}
    assert "rayfleet_stage_ray" in selected["groups"]["h1"]
    assert "rayfleet_stage_common" not in selected["groups"]["h1"] + selected["groups"]["w1"]
    assert sorted(asked) == ["h1", "w1"]
    asked.clear()
    # the gates read the selection's comparison, and compute no inputs again
    assert run("ray", "h1", __rayfleet_select=selected)["run"]
    worker = run("common", "w1", __rayfleet_select=selected)
    assert not worker["run"] and worker["msg"] == "skipped: nothing drifted"
    assert asked == []
    # a host the selection did not compare runs every stage it has a record of
    assert run("common", "w1")["msg"] == "runs: its inputs changed"


def test_a_drift_check_without_digests_is_completed_by_the_comparison():
    from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import inputs_changed, with_inputs

    found = {"stages": {"a": {"recorded": True, "inputs": "1", "inputs_changed": False},
                        "b": {"recorded": True, "inputs": "2", "inputs_changed": False},
                        "c": {"recorded": False, "inputs": None, "inputs_changed": None}}}
    assert inputs_changed(found, {"a": "1", "b": "3", "c": "4"}) == ["b"]
    # a stage whose inputs could not be computed counts as changed
    assert inputs_changed(found, {"a": "1"}) == ["b"]
    done = with_inputs(found, ["b"])
    assert [done["stages"][n]["inputs_changed"] for n in "abc"] == [False, True, None]
    assert [with_inputs(found, None)["stages"][n]["inputs_changed"] for n in "abc"] == [True, True, None]
    assert found["stages"]["a"]["inputs_changed"] is False, "the registered result is not changed"
    assert with_inputs(None, []) is None
