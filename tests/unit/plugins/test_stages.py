# SPDX-License-Identifier: GPL-3.0-or-later
"""The stages (plugins/plugin_utils/stages.py): which items a task result names, whether a stage runs on a host, the
inputs digests; and a check that every module the roles call is either recorded or declared as recording nothing."""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils import stages
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import cluster_members, host_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import (
    CERT_RENEWAL_PERIOD_S,
    FILE_ACTIONS,
    PACKAGE_ACTIONS,
    STAGES,
    UNIT_ACTIONS,
    UNRECORDED_ACTIONS,
    cluster_inputs,
    inputs_digests,
    items_of_task_result,
    merge_items,
    short_action,
    spool_write,
    spooled_items,
    stage_verdict,
)

ROOT = Path(__file__).resolve().parents[3]
RECORDED_ACTIONS = (
    FILE_ACTIONS
    | UNIT_ACTIONS
    | PACKAGE_ACTIONS
    | {"pip", "mount", "authorized_key", "user", "group", "modprobe", "ray_node", "stage_items"}
)


@pytest.mark.parametrize(
    ("action", "result", "args", "items"),
    [
        (
            "ansible.builtin.template",
            {"dest": "/etc/a.conf", "changed": True},
            {},
            [{"kind": "file", "path": "/etc/a.conf"}],
        ),
        ("copy", {"dest": "/etc/b", "changed": False}, {}, [{"kind": "file", "path": "/etc/b"}]),
        ("ansible.builtin.file", {"path": "/opt/x", "state": "directory"}, {}, [{"kind": "file", "path": "/opt/x"}]),
        # lineinfile's result names no path: its arguments do
        (
            "lineinfile",
            {"changed": False, "invocation": {"module_args": {"path": "/etc/environment"}}},
            {},
            [{"kind": "file", "path": "/etc/environment"}],
        ),
        (
            "community.general.ini_file",
            {"changed": False},
            {"path": "/etc/pip.conf"},
            [{"kind": "file", "path": "/etc/pip.conf"}],
        ),
        (
            "ansible.builtin.systemd_service",
            {"name": "ray-head.service", "status": {}},
            {},
            [{"kind": "unit", "name": "ray-head.service"}],
        ),
        ("service", {"name": "nfs-server"}, {}, [{"kind": "unit", "name": "nfs-server.service"}]),
        (
            "ansible.builtin.apt",
            {"invocation": {"module_args": {"name": ["curl", "nvidia-driver=535.1", "lib*"]}}},
            {},
            [{"kind": "package", "name": "curl"}, {"kind": "package", "name": "nvidia-driver"}],
        ),
        (
            "package",
            {},
            {"name": "nftables,sudo"},
            [{"kind": "package", "name": "nftables"}, {"kind": "package", "name": "sudo"}],
        ),
        (
            "ansible.builtin.pip",
            {
                "invocation": {
                    "module_args": {
                        "name": ["ray[default]==2.60.0", "/tmp/x.whl", "Foo_Bar>=1"],
                        "virtualenv": "/opt/ray/venv",
                    }
                }
            },
            {},
            [
                {"kind": "pip", "venv": "/opt/ray/venv", "name": "ray"},
                {"kind": "pip", "venv": "/opt/ray/venv", "name": "foo-bar"},
            ],
        ),
        ("ansible.posix.mount", {"name": "/mnt/shared"}, {}, [{"kind": "mount", "path": "/mnt/shared"}]),
        (
            "ansible.posix.authorized_key",
            {"keyfile": "/home/ray/.ssh/authorized_keys"},
            {},
            [{"kind": "file", "path": "/home/ray/.ssh/authorized_keys"}],
        ),
        ("user", {"name": "ray"}, {}, [{"kind": "user", "name": "ray"}]),
        ("community.general.modprobe", {"name": "br_netfilter"}, {}, [{"kind": "kmod", "name": "br_netfilter"}]),
        (
            "rayfleet.cluster.ray_node",
            {"rayfleet_managed": [{"kind": "file", "path": "/etc/rayfleet/ray-head.json"}]},
            {},
            [{"kind": "file", "path": "/etc/rayfleet/ray-head.json"}],
        ),
        (
            "rayfleet.cluster.stage_items",
            {"rayfleet_managed": [{"kind": "nft_table", "family": "inet", "name": "rayfleet"}]},
            {},
            [{"kind": "nft_table", "family": "inet", "name": "rayfleet"}],
        ),
        # what read, ran elsewhere, skipped or failed manages nothing here
        ("ansible.builtin.command", {"stdout": "x", "changed": True}, {"argv": ["nft", "-f", "/etc/x"]}, []),
        ("copy", {"dest": "/root/.ray/token", "_ansible_delegated_vars": {"ansible_host": "localhost"}}, {}, []),
        ("copy", {"skipped": True}, {"dest": "/etc/c"}, []),
        ("copy", {"failed": True, "msg": "no"}, {"dest": "/etc/c"}, []),
        # no_log: the result is censored, the worker's rendered arguments still name the file (never its content)
        (
            "copy",
            {"censored": "the output has been hidden", "changed": False},
            {"dest": "/etc/rayfleet/token", "content": "s3cret"},
            [{"kind": "file", "path": "/etc/rayfleet/token"}],
        ),
    ],
)
def test_items_a_task_result_names(action, result, args, items):
    assert items_of_task_result(action, result, args) == items


def test_a_loop_names_each_items_own_file():
    result = {"results": [{"dest": "/etc/a"}, {"skipped": True}, {"dest": "/etc/b"}], "changed": True}
    assert items_of_task_result("template", result, {"dest": "/etc/{{ item }}"}) == [
        {"kind": "file", "path": "/etc/a"},
        {"kind": "file", "path": "/etc/b"},
    ]


def test_items_are_merged_once_each_in_a_stable_order():
    items = [
        {"kind": "unit", "name": "b.service"},
        {"kind": "file", "path": "/a"},
        {"kind": "unit", "name": "b.service"},
    ]
    assert merge_items(items) == [{"kind": "file", "path": "/a"}, {"kind": "unit", "name": "b.service"}]


def _task_actions():
    """Every module a role or playbook task calls, by short name."""
    found = set()
    for path in (
        list(ROOT.glob("roles/*/tasks/*.yml"))
        + list(ROOT.glob("roles/*/handlers/*.yml"))
        + list(ROOT.glob("playbooks/*.yml"))
    ):
        for match in re.finditer(
            r"^\s*-?\s*((?:ansible|community|rayfleet)\.[a-z_]+\.[a-z_]+):", path.read_text(), re.M
        ):
            found.add(short_action(match.group(1)))
    return found


def test_every_module_the_roles_call_is_recorded_or_declared_as_recording_nothing():
    """A new module in a role must either name its items (items_of_result) or be listed as managing nothing a
    drift check could compare: otherwise its changes would go unwatched."""
    unknown = sorted(_task_actions() - RECORDED_ACTIONS - UNRECORDED_ACTIONS - {"import_playbook"})
    assert unknown == [], f"tasks call modules the stage record does not cover: {unknown}"


# A stage role's command or shell task that changes its host (changed_when not false) manages something no module
# result names: each says here what watches it, so a new one cannot go unwatched by the drift check.
COMMANDS_THAT_CHANGE = {
    "apex/tasks/build.yml: Compile the Apex wheel": "builds into a build directory; the wheel's pip install is "
    "recorded",
    "common/tasks/ca.yml: Rebuild the system CA bundle": "derived from the CA files, which are recorded",
    "nccl/tasks/efa.yml: Run the EFA installer": "stage_items",
    "nvidia_driver/tasks/stream-dnf.yml: Enable the driver branch's module stream": "the packages of the stream are "
    "recorded",
    "ray/tasks/container_nvidia.yml: Configure docker's nvidia runtime": "stage_items",
    "ray/tasks/main.yml: Create the Ray venv": "the venv's pip packages are recorded (pip installs into it next)",
    "ray/tasks/main.yml: Install Ray into its venv at version": "stage_items (Watch Ray and uv in the stage record)",
    "pytorch/tasks/main.yml: Install PyTorch into the Ray venv at": "stage_items (Watch torch in the stage record)",
    "nccl/tasks/library.yml: Install the pinned NCCL wheel into the Ray venv at": "stage_items (Watch the pinned NCCL "
    "wheel in the stage record)",
    "rocm/tasks/install.yml: Install the ROCm use cases": "stage_items",
    "shared_storage/tasks/efs_utils_build.yml: Build the package": "builds into a build directory; the package's "
    "install is recorded",
}


def _changing_commands():
    """'<role>/tasks/<file>: <task name>' of every command or shell task in a stage's role that may change its
    host, and the file's text."""
    roles = {role for stage in STAGES for role in stage.roles}
    found = {}

    def walk(tasks, path, text):
        for task in tasks or []:
            if not isinstance(task, dict):
                continue
            for key in ("block", "rescue", "always"):
                walk(task.get(key), path, text)
            if any(short_action(key) in ("command", "shell") for key in task) and task.get("changed_when") is not False:
                name = re.sub(r"\s*\(.*$|\s*\{\{.*$", "", str(task.get("name")))
                found[f"{path.relative_to(ROOT / 'roles')}: {name}"] = text

    for role in sorted(roles):
        for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
            text = path.read_text()
            walk(yaml.safe_load(text), path, text)
    return found


def test_every_command_that_changes_a_stage_host_says_what_watches_it():
    found = _changing_commands()
    assert sorted(set(found) - set(COMMANDS_THAT_CHANGE)) == [], (
        "command/shell tasks that change a host with nothing watching what they change: declare the items with "
        "rayfleet.cluster.stage_items after them (or say what records them) in COMMANDS_THAT_CHANGE")
    assert sorted(set(COMMANDS_THAT_CHANGE) - set(found)) == [], "COMMANDS_THAT_CHANGE names tasks that are gone"
    for task, why in COMMANDS_THAT_CHANGE.items():
        if why == "stage_items":
            assert "rayfleet.cluster.stage_items:" in found[task], f"{task}: no stage_items task in its file"


def _set_names(tasks):
    """The variables these tasks (blocks included) register or set with set_fact."""
    found = set()
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            found |= _set_names(task.get(key))
        if isinstance(task.get("register"), str):
            found.add(task["register"])
        for key, value in task.items():
            if short_action(key) == "set_fact" and isinstance(value, dict):
                found |= {name for name in value if name != "cacheable"}
    return found


def test_no_variable_the_roles_or_playbooks_set_is_a_stage_input():
    """A variable a task registers or sets is a result: as a stage input, every stage's inputs digest would change
    once it is set."""
    set_names = set()
    for path in list(ROOT.glob("roles/*/tasks/*.yml")) + list(ROOT.glob("playbooks/*.yml")):
        set_names |= _set_names(yaml.safe_load(path.read_text()))
    inputs = set().union(*stages.stage_variables(str(ROOT)).values())
    assert len(set_names) > 20
    assert sorted(set_names & inputs) == []


def _stage_of(tasks, part):
    """The stage named by the import of playbooks/tasks/stage_<part>.yml among tasks (None: no such import)."""
    for task in tasks or []:
        if task.get("ansible.builtin.import_tasks") == f"tasks/stage_{part}.yml":
            return task["vars"]["__rayfleet_stage"]
    return None


def test_the_stage_tasks_gate_set_aside_and_record_under_the_stages_name():
    """What every stage play imports: its gate, its record set aside before any of its tasks whatever the run's tags,
    and its record kept under the name the gates of later stages read (__rayfleet_record_<stage>)."""
    begin = yaml.safe_load((ROOT / "playbooks/tasks/stage_begin.yml").read_text())
    assert [t.get("tags") for t in begin] == [["always"]] * len(begin)
    (gate,) = [t for t in begin if "rayfleet.cluster.stage_gate" in t]
    assert gate["rayfleet.cluster.stage_gate"] == {"stage": "{{ __rayfleet_stage }}"}
    assert gate["register"] == "__rayfleet_gate"
    aside = begin[-1]
    assert aside["rayfleet.cluster.stage_record"] == {"stage": "{{ __rayfleet_stage }}", "state": "aside"}
    assert aside["when"] == "__rayfleet_gate.supersede"
    end = yaml.safe_load((ROOT / "playbooks/tasks/stage_end.yml").read_text())
    assert [t.get("tags") for t in end] == [["always"]] * len(end)
    assert end[0]["rayfleet.cluster.stage_record"] == {"stage": "{{ __rayfleet_stage }}"}
    assert end[1]["ansible.builtin.set_fact"] == {
        "__rayfleet_record_{{ __rayfleet_stage }}": "{{ " + end[0]["register"] + " }}"}


def test_every_stage_play_gates_and_records_its_own_stage_on_its_groups():
    """Each stage's play begins with its gate (tasks/stage_begin.yml, the last of its pre_tasks) and ends with its
    record (tasks/stage_end.yml), under the stage's own name, and targets the groups the stage table says (the drift
    check compares a host with the stages of its groups)."""
    seen = {}
    for path in ROOT.glob("playbooks/*.yml"):
        if path.name == "bake.yml":  # its plays record stages for an image (test_bake_records_only_...)
            continue
        for play in yaml.safe_load(path.read_text()) or []:
            name, recorded = _stage_of(play.get("pre_tasks"), "begin"), _stage_of(play.get("post_tasks"), "end")
            checks = [t for t in play.get("pre_tasks", []) if "rayfleet.cluster.stage_gate" in t]
            if checks:  # a play that checks variables where its gate says: records nothing
                assert all(task.get("ansible.builtin.include_role", {}).get("tasks_from") == "validate"
                           for task in play.get("tasks", [])) and not play.get("roles"), play["name"]
                assert name is None and recorded is None, f"{path.name}: a play that only checks records nothing"
                continue
            if name is None and recorded is None:
                continue
            assert name == recorded, "{}: play {!r} gates without recording, or records without a gate".format(
                path.name, play["name"])
            # before any of the stage's tasks
            assert _stage_of(play["pre_tasks"][-1:], "begin") == name, play["name"]
            # the stage table knows the tags that select the stage's tasks
            selected = set(play.get("tags") or [])
            for task in list(play.get("roles") or []) + list(play.get("tasks") or []):
                selected.update(task.get("tags") or [])
            assert set(stages.STAGE_BY_NAME[name].tags) == selected - {"always"}, play["name"]
            assert play["hosts"] == _selected_hosts(name), play["name"]
            seen[name] = path.name
    assert set(seen) == {stage.name for stage in STAGES}


def _selected_hosts(group):
    """A play's hosts under site.yml's selection: the group rayfleet_stage_<group> the drift check filled, or
    without a selection in the run (the playbook alone) the inventory groups the stage table says."""
    pattern = ":".join(stages.STAGE_BY_NAME[group].groups) if group != stages.VALIDATE else "ray_head:ray_worker"
    return (f"{{{{ groups['{stages.GROUP_PREFIX}{group}'] | default([])\n   if '{stages.SELECTED_GROUP}' in groups "
            f"else '{pattern}' }}}}")


def test_the_validate_plays_target_the_hosts_where_their_roles_stage_may_run():
    """site.yml checks a host's variables only where a stage may run on it: the Ray nodes' play targets
    rayfleet_stage_validate, and the plays for the hosts of one stage's group (NFS servers, GPU hosts, submit hosts)
    that stage's hosts - the roles they check are that stage's roles."""
    targets = {}
    for play in yaml.safe_load((ROOT / "playbooks/validate.yml").read_text()):
        checked = {task["ansible.builtin.include_role"]["name"].rsplit(".", 1)[-1] for task in play.get("tasks", [])
                   if task.get("ansible.builtin.include_role", {}).get("tasks_from") == "validate"}
        if not checked:
            continue
        (group,) = [name for name in [stages.VALIDATE, *stages.STAGE_BY_NAME]
                    if play["hosts"] == _selected_hosts(name)]
        targets[group] = checked
    for name, roles in targets.items():
        if name != stages.VALIDATE:
            assert roles == set(stages.STAGE_BY_NAME[name].roles), name
    assert set(targets) == {stages.VALIDATE, "nfs_server", "gpu", "submit_host"}


def test_bake_records_for_its_image_only_the_stages_it_applies_as_site_yml_would():
    """playbooks/bake.yml records a stage for the nodes booted from its image only where the builder applies it as
    site.yml would on them: the play holds the stage's roles alone, the stage's files name no ray_state (a role that
    acts otherwise while baking), read no address and not the cluster's members (a booted node has its own). The
    record's inputs then hold on a booted node of the same inventory, and its first site.yml skips the stage."""
    variables = stages.stage_variables(str(ROOT))
    recorded = []
    for play in yaml.safe_load((ROOT / "playbooks" / "bake.yml").read_text()):
        pre = [t for t in play.get("pre_tasks", []) if "rayfleet.cluster.stage_gate" in t]
        post = [t for t in play.get("post_tasks", []) if "rayfleet.cluster.stage_record" in t]
        if not pre and not post:
            continue
        name = pre[0]["rayfleet.cluster.stage_gate"]["stage"]
        assert post[0]["rayfleet.cluster.stage_record"] == {"stage": name, "image": True}, play["name"]
        assert [role["role"].rsplit(".", 1)[-1] for role in play["roles"]] == list(stages.STAGE_BY_NAME[name].roles)
        assert not play.get("tasks"), play["name"]
        assert "ray_state" not in variables[name], name
        item = stages.STAGE_BY_NAME[name]
        assert not item.addresses and not item.cluster_inputs and not item.plan and not item.files, name
        recorded.append(name)
    assert recorded == ["common"]


# ---- whether a stage runs ----


def _checked(**stages_state):
    return {
        "stages": stages_state,
        "records": {name: v.get("digest") for name, v in stages_state.items() if v.get("recorded")},
    }


CLEAN = {"recorded": True, "inputs_changed": False, "drifted": [], "upstream": {}, "digest": "d0"}


def test_a_clean_host_skips_and_a_drifted_one_runs_saying_what_drifted():
    drift = {"w1": _checked(common=CLEAN), "w2": _checked(common=dict(CLEAN, drifted=["file:/etc/a (sha256 1 -> 2)"]))}
    assert stage_verdict("common", "w1", drift, {}, group_heads=["h"], play_hosts=["w1", "w2"]) == (
        False,
        "nothing drifted",
    )
    run, reason = stage_verdict("common", "w2", drift, {}, group_heads=["h"], play_hosts=["w1", "w2"])
    assert run and "file:/etc/a" in reason


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (None, "no record of this stage"),
        (dict(CLEAN, recorded=False), "no record of this stage"),
        (dict(CLEAN, inputs_changed=True), "its inputs changed"),
    ],
)
def test_no_record_or_new_inputs_make_a_stage_run(state, reason):
    drift = {"w1": _checked(**({"common": state} if state else {}))}
    assert stage_verdict("common", "w1", drift, {}, group_heads=[], play_hosts=["w1"]) == (True, reason)


@pytest.mark.parametrize(
    ("state", "supersede"),
    [
        (dict(CLEAN, inputs_changed=True), True),  # new inputs: a partial or failed run must not leave the old record
        (dict(CLEAN, drifted=["file:/a"], drifted_items=["file:/a"]), False),  # the recorded inputs are re-applied
        (CLEAN, False),  # runs for another reason (upstream, scope): the recorded inputs
        (dict(CLEAN, recorded=False, inputs_changed=None), False),  # no record to set aside
    ],
)
def test_a_stage_that_applies_new_inputs_sets_its_record_aside_first(state, supersede):
    assert stages.supersedes_record("ray", "w1", {"w1": _checked(ray=state)}) is supersede


def test_a_run_whose_tags_select_none_of_a_stages_tasks_leaves_its_record():
    drift = {"w1": _checked(ray=dict(CLEAN, inputs_changed=True), ml=dict(CLEAN, inputs_changed=True))}
    assert stages.supersedes_record("ray", "w1", drift, ["ray"]) is True
    assert stages.supersedes_record("ml", "w1", drift, ["ray"]) is False
    assert stages.supersedes_record("ml", "w1", drift, ["apex", "firewall"]) is True
    assert stages.supersedes_record("ml", "w1", drift, ["all"]) is True


def test_a_stage_run_without_a_drift_check_sets_its_record_aside():
    assert stages.supersedes_record("ray", "w1", {"w1": None}) is True
    assert stages.supersedes_record("ray", "w1", {}) is True


def test_without_a_drift_check_every_stage_runs_and_full_runs_everything():
    assert stage_verdict("ray", "w1", {"w1": None}, {}, group_heads=[], play_hosts=["w1"]) == (
        True,
        "no drift check ran on this host",
    )
    drift = {"w1": _checked(ray=CLEAN)}
    assert stage_verdict("ray", "w1", drift, {}, group_heads=[], play_hosts=["w1"], full=True) == (
        True,
        "rayfleet_full is set",
    )


def test_the_ml_stage_follows_the_ray_venvs_packages_not_the_ray_stages_other_items():
    """The ml stage reads the packages the ray stage installs into the Ray venv (ray:pip): a ray stage that changed
    its settings or units alone (a new health timer, a Ray restart) does not run it; new packages there do."""
    assert "ray:pip" in stages.STAGE_BY_NAME["ml"].upstream and stages.upstream_views() == ["ray:pip"]
    assert stages.upstream_views("ray") == ["ray:pip"] and stages.upstream_views("nccl") == []
    ml = dict(CLEAN, upstream={"gpu": None, "ray:pip": "p1"})
    drift = {"w1": _checked(ml=ml, ray=CLEAN)}
    assert stage_verdict("ml", "w1", drift, {"w1": {"ray": "r2", "ray:pip": "p1"}}, group_heads=["h"],
                         play_hosts=["w1"]) == (False, "nothing drifted")
    assert stage_verdict("ml", "w1", drift, {"w1": {"ray": "r2", "ray:pip": "p2"}}, group_heads=["h"],
                         play_hosts=["w1"]) == (True, "the ray stage's pip items changed")
    # where the ray stage may run, the ml stage may too (its gate decides once the ray stage recorded)
    ray_runs = {"w1": _checked(ml=ml, ray=dict(CLEAN, inputs_changed=True))}
    assert "ml" in stages.running_stages("w1", ray_runs, {"w1": {"ray:pip": "p1"}}, group_heads=["w1"],
                                         play_hosts=["w1"])


def test_an_upstream_record_that_changed_since_makes_the_stage_run():
    ray = dict(CLEAN, upstream={"nccl": "n1", "gpu": None, "checkpoint_store": "c1"})
    drift = {"w1": _checked(ray=ray)}
    now = {"w1": {"nccl": "n1", "checkpoint_store": "c1"}}
    assert stage_verdict("ray", "w1", drift, now, group_heads=[], play_hosts=["w1"])[0] is False
    now["w1"]["nccl"] = "n2"  # the nccl stage wrote a new record in this run
    assert stage_verdict("ray", "w1", drift, now, group_heads=[], play_hosts=["w1"]) == (
        True,
        "the nccl stage's record changed",
    )


def test_a_stage_runs_where_it_drifted_and_the_ray_stage_follows_the_head():
    drift = {
        "h": _checked(ssh_trust=CLEAN, ray=dict(CLEAN, inputs_changed=True)),
        "w1": _checked(ssh_trust=dict(CLEAN, drifted=["file:/x"]), ray=CLEAN),
        "w2": _checked(ssh_trust=CLEAN, ray=CLEAN),
    }
    hosts = ["h", "w1", "w2"]
    assert stage_verdict("ssh_trust", "w1", drift, {}, group_heads=["h"], play_hosts=hosts)[0] is True
    assert stage_verdict("ssh_trust", "w2", drift, {}, group_heads=["h"], play_hosts=hosts)[0] is False
    assert stage_verdict("ssh_trust", "h", drift, {}, group_heads=["h"], play_hosts=hosts)[0] is False
    assert stage_verdict("ray", "w2", drift, {}, group_heads=["h"], play_hosts=hosts) == (True, "it runs on the head h")
    # a worker's ray stage does not make the head's run
    drift["h"]["stages"]["ray"] = CLEAN
    drift["w1"]["stages"]["ray"] = dict(CLEAN, drifted=["unit:ray-worker.service"])
    assert stage_verdict("ray", "h", drift, {}, group_heads=["h"], play_hosts=hosts)[0] is False
    assert stage_verdict("ray", "w2", drift, {}, group_heads=["h"], play_hosts=hosts)[0] is False


class _Reads(dict):
    """A host -> value mapping that notes which hosts were read (a gate reading another host's variables makes
    Ansible compute all of them: the cost of a run grows with the square of its hosts if every gate reads all)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def __getitem__(self, host):
        self.read.add(host)
        return super().__getitem__(host)

    def get(self, host, default=None):
        if host not in self:
            return default
        return self[host]  # noted as read


def test_a_clean_host_scope_gate_reads_only_its_own_host_and_the_ray_gate_the_head():
    hosts = ["h"] + [f"w{i}" for i in range(50)]
    drift = _Reads({h: _checked(common=CLEAN, ray=CLEAN, ssh_trust=CLEAN) for h in hosts})
    records = _Reads({h: {} for h in hosts})
    assert stage_verdict("common", "w7", drift, records, group_heads=["h"], play_hosts=hosts)[0] is False
    assert drift.read | records.read == {"w7"}
    assert stage_verdict("ray", "w7", drift, records, group_heads=["h"], play_hosts=hosts)[0] is False
    assert drift.read | records.read == {"w7", "h"}


def test_an_unknown_stage_is_named():
    with pytest.raises(stages.StageError, match="unknown stage 'rays'"):
        stage_verdict("rays", "w1", {}, {}, group_heads=[], play_hosts=[])


def test_the_report_says_why_a_stage_would_run_and_leaves_out_those_that_would_not():
    checked = _checked(common=CLEAN, ray=dict(CLEAN, drifted=["unit:ray-worker.service (running true -> false)"]))
    assert stages.drifted_report(["w1"], {"w1": checked}) == {
        "w1": ["ray: drifted: unit:ray-worker.service (running true -> false)"]}
    # a node booted from a baked image, compared with the image's record: settled where the image's record holds
    booted = _checked(common=dict(CLEAN, from_image=True), ray=dict(CLEAN, recorded=False))
    assert stages.drifted_report(["w1"], {"w1": booted}) == {"w1": ["ray: no record of this stage"]}


# ---- inputs ----


def test_the_run_names_only_the_hosts_where_a_stage_drifted_and_why():
    drift = {"h": _checked(common=CLEAN, ray=CLEAN),
             "w1": _checked(common=dict(CLEAN, drifted=["file:/etc/sysctl.d/60-rayfleet.conf"]), ray=CLEAN),
             "w2": _checked(common=CLEAN, ray=dict(CLEAN, inputs_changed=True))}
    assert stages.drifted_report(["h", "w1", "w2", "w3"], drift) == {
        "w1": ["common: drifted: file:/etc/sysctl.d/60-rayfleet.conf"], "w2": ["ray: its inputs changed"],
        "w3": ["no drift check ran on this host"]}
    assert stages.drifted_report(["h"], drift) == {}


def test_inputs_digests_change_with_what_each_stage_reads():
    cluster = {"groups": {"ray_head": ["h"]}, "members": None}
    one = inputs_digests("code1", {"ray_num_cpus": 2}, {"kernel": "6.1"}, cluster)
    assert set(one) == {stage.name for stage in STAGES}
    assert inputs_digests("code1", {"ray_num_cpus": 2}, {"kernel": "6.1"}, cluster) == one
    assert inputs_digests("code2", {"ray_num_cpus": 2}, {"kernel": "6.1"}, cluster)["common"] != one["common"]
    assert inputs_digests("code1", {"ray_num_cpus": 3}, {"kernel": "6.1"}, cluster)["ray"] != one["ray"]
    assert inputs_digests("code1", {"ray_num_cpus": 2}, {"kernel": "6.2"}, cluster)["gpu"] != one["gpu"]
    # the stages that read the head follow a new head; a new worker is an input of the submit host's alone (it
    # reads the members whole)
    joined = inputs_digests("code1", {"ray_num_cpus": 2}, {"kernel": "6.1"},
                            {"groups": {"ray_head": ["h"], "ray_worker": ["w3"]}, "members": None})
    assert {name for name in one if joined[name] != one[name]} == {"submit_host"}
    other = {"groups": {"ray_head": ["h2"]}, "members": None}
    moved = inputs_digests("code1", {"ray_num_cpus": 2}, {"kernel": "6.1"}, other)
    assert moved["firewall"] != one["firewall"] and moved["common"] == one["common"]


def test_with_network_membership_ssh_trust_runs_again_each_week_to_renew_its_certificates():
    """A certificate is signed again only by a run of the SSH trust stage: with network membership the stage's inputs
    hold the week's number, so a run in a new week applies it (and renews what ends within
    ssh_trust_cert_renew_before) however long nothing else changed. Static membership has no certificate."""
    cluster = {"groups": {"ray_head": ["h"]}, "members": None}
    week = CERT_RENEWAL_PERIOD_S
    for membership, renewed in (("network", True), ("static", False)):

        def at(t, membership=membership):
            return inputs_digests("code", {}, {}, cluster, plan={"host": {}, "cluster": {"membership": membership}},
                                  now=t)

        monday = 100 * week + 3600
        assert at(monday) == at(monday + week - 7200), "the same week: no stage runs again"
        later = at(monday + week)
        assert (later["ssh_trust"] != at(monday)["ssh_trust"]) is renewed, membership
        assert {name for name in later if later[name] != at(monday)[name]} <= {"ssh_trust"}


def test_a_members_new_host_key_or_address_is_an_input_of_ssh_trust_but_its_docker0_is_none():
    """known_hosts comes from the cluster plan: a member whose host key changes (a reinstalled node) makes SSH trust
    run again on every host; docker0 coming or going on a member changes nothing."""
    facts = {"default_ipv4": {"address": "10.0.0.2"}, "interfaces": ["eth0"], "all_ipv4_addresses": ["10.0.0.2"],
             "ssh_host_key_ed25519_public": "AAAA-old"}

    def ssh_trust_digest(worker_facts):
        hostvars = {"h": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.1"}}},
                    "w": {"ansible_facts": worker_facts}}
        members = cluster_members(["h"], ["w"], hostvars.__getitem__)
        cluster = cluster_inputs({"ray_head": ["h"], "ray_worker": ["w"]}, members)
        return inputs_digests("code", {}, {}, cluster, plan={"host": {}, "cluster": members})["ssh_trust"]

    one = ssh_trust_digest(facts)
    docker = dict(facts, interfaces=["eth0", "docker0"], docker0={"ipv4": {"address": "172.17.0.1"}},
                  all_ipv4_addresses=["10.0.0.2", "172.17.0.1"])
    assert ssh_trust_digest(docker) == one
    assert ssh_trust_digest(dict(facts, ssh_host_key_ed25519_public="AAAA-new")) != one
    assert ssh_trust_digest(dict(facts, all_ipv4_addresses=["10.0.0.2", "192.168.7.2"])) != one


class _HostVars(dict):
    def raw_get(self, host):
        return self[host]


RAY_DEFAULTS = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())


def _plan(host, role, ip, variables, hostvars_of, workers=("w",), networks=None):
    """The cluster plan of host as the drift check's play registers it (the ray role's defaults, rendered as an
    inventory without a named cluster would; these variables over them)."""
    settings = {**RAY_DEFAULTS, "ray_node_role": role, "ray_node_ip": ip, "ray_temp_dir": "/tmp/ray",
                "ray_cluster_name": "", "ray_head_address": "10.0.0.1",
                "ray_auth_token_path": "/srv/rayfleet/credentials/ray_auth_token",
                "ray_dashboard_prometheus_url": "", "ray_dashboard_grafana_url": "",
                "ray_dashboard_grafana_iframe_url": "", "ray_container_image": "", **variables}
    groups = ["ray_head"] if role == "head" else ["ray_worker", "gpu"]
    return {"changed": False, "host": host_plan(host, settings, groups),
            "cluster": cluster_members(["h"], list(workers), hostvars_of, networks=networks)}


def _registered(plan):
    """The host's plan and the run's cluster plan as the ray role's plan tasks register them."""
    return {"__ray_plan_result": {"changed": False, "host": plan["host"]},
            "__ray_cluster_plan": {"changed": False, "cluster": plan["cluster"]}}


def _inputs(**variables):
    """host_inputs of a worker in group gpu with these variables, its cluster plan computed from them, on the
    collection as it is."""
    ray = {key: value for key, value in variables.items() if key.startswith("ray_")}
    ips = {"h": "10.0.0.1", "w": "10.0.0.2"}

    def hostvars_of(name):
        return {"ray_node_ip": ips[name], "ray_node_instances": ray.get("ray_node_instances") if name == "w" else None,
                "ansible_facts": {}}

    worker = {"group_names": ["ray_worker", "gpu"], **variables,
              **_registered(_plan("w", "worker", ips["w"], ray, hostvars_of))}
    hostvars = _HostVars(h={"group_names": ["ray_head"], **_registered(_plan("h", "head", ips["h"], {}, hostvars_of))},
                         w=worker)
    return stages.host_inputs(hostvars, "w", {"ray_head": ["h"], "ray_worker": ["w"], "gpu": ["w"]})


@pytest.mark.parametrize(
    ("variable", "value", "runs"),
    [
        # a Ray setting the cluster plan does not turn into anything another stage reads: the ray stage alone
        ("ray_preemption_watch", True, {"ray"}),
        ("ray_object_store_memory", 10**9, {"ray"}),
        ("ray_num_cpus", 3, {"ray"}),
        ("ray_version", "2.61.0", {"ray"}),
        # a port: the firewall names it, and it changes the ports of the host's nodes in the plan, which Prometheus's
        # targets read
        ("ray_gcs_port", 6390, {"ray", "firewall", "monitoring"}),
        # a Ray setting the ML libraries name (they install into Ray's venv)
        ("ray_venv_dir", "/opt/ray", {"ray", "ml", "nccl", "monitoring", "checkpoint_store"}),
        ("ray_limit_nofile", 4096, {"common", "ray"}),
        ("pytorch_version", "2.12.0", {"ml"}),
        # of a playbook that holds several stages (storage.yml, gpu.yml), each stage reads its own plays
        ("common_user", "ops", {"common", "gpu", "ssh_trust", "shared_storage"}),
        ("checkpoint_store_backend", "s3", {"checkpoint_store", "ray", "ml"}),
        ("nfs_server_port", 2050, {"firewall"}),
        ("monitoring_node_exporter_port", 9200, {"monitoring", "firewall"}),  # its port is opened
        # an inventory's own rayfleet_ variable (rayfleet_instance_id, rayfleet_availability_zone): an input of the
        # stages that name it only, so a node booted from an image keeps the image's record of the base stage
        ("rayfleet_instance_id", "i-0abc", set()),
        ("rayfleet_spot", True, {"ray"}),
        ("rayfleet_full", True, set()),  # how to run, not what to converge to
    ],
)
def test_a_variable_is_an_input_of_the_stages_that_read_it_only(variable, value, runs):
    before, after = _inputs(), _inputs(**{variable: value})
    assert {name for name in before if before[name] != after[name]} == runs


def test_each_stage_reads_its_roles_argument_specs_and_the_variables_it_declares():
    variables = stages.stage_variables(str(ROOT))
    assert set(variables) == {stage.name for stage in STAGES}
    for stage in STAGES:
        for role in stage.roles + stage.uses:
            assert stages.role_variables(str(ROOT), role) - stages.RUN_OPTIONS <= variables[stage.name], stage.name
        assert set(stage.reads) - stages.RUN_OPTIONS <= variables[stage.name], stage.name
        assert not variables[stage.name] & stages.RUN_OPTIONS, stage.name
    # a stage that reads the cluster plan reads the keys it declares of it (the plan, not every ray_ setting)
    assert "ray_num_cpus" not in variables["firewall"] and "ray_num_cpus" not in variables["monitoring"]
    # the Ray ports reach the firewall through the plan (host.ray_ports), their one home the ray role
    assert "ray_gcs_port" not in variables["firewall"]
    assert {"host.ray_ports", "host.any_role_units", "cluster.sources"} <= set(stages.STAGE_BY_NAME["firewall"].plan)
    # the ray stage reads its host's plan whole, and of the cluster nothing: no other member's address or key
    assert stages.STAGE_BY_NAME["ray"].plan == ("host",)
    assert "ray_limit_nofile" in variables["common"] and "ray_num_cpus" not in variables["common"]
    assert "ray_venv_dir" in variables["ml"] and "ray_preemption_watch" not in variables["ml"]
    # an inventory's per-host rayfleet_ variables are inputs only of the stages that declare them
    assert "rayfleet_spot" in variables["ray"] and "rayfleet_spot" not in variables["common"]
    assert not any("rayfleet_instance_id" in names for names in variables.values())


def _stage_texts(stage):
    """The text of each file of a stage's roles and the roles they use, and of its playbook."""
    texts = {}
    for role in stage.roles + stage.uses:
        for path in sorted((ROOT / "roles" / role).rglob("*")):
            text_file = path.is_file() and path.suffix in (".yml", ".j2", ".py", ".sh", ".service", ".cfg", ".conf")
            if text_file and path.relative_to(ROOT / "roles" / role).parts[0] != "meta":
                texts[str(path.relative_to(ROOT))] = path.read_text(errors="replace")
    texts[f"playbooks/{stage.playbook}"] = (ROOT / "playbooks" / stage.playbook).read_text()
    return texts


@pytest.mark.parametrize("stage", STAGES, ids=[stage.name for stage in STAGES])
def test_the_stage_table_declares_every_variable_and_plan_key_the_stages_files_name(stage):
    """The stage table is the one source of a stage's inputs, and a missed input is a change that never reaches the
    hosts: every variable of the collection's argument specs (and every inventory variable the collection documents)
    named in the stage's roles and playbook is declared an input of the stage (or a run option), each key of the
    cluster plan they name is in Stage.plan, and each role of the collection they include is one of its roles, one
    it uses, or the ray role's plan tasks."""
    known = set().union(*(stages.role_variables(str(ROOT), path.name) for path in (ROOT / "roles").iterdir()))
    known |= {"rayfleet_spot", "rayfleet_cluster", "rayfleet_instance_id", "rayfleet_instance_type",
              "rayfleet_availability_zone"}
    texts = _stage_texts(stage)
    # the other stages' plays of a playbook that holds several stages name their own variables
    own_plays = texts.pop(f"playbooks/{stage.playbook}")
    plays = [play for play in yaml.safe_load(own_plays)
             if _stage_of(play.get("pre_tasks"), "begin") == stage.name
             or (_stage_of(play.get("pre_tasks"), "begin") is None and "stage_gate" not in str(play))]
    texts["playbook"] = yaml.safe_dump(plays)
    named = set()
    plan_keys = set()
    included = set()
    for text in texts.values():
        named |= set(re.findall(r"(?<![\w.])\w+", text)) & known
        plan_keys |= {".".join(found) for found in re.findall(r"__ray_plan_result\.(host)\.(\w+)", text)}
        plan_keys |= {".".join(found) for found in re.findall(r"__ray_cluster_plan\.(cluster)\.(\w+)", text)}
        included |= set(re.findall(r"rayfleet\.cluster\.(\w+)", text)) & {p.name for p in (ROOT / "roles").iterdir()}
    variables = stages.stage_variables(str(ROOT))[stage.name]
    assert sorted(named - variables - stages.RUN_OPTIONS) == [], stage.name
    declared = set(stage.plan)
    run_only = {f"cluster.{key}" for key in stages.RUN_ONLY_PLAN_KEYS}
    undeclared = [key for key in plan_keys - run_only if key not in declared and key.split(".")[0] not in declared]
    assert sorted(undeclared) == [], stage.name
    assert sorted(included - set(stage.roles) - set(stage.uses) - {"ray"}) == [], stage.name


def test_what_a_stage_reads_of_the_cluster_plan_is_its_input_and_nothing_else():
    plan = {"host": {"ray_ports": [], "any_role_units": ["ray-head.service", "ray-worker.service"],
                     "instances": [{"temp_dir": "/tmp/ray"}]},
            "cluster": {"sources": ["10.0.0.1", "10.0.0.2"], "members": ["h", "w"], "left_out": [],
                        "awaited_nodes": {"10.0.0.2": "w"}}}
    keys = frozenset({"host.ray_ports", "cluster.sources"})
    one = stages.plan_inputs(plan, keys)
    assert one == {"host.ray_ports": [], "cluster.sources": ["10.0.0.1", "10.0.0.2"]}
    assert stages.plan_inputs({**plan, "host": {**plan["host"], "instances": []}}, keys) == one
    assert stages.plan_inputs({**plan, "host": {**plan["host"], "ray_ports": [6390]}}, keys) != one
    # the hosts a run goes on without, and the nodes it waits for, are the run's, not the cluster's configuration
    down = {**plan, "cluster": {**plan["cluster"], "left_out": ["w"], "awaited_nodes": {}}}
    assert stages.plan_inputs(down, {"cluster"}) == stages.plan_inputs(plan, {"cluster"})
    assert stages.plan_inputs(down, {"cluster.left_out"}) == {"cluster.left_out": None}
    # a host outside the cluster reads the head's plan: its cluster, not the head's own nodes
    assert stages.plan_inputs(plan, {"host", "cluster"}, own=False) == {"host": None, "cluster": {
        "sources": ["10.0.0.1", "10.0.0.2"], "members": ["h", "w"]}}
    assert stages.plan_inputs(plan, frozenset()) is None
    # a section read whole
    assert stages.plan_inputs(plan, {"host"}) == {"host": plan["host"]}
    assert stages.plan_inputs(plan, {"host"}, own=False) == {"host": None}
    assert stages.plan_inputs(None, keys) == {"host.ray_ports": None, "cluster.sources": None}


def test_a_gpu_members_exporter_port_is_an_input_of_the_monitoring_host_only():
    """The head (the monitoring host, outside group gpu) writes the GPU workers' DCGM targets: a new DCGM port in
    the gpu group's variables runs the monitoring stage there, through the cluster plan; no other stage that reads
    the cluster runs for it."""
    def head_inputs(worker_monitoring):
        ips = {"h": "10.0.0.1", "w": "10.0.0.2"}
        cluster = {"members": ["h", "w"], "ips": ips, "sources": ["10.0.0.1", "10.0.0.2"],
                   "scrape": {"members": ["h", "w"], "ips": ips, "monitoring": {"h": {}, "w": worker_monitoring},
                              "gpu_hosts": ["w"]},
                   "awaited_nodes": {}, "left_out": []}
        plan = {"host": {"node_ip": "10.0.0.1", "instances": [{"temp_dir": "/tmp/ray"}]}, "cluster": cluster}
        hostvars = _HostVars(h={"group_names": ["ray_head"], **_registered(plan)},
                             w={"group_names": ["ray_worker", "gpu"], **_registered(plan)})
        return stages.host_inputs(hostvars, "h", {"ray_head": ["h"], "ray_worker": ["w"], "gpu": ["w"]})

    before, after = head_inputs({}), head_inputs({"monitoring_dcgm_exporter_port": 9500})
    assert {name for name in before if before[name] != after[name]} == {"monitoring"}


def test_the_heads_cluster_name_is_an_input_of_the_submit_host():
    """A submit host reads the head's settings file, named after the head's ray_cluster_name: a name set on the head
    alone reaches the submit host's stage through the cluster plan the head computed."""
    ips = {"h": "10.0.0.1", "w": "10.0.0.2"}

    def submit_inputs(head_name):
        def hostvars_of(name):
            return {"ray_node_ip": ips[name], "ansible_facts": {},
                    **({"ray_cluster_name": head_name} if name == "h" else {})}

        plan = _plan("h", "head", ips["h"], {"ray_cluster_name": head_name}, hostvars_of)
        assert plan["cluster"]["cluster_name"] == head_name
        hostvars = _HostVars(h={"group_names": ["ray_head"], "ray_cluster_name": head_name, **_registered(plan)},
                             s={"group_names": ["ray_submit"]})
        return stages.host_inputs(hostvars, "s", {"ray_head": ["h"], "ray_worker": ["w"], "ray_submit": ["s"]})

    before, after = submit_inputs(""), submit_inputs("teamb")
    assert set(before) == {"submit_host"}
    assert before["submit_host"] != after["submit_host"]


def test_a_reinstalled_members_host_key_runs_ssh_trust_and_not_ray_the_firewall_or_monitoring():
    """A member reinstalled with the same name and address has a new SSH host key: on the other hosts, SSH trust
    runs again (known_hosts names it); Ray, the firewall and monitoring, which read the plan's addresses, members
    and expected nodes alone, do not. A member's new address runs the firewall (its sources), SSH trust and
    Prometheus's targets, not Ray: its settings name no other member."""
    def head_inputs(worker_facts):
        facts = {"h": {"ssh_host_key_ed25519_public": "AAAA-head"}, "w": worker_facts}

        def hostvars_of(name):
            return {"ray_node_ip": ips[name], "ansible_facts": facts[name]}

        plan = _plan("h", "head", "10.0.0.1", {}, hostvars_of)
        hostvars = _HostVars(h={"group_names": ["ray_head"], **_registered(plan)},
                             w={"group_names": ["ray_worker", "gpu"], **_registered(plan)})
        return stages.host_inputs(hostvars, "h", {"ray_head": ["h"], "ray_worker": ["w"], "gpu": ["w"]})

    ips = {"h": "10.0.0.1", "w": "10.0.0.2"}
    before = head_inputs({"ssh_host_key_ed25519_public": "AAAA-old"})
    after = head_inputs({"ssh_host_key_ed25519_public": "AAAA-new"})
    assert {name for name in before if before[name] != after[name]} == {"ssh_trust"}
    ips["w"] = "10.0.0.3"
    moved = head_inputs({"ssh_host_key_ed25519_public": "AAAA-old"})
    assert {"firewall", "ssh_trust", "monitoring"} <= {name for name in before if before[name] != moved[name]}
    assert before["ray"] == moved["ray"], "the head's Ray reads no other member's address"


def test_the_controller_files_a_stage_installs_are_its_inputs(tmp_path):
    """The cluster key pair, its certificate and the certificate authority live on the controller (role defaults
    under the inventory's credentials/, rendered as the role renders them): a key made anew or restored from a
    backup is an input of SSH trust on every host, and of no other stage."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    credentials = tmp_path / "credentials"
    credentials.mkdir()
    render = stages.renderer(Templar(loader=DataLoader(), variables={"inventory_dir": str(tmp_path)}))
    hostvars = _HostVars(h={}, w={"group_names": ["ray_worker"], "inventory_dir": str(tmp_path)})
    groups = {"ray_head": ["h"], "ray_worker": ["w"]}

    def inputs():
        return stages.host_inputs(hostvars, "w", groups, template=render)

    before = inputs()
    changed = []
    for name in ("ssh_trust_ed25519.pub", "ssh_trust_ed25519-cert.pub", "ssh_trust_ca_ed25519.pub"):
        (credentials / name).write_text("ssh-ed25519 AAAA-one\n")
        after = inputs()
        changed.append({stage for stage in before if before[stage] != after[stage]})
        before = after
    assert changed == [{"ssh_trust"}] * 3
    (credentials / "ssh_trust_ed25519.pub").write_text("ssh-ed25519 AAAA-restored\n")
    assert inputs()["ssh_trust"] != before["ssh_trust"]
    before = inputs()
    # the private key is no input (its public half is), and an inventory's own path is followed
    (credentials / "ssh_trust_ed25519").write_text("private")
    assert inputs() == before
    elsewhere = tmp_path / "keys"
    elsewhere.mkdir()
    hostvars["w"]["ssh_trust_key_path"] = str(elsewhere / "cluster")
    moved = inputs()
    assert moved["ssh_trust"] != before["ssh_trust"]
    (elsewhere / "cluster.pub").write_text("ssh-ed25519 AAAA-two\n")
    assert inputs()["ssh_trust"] != moved["ssh_trust"]
    # every declared file's default renders with the inventory's directory alone
    for stage in STAGES:
        for variable, _suffix in stage.files:
            default = stages.role_default(str(ROOT), stage, variable)
            assert render(default).startswith(str(tmp_path)), (stage.name, variable)


def test_a_new_address_is_an_input_a_new_mac_address_is_not():
    """A container or VM may boot with a new MAC address; no stage reads it, so no stage runs again for it."""
    cluster = {"groups": {"ray_head": ["h"]}, "members": None}
    ipv4 = {"address": "10.0.0.5", "interface": "eth0", "macaddress": "12:1d:1a:a0:fd:a6", "prefix": "24"}
    one = inputs_digests("code", {}, {"kernel": "6.1", "default_ipv4": ipv4}, cluster)
    booted = inputs_digests("code", {}, {"kernel": "6.1", "default_ipv4": dict(ipv4, macaddress="ae:00:11:22:33:44")},
                            cluster)
    assert booted == one
    moved = inputs_digests("code", {}, {"kernel": "6.1", "default_ipv4": dict(ipv4, address="10.0.0.6")}, cluster)
    assert moved["ray"] != one["ray"] and moved["common"] == one["common"]


def test_a_new_address_runs_only_the_stages_that_read_addresses():
    """A node whose default address changes (a new DHCP lease; a node booted from a baked image) runs again the stages
    that read an address other than through the cluster plan, or the cluster's members whole: with its ray_node_ip
    pinned in the inventory (the plan unchanged), not the firewall and monitoring, which read the plan's addresses,
    nor the base, GPU, NCCL, ML and checkpoint store stages; SSH trust does (a host's certificate names its
    addresses, from its facts); a new kernel runs them all."""
    facts = {"kernel": "6.1", "default_ipv4": {"address": "10.0.0.5", "interface": "eth0"}}
    before = _inputs(ansible_facts=facts)
    moved = _inputs(ansible_facts=dict(facts, default_ipv4={"address": "10.0.0.6", "interface": "eth0"}))
    assert {name for name in before if before[name] != moved[name]} == {"shared_storage", "ray", "ssh_trust"}
    upgraded = _inputs(ansible_facts=dict(facts, kernel="6.2"))
    assert {name for name in before if before[name] != upgraded[name]} == set(before)


def test_a_run_option_is_no_input_and_only_declared_variables_are():
    variables = {"ray": frozenset({"ray_version", "ray_wait_timeout"})}
    ray = (stages.STAGE_BY_NAME["ray"],)
    cluster = {"groups": {"ray_head": ["h"]}, "members": None}

    def ray_digest(host_vars):
        return inputs_digests("code", host_vars, {}, cluster, ray, variables=variables)["ray"]

    one = ray_digest({"ray_version": "2.60.0"})
    assert ray_digest({"ray_version": "2.60.0", "ray_wait_timeout": 600, "ansible_host": "x"}) == one
    assert ray_digest({"ray_version": "2.61.0"}) != one


def test_the_code_digest_follows_the_collections_code(tmp_path):
    for name in ("roles/r/tasks/main.yml", "plugins/modules/m.py", "site.yml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("a")
    first = stages.code_digest(tmp_path)
    (tmp_path / "plugins/modules/__pycache__").mkdir()
    (tmp_path / "plugins/modules/__pycache__/m.cpython-311.pyc").write_text("x")
    (tmp_path / "roles/r/README.md").write_text("documentation")
    assert stages.code_digest(tmp_path) == first
    (tmp_path / "roles/r/tasks/main.yml").write_text("b")
    assert stages.code_digest(tmp_path) != first


def test_the_spool_hands_a_hosts_items_from_the_callback_to_the_record(tmp_path, monkeypatch):
    monkeypatch.delenv(stages.SPOOL_ENV, raising=False)
    assert spooled_items("w1", "common") is None  # no callback: no record
    spool_write(str(tmp_path), "w1", {"common": [{"kind": "file", "path": "/a"}]})
    assert spooled_items("w1", "common", spool=str(tmp_path)) == [{"kind": "file", "path": "/a"}]
    assert spooled_items("w1", "ray", spool=str(tmp_path)) == []
    assert spooled_items("w2", "common", spool=str(tmp_path)) == []
    assert spooled_items("w1", "common", spool=str(tmp_path / "gone")) is None
    assert stages.spooled_changed("w1", "common", spool=str(tmp_path)) is False
    spool_write(str(tmp_path), "w1", {"common": []}, changed={"common"})
    assert stages.spooled_changed("w1", "common", spool=str(tmp_path)) is True
    assert stages.spooled_changed("w1", "ray", spool=str(tmp_path)) is False
    assert stages.spooled_changed("w2", "ray", spool=str(tmp_path)) is False
    assert stages.spooled_changed("w1", "common", spool=str(tmp_path / "gone")) is None
    spool_write(str(tmp_path), "w1", {"common": None})  # a result the callback could not read
    assert spooled_items("w1", "common", spool=str(tmp_path)) is None


def test_a_run_limited_by_tags_writes_no_record():
    assert stages.partial_run(["all"], []) is None
    assert stages.partial_run(["all"], ["molecule-notest", "notest"]) is None
    assert stages.partial_run(["ray"], []) == "--tags ray"
    assert stages.partial_run(["all"], ["nccl", "notest"]) == "--skip-tags nccl"


def test_the_validate_plays_check_only_hosts_where_a_stage_runs():
    drift = {
        "h": _checked(common=CLEAN, ray=CLEAN),
        "w1": _checked(common=dict(CLEAN, drifted=["file:/etc/a"]), ray=CLEAN),
        "w2": _checked(common=CLEAN, ray=CLEAN),
    }
    hosts = ["h", "w1", "w2"]
    verdict = stages.VALIDATE
    assert stage_verdict(verdict, "w1", drift, {}, group_heads=["h"], play_hosts=hosts) == (
        True, "stages that may run here: common")
    assert stage_verdict(verdict, "w2", drift, {}, group_heads=["h"], play_hosts=hosts) == (
        False, "no stage runs here, so nothing changes")
    # the head's ray stage brings every node's: every node is checked
    drift["h"]["stages"]["ray"] = dict(CLEAN, inputs_changed=True)
    assert stage_verdict(verdict, "w2", drift, {}, group_heads=["h"], play_hosts=hosts)[0] is True
    assert stage_verdict(verdict, "w2", {}, {}, group_heads=["h"], play_hosts=hosts)[0] is True
    assert stage_verdict(verdict, "w2", drift, {}, group_heads=["h"], play_hosts=hosts, full=True)[0] is True


def _records(drift):
    """The records as the drift check read them, per host (what a gate sees before any stage ran)."""
    return {host: dict(checked.get("records") or {}) for host, checked in drift.items()}


def test_a_host_is_settled_only_when_no_earlier_stage_can_bring_a_stage_to_it():
    """A stage the gates would run later in the run counts at validate: the head's gpu stage may change its record,
    which brings the head's ray stage, every node's ray stage with it, and their ml stages after that."""
    member = ("common", "nccl", "firewall", "ssh_trust", "shared_storage", "checkpoint_store", "ray", "ml",
              "monitoring")

    def clean(names):
        return {name: dict(CLEAN, upstream={up: "d0" for up in stages.STAGE_BY_NAME[name].upstream if up in names})
                for name in names}

    def cluster():
        return {"h": _checked(**clean(("gpu", *member))), "w1": _checked(**clean(member)),
                "w2": _checked(**clean(member))}

    hosts, heads = ["h", "w1", "w2"], ["h"]
    drift = cluster()

    def running(host, play_hosts=None):
        return stages.running_stages(host, drift, _records(drift), group_heads=heads,
                                     play_hosts=hosts if play_hosts is None else play_hosts)

    assert [running(host) for host in hosts] == [[], [], []]
    drift["h"]["stages"]["gpu"] = dict(CLEAN, drifted=["package:nvidia-driver"])
    assert running("h") == ["gpu", "nccl", "ray", "ml"]
    assert running("w2") == ["ray", "ml"]
    drift = cluster()
    drift["w1"]["stages"]["ssh_trust"] = dict(CLEAN, inputs_changed=True)
    assert running("w1") == ["ssh_trust"]
    assert running("w2") == []
    drift = cluster()
    del drift["w1"]  # not checked: every stage runs there, and the others stay settled
    assert running("w2") == []
    drift = cluster()
    del drift["h"]  # the head not checked: the ray stage runs there, so on every node, and the ml stage after it
    assert running("w2") == ["ray", "ml"]
    drift = cluster()
    drift["w1"]["stages"]["checkpoint_store"] = dict(CLEAN, drifted=["file:/etc/rayfleet/store.json"])
    assert running("w1") == ["checkpoint_store", "ray", "ml"]
    assert running("h") == []


@pytest.mark.parametrize("seed", range(200))
def test_every_stage_a_gate_runs_was_counted_at_validate(seed):
    """Random drift on a head and two workers, then the run played stage by stage: each gate decides with the
    records the earlier stages wrote (a stage that ran may or may not change its record). Every stage a gate runs
    on a host must be among the stages validate counted for it, and a settled host must see no gate run."""
    rng = random.Random(seed)
    hosts, heads = ["h", "w1", "w2"], ["h"]
    groups = {"h": ("ray_head", "gpu"), "w1": ("ray_worker",), "w2": ("ray_worker", "gpu")}
    drift = {}
    for host in hosts:
        state = {}
        for item in stages.stages_of(groups[host]):
            roll = rng.random()
            mine = {each.name for each in stages.stages_of(groups[host])}
            state[item.name] = dict(CLEAN, upstream={up: "d0" for up in item.upstream if up in mine},
                                    drifted=["file:/x"] if roll < 0.08 else [],
                                    inputs_changed=0.08 <= roll < 0.12,
                                    recorded=roll < 0.97)
        drift[host] = _checked(**state)
    if rng.random() < 0.1:
        del drift[rng.choice(hosts)]
    records_now = _records(drift)
    counted = {host: stages.running_stages(host, drift, records_now, group_heads=heads, play_hosts=hosts)
               for host in hosts}
    selected = stages.stage_groups(drift, records_now, group_heads=heads, host_groups=groups)
    records_now = {host: dict(records) for host, records in records_now.items()}
    for item in STAGES:
        targets = [host for host in hosts if set(item.groups) & set(groups[host])]
        ran = [host for host in targets
               if stage_verdict(item.name, host, drift, records_now, group_heads=heads, play_hosts=targets)[0]]
        for host in ran:
            assert counted[host] is None or item.name in counted[host], (item.name, host, counted[host])
            assert stages.GROUP_PREFIX + item.name in selected[host], (item.name, host, selected[host])
            if rng.random() < 0.5:
                records_now.setdefault(host, {})[item.name] = "changed"


def test_the_selection_puts_each_host_in_the_groups_of_the_stages_that_may_run_on_it():
    member = ("common", "nccl", "firewall", "ssh_trust", "shared_storage", "checkpoint_store", "ray", "ml",
              "monitoring")
    groups = {"h": ["ray_head", "gpu"], "w1": ["ray_worker"], "w2": ["ray_worker"], "s": ["ray_submit"]}

    def clean(names):
        return {name: dict(CLEAN, upstream={up: "d0" for up in stages.STAGE_BY_NAME[name].upstream if up in names})
                for name in names}

    drift = {"h": _checked(**clean(("common", "gpu", *member[1:]))), "w1": _checked(**clean(member)),
             "w2": _checked(**clean(member)), "s": _checked(**clean(("submit_host",)))}

    def select(full=False):
        return stages.stage_groups(drift, _records(drift), group_heads=["h"], host_groups=groups, full=full)

    settled = [stages.SELECTED_GROUP]
    assert select() == {host: settled for host in groups}
    drift["w1"]["stages"]["firewall"] = dict(CLEAN, drifted=["nft_table:inet rayfleet"])
    assert select()["w1"] == ["rayfleet_stage_firewall", "rayfleet_stage_validate", stages.SELECTED_GROUP]
    assert select()["w2"] == select()["h"] == select()["s"] == settled
    # the head's gpu stage may change its record: the ray stage everywhere, the ml stage after it
    drift["h"]["stages"]["gpu"] = dict(CLEAN, drifted=["package:nvidia-driver"])
    assert select()["w2"] == ["rayfleet_stage_ray", "rayfleet_stage_ml", "rayfleet_stage_validate",
                              stages.SELECTED_GROUP]
    assert select()["h"][:4] == ["rayfleet_stage_gpu", "rayfleet_stage_nccl", "rayfleet_stage_ray", "rayfleet_stage_ml"]
    # a submit host is no Ray node: its own stage's group only
    drift["s"]["stages"]["submit_host"] = dict(CLEAN, inputs_changed=True)
    assert select()["s"] == ["rayfleet_stage_submit_host", stages.SELECTED_GROUP]
    # rayfleet_full, or a host without a drift check: every stage of its groups
    assert select(full=True)["w1"] == [stages.GROUP_PREFIX + name for name in member] + [
        "rayfleet_stage_validate", stages.SELECTED_GROUP]
    del drift["w2"]
    assert select()["w2"] == select(full=True)["w2"]


def test_a_host_is_compared_with_the_stages_of_its_groups():
    assert [s.name for s in stages.stages_of(["ray_worker"])] == [
        "common", "nccl", "firewall", "ssh_trust", "shared_storage", "checkpoint_store", "ray", "ml", "monitoring"]
    assert [s.name for s in stages.stages_of(["ray_head", "nfs_server", "gpu"])][:3] == ["common", "gpu", "nccl"]
    assert [s.name for s in stages.stages_of(["ray_submit"])] == ["submit_host"]


def test_only_the_roles_of_the_stages_that_run_are_checked():
    drift = {"w1": _checked(common=dict(CLEAN, drifted=["file:/etc/a"]), ml=dict(CLEAN, inputs_changed=True),
                            ray=CLEAN)}
    running = stages.running_stages("w1", drift, {}, group_heads=[], play_hosts=["w1"])
    assert running == ["common", "ml"]
    assert stages.roles_to_check(running) == ["apex", "checkpoint_store", "common", "nccl", "pytorch"]
    assert stages.running_stages("w2", drift, {}, group_heads=[], play_hosts=["w2"]) is None
    assert stages.roles_to_check(None) is None


@pytest.fixture(scope="module")
def collection_copy(tmp_path_factory):
    """A copy of the collection's code, to edit."""
    copy = tmp_path_factory.mktemp("collection")
    for path in stages.code_files(str(ROOT)):
        target = copy / os.path.relpath(path, ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return copy


ALL = {s.name for s in stages.STAGES}


@pytest.mark.parametrize(
    "edited, expect",
    [
        ("roles/firewall/templates/firewall.nft.j2", {"firewall"}),
        ("roles/pytorch/defaults/main.yml", {"ml"}),
        ("roles/monitoring/tasks/main.yml", {"monitoring"}),
        ("roles/common/tasks/main.yml", {"common"}),
        # a role a stage uses is its code: the ray stage runs the logs role's tasks
        ("roles/logs/tasks/main.yml", {"ray"}),
        ("roles/nvidia_driver/tasks/main.yml", {"gpu", "nccl", "ml", "monitoring"}),
        # the cluster plan's code is the ray stage's; the plan it gives is an input of the stages that read it
        ("roles/ray/tasks/plan.yml", {"ray"}),
        ("roles/ray/templates/ray-node.service.j2", {"ray"}),
        # the plugins and the node library are every stage's
        ("plugins/plugin_utils/firewall_plan.py", ALL),
        ("library_py/rayfleet/launch.py", ALL),
        # the drift check, the gates and the records apply nothing
        ("plugins/plugin_utils/stages.py", set()),
        ("plugins/module_utils/stage_state.py", set()),
        ("playbooks/firewall.yml", {"firewall"}),
        ("playbooks/storage.yml", {"nfs_server", "shared_storage", "checkpoint_store"}),
        ("playbooks/preflight.yml", set()),
    ],
)
def test_an_edit_changes_the_code_digest_of_the_stages_whose_code_it_is(collection_copy, edited, expect):
    root = str(collection_copy)
    before = stages.stage_code(root)
    path = collection_copy / edited
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# edited\n")
        after = stages.stage_code(root)
    finally:
        path.write_bytes(original)
    # the submit_host role installs the whole collection: every edit is its code
    assert {name for name in after if after[name] != before[name]} == expect | {"submit_host"}


def test_a_host_that_joins_a_cluster_with_network_membership_changes_no_stage_of_the_other_hosts():
    """Network membership: the firewall's sources are the networks, SSH trust is by certificate, Ray names no other
    member, the monitoring host discovers the exporters. A worker that joins or leaves changes no stage's inputs on
    the head or an old worker; with static membership the firewall, SSH trust and monitoring change everywhere."""
    ips = {"h": "10.0.0.1", "w1": "10.0.0.2", "w2": "10.0.0.3", "w3": "10.0.0.4"}
    network = {"ray_membership": "network", "ray_cluster_networks": ["10.0.0.0/24"], "ray_auth_mode": "token"}

    def inputs(host, workers, variables):
        def hostvars_of(name):
            return {"ray_node_ip": ips[name], "ansible_facts": {"ssh_host_key_ed25519_public": "AAAA-" + name}}

        networks = variables.get("ray_cluster_networks")
        groups = {"ray_head": ["h"], "ray_worker": list(workers), "gpu": list(workers), "nfs_server": ["h"]}
        hostvars = _HostVars()
        for name in ["h", *workers]:
            role = "head" if name == "h" else "worker"
            plan = _plan(name, role, ips[name], variables, hostvars_of, workers, networks)
            hostvars[name] = {"group_names": ["ray_head", "nfs_server"] if name == "h" else ["ray_worker", "gpu"],
                              **_registered(plan), **variables}
        return stages.host_inputs(hostvars, host, groups)

    for host in ("h", "w1"):
        before = inputs(host, ["w1", "w2"], network)
        joined = inputs(host, ["w1", "w2", "w3"], network)
        assert {name for name in before if before[name] != joined[name]} == set(), host
        left = inputs(host, ["w1"], network)
        assert {name for name in before if before[name] != left[name]} == set(), host
        static = inputs(host, ["w1", "w2"], {})
        static_joined = inputs(host, ["w1", "w2", "w3"], {})
        assert {"firewall", "ssh_trust", "monitoring"} | ({"nfs_server"} if host == "h" else set()) <= {
            name for name in static if static[name] != static_joined[name]}, host


def test_a_hosts_inventory_groups_outside_the_contract_are_no_stage_input():
    """The stages that read the head and the host's own groups read the contract groups: a group of the inventory's
    own (a rack, a zone, the sandbox's) added to a host reruns nothing there; a contract group does."""
    cluster = {"groups": {"ray_head": ["h"], "ray_worker": ["w1"]}, "members": {}}

    code, variables = stages.collection_code(stages.collection_root())

    def digests(own):
        return inputs_digests(code, {}, {}, cluster, variables=variables, own_groups=own)

    plain = digests(["ray_worker"])
    assert digests(["ray_worker", "rack_a", "sandbox"]) == plain
    with_gpu = digests(["ray_worker", "gpu"])
    assert {name for name in plain if plain[name] != with_gpu[name]} == {
        s.name for s in stages.STAGES if s.cluster_inputs == stages.HEAD}


def test_a_run_digests_the_cluster_once_and_gets_what_each_host_alone_gets():
    """The selection compares every host's inputs in one task, with one memo for the run: the cluster section of the
    plan, the same for every host, is read and digested once, and each host's digests are those its own stage
    record computes without one. A member's new address still changes what the cluster-reading stages take."""
    workers = [f"w{i}" for i in range(4)]

    def hostvars_for(ips):
        def hostvars_of(name):
            return {"ray_node_ip": ips[name], "ray_node_instances": None,
                    "ansible_facts": {"ssh_host_key_ed25519_public": "AAAA" + name, "hostname": name}}

        plan = _plan("w0", "worker", ips["w0"], {}, hostvars_of, workers=workers)
        hostvars = _HostVars({w: {"group_names": ["ray_worker", "gpu"], **_registered(plan)} for w in workers})
        hostvars["h"] = {"group_names": ["ray_head"], **_registered(plan)}
        return hostvars

    ips = {"h": "10.0.0.1", **{w: f"10.0.0.{i + 2}" for i, w in enumerate(workers)}}
    groups = {"ray_head": ["h"], "ray_worker": workers, "gpu": workers}
    hostvars = hostvars_for(ips)
    memo = {}
    together = {host: stages.host_inputs(hostvars, host, groups, memo=memo) for host in ["h", *workers]}
    assert together == {host: stages.host_inputs(hostvars, host, groups) for host in ["h", *workers]}
    assert "cluster" in memo and any(key.startswith("plan.cluster") for key in memo)
    moved = stages.host_inputs(hostvars_for(dict(ips, w3="10.0.0.99")), "w0", groups, memo={})
    readers = {item.name for item in STAGES if item.cluster_inputs == stages.MEMBERS
               or any(key.split(".", 1)[0] == "cluster" and key.split(".", 1)[-1] not in stages.RUN_ONLY_PLAN_KEYS
                      for key in item.plan or ())} & set(moved)
    assert readers and all(moved[name] != together["w0"][name] for name in readers), readers
    assert moved["common"] == together["w0"]["common"]
