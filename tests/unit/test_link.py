# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.link, admission's pair test of a worker's link: its settings, which proved nodes it pairs with, how a
measurement is judged against the proved pair and the floor, and what gives no verdict. The measurement itself runs
on real hosts (tests/integration/test_p_admission.py)."""

from __future__ import annotations

import pytest
from rayfleet import link
from rayfleet.errors import RayfleetError, SettingsError
from rayfleet.link import FAILED, NOT_APPLICABLE, OK, LinkCheck, Measurement
from rayfleet.raynode import RayNodeSettings

PASSED = (("rayfleet.io/admission", "passed"),)


def settings(role="worker", **extra) -> RayNodeSettings:
    data = {"role": role, "node_ip": "10.0.0.5", "ray_bin": "/opt/rayfleet/venv/bin/ray", **extra}
    if role == "worker":
        data["head_address"] = "10.0.0.1:6379"
    return RayNodeSettings.from_mapping(data)


def node(ip, head=False, labels=PASSED, state="ALIVE", name="", draining=False):
    return {"node_id": f"id-{ip}{name}", "node_ip": ip, "node_name": name or ip, "is_head_node": head,
            "state": state, "labels": dict(labels), "draining": draining}


def test_the_settings_default_validate_and_round_trip():
    assert LinkCheck.from_mapping(None) is None
    check = LinkCheck.from_mapping({"bytes": 4194304, "ratio": 0.3, "min_busbw_gbps": None, "timeout_s": 30})
    assert check == LinkCheck(bytes=4 << 20, ratio=0.3, timeout_s=30.0)
    s = settings(link_check=check.to_dict())
    assert s.link_check == check
    assert RayNodeSettings.from_mapping(s.to_dict()) == s
    # a settings file without the check reads as before, and writes no key for it
    assert "link_check" not in settings().to_dict() and settings().link_check is None


@pytest.mark.parametrize("data, message", [
    ({"size": 8}, "link_check: unknown keys ['size']"),
    ({"bytes": "16M"}, "link_check.bytes: expected a whole number >= 4"),
    ({"bytes": 2}, "link_check.bytes: expected a whole number >= 4"),
    ({"ratio": 1.5}, "link_check.ratio: expected a number >= 0 and <= 1, got 1.5"),
    ({"iters": True}, "link_check.iters: expected a whole number >= 1"),
    ({"timeout_s": 1}, "link_check.timeout_s: expected a number >= 5, got 1"),
    ({"min_busbw_gbps": -1}, "link_check.min_busbw_gbps: expected a number >= 0, got -1"),
    ([1], "link_check: expected a mapping"),
])
def test_bad_settings_are_named(data, message):
    with pytest.raises(SettingsError, match=message.replace("[", r"\[").replace("]", r"\]")):
        settings(link_check=data)


def test_peers_are_proved_alive_nodes_of_other_hosts_workers_before_the_head():
    nodes = [node("10.0.0.1", head=True), node("10.0.0.5"),  # this host's own (an earlier start) is never a peer
             node("10.0.0.6", labels={}), node("10.0.0.7", state="DEAD"), node("10.0.0.8", draining=True),
             node("10.0.0.9"), node("10.0.0.9", name="10.0.0.9/1"), node("10.0.0.10")]
    peers = link.choose_peers(nodes, "10.0.0.5")
    assert sorted(p["node_ip"] for p in peers[:2]) == ["10.0.0.10", "10.0.0.9"]  # one node per host
    assert [p["node_ip"] for p in peers][-1] == "10.0.0.1" and len(peers) == 3
    # the same joining node always starts at the same worker; others spread over them
    assert link.choose_peers(nodes, "10.0.0.5") == peers
    starts = {link.choose_peers(nodes, f"10.0.1.{i}")[0]["node_ip"] for i in range(20)}
    assert starts == {"10.0.0.5", "10.0.0.9", "10.0.0.10"}
    # only the head is proved: it is the peer, and there is no reference pair
    assert [p["node_ip"] for p in link.choose_peers([node("10.0.0.1", head=True)], "10.0.0.5")] == ["10.0.0.1"]


def test_a_pair_below_the_ratio_of_the_proved_pair_fails_and_says_against_what():
    opts = LinkCheck(bytes=4 << 20, ratio=0.3)
    slow = Measurement(peer="w1", busbw_gbps=0.012, reference_pair=("w1", "w2"), reference_gbps=1.0)
    state, reason = link.judge(opts, slow)
    assert state == FAILED
    assert reason == ("all-reduce with w1 at 4 MiB: 0.012 GB/s bus bandwidth, below 0.3 x 1.000 GB/s between w1 "
                      "and w2 (a slow NIC, cable or link on this node)")
    good = Measurement(peer="w1", busbw_gbps=0.9, reference_pair=("w1", "w2"), reference_gbps=1.0)
    assert link.judge(opts, good) == (OK, "all-reduce with w1 at 4 MiB: 0.900 GB/s bus bandwidth, at least 0.3 x "
                                          "1.000 GB/s between w1 and w2")


def test_the_floor_applies_with_the_reference_and_alone():
    opts = LinkCheck(ratio=0.5, min_busbw_gbps=2.0)
    with_ref = Measurement(peer="w1", busbw_gbps=1.5, reference_pair=("w1", "w2"), reference_gbps=2.0)
    state, reason = link.judge(opts, with_ref)  # 1.5 >= 0.5 x 2.0, but below the floor
    assert state == FAILED and "below 0.5 x 2.000 GB/s between w1 and w2 and the floor 2 GB/s" in reason
    alone = Measurement(peer="head", busbw_gbps=2.5)
    assert link.judge(opts, alone)[0] == OK
    assert link.judge(opts, Measurement(peer="head", busbw_gbps=1.0))[0] == FAILED
    # neither a reference nor a floor: measured and said so, not judged
    state, reason = link.judge(LinkCheck(), Measurement(peer="head", busbw_gbps=0.001))
    assert state == OK and "no reference (one proved host, and no floor set)" in reason


def test_wrong_results_fail_whatever_the_speed():
    state, reason = link.judge(LinkCheck(), Measurement(peer="w1", busbw_gbps=9.0, wrong=3))
    assert state == FAILED and "3 element(s) came back wrong" in reason


def fake_env(nodes, measured=None, error=None):
    calls = []

    def measure(s, opts, peers):
        calls.append([p["node_ip"] for p in peers])
        if error is not None:
            raise error
        return measured

    return link.Environment(nodes=lambda _s: nodes, measure=measure), calls


def test_check_runs_only_where_it_applies():
    on = {"link_check": {"ratio": 0.5}}
    assert link.check(settings("head", **on))[0] == NOT_APPLICABLE
    assert link.check(settings()) == (NOT_APPLICABLE, "turned off (link_check: null)", {})
    env, calls = fake_env([node("10.0.0.5")])
    state, reason, details = link.check(settings(**on), env)
    assert state == NOT_APPLICABLE and reason.startswith("no proved node on another host") and calls == []
    assert details == {}


def test_check_pairs_with_two_proved_hosts_and_records_the_figures():
    nodes = [node("10.0.0.1", head=True), node("10.0.0.9"), node("10.0.0.10")]
    m = Measurement(peer="10.0.0.9", busbw_gbps=0.1, reference_pair=("10.0.0.9", "10.0.0.10"), reference_gbps=1.0,
                    seconds=4.2)
    env, calls = fake_env(nodes, m)
    state, reason, details = link.check(settings(link_check={"ratio": 0.3, "bytes": 1024}), env)
    assert state == FAILED and "below 0.3 x 1.000 GB/s" in reason
    assert len(calls) == 1 and len(calls[0]) == 2 and "10.0.0.1" not in calls[0]
    assert details == {"peer": "10.0.0.9", "busbw_gbps": 0.1, "bytes": 1024,
                       "reference_pair": ["10.0.0.9", "10.0.0.10"], "reference_gbps": 1.0, "floor_gbps": 0.3,
                       "seconds": 4.2}


def test_a_pair_that_cannot_form_refuses_the_node_and_an_unanswering_cluster_gives_no_verdict():
    env, _calls = fake_env([node("10.0.0.9")], error=RayfleetError("10.0.0.9 could not form a group with this node"))
    state, reason, details = link.check(settings(link_check={}), env)
    assert state == FAILED and reason == "pair test with 10.0.0.9: 10.0.0.9 could not form a group with this node"
    assert details == {"peer": "10.0.0.9"}
    env, _calls = fake_env([node("10.0.0.9")], error=link.Unreachable("no client server"))
    with pytest.raises(link.Unreachable):
        link.check(settings(link_check={}), env)


class FakeRay:
    def __init__(self, failures):
        self.failures, self.calls = failures, 0

    def init(self, address, **_kw):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionAbortedError("Initialization failure from server:\nStarting Ray client server failed.")


def test_the_client_connection_is_tried_again_then_gives_no_verdict():
    ray = FakeRay(failures=1)
    link.connect(ray, "ray://10.0.0.1:10001", sleep=lambda _s: None)
    assert ray.calls == 2
    ray = FakeRay(failures=5)
    with pytest.raises(link.Unreachable, match=r"did not serve this node in 3 attempts: Starting Ray client server "):
        link.connect(ray, "ray://10.0.0.1:10001", sleep=lambda _s: None)
    assert ray.calls == 3
