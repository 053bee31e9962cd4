# SPDX-License-Identifier: GPL-3.0-or-later
"""Find the slow nodes of a cluster with pair tests: a ring first, then re-tests against nodes that passed.

A pair test is one all-reduce over the nodes of its two sides. A side is one node in a ring of node pairs, or, on a
large cluster, a block of neighbouring nodes or half of one. The all-reduce runs at the pace of its slowest link, so a
fast pair clears every node in it, and a slow pair holds at least one slow node.

1. First pass, the ring: each node (or, beyond ``ring_max`` nodes, each of ``ring_max`` blocks) is paired with the
   next one, the last with the first. The ring is ordered so that two Ray nodes of one host (``ray_node_instances``)
   are never neighbours when the hosts allow it: such a pair measures the host's loopback, not a network link. The
   best pair is the reference: a pair below ``ratio`` x the best pair, or below ``min_busbw``, is slow. A member in a
   fast pair passes; a member in slow pairs only is a suspect.
2. Bisection: a suspect block is split in halves, each half tested with a node that passed (on another host), so only
   the half can make the test slow. A slow half is split again, a fast one passes: one slow node among the n nodes
   of a block is found in log2(n) rounds, two slow nodes in the same rounds.
3. Confirmation: a suspect of one node is re-tested with a node that passed. Only a node slow again is named; a node
   that only a noisy first-pass measurement pointed at passes.

A round is one batch of pair tests run at once: no node and no host is in two tests of a round (a host's nodes share
its network). ``locate`` is pure: it takes the measurement as a callback, ``measure(pairs) -> bandwidths`` (one
round), so the same code runs against Ray (``rayfleet.collective``) and against ``simulated_measure``'s model.

The model (tools/bench_localize.py): each node has a link capacity, 1.0 when healthy and 0.1-0.3 when bad; a pair's
bandwidth is the smallest capacity among its nodes x (1 + u), u uniform in [-noise, +noise], drawn for each test.
With ``ratio`` r, noise within +-(1 - r) / (1 + r) (+-14 % at r = 0.75) never makes a healthy pair slow, and a node at
0.3 of a healthy link or less is slow in every test it is in; beyond that, re-tests clear what the ring mistook.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rayfleet.errors import RayfleetError

Side = tuple[int, ...]
Pair = tuple[Side, Side]
Measure = Callable[[Sequence[Pair]], Sequence[float]]

RING = "ring"  # phases of a test
BISECT = "bisect"
CONFIRM = "confirm"


class LocalizeError(RayfleetError):
    """The measurement callback broke its contract (wrong number of results, a negative bandwidth)."""


def ring_pairs(count: int) -> list[tuple[int, int]]:
    """Pairs (i, i+1 mod k): every member is in two pairs when k >= 3, so one slow member shows twice."""
    if count < 2:
        return []
    if count == 2:
        return [(0, 1)]
    return [(i, (i + 1) % count) for i in range(count)]


def ring_order(hosts: Sequence[str]) -> list[int]:
    """Node indices in ring order: two nodes of one host are never neighbours (the last node included, whose
    neighbour is the first) when no host holds more than half the nodes. Nodes all on different hosts keep their
    order.

    The nodes, grouped by host (largest group first), fill the even places of the ring, then the odd ones.
    """
    if len(set(hosts)) == len(hosts):
        return list(range(len(hosts)))
    groups: dict[str, list[int]] = {}
    for index, host in enumerate(hosts):
        groups.setdefault(host, []).append(index)
    nodes = [i for group in sorted(groups.values(), key=lambda g: (-len(g), g[0])) for i in group]
    places = list(range(0, len(hosts), 2)) + list(range(1, len(hosts), 2))
    order = [0] * len(hosts)
    for place, index in zip(places, nodes):
        order[place] = index
    return order


def blocks(order: Sequence[int], ring_max: int) -> list[Side]:
    """The ring's members: each node when there are at most ``ring_max``, else ``ring_max`` blocks of neighbouring
    nodes (in ring order, so a block spans several hosts), their sizes differing by one at most."""
    if len(order) <= ring_max:
        return [(i,) for i in order]
    size, extra = divmod(len(order), ring_max)
    out, start = [], 0
    for b in range(ring_max):
        end = start + size + (1 if b < extra else 0)
        out.append(tuple(order[start:end]))
        start = end
    return out


def hosts_of(pair: Pair, hosts: Sequence[str]) -> set[str]:
    return {hosts[i] for side in pair for i in side}


def spans_hosts(pair: Pair, hosts: Sequence[str]) -> bool:
    """Whether a pair crosses the network: its nodes are on two hosts or more."""
    return len(hosts_of(pair, hosts)) >= 2


def ring_of(members: Sequence[Side], hosts: Sequence[str]) -> tuple[list[Pair], list[Pair]]:
    """(pairs to test, pairs left out): the ring of the members without the pairs inside one host; a member left
    with fewer than two pairs is paired across hosts with the members that have fewest pairs."""
    ring = [(members[i], members[j]) for i, j in ring_pairs(len(members))]
    pairs = [p for p in ring if spans_hosts(p, hosts)]
    skipped = [p for p in ring if not spans_hosts(p, hosts)]
    if not skipped:
        return pairs, skipped
    count = Counter(m for p in pairs for m in p)
    want = min(2, len(members) - 1)
    for member in members:
        taken = {q for p in pairs if member in p for q in p}
        others = [m for m in members if m not in taken and spans_hosts((member, m), hosts)]
        while count[member] < want and others:
            other = min(others, key=lambda m: count[m])
            others.remove(other)
            pairs.append((member, other))
            count[member] += 1
            count[other] += 1
    return pairs, skipped


def schedule(pairs: Sequence[Pair], hosts: Sequence[str]) -> list[list[Pair]]:
    """Rounds of tests run at once, in order: a test joins the first round none of whose tests shares a host
    (and so a node) with it."""
    rounds: list[tuple[list[Pair], set[str]]] = []
    for pair in pairs:
        used = hosts_of(pair, hosts)
        for tests, busy in rounds:
            if not busy & used:
                tests.append(pair)
                busy.update(used)
                break
        else:
            rounds.append(([pair], set(used)))
    return [tests for tests, _placed in rounds]


def halves(side: Side) -> list[Side]:
    if len(side) == 1:
        return [side]
    mid = (len(side) + 1) // 2
    return [side[:mid], side[mid:]]


@dataclass(frozen=True)
class PairTest:
    pair: Pair
    busbw_gbps: float
    round: int
    phase: str  # ring, bisect or confirm
    slow: bool = False


@dataclass
class Localization:
    """What the pair tests found: node indices into ``hosts``, and every test in the order it ran."""

    hosts: list[str]
    members: int = 0  # members of the first-pass ring: nodes, or blocks when there are more than ring_max nodes
    tests: list[PairTest] = field(default_factory=list)
    rounds: int = 0
    best_gbps: float = 0.0
    threshold_gbps: float = 0.0
    first_pass_suspects: list[int] = field(default_factory=list)  # nodes of the members in slow pairs only
    confirmed: list[int] = field(default_factory=list)  # slow with a node that passed: the slow nodes
    cleared: list[int] = field(default_factory=list)  # first-pass suspects that passed a re-test
    unresolved: list[int] = field(default_factory=list)  # suspects with no node that passed to re-test them with
    passed: list[int] = field(default_factory=list)  # nodes in a fast test
    skipped: list[Pair] = field(default_factory=list)  # ring neighbours inside one host, not measured

    @property
    def in_blocks(self) -> bool:
        """Whether the ring's members were blocks of nodes rather than single nodes."""
        return 0 < self.members < len(self.hosts)

    @property
    def single_host(self) -> bool:
        return len(self.hosts) >= 2 and len(set(self.hosts)) == 1

    def verdicts(self) -> dict[int, str]:
        """Each node's verdict: slow, ok (in a fast test), unresolved or untested."""
        out = dict.fromkeys(range(len(self.hosts)), "untested")
        out.update(dict.fromkeys(self.passed, "ok"))
        out.update(dict.fromkeys(self.unresolved, "unresolved"))
        out.update(dict.fromkeys(self.confirmed, "slow"))
        return out


def _run_rounds(loc: Localization, measure: Measure, pairs: Sequence[Pair]) -> list[tuple[Pair, float, int]]:
    """Run ``pairs`` in rounds; (pair, bandwidth, round number) for each, in the order they ran."""
    out = []
    for tests in schedule(pairs, loc.hosts):
        found = list(measure(tests))
        if len(found) != len(tests) or any(not bw >= 0 for bw in found):
            raise LocalizeError(f"the measurement of round {loc.rounds + 1} returned {found!r}; expected "
                                f"{len(tests)} bandwidth(s) >= 0, one per pair, for {tests!r}")
        loc.rounds += 1
        out += [(pair, bw, loc.rounds) for pair, bw in zip(tests, found)]
    return out


def locate(hosts: Sequence[str], measure: Measure, *, ratio: float, min_busbw: float | None = None,
           ring_max: int = 32) -> Localization:
    """Find the slow nodes among ``len(hosts)`` nodes (``hosts[i]``: node i's host) with ``measure``."""
    if ring_max < 3:
        raise ValueError(f"ring_max: expected 3 or more (a ring puts each member in two pairs), got {ring_max}")
    loc = Localization(list(hosts))
    if len(hosts) < 2 or loc.single_host:
        return loc
    members = blocks(ring_order(hosts), ring_max)
    loc.members = len(members)
    pairs, loc.skipped = ring_of(members, hosts)
    first = _run_rounds(loc, measure, pairs)
    loc.best_gbps = max(bw for _pair, bw, _round in first)
    loc.threshold_gbps = max(ratio * loc.best_gbps, min_busbw or 0.0)
    loc.tests = [PairTest(pair, bw, n, RING, bw < loc.threshold_gbps) for pair, bw, n in first]
    fast = {m for t in loc.tests if not t.slow for m in t.pair}
    suspects = [m for m in members if m not in fast and any(m in t.pair for t in loc.tests if t.slow)]
    loc.passed = [i for m in members if m in fast for i in m]
    loc.first_pass_suspects = sorted(i for m in suspects for i in m)
    _bisect(loc, measure, suspects)
    retested = {i for t in loc.tests if t.phase != RING and not t.slow for i in t.pair[0]}
    loc.cleared = sorted(set(loc.first_pass_suspects) & retested)
    loc.confirmed.sort()
    loc.unresolved.sort()
    return loc


def _bisect(loc: Localization, measure: Measure, suspects: list[Side]) -> None:
    """Halve each suspect, test each half with a node that passed: a fast half passes, a slow half is halved again,
    a slow single node is confirmed."""
    while suspects:
        parts = [part for side in suspects for part in halves(side)]
        pairs, alone = _partners(parts, loc.passed, loc.hosts)
        loc.unresolved.extend(i for part in alone for i in part)
        suspects = []
        for (part, partner), bw, n in _run_rounds(loc, measure, pairs):
            slow = bw < loc.threshold_gbps
            loc.tests.append(PairTest((part, partner), bw, n, CONFIRM if len(part) == 1 else BISECT, slow))
            if not slow:
                loc.passed.extend(part)
            elif len(part) == 1:
                loc.confirmed.extend(part)
            else:
                suspects.append(part)


def _partners(parts: Sequence[Side], passed: Sequence[int], hosts: Sequence[str]) -> tuple[list[Pair], list[Side]]:
    """(each part with a node that passed on another host, parts with none). A partner is used once per batch
    where the nodes allow, and preferably on a host no other part or partner of the batch is on, so that the
    batch runs in one round."""
    busy = {hosts[i] for part in parts for i in part}
    uses: Counter[int] = Counter()
    pairs, alone = [], []
    for part in parts:
        own = {hosts[i] for i in part}
        candidates = [i for i in passed if hosts[i] not in own]
        if not candidates:
            alone.append(part)
            continue
        partner = min(candidates, key=lambda i: (uses[i], hosts[i] in busy))
        uses[partner] += 1
        busy.add(hosts[partner])
        pairs.append((part, (partner,)))
    return pairs, alone


# --- The model ----------------------------------------------------------------------------------------------------
def capacities(n: int, bad: Sequence[int], rng: random.Random, low: float = 0.1, high: float = 0.3) -> list[float]:
    """Link capacity per node: 1.0 healthy, a uniform draw in [low, high] for each bad node."""
    out = [1.0] * n
    for i in bad:
        out[i] = rng.uniform(low, high)
    return out


def simulated_measure(capacity: Sequence[float], rng: random.Random, noise: float = 0.1) -> Measure:
    """A round of pair tests on the model: min capacity of the pair's nodes x (1 + uniform(-noise, +noise))."""
    def measure(pairs: Sequence[Pair]) -> list[float]:
        return [min(capacity[i] for side in pair for i in side) * (1 + rng.uniform(-noise, noise)) for pair in pairs]

    return measure
