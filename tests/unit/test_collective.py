# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.collective's arithmetic and verdicts: sizes, bus bandwidth, NCCL's network, the slow node."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rayfleet import collective as c
from rayfleet.errors import SettingsError

ROOT = Path(__file__).resolve().parents[2]


def test_sizes_parse_like_nccl_tests():
    assert c.parse_size("8") == 8
    assert c.parse_size("64K") == 64 << 10
    assert c.parse_size("16M") == 16 << 20
    assert c.parse_size("1g") == 1 << 30
    assert c.parse_size("2GiB") == 2 << 30
    for bad in ("", "1.5G", "ten", "-8", "3"):
        with pytest.raises(SettingsError, match="size"):
            c.parse_size(bad, "size")


def test_sweep_doubles_and_keeps_whole_floats():
    assert c.sweep(8, 128) == [8, 16, 32, 64, 128]
    assert c.sweep(8, 100, 4) == [8, 32]
    assert c.sweep(6, 12) == [4, 12]  # rounded down to a multiple of 4 bytes
    with pytest.raises(SettingsError, match="larger than max_bytes"):
        c.sweep(1 << 20, 8)


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n():
    # 1 GiB in 10 ms: algbw 107.37 GB/s; 8 ranks: busbw = algbw * 14/8
    row = c.Row(size=1 << 30, time_us=10_000, world_size=8)
    assert row.algbw_gbps == pytest.approx(107.374, rel=1e-4)
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 1.75)
    assert c.Row(size=1 << 20, time_us=100, world_size=2).busbw_gbps == pytest.approx(
        c.Row(size=1 << 20, time_us=100, world_size=2).algbw_gbps)
    assert c.bus_factor(1) == 0.0


def test_peak_uses_large_sizes_only():
    rows = [c.Row(8, 1.0, 2), c.Row(1 << 20, 100.0, 2), c.Row(2 << 20, 150.0, 2)]
    # the 8-byte row has a huge "bandwidth" per time unit only if timing is wrong; it must not count
    assert c.peak_busbw(rows, 1 << 20) == pytest.approx(max(r.busbw_gbps for r in rows[1:]))
    assert c.peak_busbw(rows, 1 << 40) == pytest.approx(rows[-1].busbw_gbps)  # no size that large: the largest
    assert c.peak_busbw([], 8) == 0.0


def test_table_has_nccl_tests_shape():
    table = c.format_table([c.Row(8, 20.5, 3), c.Row(1 << 20, 900.0, 3, wrong=2)], "t")
    lines = table.splitlines()
    assert "#       size         count      type   redop     time   algbw   busbw  #wrong" in lines
    data = [ln.split() for ln in lines if not ln.startswith("#")]
    assert data[0][:4] == ["8", "2", "float", "sum"] and data[1][-1] == "2"
    assert "# Out of bounds values : 2 FAILED" in lines
    assert lines[-1].startswith("# Avg bus bandwidth    : ")


NCCL_EFA = """\
ip-10-0-1-5:811:811 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v9)
ip-10-0-1-5:811:811 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)
ip-10-0-1-5:811:811 [0] NCCL INFO Using network Libfabric
ip-10-0-1-5:811:822 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA
"""
NCCL_SOCKET_FALLBACK = """\
host:9:9 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
host:9:9 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>
host:9:9 [0] NCCL INFO Using network Socket
host:9:20 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
"""


def test_transport_from_nccl_debug_output():
    efa = c.parse_transport(NCCL_EFA.splitlines())
    assert efa["network"] == "Libfabric" and efa["gpudirect_rdma"] and not efa["plugin_errors"]
    sock = c.parse_transport(NCCL_SOCKET_FALLBACK.splitlines())
    assert sock["network"] == "Socket" and not sock["gpudirect_rdma"]
    assert sock["plugin_errors"] and "Could not find: libnccl-net.so" in sock["plugin_errors"][0]
    assert c.network_matches("AWS Libfabric", ["Libfabric"]) and not c.network_matches("Socket", ["IB", "Libfabric"])
    assert c.parse_transport([])["network"] == ""


# NCCL 2.28.9 (torch 2.11 cu130) on an H200 without IB or net plugins: the lines rayfleet kept as evidence
NCCL_2_28_H200 = """\
gpu:1:1 [0] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so
gpu:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so
gpu:1:1 [0] NCCL INFO Failed to initialize NET plugin IB
gpu:1:1 [0] NCCL INFO Initialized NET plugin Socket
gpu:1:1 [0] NCCL INFO Assigned NET plugin Socket to comm
"""


def test_transport_from_nccl_2_28s_assigned_plugin_line():
    found = c.parse_transport(NCCL_2_28_H200.splitlines())
    assert found["network"] == "Socket" and found["networks"] == ["Socket"] and not found["gpudirect_rdma"]
    assert "Failed to initialize NET plugin IB" in found["plugin_errors"][2]


def test_one_rank_cannot_pass_or_fail_a_bandwidth_floor():
    rows = [c.Row(1 << 30, 27.7, 1)]  # what one H200 printed: a no-op all-reduce, 38,821 "GB/s" algbw
    report = c.Report(backend="nccl", world_size=1, nodes=[{}], rows=rows, large_bytes=1 << 27)
    assert report.problems() == [] and "One rank" in report.format() and report.peak_busbw_gbps == 0
    floored = c.Report(backend="nccl", world_size=1, nodes=[{}], rows=rows, large_bytes=1 << 27, min_busbw_gbps=100)
    problems = floored.problems()
    assert len(problems) == 1 and "cannot be checked with one rank" in problems[0], problems
    assert "below" not in problems[0]


def test_socket_fallback_fails_when_efa_expected():
    report = c.Report(backend="nccl", world_size=16, nodes=[{}, {}], rows=[c.Row(1 << 30, 30_000, 16)],
                      large_bytes=1 << 27, transport=c.parse_transport(NCCL_SOCKET_FALLBACK.splitlines()),
                      expect_network=["Libfabric"])
    problems = report.problems()
    assert len(problems) == 1 and "NCCL used network 'Socket', expected one of ['Libfabric']" in problems[0]
    assert "libnccl-net.so" in problems[0]


def _nodes(names, ips=None):
    ips = ips or [f"10.0.0.{10 + i}" for i in range(len(names))]
    return [{"name": name, "ip": ip, "ranks": [i], "gpu_ids": [], "nccl": {}}
            for i, (name, ip) in enumerate(zip(names, ips))]


def _by_capacity(capacity, seen=None):
    """measure(): a pair runs at its slower node's link (GB/s)."""
    def measure(pairs):
        if seen is not None:
            seen.extend(pairs)
        return [min(capacity[i] for side in pair for i in side) for pair in pairs]

    return measure


def test_slow_node_is_named_once_a_re_test_with_a_node_that_passed_is_slow_too():
    # n2 is throttled: pairs n1-n2 and n2-n3 are slow, the others healthy; its re-test with n0 or n1 is slow again
    nodes = _nodes(["n0", "n1", "n2", "n3"])
    pairs, found = c.check_pairs(nodes, _by_capacity([10.0, 10.0, 0.4, 9.5]), c.Options(), 1 << 20)
    assert found["suspects"] == ["n2"] and found["first_pass_suspects"] == ["n2"] and found["cleared"] == []
    # round 1 runs n0 - n1 and n2 - n3 at once, round 2 n1 - n2 and n3 - n0
    assert [p["nodes"] for p in found["slow_pairs"]] == [["n2", "n3"], ["n1", "n2"]]
    assert "n2" in found["slowest"]["nodes"] and found["best_gbps"] == 10.0
    retest = [p for p in pairs if p.phase == "confirm"]
    assert len(retest) == 1 and retest[0].nodes[0] == "n2" and retest[0].slow and retest[0].round == 3
    report = c.Report(backend="gloo", world_size=4, nodes=nodes, rows=[c.Row(1 << 20, 1000.0, 4)],
                      large_bytes=1 << 20, pairs=pairs, pair_findings=found)
    problem = report.problems()[0]
    assert problem.startswith("slow node(s): n2 (slow pairs: n2 - n3 0.40 GB/s, n1 - n2 0.40 GB/s; slow again "
                              f"with a node that passed: n2 - {retest[0].nodes[1]} 0.40 GB/s; best pair 10.00"), problem
    text = report.format()
    assert "(re-test)" in text and "# Localization: ring of 4 nodes" in text and "3 round(s), 5 pair test(s)" in text


def test_a_lone_slow_pair_names_nobody_and_a_floor_no_pair_meets_is_not_pinned_on_a_node():
    nodes = _nodes(["n0", "n1", "n2", "n3"])
    slow_link = {frozenset({2, 3}): 2.0}

    def measure(pairs):
        return [slow_link.get(frozenset(i for side in p for i in side), 10.0) for p in pairs]

    # n2 and n3 each pass with their other neighbour: the slow pair is neither node's fault
    pairs, found = c.check_pairs(nodes, measure, c.Options(), 1 << 20)
    assert [p["nodes"] for p in found["slow_pairs"]] == [["n2", "n3"]]
    assert found["suspects"] == [] and found["unresolved"] == [] and c.pair_problems(found) == []
    assert len(pairs) == 4  # the ring only: nothing to re-test
    # every pair below an absolute floor: no node passed, so none can be re-tested or named, and the check fails
    _pairs, floor = c.check_pairs(nodes[:3], _by_capacity([3.0, 3.1, 2.9]), c.Options(min_busbw_gbps=5.0), 8)
    assert len(floor["slow_pairs"]) == 3 and floor["suspects"] == [] and floor["unresolved"] == ["n0", "n1", "n2"]
    problems = c.pair_problems(floor)
    assert len(problems) == 1 and problems[0].startswith("slow pair(s) not pinned on a node: n0 - n1 3.00 GB/s")
    assert "no node on another host passed" in problems[0]


def test_nodes_are_named_by_their_ray_node_names():
    hosts = {"10.0.0.11": "gpu1", "10.0.0.12/a": "gpu2/a"}
    assert c.node_label("10.0.0.11", "10.0.0.11", hosts) == "gpu1"
    assert c.node_label("10.0.0.12/a", "10.0.0.12", hosts) == "gpu2/a"  # the preflight's map, by Ray node name
    assert c.node_label("10.0.0.11/b", "10.0.0.11", hosts) == "gpu1/b"  # an IP map still tells instances apart
    assert c.node_label("", "10.0.0.11", hosts) == "gpu1"
    assert c.node_label("10.0.0.13/a", "10.0.0.13", hosts) == "10.0.0.13/a"
    assert c.node_label("trainer-7", "10.0.0.11", hosts) == "trainer-7"


def test_instances_of_one_host_are_not_a_pair_and_get_a_host_line():
    # gpu1 runs two Ray nodes. Paired, they would measure its loopback (80 GB/s), be the best pair and make every
    # real 10 GB/s pair "slow"; in the ring they are never neighbours, and nobody is named.
    names = ["gpu1/a", "gpu1/b", "gpu2", "gpu3"]
    ips = ["10.0.0.11", "10.0.0.11", "10.0.0.12", "10.0.0.13"]
    nodes = _nodes(names, ips)

    def measure(pairs):
        return [80.0 if len({ips[i] for side in p for i in side}) == 1 else 10.0 for p in pairs]

    pairs, found = c.check_pairs(nodes, measure, c.Options(), 1 << 20)
    assert all(ips[names.index(a)] != ips[names.index(b)] for a, b in (p.nodes for p in pairs))
    assert found["suspects"] == [] and found["slow_pairs"] == [] and found["best_gbps"] == 10.0
    assert found["hosts"] == [{"host": "10.0.0.11", "name": "gpu1", "nodes": {"gpu1/a": "ok", "gpu1/b": "ok"}}]
    report = c.Report(backend="gloo", world_size=4, nodes=nodes, rows=[c.Row(1 << 20, 1000.0, 4)],
                      large_bytes=1 << 20, pairs=pairs, pair_findings=found)
    assert report.problems() == []
    assert "# Host gpu1 (10.0.0.11), 2 Ray nodes: gpu1/a ok, gpu1/b ok" in report.format()


def test_a_single_host_cluster_says_so_and_skips_the_pair_tests():
    nodes = _nodes(["gpu1/a", "gpu1/b", "gpu1/c"], ["10.0.0.11"] * 3)
    seen: list = []
    pairs, found = c.check_pairs(nodes, _by_capacity([1.0] * 3, seen), c.Options(), 1 << 20)
    assert seen == [] and pairs == [] and found["single_host"] == "10.0.0.11" and found["suspects"] == []
    assert found["hosts"][0]["nodes"] == {"gpu1/a": "untested", "gpu1/b": "untested", "gpu1/c": "untested"}
    report = c.Report(backend="gloo", world_size=3, nodes=nodes, rows=[c.Row(1 << 20, 1000.0, 3)],
                      large_bytes=1 << 20, pairs=pairs, pair_findings=found)
    assert report.problems() == []
    assert ("# Pair tests skipped: every node is on host 10.0.0.11; a pair there would measure the host's loopback, "
            "not a network link") in report.format()


def test_a_large_cluster_is_bisected_in_blocks_and_names_the_slow_node():
    names = [f"w{i:03d}" for i in range(100)]
    capacity = [10.0] * 100
    capacity[42] = 1.5
    pairs, found = c.check_pairs(_nodes(names, [f"10.0.{i // 200}.{i % 200}" for i in range(100)]),
                                 _by_capacity(capacity), c.Options(pair_ring_max=8), 1 << 20)
    assert found["suspects"] == ["w042"] and found["first_pass"] == "ring of 8 blocks of about 12 nodes"
    # the pairs of single nodes: the last halves, w041 and w042, each with a node that passed; w041 passes
    assert [(p.nodes[0], p.phase, p.slow) for p in pairs] == [("w041", "confirm", False), ("w042", "confirm", True)]
    phases = [t["phase"] for t in found["tests"]]
    assert phases.count("ring") == 8 and "bisect" in phases and phases[-1] == "confirm"
    assert found["tests"][0]["nodes"][0] == "w000 and 12 more" and len(found["tests"][0]["sides"][0]) == 13


def test_report_verdict_names_floor_and_wrong_values():
    rows = [c.Row(1 << 20, 1000.0, 3), c.Row(2 << 20, 2000.0, 3, wrong=5)]
    pairs, found = c.check_pairs(_nodes(["n0", "n1", "n2"]), _by_capacity([1.0, 1.0, 1.0]), c.Options(), 1 << 20)
    report = c.Report(backend="gloo", world_size=3, nodes=[{}, {}, {}], rows=rows, large_bytes=1 << 20,
                      min_busbw_gbps=100.0, pairs=pairs, pair_findings=found)
    data = report.to_dict()
    assert not data["ok"]
    assert any("wrong values at 1 size(s) (first at 2097152 B)" in p for p in data["problems"])
    assert any("below min_busbw_gbps 100 GB/s; slowest pair n0 - n1" in p for p in data["problems"])
    assert "# Result: FAILED" in report.format()
    json.dumps(data)  # serializable as the module returns it


def test_a_node_whose_nccl_bootstraps_elsewhere_is_named():
    good = {"available": True, "version": "2.30.7", "socket_ifname": "=eth0",
            "bootstrap": {"address": "10.0.0.11", "port": 40000}}
    wrong_if = dict(good, socket_ifname="=lo", bootstrap={"address": "127.0.0.1", "port": 40001})
    nodes = [{"name": "w1", "ip": "10.0.0.11", "nccl": good}, {"name": "w2", "ip": "10.0.0.12", "nccl": wrong_if},
             {"name": "cpu", "ip": "10.0.0.13", "nccl": {"available": False, "reason": "no libnccl found"}}]
    report = c.Report(backend="gloo", world_size=3, nodes=nodes, rows=[c.Row(1 << 20, 1000.0, 3)],
                      large_bytes=1 << 20)
    assert report.problems() == ["node w2: NCCL bootstraps on 127.0.0.1 (NCCL_SOCKET_IFNAME='=lo'), not on the "
                                 "node's Ray address 10.0.0.12"]


def test_options_are_checked_and_named():
    with pytest.raises(SettingsError, match="backend"):
        c.Options(backend="mpi").validate()
    with pytest.raises(SettingsError, match="pair_ratio"):
        c.Options(pair_ratio=1.5).validate()
    with pytest.raises(SettingsError, match="pair_ring_max: must be 3 or more"):
        c.Options(pair_ring_max=2).validate()
    with pytest.raises(SettingsError, match="the size range is empty"):
        c.Options(min_bytes=1 << 20, max_bytes=1024).validate()
    with pytest.raises(SettingsError, match="unknown option"):
        c.Options.from_dict({"itters": 3})
    with pytest.raises(SettingsError, match="environment variable names"):
        c.Options(env={"NCCL DEBUG": "INFO"}).validate()


def test_cli_parses_sizes_env_and_hosts():
    args = c._parser().parse_args(["--address", "10.0.0.1:6379", "--max-bytes", "16M", "--env", "NCCL_DEBUG=WARN",
                                   "--host", "10.0.0.1=head", "--host", "10.0.0.2/a=gpu2/a", "--expect-network",
                                   "IB", "--no-pairwise", "--pair-ring-max", "16", "--pair-one-at-a-time"])
    opts = c.options_from_args(args)
    assert opts.max_bytes == 16 << 20 and opts.env == {"NCCL_DEBUG": "WARN"}
    assert opts.hosts == {"10.0.0.1": "head", "10.0.0.2/a": "gpu2/a"}
    assert opts.expect_network == ["IB"] and not opts.pairwise
    assert opts.pair_ring_max == 16 and not opts.pair_concurrent
    assert c.options_from_args(c._parser().parse_args([])).pair_concurrent
    with pytest.raises(SettingsError, match="--env"):
        c.options_from_args(c._parser().parse_args(["--env", "NOVALUE"]))


def test_thresholds_data_file_has_a_source_and_a_margin_for_every_floor():
    data = yaml.safe_load((ROOT / "roles/preflight/files/busbw_thresholds.yml").read_text())["instance_types"]
    assert {"p4de.24xlarge", "p5.48xlarge", "BM.GPU.H100.8"} <= set(data)
    for name, entry in data.items():
        assert entry.get("network") in ("Libfabric", "IB", "Socket"), name
        scopes = [s for s in ("multi_node", "single_node") if s in entry]
        assert scopes, name
        for scope in scopes:
            floor = entry[scope]
            assert floor["source"].startswith("https://"), (name, scope)
            assert floor["min_busbw_gbps"] > 0, (name, scope)
            if not floor.get("vendor_floor"):
                assert floor["min_busbw_gbps"] < floor["published_gbps"], (name, scope)


def test_report_renders_markdown_html_and_plot(tmp_path):
    rows = [c.Row(s, 10.0 + s / 1e4, 3).to_dict() for s in c.sweep(8, 1 << 20)]
    result = {
        "ok": False, "time": "2026-11-23T12:00:00Z", "head": "demo-head", "instance_type": "", "floor_source": "",
        "cluster": {"ray_version": "2.60.0", "alive_nodes": 3, "cpus": 6.0, "gpus": 0.0},
        "gpus": {"demo-head": {"available": False, "reason": "no NVIDIA driver on this host", "count": 0,
                               "problems": [], "ray_gpus": 0.0},
                 "demo-worker1": {"available": True, "count": 1, "ray_gpus": 1.0, "driver_version": "570.86.15",
                                  "gpus": [{"name": "NVIDIA H100"}],
                                  "problems": ["GPU 0 (GPU-1): PCIe link x8 of x16"]}},
        "collective": {"ok": False, "problems": ["slow node(s): demo-worker2 (slow pairs: ...)"], "backend": "gloo",
                       "world_size": 3, "rows": rows, "large_bytes": 1 << 17, "peak_busbw_gbps": 1.5,
                       "min_busbw_gbps": None, "transport": {"network": "gloo/tcp"},
                       "nodes": [{"name": "demo-head", "ip": "10.0.0.10", "ranks": [0], "gpu_ids": [],
                                  "nccl": {"available": True, "version": "2.30.7", "socket_ifname": "=eth0",
                                           "bootstrap": {"address": "10.0.0.10", "port": 40000}}},
                                 {"name": "demo-worker1", "ip": "10.0.0.11", "ranks": [1], "gpu_ids": [],
                                  "nccl": {"available": False, "reason": "no libnccl found"}}],
                       "pairs": [{"nodes": ["demo-head", "demo-worker2"], "busbw_gbps": 0.01, "size": 1 << 20},
                                 {"nodes": ["demo-worker2", "demo-worker1"], "busbw_gbps": 0.01, "size": 1 << 20,
                                  "phase": "confirm", "round": 4, "slow": True}],
                       "pair_findings": {"slow_pairs": [{"nodes": ["demo-head", "demo-worker2"]}],
                                         "suspects": ["demo-worker2"], "rounds": 4, "pair_tests": 4,
                                         "first_pass": "ring of 3 nodes", "threshold_gbps": 0.14,
                                         "hosts": [{"host": "10.0.0.12", "name": "demo-worker2",
                                                    "nodes": {"demo-worker2/a": "slow", "demo-worker2/b": "ok"}}]}},
        "storage": {"demo-head": [], "demo-worker1": [{"path": "/shared", "state": "ok", "reason": "mounted"}],
                    "demo-worker2": [{"path": "/shared", "state": "degraded", "reason": "server unreachable"}]},
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    out = subprocess.run([sys.executable, str(ROOT / "roles/preflight/files/preflight_report.py"), str(path)],
                         capture_output=True, text=True, check=True).stdout.split()
    assert sorted(Path(p).name for p in out) == ["busbw.png", "report.html", "report.md"]
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# Cluster health: FAIL") and "slow node(s): demo-worker2" in md
    assert "- demo-worker1: GPU 0 (GPU-1): PCIe link x8 of x16" in md
    assert ("- shared storage: demo-worker1 /shared ok, demo-worker2 /shared degraded (server unreachable)"
            in md), md
    assert "| demo-head | no: no NVIDIA driver on this host | 0 | 0 |" in md
    assert "| demo-head - demo-worker2 | 1 MiB | 0.010 | yes |" in md
    assert "| demo-worker2 - demo-worker1 (re-test) | 1 MiB | 0.010 | yes |" in md
    assert ("- ring of 3 nodes, then halves and re-tests with nodes that passed: 4 round(s), 4 pair test(s); slow "
            "below 0.140 GB/s") in md
    assert "- slow, confirmed by a re-test with a node that passed: demo-worker2" in md
    assert "- host demo-worker2 (10.0.0.12): demo-worker2/a slow, demo-worker2/b ok" in md
    assert "| demo-head | 10.0.0.10 | 0 | - | 2.30.7 (10.0.0.10, =eth0) |" in md
    assert "| demo-worker1 | 10.0.0.11 | 1 | - | - |" in md
    assert "<span class='fail'>FAIL</span>" in (tmp_path / "report.html").read_text()
    assert (tmp_path / "busbw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _node(cpus=2, gpus=0):
    return {"Alive": True, "Resources": {"CPU": float(cpus), **({"GPU": float(gpus)} if gpus else {})}}


def test_bundles_per_node_and_too_few_nodes_named():
    nodes = [_node(), _node(), _node()]
    assert c.plan_bundles(nodes, c.Options(), "gloo") == ([{"CPU": 1}] * 3, 1, 3)
    assert c.plan_bundles([_node(16, 8)] * 2, c.Options(), "nccl") == ([{"GPU": 8, "CPU": 8}] * 2, 8, 2)
    with pytest.raises(c.CollectiveError, match=r"nodes: 5 requested, but 3 alive node\(s\) with >= 1 CPU"):
        c.plan_bundles(nodes, c.Options(nodes=5), "gloo")
    with pytest.raises(c.CollectiveError, match="needs 2 or more"):
        c.plan_bundles([_node()], c.Options(), "gloo")
    with pytest.raises(c.CollectiveError, match="Ray reports no GPUs"):
        c.plan_bundles(nodes, c.Options(), "nccl")
    assert c.plan_bundles([_node(16, 8)], c.Options(intra_node=True), "nccl")[2] == 1


class _Method:
    def __init__(self, fn):
        self.remote = fn


class _FakeRank:
    """A rank actor's two methods the pair tests call; .remote returns the value itself (get() passes it on)."""

    def __init__(self, rank, log, times):
        self.groups = []
        self.new_group = _Method(lambda ranks: self.groups.append(tuple(ranks)))
        self.run = _Method(lambda sizes, warmup, iters, ranks: (
            log.append((rank, tuple(ranks))) or [(sizes[0], times[tuple(ranks)], 0)]))


def test_the_ray_measurement_makes_each_group_once_and_reads_each_pairs_own_time():
    nodes = _nodes(["a", "b", "c", "d"])
    for i, node in enumerate(nodes):
        node["ranks"] = [2 * i, 2 * i + 1]  # two ranks (GPUs) per node
    times = {(0, 1, 2, 3): 1000.0, (4, 5, 6, 7): 4000.0, (0, 1, 4, 5): 2000.0}
    log, batches = [], []
    actors = [_FakeRank(r, log, times) for r in range(8)]

    def get(refs, what):
        batches.append(what)
        return refs

    measure = c._ray_measure(actors, nodes, get, size=1 << 20, iters=5, concurrent=True)
    found = measure([((0,), (1,)), ((2,), (3,))])
    assert found == [pytest.approx(c.Row(1 << 20, 1000.0, 4).busbw_gbps),
                     pytest.approx(c.Row(1 << 20, 4000.0, 4).busbw_gbps)]
    assert all(a.groups == [(0, 1, 2, 3), (4, 5, 6, 7)] for a in actors)  # every rank, in the same order
    assert batches[-1] == "the pair test(s) a - b, c - d" and sorted(r for r, _g in log) == list(range(8))
    measure([((0,), (1,)), ((0,), (2,))])  # a group seen before is not made again
    assert all(a.groups == [(0, 1, 2, 3), (4, 5, 6, 7), (0, 1, 4, 5)] for a in actors)

    batches.clear()
    one_by_one = c._ray_measure(actors, nodes, get, size=1 << 20, iters=5, concurrent=False)
    assert one_by_one([((0,), (1,)), ((2,), (3,))]) == found
    assert batches[-2:] == ["the pair test(s) a - b", "the pair test(s) c - d"]
