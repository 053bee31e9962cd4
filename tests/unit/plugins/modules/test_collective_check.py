# SPDX-License-Identifier: GPL-3.0-or-later
"""collective_check: parameters become rayfleet.collective options; the engine's verdict becomes the result."""

import json

import pytest
import yaml
from ansible.module_utils import basic
from ansible_collections.rayfleet.cluster.plugins.modules import collective_check
from conftest import run_module as run


def _fake_engine(monkeypatch, result, rc=0, out="# table", seen=None):
    def run_command(self, argv, **kwargs):
        options_file = argv[argv.index("--options-file") + 1]
        if seen is not None:
            with open(options_file) as fh:
                seen.update(json.load(fh))
        with open(argv[argv.index("--json-out") + 1], "w") as fh:
            json.dump(result, fh)
        return rc, out, "ray driver noise"

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)


def test_parameters_reach_the_engine(monkeypatch):
    seen = {}
    _fake_engine(monkeypatch, {"ok": True, "problems": [], "peak_busbw_gbps": 1.0}, seen=seen)
    out = run(collective_check, {"address": "10.0.0.10:6379", "max_bytes": "16M", "min_busbw_gbps": 0.5,
                                 "hosts": {"10.0.0.10": "head"}, "env": {"NCCL_SOCKET_IFNAME": "eth0"},
                                 "timeout": 120})
    assert not out.failed and out.result["table"] == "# table" and not out.result["changed"]
    assert seen["max_bytes"] == 16 << 20 and seen["min_bytes"] == 8 and seen["timeout_s"] == 120
    assert seen["hosts"] == {"10.0.0.10": "head"} and seen["env"] == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert seen["pair_ring_max"] == 32 and seen["pair_concurrent"] is True


def test_failed_check_fails_with_the_problems(monkeypatch):
    _fake_engine(monkeypatch, {"ok": False, "problems": ["slow node(s): w2"], "pairs": []}, rc=1)
    out = run(collective_check, {})
    assert out.failed and out.result["msg"] == "collective check failed: slow node(s): w2"
    assert out.result["problems"] == ["slow node(s): w2"]


def test_engine_error_is_reported(monkeypatch):
    _fake_engine(monkeypatch, {"ok": False, "error": "could not place 3 bundle(s)"}, rc=2)
    out = run(collective_check, {})
    assert out.failed and "could not run: could not place 3 bundle(s)" in out.result["msg"]


def test_bad_size_names_the_parameter():
    out = run(collective_check, {"max_bytes": "lots"})
    assert out.failed and "max_bytes" in out.result["msg"] and "expected bytes like" in out.result["msg"]


def test_nodes_named_by_ray_node_name_and_the_localization_options_reach_the_engine(monkeypatch):
    seen = {}
    _fake_engine(monkeypatch, {"ok": True, "problems": []}, seen=seen)
    out = run(collective_check, {"hosts": {"10.0.0.11/a": "gpu1/a", "10.0.0.11/b": "gpu1/b"},
                                 "pair_ring_max": 16, "pair_concurrent": False})
    assert not out.failed
    assert seen["hosts"] == {"10.0.0.11/a": "gpu1/a", "10.0.0.11/b": "gpu1/b"}
    assert seen["pair_ring_max"] == 16 and seen["pair_concurrent"] is False
    bad = run(collective_check, {"pair_ring_max": 2})
    assert bad.failed and "pair_ring_max: must be 3 or more" in bad.result["msg"]


def test_documentation_parses_and_documents_every_option(monkeypatch):
    doc = yaml.safe_load(collective_check.DOCUMENTATION)
    assert yaml.safe_load(collective_check.RETURN)["pair_findings"]["type"] == "dict"
    assert yaml.safe_load(collective_check.EXAMPLES)
    spec = {}

    def capture(self, argument_spec, **kwargs):
        spec.update(argument_spec)
        raise SystemExit

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    with pytest.raises(SystemExit):
        collective_check.build_module()
    assert sorted(doc["options"]) == sorted(spec)
    for name, opt in spec.items():
        assert doc["options"][name].get("default") == opt.get("default"), name
