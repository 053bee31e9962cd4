# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.targets: the exporters of a cluster's alive Ray nodes, from its GCS node table, in Prometheus's file_sd
format."""

from __future__ import annotations

import json

from rayfleet import targets


def node(ip, state="ALIVE", start=1, **resources):
    return {"node_ip": ip, "state": state, "start_time_ms": start, "resources_total": {"CPU": 4.0, **resources}}


def test_every_alive_node_is_a_node_exporter_target_and_nvidia_nodes_dcgm_targets():
    nodes = [node("10.0.0.1"), node("10.0.0.2", GPU=8.0, **{"accelerator_type:H100": 1.0}),
             node("10.0.0.3", state="DEAD"), node("10.0.0.4", GPU=8.0, **{"accelerator_type:AMD-Instinct-MI300X": 1}),
             node("fd00::5", GPU=1.0)]
    got = targets.targets(nodes, 9100, 9400, "train")
    assert [g["targets"] for g in got["node.json"]] == [["10.0.0.1:9100"], ["10.0.0.2:9100"], ["10.0.0.4:9100"],
                                                        ["[fd00::5]:9100"]]
    assert [g["targets"] for g in got["dcgm.json"]] == [["10.0.0.2:9400"], ["[fd00::5]:9400"]]
    assert got["node.json"][0]["labels"] == {"rayfleet_cluster": "train", "ray_node_ip": "10.0.0.1"}


def test_a_hosts_several_node_instances_are_one_target_and_an_exporter_off_has_none():
    nodes = [node("10.0.0.2", start=1), node("10.0.0.2", start=2, GPU=1.0)]
    got = targets.targets(nodes, 9100, None)
    assert [g["targets"] for g in got["node.json"]] == [["10.0.0.2:9100"]]
    assert got["dcgm.json"] == [] and got["node.json"][0]["labels"]["rayfleet_cluster"] == "default"


def test_files_are_replaced_whole_and_only_when_they_change(tmp_path):
    files = targets.targets([node("10.0.0.1")], 9100, 9400)
    assert sorted(targets.write(tmp_path, files)) == ["dcgm.json", "node.json"]
    assert json.loads((tmp_path / "node.json").read_text()) == files["node.json"]
    assert targets.write(tmp_path, files) == []
    assert targets.write(tmp_path, targets.targets([node("10.0.0.1"), node("10.0.0.9")], 9100, 9400)) == [
        "node.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dcgm.json", "node.json"]
    assert oct((tmp_path / "node.json").stat().st_mode & 0o777) == "0o644"


def test_a_gcs_that_does_not_answer_leaves_the_targets_as_they_are(tmp_path, monkeypatch, capsys):
    (tmp_path / "node.json").write_text("[]\n")

    def down(settings):
        raise ConnectionError("GCS at 10.0.0.1:6379 does not answer")

    import rayfleet.health
    import rayfleet.raynode

    monkeypatch.setattr(rayfleet.health, "gcs_nodes", down)
    monkeypatch.setattr(rayfleet.raynode, "load_settings", lambda path: object())
    rc = targets.main(["--node", "/etc/rayfleet/ray.json", "--dir", str(tmp_path), "--node-exporter-port", "9100",
                       "--once"])
    assert rc == 75 and (tmp_path / "node.json").read_text() == "[]\n"
    assert "the targets stay as they are" in capsys.readouterr().err
