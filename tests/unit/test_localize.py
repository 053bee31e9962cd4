# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.localize: the ring, the bisection and the re-tests that name a slow node, on the bandwidth model."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from rayfleet import localize as lz


def _model(n: int, bad: dict[int, float], noise: float = 0.0, seed: int = 0, hosts=None, seen=None):
    """A measure() over the model: capacity 1.0, bad nodes theirs; every round checked for the contract."""
    hosts = hosts or [f"10.0.0.{i}" for i in range(n)]
    capacity = [bad.get(i, 1.0) for i in range(n)]
    inner = lz.simulated_measure(capacity, random.Random(seed), noise)

    def measure(pairs):
        per_test = [lz.hosts_of(pair, hosts) for pair in pairs]
        assert sum(map(len, per_test)) == len(set().union(*per_test)), f"a host in two tests of a round: {pairs}"
        for pair in pairs:
            assert lz.spans_hosts(pair, hosts), f"a pair inside one host was measured: {pair}"
        if seen is not None:
            seen.extend(pairs)
        return inner(pairs)

    return hosts, measure


def test_ring_pairs_put_every_member_in_two_pairs():
    assert lz.ring_pairs(1) == []
    assert lz.ring_pairs(2) == [(0, 1)]
    assert lz.ring_pairs(4) == [(0, 1), (1, 2), (2, 3), (3, 0)]


def test_ring_order_never_puts_two_nodes_of_one_host_side_by_side():
    assert lz.ring_order(["a", "b", "c", "d"]) == [0, 1, 2, 3]  # one node per host: the order is kept
    for n in range(3, 10):
        for layout in itertools.product("abc", repeat=n):
            order = lz.ring_order(layout)
            assert sorted(order) == list(range(n))
            if max(layout.count(h) for h in set(layout)) <= n // 2:
                assert all(layout[order[i]] != layout[order[(i + 1) % n]] for i in range(n)), (layout, order)


def test_a_rounds_tests_share_no_host():
    hosts = ["h0", "h0", "h1", "h1", "h2", "h3"]
    units = [(i,) for i in lz.ring_order(hosts)]
    pairs, skipped = lz.ring_of(units, hosts)
    assert not skipped
    rounds = lz.schedule(pairs, hosts)
    assert sum(len(r) for r in rounds) == len(pairs)
    for tests in rounds:
        used = [h for pair in tests for h in lz.hosts_of(pair, hosts)]
        assert len(used) == len(set(used)), tests
    assert len(lz.schedule([((i,), (j,)) for i, j in lz.ring_pairs(8)], [str(i) for i in range(8)])) == 2


def test_instances_of_one_host_are_never_paired_and_cannot_become_the_best_pair():
    # 10.0.0.1 runs two Ray nodes: their "pair" would move data over the host's loopback at 100 GB/s, be the best
    # pair, and put every real 10 GB/s pair below 0.75 x best. The plain ring of the 4 nodes has that pair.
    hosts = ["10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert any(hosts[i] == hosts[j] for i, j in lz.ring_pairs(len(hosts)))

    def measure(pairs):
        return [100.0 if not lz.spans_hosts(p, hosts) else 10.0 for p in pairs]

    found = lz.locate(hosts, measure, ratio=0.75)
    assert all(lz.spans_hosts(t.pair, hosts) for t in found.tests)
    assert found.best_gbps == 10.0 and not any(t.slow for t in found.tests)
    assert found.confirmed == [] and found.first_pass_suspects == [] and not found.skipped
    assert set(found.passed) == {0, 1, 2, 3}


def test_one_slow_node_among_256_is_found_within_2_log2_n_plus_2_rounds():
    n, bound = 256, 2 * math.log2(256) + 2
    for seed in range(40):
        rng = random.Random(seed)
        victim = rng.randrange(n)
        hosts, measure = _model(n, {victim: rng.uniform(0.1, 0.3)}, noise=0.1, seed=seed)
        found = lz.locate(hosts, measure, ratio=0.75)
        assert found.confirmed == [victim], seed
        assert found.rounds <= bound, (seed, found.rounds)
        assert found.in_blocks and len(found.tests) < n // 4  # far fewer pair tests than a ring of 256 nodes


@pytest.mark.parametrize("n", [8, 64, 256])
def test_two_slow_nodes_are_both_named(n):
    rng = random.Random(n)
    placements = [(0, 1), (0, 2), (n // 2, n - 1)] + [tuple(rng.sample(range(n), 2)) for _draw in range(20)]
    for a, b in placements:  # side by side, one node apart (their common neighbour is a suspect), anywhere
        hosts, measure = _model(n, {a: 0.2, b: 0.1}, noise=0.1, seed=a * n + b)
        found = lz.locate(hosts, measure, ratio=0.75)
        assert found.confirmed == sorted({a, b}), (a, b, found.confirmed)
        assert found.rounds <= 2 * math.log2(n) + 2


def test_a_noisy_healthy_cluster_names_nobody():
    for n in (8, 64, 256):
        for seed in range(100):
            hosts, measure = _model(n, {}, noise=0.1, seed=seed)
            found = lz.locate(hosts, measure, ratio=0.75)
            assert found.confirmed == [] and found.unresolved == [], (n, seed)
            assert found.rounds == 2  # the ring only: nothing to re-test


def test_a_ring_suspect_the_re_test_clears_is_not_named():
    # n2's two ring pairs were timed during someone else's transfer; re-tested with a node that passed, it is fine
    hosts = [f"10.0.0.{i}" for i in range(6)]
    transient = {frozenset({1, 2}): 2.0, frozenset({2, 3}): 2.5}

    def measure(pairs):
        out = []
        for pair in pairs:
            key = frozenset(i for side in pair for i in side)
            out.append(transient.pop(key, 10.0))
        return out

    found = lz.locate(hosts, measure, ratio=0.75)
    assert found.first_pass_suspects == [2]
    assert found.confirmed == [] and found.cleared == [2]
    retest = [t for t in found.tests if t.phase == lz.CONFIRM]
    assert len(retest) == 1 and retest[0].pair[0] == (2,) and retest[0].pair[1][0] in found.passed
    assert not retest[0].slow and found.rounds == 3


def test_a_single_host_cluster_is_not_pair_tested():
    def measure(pairs):
        raise AssertionError(f"measured {pairs} on a single host")

    found = lz.locate(["10.0.0.5"] * 4, measure, ratio=0.75)
    assert found.single_host and found.tests == [] and found.rounds == 0 and found.confirmed == []
    assert set(found.verdicts().values()) == {"untested"}


def test_a_host_holding_most_nodes_still_gets_each_node_a_pair_across_hosts():
    hosts = ["a", "a", "a", "b"]
    seen: list = []
    _hosts, measure = _model(4, {}, hosts=hosts, seen=seen)
    found = lz.locate(hosts, measure, ratio=0.75)
    assert found.skipped  # a ring of 3 a-nodes and one b-node cannot avoid a-a neighbours: those are left out
    assert {i for pair in seen for side in pair for i in side} == {0, 1, 2, 3}
    assert found.confirmed == [] and sorted(found.passed) == [0, 1, 2, 3]


def test_a_pair_below_the_floor_with_no_node_that_passed_names_nobody():
    hosts, measure = _model(2, {})
    found = lz.locate(hosts, measure, ratio=0.75, min_busbw=5.0)
    assert found.tests[0].slow and found.confirmed == [] and found.unresolved == [0, 1]


def test_a_measurement_that_breaks_the_contract_is_named():
    with pytest.raises(lz.LocalizeError, match=r"round 1 returned \[1\.0\]; expected 2 bandwidth"):
        lz.locate([str(i) for i in range(4)], lambda pairs: [1.0], ratio=0.75)
    with pytest.raises(ValueError, match="ring_max: expected 3 or more"):
        lz.locate(["a", "b"], lambda pairs: [1.0], ratio=0.75, ring_max=2)
