# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/bench_report.py: docs/benchmarks.md's sections are written from the JSON results, and only theirs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_report


def result(hosts: int, rerun: float, commit: str = "abc1234") -> dict:
    return {"benchmark": "converge", "command": f"make bench-converge WORKERS={hosts - 1}", "hosts": hosts,
            "commit": commit,
            "machine": {"cpus": 2, "memory_gib": 23.4, "os": "Linux-6.1", "python": "3.11.7"},
            "first_run_s": 150.2, "first_run_per_role_s": {"ray": 60.0, "common": 20.5, "tiny": 0.1},
            "rerun_s": [rerun, rerun + 1, rerun - 1], "rerun_median_s": rerun,
            "rerun_per_role_median_s": {"ray": 0.4}, "drift_rerun_s": [20.0, 21.0, 19.0],
            "drift_rerun_median_s": 20.0, "floor_plain_ray_start_s": [9.0, 9.5, 8.5], "floor_median_s": 9.0,
            "rerun_over_floor": round(rerun / 9.0, 2), "date": "2026-11-27T01:30:00Z"}


def test_the_converge_section_comes_from_the_results_and_other_sections_stay(tmp_path):
    art = tmp_path / "artifacts"
    art.mkdir()
    three = result(3, 10.0)
    three.update(rerun_controller_cpu_median_s=3.8, hand_floor_s=120.0, first_over_hand_floor=1.25,
                 hand_floor_installed={"head": {"apt": ["chrony=4.3"], "pip": ["ray[default]==2.60.0", "torch==2"]},
                                       "worker": {"apt": ["chrony=4.3"], "pip": ["ray[default]==2.60.0"]}})
    (art / "bench-converge-3hosts.json").write_text(json.dumps(three))
    six = result(6, 13.0)
    six["rerun_controller_cpu_median_s"] = 4.7
    six["first_run_cpu"] = {"busy_fraction": 0.874, "cpus": 2, "machine_busy_s": 379.6, "controller_s": 121.2}
    six.update(release_rerun_s=[14.0, 15.5, 14.5, 15.0], release_rerun_median_s=14.75, full_run_s=98.2,
               full_run_per_role_s={"ray": 16.1, "tiny": 0.2})
    (art / "bench-converge-6hosts.json").write_text(json.dumps(six))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- begin: localize -->\nkept as it is\n<!-- end: localize -->\n")
    assert bench_report.main(["--artifacts", str(art), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "kept as it is" in text
    assert "### 3 hosts — 2026-11-27" in text and "`make bench-converge WORKERS=2`" in text
    assert "| idempotent re-run | 10.0 | 10.0 / 11.0 / 9.0;" in text
    assert "ray 60.0, common 20.5 |" in text and "tiny" not in text
    # the controller's CPU per added host, as the wall time
    assert "| 6 | 13.0 | +1.00 | 4.7 | +0.30 | 2026-11-27 | `abc1234` |" in text
    # the first converge against the hand floor, where it was measured
    assert text.count("| first `site.yml` / hand floor |") == 1
    assert "| first `site.yml` / hand floor | 1.25 | goal: at most 1.3 |" in text
    assert "(the head: 1), and the Ray venv's 2 requirements" in text
    # the CPU row only where the result measured it (the 6-host one)
    assert text.count("| CPU busy during the first run |") == 1
    assert ("| CPU busy during the first run | 380 CPU-s | 87% of the machine's 2 CPUs (hosts and controller "
            "together); the controller (`ansible-playbook`, its forks and ssh clients, not the persistent ssh "
            "connections): 121 CPU-s |") in text
    # the release and full rows only where the result measured them
    assert text.count("| re-run, a release that changed one role |") == 1
    assert "| re-run, a release that changed one role | 14.8 | 14.0 / 15.5 / 14.5 / 15.0; " in text
    assert "| every stage on every host (`-e rayfleet_full=true`) | 98.2 | " in text and "per role: ray 16.1 |" in text
    # written again: the section is replaced, not added twice
    bench_report.main(["--artifacts", str(art), "--doc", str(doc)])
    assert doc.read_text().count("<!-- begin: converge -->") == 1


def test_the_cost_per_added_host_compares_results_of_one_commit_only(tmp_path):
    """A cluster size measured at another commit (or on another machine) is no base for the cost per added host."""
    art = tmp_path / "artifacts"
    art.mkdir()
    (art / "bench-converge-3hosts.json").write_text(json.dumps(result(3, 5.0, commit="new1234")))
    (art / "bench-converge-6hosts.json").write_text(json.dumps(result(6, 7.5)))
    (art / "bench-converge-9hosts.json").write_text(json.dumps(result(9, 10.5)))
    doc = tmp_path / "benchmarks.md"
    bench_report.main(["--artifacts", str(art), "--doc", str(doc)])
    text = doc.read_text()
    assert "| 3 | 5.0 | - | - | - | 2026-11-27 | `new1234` |" in text
    assert "| 6 | 7.5 | - | - | - | 2026-11-27 | `abc1234` |" in text
    assert "| 9 | 10.5 | +1.00 | - | - | 2026-11-27 | `abc1234` |" in text


def test_without_results_nothing_is_rewritten(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- begin: converge -->\nold\n<!-- end: converge -->\n")
    bench_report.main(["--artifacts", str(tmp_path / "none"), "--doc", str(doc)])
    assert "old" in doc.read_text()


def test_the_localize_section_comes_from_the_bench_result(tmp_path):
    art = tmp_path / "artifacts"
    art.mkdir()
    row = {"nodes": 256, "bad": 1, "trials": 1000, "ring_max": 32, "first_pass": "ring of 32 blocks",
           "rounds_max": 5, "rounds_mean": 5.0, "rounds_bound": 18.0, "pair_tests_mean": 38.0, "pair_tests_max": 38,
           "wall_s_mean": 16.7, "wall_s_max": 24.7, "one_at_a_time_s_mean": 65.2, "false_positives": 0,
           "false_negatives": 0, "trials_with_a_false_positive": 0}
    ring = dict(row, first_pass="ring of 256 nodes", rounds_max=3, pair_tests_mean=257.0, wall_s_mean=7.4)
    (art / "bench-localize.json").write_text(json.dumps({
        "benchmark": "localize", "command": "make bench-localize", "commit": "abc1234", "date": "2026-11-27T05:00:00Z",
        "machine": {"cpus": 2, "python": "3.11.7", "os": "Linux-6.1"},
        "model": {"healthy": 1.0, "bad": [0.1, 0.3], "noise": 0.1, "ratio": 0.75, "ring_max": 32, "seed": 1,
                  "setup_s": 1.0, "pair_bytes": 1 << 30, "iters": 10, "warmup": 2, "link_gbps": 50.0},
        "results": [row], "ring_of_every_node": [ring],
        "goal": {"nodes": 256, "bad": 1, "rounds_max": 5, "rounds_bound": 18.0, "false_positives": 0, "met": True}}))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- begin: converge -->\nkept\n<!-- end: converge -->\n")
    assert bench_report.main(["--artifacts", str(art), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "kept" in text and text.count("<!-- begin: localize -->") == 1
    assert "with `make bench-localize` at commit `abc1234`" in text and "u uniform in +-10%" in text
    assert "| 256 | 1 | ring of 32 blocks | 5 (5) | 18 | 38 (38) | 16.7 (24.7) | 65.2 | 1000 | 0 | 0 |" in text
    assert "| 256 | 3 | 257 | 7.4 | 65.2 | 0 | 0 |" in text
    assert "5 rounds at most, 0 false positive(s): **met**." in text


# Test data for the bake and collective sections: made-up figures in the shape the benchmarks write, not
# measurements.
MACHINE = {"cpus": 4, "memory_gib": 15.6, "os": "Linux-6.1-test-x86_64", "kernel": "6.1", "python": "3.11.7"}


def bake_result() -> dict:
    return {"benchmark": "bake", "command": "make bench-bake WORKERS=2", "commit": "bak1234",
            "date": "2031-02-03T04:05:06Z", "machine": MACHINE, "hosts": 3, "workers": 2, "boots": 3,
            "image_bytes": 1_612_000_000, "bare_site_s": 111.1, "bake_s": 99.9,
            "boot_to_alive_s": [12.1, 13.2, 14.3], "boot_to_verified_s": [61.1, 62.2, 63.3],
            "site_on_baked_s": [41.1, 42.2, 43.3], "median_boot_to_alive_s": 13.2, "median_boot_to_verified_s": 62.2,
            "median_site_on_baked_s": 42.2, "verified_over_bare": 0.56, "goal_verified_s": 19.0, "goal_ratio": 0.2,
            "package_changes_on_baked": []}


def collective_result() -> dict:
    return {"benchmark": "collective", "command": "tools/bench_collective.py --name molecule --existing",
            "commit": "col5678", "date": "2031-02-04T07:08:09Z", "machine": MACHINE, "sandbox": "molecule",
            "existing": True, "hosts": 3, "workers": 2, "ranks": 3, "runs": 3, "backend": "gloo",
            "max_bytes": "64M", "iperf3_seconds": 5, "iperf3_client": "worker2", "iperf3_server": "worker1",
            "pair": ["worker1", "worker2"],
            "iperf3_gbytes_per_s": [2.111, 2.222, 2.333], "iperf3_median_gbytes_per_s": 2.222,
            "iperf3_bidir_gbytes_per_s_per_direction": [1.411, 1.422, 1.433],
            "iperf3_bidir_median_gbytes_per_s_per_direction": 1.422,
            "pair_busbw_gbps": [0.911, 0.922, 0.933], "pair_busbw_median_gbps": 0.922,
            "all_nodes_peak_busbw_gbps": [0.811, 0.822, 0.833], "all_nodes_peak_busbw_median_gbps": 0.822,
            "pair_over_link": 0.415, "pair_over_bidir_link": 0.648, "all_nodes_over_link": 0.37,
            "preflight_wall_s": [23.1, 24.2, 25.3], "preflight_wall_median_s": 24.2,
            "goal_pair_over_link": 0.7, "goal_preflight_s": 60.0, "last_sweep": []}


HAND_WRITTEN = """# Benchmarks

## Baked image vs bare hosts

Copied by hand: 183.4

## Collective check vs the raw link

Copied by hand: 1.863 GB/s

## NVML in-process vs `nvidia-smi`

kept as it is
"""


def _report(tmp_path, results: dict, doc_text: str = HAND_WRITTEN) -> str:
    art = tmp_path / "artifacts"
    art.mkdir(exist_ok=True)
    for name, data in results.items():
        (art / name).write_text(json.dumps(data))
    doc = tmp_path / "benchmarks.md"
    doc.write_text(doc_text)
    assert bench_report.main(["--artifacts", str(art), "--doc", str(doc)]) == 0
    return doc.read_text()


def test_the_bake_section_comes_from_its_result(tmp_path):
    text = _report(tmp_path, {"bench-bake.json": bake_result()})
    bake = text.split("<!-- begin: bake -->")[1].split("<!-- end: bake -->")[0]
    assert "## Baked image vs bare hosts" in bake and "### 3 hosts — 2031-02-03" in bake
    assert ("Measured 2031-02-03T04:05:06Z on 4 CPUs, 15.6 GiB, Linux-6.1-test-x86_64, Python 3.11.7 with "
            "`make bench-bake WORKERS=2` at commit `bak1234`; 3 boots of the image.") in bake
    assert "| `site.yml` on 3 bare hosts | 111.1 | |" in bake
    assert "| `bake.yml` on one builder | 99.9 | podman commit of the 1.6 GB image included |" in bake
    assert "| boot → 3 nodes alive in Ray | 13.2 | 12.1 / 13.2 / 14.3;" in bake
    assert "| boot → `site.yml` verified | 62.2 | 61.1 / 62.2 / 63.3; goal ≤ 19 s |" in bake
    assert "| of which `site.yml` itself | 42.2 | 41.1 / 42.2 / 43.3 |" in bake
    assert "| verified / bare | 0.560 | goal ≤ 0.2 |" in bake
    assert ("Packages `site.yml` installed, removed or upgraded on the baked hosts (Debian's and the Ray venv's, "
            "against the image's): none.") in bake
    # the hand-copied figures are gone, the section is there once, and the next sections are kept
    assert "Copied by hand: 183.4" not in text and text.count("## Baked image vs bare hosts") == 1
    assert "Copied by hand: 1.863 GB/s" not in text  # no result: the collective section says how to measure it
    assert "## NVML in-process vs `nvidia-smi`\n\nkept as it is\n" in text
    # with the seconds per role, the largest first (under 0.5 s left out)
    per_role = dict(bake_result(), site_on_baked_per_role_median_s={"ray": 9.5, "firewall": 4.25, "common": 0.2})
    bake = _report(tmp_path, {"bench-bake.json": per_role}).split("<!-- begin: bake -->")[1]
    assert "| of which `site.yml` itself | 42.2 | 41.1 / 42.2 / 43.3; per role: ray 9.5, firewall 4.2 |" in bake
    installed = dict(bake_result(),
                     package_changes_on_baked=["head: +deb nfs-ganesha 5.7-1", "head: +deb libntirpc5 5.7"])
    bake = _report(tmp_path, {"bench-bake.json": installed}).split("<!-- begin: bake -->")[1]
    assert "against the image's): 2: `head: +deb nfs-ganesha 5.7-1`, `head: +deb libntirpc5 5.7`." in bake


def test_the_collective_section_comes_from_its_result(tmp_path):
    text = _report(tmp_path, {"bench-collective.json": collective_result()})
    coll = text.split("<!-- begin: collective -->")[1].split("<!-- end: collective -->")[0]
    assert "## Collective check vs the raw link" in coll and "### 3 hosts — 2031-02-04" in coll
    assert ("Measured 2031-02-04T07:08:09Z on 4 CPUs, 15.6 GiB, Linux-6.1-test-x86_64, Python 3.11.7 with "
            "`tools/bench_collective.py --name molecule --existing` at commit `col5678` on the running sandbox "
            "`molecule`, as it was; 3 runs.") in coll
    assert "| iperf3 worker2 → worker1 | 2.222 GB/s | 2.111 / 2.222 / 2.333; 5 s each |" in coll
    assert "| iperf3 both ways at once, per direction | 1.422 GB/s | 1.411 / 1.422 / 1.433 |" in coll
    assert "| pair worker1-worker2 busbw at 64 MiB | 0.922 GB/s | 0.911 / 0.922 / 0.933; gloo |" in coll
    assert "| all-nodes peak busbw (3 ranks) | 0.822 GB/s | 0.811 / 0.822 / 0.833 |" in coll
    assert "| pair busbw / iperf3 one way | 0.41 | goal ≥ 0.7 |" in coll  # 0.415 shown to two places
    assert "| pair busbw / iperf3 both ways | 0.65 | goal ≥ 0.7: the all-reduce's own traffic pattern |" in coll
    assert "| all-nodes busbw / iperf3 one way | 0.37 | |" in coll
    assert "| `preflight.yml` wall time | 24.2 s | 23.1 / 24.2 / 25.3; goal < 60 s |" in coll
    assert "Copied by hand" not in text and "kept as it is" in text


def test_without_their_results_the_sections_say_which_command_measures_them(tmp_path):
    text = _report(tmp_path, {})
    bake = text.split("<!-- begin: bake -->")[1].split("<!-- end: bake -->")[0]
    coll = text.split("<!-- begin: collective -->")[1].split("<!-- end: collective -->")[0]
    assert "Not measured yet: run `make bench-bake` (on the podman sandbox). It writes `artifacts/bench-bake.json`" \
        in bake
    assert "Not measured yet: run `make bench-collective`" in coll and "`artifacts/bench-collective.json`" in coll
    assert "Copied by hand" not in text and "|" not in bake + coll  # no table, old or new
    assert text.index("## Baked image") < text.index("## Collective check") < text.index("## NVML")


def test_a_new_result_replaces_the_generated_section_and_a_missing_one_empties_it(tmp_path):
    first = _report(tmp_path, {"bench-bake.json": bake_result(), "bench-collective.json": collective_result()})
    second = dict(bake_result(), date="2031-03-01T00:00:00Z", bare_site_s=222.2)
    again = _report(tmp_path, {"bench-bake.json": second}, first)
    assert again.count("<!-- begin: bake -->") == 1 and again.count("## Baked image vs bare hosts") == 1
    assert "### 3 hosts — 2031-03-01" in again and "| `site.yml` on 3 bare hosts | 222.2 | |" in again
    assert "111.1" not in again
    (tmp_path / "artifacts" / "bench-collective.json").unlink()
    gone = _report(tmp_path, {}, again)
    assert "2.222 GB/s" not in gone and "Not measured yet: run `make bench-collective`" in gone
    assert gone.count("<!-- begin: collective -->") == 1


def test_a_doc_without_these_sections_gets_them_at_the_end(tmp_path):
    text = _report(tmp_path, {"bench-bake.json": bake_result()}, "# Benchmarks\n")
    assert text.startswith("# Benchmarks\n\n<!-- begin: bake -->\n## Baked image vs bare hosts")
    assert text.rstrip().endswith("<!-- end: collective -->")


def test_sizes_are_written_in_binary_units():
    assert bench_report._bytes("64M") == "64 MiB" and bench_report._bytes("1G") == "1 GiB"
    assert bench_report._bytes("4096") == "4096 bytes" and bench_report._bytes("lots") == "lots"


def join_result() -> dict:
    none = {"stages": [], "changed": 0}
    return {"benchmark": "join", "command": "make bench-join WORKERS=2", "hosts": 3, "commit": "joi1234",
            "machine": {"cpus": 2, "memory_gib": 23.4, "os": "Linux-6.1", "python": "3.11.7"},
            "date": "2031-02-03T04:05:06Z", "first_run_s": 250.4, "rerun_s": [5.1, 5.3, 5.0], "rerun_median_s": 5.1,
            "join_s": [120.2, 118.0], "join_median_s": 119.1,
            "join_old_hosts": {"bench-head": none, "bench-worker1": {"stages": ["ray"], "changed": 1}},
            "join_new_host_stages": ["common", "firewall", "ray"],
            "join_new_host_admission": [{"gpu": "n/a", "link": "n/a"}],
            "next_run_s": [5.5, 5.7], "next_run_median_s": 5.6, "leave_s": [5.2, 5.4], "leave_median_s": 5.3,
            "leave_old_hosts": {"bench-head": none, "bench-worker1": none}}


def test_the_join_section_comes_from_its_result_and_names_what_ran_on_the_other_hosts(tmp_path):
    text = _report(tmp_path, {"bench-join-3hosts.json": join_result()})
    join = text.split("<!-- begin: join -->")[1].split("<!-- end: join -->")[0]
    assert "## Joining and removing a host with network membership" in join and "### 3 hosts → 4 → 3" in join
    assert ("| `site.yml` joining one bare host (3 → 4) | 119.1 | 120.2 / 118.0; the other hosts: stages run there: "
            "ray; most changes on one of them: 1 |") in join
    assert ("| `site.yml` after removing it (4 → 3) | 5.3 | 5.2 / 5.4; the other hosts: stages run there: none; "
            "most changes on one of them: 0 |") in join
    assert "| idempotent re-run | 5.1 | 5.1 / 5.3 / 5.0; changed=0 |" in join
    assert "On the joining host `site.yml` ran: common, firewall, ray." in join


def test_the_bake_section_shows_a_host_booted_into_the_running_cluster():
    joined = dict(bake_result(), join_alive_s=[9.1, 8.2, 10.3], median_join_alive_s=9.1, join_task_s=[12.0, 11.5, 13.1],
                  median_join_task_s=12.0, join_link_states=["ok", "ok", "ok"], join_others_changed=[],
                  join_node_ids_kept=True, goal_join_s=15.0)
    bake = bench_report.bake_section([joined])
    assert ("| a host booted into the running cluster → admitted and alive | 9.1 | 9.1 / 8.2 / 10.3; its link check: "
            "ok, ok, ok |") in bake
    assert "| … → a Ray task ran on it | 12.0 | 12.0 / 11.5 / 13.1; goal ≤ 15 s |" in bake
    assert "| other hosts whose files or ruleset changed | 0 | none; Ray node ids kept |" in bake
    assert "a host booted into" not in bench_report.bake_section([bake_result()])
