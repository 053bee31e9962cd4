# SPDX-License-Identifier: GPL-3.0-or-later
"""stage_record and drift_check together, on real files, a real fake venv and a stub systemctl: what a record holds,
and every kind of drift the check reports."""

import json
import os
import stat

import pytest
from ansible_collections.rayfleet.cluster.plugins.modules import drift_check, stage_record
from conftest import run_module as run

SYSTEMCTL = """#!/bin/sh
# systemctl show --property=... -- UNIT...: one block per unit, from $STATES/<unit>
shift 3
first=1
for unit in "$@"; do
  [ $first = 1 ] || echo
  first=0
  echo "Id=$unit"
  cat "$STATES/$unit" 2>/dev/null ||
    printf 'LoadState=not-found\\nActiveState=inactive\\nSubState=dead\\nUnitFileState=\\n'
done
"""


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A record directory, a config file, a venv with two packages and a stub systemctl with one running unit."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "systemctl").write_text(SYSTEMCTL)
    (tmp_path / "bin" / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", "{}:{}".format(tmp_path / "bin", os.environ["PATH"]))
    states = tmp_path / "units"
    states.mkdir()
    monkeypatch.setenv("STATES", str(states))
    (states / "ray-worker.service").write_text(
        "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n"
    )
    conf = tmp_path / "etc" / "ray.json"
    conf.parent.mkdir()
    conf.write_text('{"num_cpus": 2}\n')
    conf.chmod(0o644)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for dist in ("ray-2.60.0", "torch-2.13.0"):
        (site / (dist + ".dist-info")).mkdir(parents=True)
    return tmp_path


def items(host):
    return [
        {"kind": "file", "path": str(host / "etc" / "ray.json")},
        {"kind": "unit", "name": "ray-worker.service"},
        {"kind": "pip", "venv": str(host / "venv"), "name": "Ray"},
        {"kind": "user", "name": "root"},
    ]


def record(host, stage="ray", inputs="i1", these=None, upstream=(), check_mode=False):
    return run(
        stage_record,
        {
            "stage": stage,
            "inputs": inputs,
            "items": items(host) if these is None else these,
            "upstream": list(upstream),
            "directory": str(host / "records"),
            "image_directory": str(host / "image"),
        },
        check_mode=check_mode,
    )


def check(host, stages=("ray",)):
    out = run(drift_check, {"stages": list(stages), "directory": str(host / "records"),
                            "image_directory": str(host / "image")})
    assert not out.failed, out.result
    return out.result


def test_a_record_is_root_only_and_a_clean_host_shows_no_drift(host):
    out = record(host)
    assert not out.failed and out.result["written"] and out.result["changed"] is False
    path = host / "records" / "ray.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((host / "records").stat().st_mode) == 0o700
    saved = json.loads(path.read_text())
    assert saved["state"]["unit:ray-worker.service"] == {"loaded": "loaded", "running": True, "enabled": "enabled"}
    assert saved["state"]["pip:%s:Ray" % (host / "venv")] == "2.60.0"
    result = check(host)
    assert result["stages"]["ray"] == {
        "recorded": True,
        "inputs": "i1",
        "drifted": [],
        "drifted_items": [],
        "upstream": {},
        "digest": out.result["digest"],
        "from_image": False,
    }
    assert result["records"] == {"ray": out.result["digest"]}
    # the same state again: nothing written
    assert record(host).result["written"] is False


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda h: (h / "etc" / "ray.json").write_text('{"num_cpus": 3}\n'), "sha256"),
        (lambda h: (h / "etc" / "ray.json").unlink(), "type file -> absent"),
        (lambda h: (h / "etc" / "ray.json").chmod(0o600), "mode 0644 -> 0600"),
        (
            lambda h: (h / "units" / "ray-worker.service").write_text(
                "LoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=enabled\n"
            ),
            "running true -> false",
        ),
        (
            lambda h: (h / "units" / "ray-worker.service").write_text(
                "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=disabled\n"
            ),
            "enabled enabled -> disabled",
        ),
        (
            lambda h: (h / "venv/lib/python3.11/site-packages/ray-2.60.0.dist-info").rename(
                h / "venv/lib/python3.11/site-packages/ray-2.59.0.dist-info"
            ),
            "2.60.0 -> 2.59.0",
        ),
        (lambda h: (h / "venv/lib/python3.11/site-packages/ray-2.60.0.dist-info").rmdir(), "2.60.0 -> null"),
    ],
)
def test_each_kind_of_drift_is_named_with_what_changed(host, change, expect):
    record(host)
    change(host)
    found = check(host)["stages"]["ray"]
    drifted = found["drifted"]
    assert len(drifted) == 1 and expect in drifted[0], drifted
    assert len(found["drifted_items"]) == 1 and drifted[0].startswith(found["drifted_items"][0] + " (")


def test_a_crash_looping_unit_is_not_running(host):
    record(host)
    (host / "units" / "ray-worker.service").write_text(
        "LoadState=loaded\nActiveState=activating\nSubState=auto-restart\nUnitFileState=enabled\n"
    )
    assert "running true -> false" in check(host)["stages"]["ray"]["drifted"][0]


def test_recorded_inputs_and_missing_records_are_reported(host):
    record(host)
    result = check(host, ("ray", "common"))
    assert result["stages"]["ray"]["inputs"] == "i1"
    assert result["stages"]["common"] == {
        "recorded": False,
        "inputs": None,
        "drifted": [],
        "drifted_items": [],
        "upstream": {},
        "digest": None,
        "from_image": False,
    }


def test_items_a_task_skipped_stay_watched_while_the_inputs_are_the_same(host):
    record(host)
    record(host, these=items(host)[:1])  # this run only the settings file was reported
    saved = json.loads((host / "records" / "ray.json").read_text())
    assert len(saved["items"]) == 4
    record(host, inputs="i2", these=items(host)[:1])  # new inputs: only what this run reported
    saved = json.loads((host / "records" / "ray.json").read_text())
    assert [item["kind"] for item in saved["items"]] == ["file"]


def test_a_record_keeps_its_upstream_records_digests(host):
    nccl = record(host, stage="nccl", these=items(host)[:1]).result["digest"]
    record(host, upstream=["nccl", "gpu"])
    assert check(host)["stages"]["ray"]["upstream"] == {"nccl": nccl, "gpu": None}


def test_a_stage_that_reads_one_kind_of_an_upstream_stages_items_keeps_their_digest_alone(host):
    """The ml stage reads the packages of the Ray venv (ray:pip), not the ray stage's units or settings: a changed
    settings file changes the ray record's digest, not that view of it; a changed Ray version changes both."""
    def ray():
        out = run(stage_record, {"stage": "ray", "inputs": "i1", "items": items(host), "upstream": [],
                                 "views": ["ray:pip"], "directory": str(host / "records"),
                                 "image_directory": str(host / "image")})
        assert not out.failed, out.result
        return out.result

    first = ray()
    ml = record(host, stage="ml", these=items(host)[:1], upstream=["gpu", "ray:pip"]).result
    assert not ml.get("failed"), ml
    kept = check(host, ("ml",))["stages"]["ml"]["upstream"]
    assert set(kept) == {"gpu", "ray:pip"} and kept["gpu"] is None

    def views():
        return run(drift_check, {"stages": ["ray", "ml"], "directory": str(host / "records"),
                                 "image_directory": str(host / "image"), "views": ["ray:pip"]}).result["records"]

    assert views()["ray:pip"] == kept["ray:pip"] and views()["ray"] == first["digest"]
    assert first["digests"] == {"ray:pip": kept["ray:pip"]}
    (host / "etc" / "ray.json").write_text('{"num_cpus": 4}\n')
    settings = ray()
    assert settings["digest"] != first["digest"] and settings["digests"] == {"ray:pip": kept["ray:pip"]}
    assert views()["ray:pip"] == kept["ray:pip"] and views()["ray"] == settings["digest"]
    site = host / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "ray-2.60.0.dist-info").rename(site / "ray-2.61.0.dist-info")
    upgraded = ray()
    assert upgraded["digests"]["ray:pip"] != kept["ray:pip"] and views()["ray:pip"] == upgraded["digests"]["ray:pip"]


def test_a_records_digest_follows_what_the_stage_left_on_the_host_not_its_inputs(host):
    """Downstream stages keep this digest: a stage applied again with other inputs that left the same items behind
    must not make them run, and a changed item must."""
    first = record(host, stage="nccl", inputs="i1").result["digest"]
    again = record(host, stage="nccl", inputs="i2").result["digest"]
    assert again == first
    assert check(host, ("nccl",))["records"]["nccl"] == first
    (host / "etc" / "ray.json").write_text('{"num_cpus": 4}\n')
    changed = record(host, stage="nccl", inputs="i2").result["digest"]
    assert changed != first
    assert check(host, ("nccl",))["records"]["nccl"] == changed


def test_check_mode_writes_nothing(host):
    out = record(host, check_mode=True)
    assert out.result["written"] is False and not (host / "records").exists()


def test_a_bad_item_is_named(host):
    out = record(host, these=[{"kind": "file"}])
    assert out.failed and "stage ray: item" in out.result["msg"] and "path" in out.result["msg"]


def test_sshds_effective_settings_are_compared_whatever_file_changed_them(host, monkeypatch):
    """A line at the top of sshd_config undoes the drop-in: the effective settings (sshd -T) drift."""
    from ansible.module_utils import basic

    effective = host / "sshd-T"
    effective.write_text("passwordauthentication no\n")
    stub = host / "bin" / "sshd"
    stub.write_text(f'#!/bin/sh\n[ "$1 $2 $3" = "-T -C user=rayfleet,host=localhost,addr=127.0.0.1" ] || exit 2\n'
                    f"cat {effective}\n")
    stub.chmod(0o755)
    real = basic.AnsibleModule.get_bin_path

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        return str(stub) if arg == "sshd" else real(self, arg, required=required, opt_dirs=opt_dirs)

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    record(host, stage="ssh_trust", these=[{"kind": "sshd", "name": "rayfleet"}])
    assert check(host, ("ssh_trust",))["stages"]["ssh_trust"]["drifted"] == []
    effective.write_text("passwordauthentication yes\n")
    assert check(host, ("ssh_trust",))["stages"]["ssh_trust"]["drifted_items"] == ["sshd:rayfleet"]


def settle(host, state, check_mode=False):
    out = run(stage_record, {"stage": "ray", "state": state, "directory": str(host / "records"),
                             "image_directory": str(host / "image")}, check_mode=check_mode)
    assert not out.failed, out.result
    return out.result


def test_a_record_set_aside_makes_the_next_check_run_the_stage_even_with_the_recorded_inputs(host):
    """A run that applies other inputs sets the record aside first: stopping part way and going back to the recorded
    inputs must not find the old record vouching for a host the stopped run changed."""
    first = record(host, inputs="i1").result["digest"]
    assert settle(host, "aside", check_mode=True) == {"changed": False, "state": "aside", "moved": False}
    assert check(host)["stages"]["ray"]["recorded"] is True
    assert settle(host, "aside") == {"changed": False, "state": "aside", "moved": True}
    assert check(host, ("ray",))["stages"]["ray"]["recorded"] is False
    assert "ray" not in check(host)["records"]  # the ml stage's upstream digest of it no longer matches: ml runs too
    assert settle(host, "aside")["moved"] is False  # nothing left to set aside
    # a partial run that changed nothing puts it back
    assert settle(host, "restored")["moved"] is True
    assert check(host)["records"] == {"ray": first}
    # one that changed something removes it
    settle(host, "aside")
    assert settle(host, "discarded")["moved"] is True
    assert settle(host, "restored")["moved"] is False
    assert check(host)["stages"]["ray"]["recorded"] is False


def test_a_record_written_at_the_stages_end_replaces_the_copy_set_aside(host):
    record(host, inputs="i1")
    settle(host, "aside")
    out = record(host, inputs="i2").result
    assert out["written"] and out["state"] == "present"
    assert not (host / "records" / "ray.json.aside").exists()
    assert settle(host, "restored")["moved"] is False  # a record written since is never replaced by the old one
    assert check(host)["stages"]["ray"]["inputs"] == "i2"


def test_writing_a_record_needs_its_inputs(host):
    out = run(stage_record, {"stage": "ray", "directory": str(host / "records")})
    assert out.failed and "inputs" in out.result["msg"]


def bake_record(host, inputs="i1"):
    """The record playbooks/bake.yml writes on the builder for the nodes booted from its image."""
    out = run(stage_record, {"stage": "ray", "inputs": inputs, "items": items(host), "image": True,
                             "directory": str(host / "records"), "image_directory": str(host / "image")})
    assert not out.failed, out.result
    return out.result


def test_a_node_booted_from_an_image_takes_the_images_record_until_its_cluster_records_the_stage(host):
    baked = bake_record(host)
    assert baked["written"] and (host / "image" / "ray.json").exists() and not (host / "records").exists()
    ray = check(host)["stages"]["ray"]
    assert ray["recorded"] and ray["from_image"] and ray["inputs"] == "i1" and ray["drifted"] == []
    assert check(host)["records"] == {"ray": baked["digest"]}
    # the image's items are compared like the cluster's own: an edited file is drift
    (host / "etc" / "ray.json").write_text('{"num_cpus": 4}\n')
    assert check(host)["stages"]["ray"]["drifted_items"] == ["file:%s" % (host / "etc" / "ray.json")]
    # once the cluster's stage records, its record is the one compared
    record(host, inputs="i2")
    ray = check(host)["stages"]["ray"]
    assert ray["recorded"] and not ray["from_image"] and ray["inputs"] == "i2" and ray["drifted"] == []


def test_a_stage_applying_other_inputs_than_the_images_stops_trusting_the_images_record(host):
    """Set aside before applying other inputs: a run that stops part way must not leave the image's record vouching
    for a host it changed, even with the image's inputs back."""
    bake_record(host)
    assert settle(host, "aside")["moved"] is False  # the cluster had no record of its own
    assert check(host, ("ray",))["stages"]["ray"]["recorded"] is False
    assert (host / "records" / "ray.image-superseded").stat().st_mode & 0o777 == 0o600
    # a partial run that changed nothing trusts it again; one that changed something does not
    settle(host, "restored")
    assert check(host, ("ray",))["stages"]["ray"]["from_image"] is True
    settle(host, "aside")
    settle(host, "discarded")
    assert check(host, ("ray",))["stages"]["ray"]["recorded"] is False


def test_the_images_record_is_written_only_as_a_whole_record(host):
    out = run(stage_record, {"stage": "ray", "state": "aside", "image": True, "directory": str(host / "records"),
                             "image_directory": str(host / "image")})
    assert out.failed and "image=true" in out.result["msg"] and "expected present" in out.result["msg"]


def test_the_drift_check_lists_the_packages_installed_in_full(host):
    """dpkg's fully installed packages only: one removed with its configuration kept (rc) or half-installed is not
    there for a package task to skip."""
    stub = host / "bin" / "dpkg-query"
    stub.write_text('#!/bin/sh\n[ "$1 $2" = "-W -f" ] || exit 2\n'
                    "printf 'ii \\tnftables\\nrc \\tnfs-kernel-server\\niF \\tcurl\\nii \\tchrony\\n'\n")
    stub.chmod(0o755)
    assert check(host)["packages"] == ["chrony", "nftables"]
