# SPDX-License-Identifier: GPL-3.0-or-later
"""The stage_items callback: a stage's items between its gate and its record, per host, read from results as
ansible-core 2.19 shapes them and as earlier releases do; a result it cannot read leaves the stage unrecorded."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from ansible_collections.rayfleet.cluster.plugins.callback import stage_items
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.stages import SPOOL_ENV, spooled_items


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
