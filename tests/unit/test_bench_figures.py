# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/bench_bake.py, tools/bench_collective.py and tools/bench_converge.py: medians and ratios from the measured
samples, and the converge bench's CPU reading.

The samples below are test data, not measurements.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_bake
import bench_collective
import bench_converge


def test_bake_medians_and_verified_over_bare():
    boots = [(14.0, 70.0, 55.0), (16.0, 80.0, 60.0), (15.04, 72.0, 58.0)]
    got = bench_bake.summarize(200.0, 150.04, boots)
    assert got["bare_site_s"] == 200.0 and got["bake_s"] == 150.0
    assert got["boot_to_alive_s"] == [14.0, 16.0, 15.0]  # the samples in boot order, rounded
    assert got["boot_to_verified_s"] == [70.0, 80.0, 72.0] and got["site_on_baked_s"] == [55.0, 60.0, 58.0]
    assert got["median_boot_to_alive_s"] == 15.0
    assert got["median_boot_to_verified_s"] == 72.0 and got["median_site_on_baked_s"] == 58.0
    assert got["verified_over_bare"] == 0.36  # the median verified over the bare site.yml
    assert got["site_on_baked_per_role_median_s"] == {}  # no seconds per role given


def test_bake_keeps_the_median_seconds_of_each_role_over_the_boots():
    boots = [(14.0, 70.0, 55.0)] * 3
    roles = [{"ray": 10.0, "firewall": 4.0}, {"ray": 12.0, "firewall": 5.0}, {"ray": 11.0}]
    got = bench_bake.summarize(200.0, 150.0, boots, roles)
    # a role a boot did not list took no time there
    assert got["site_on_baked_per_role_median_s"] == {"firewall": 4.0, "ray": 11.0}


def test_bake_with_an_even_number_of_boots_takes_the_middle_mean():
    got = bench_bake.summarize(100.0, 90.0, [(10.0, 40.0, 30.0), (12.0, 50.0, 36.0)])
    assert got["median_boot_to_alive_s"] == 11.0 and got["median_boot_to_verified_s"] == 45.0
    assert got["verified_over_bare"] == 0.45


def test_collective_medians_and_ratios_of_the_medians():
    got = bench_collective.summarize(links=[2.0, 1.0, 1.5], bidirs=[1.2, 0.8, 1.0], pairs=[0.6, 0.9, 0.75],
                                     peaks=[0.5, 0.7, 0.6], walls=[21.44, 20.0, 30.0])
    assert got["iperf3_gbytes_per_s"] == [2.0, 1.0, 1.5] and got["iperf3_median_gbytes_per_s"] == 1.5
    assert got["iperf3_bidir_median_gbytes_per_s_per_direction"] == 1.0
    assert got["pair_busbw_median_gbps"] == 0.75 and got["all_nodes_peak_busbw_median_gbps"] == 0.6
    assert got["pair_over_link"] == 0.5 and got["pair_over_bidir_link"] == 0.75
    assert got["all_nodes_over_link"] == 0.4
    assert got["preflight_wall_s"] == [21.4, 20.0, 30.0] and got["preflight_wall_median_s"] == 21.4


def test_collective_samples_are_rounded_to_what_the_report_shows():
    got = bench_collective.summarize([1.23456], [1.0], [0.98765], [0.5], [10.04])
    assert got["iperf3_gbytes_per_s"] == [1.235] and got["pair_busbw_gbps"] == [0.988]
    assert got["pair_over_link"] == pytest.approx(0.98765 / 1.23456, abs=1e-3)


def test_the_converge_bench_reads_this_machines_cpu_seconds():
    busy0, all0 = bench_converge.machine_cpu_s()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        pass
    busy1, all1 = bench_converge.machine_cpu_s()
    assert 0 <= busy0 <= all0 and busy1 > busy0 and all1 > all0
    # busy is at most all: equal on a machine whose CPUs were all busy, up to the float subtraction's rounding
    assert busy1 - busy0 <= all1 - all0 + 1e-6
