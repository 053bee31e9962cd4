# SPDX-License-Identifier: GPL-3.0-or-later
import pytest
from rayfleet.cluster import ClusterState, NodeInfo, format_table, get_state, lacking_resources, missing_hosts, wait_for
from rayfleet.errors import ClusterWaitTimeout


def node(ip, state="ALIVE", head=False, cpu=2.0, gpu=0.0, start=0, node_id=None):
    resources = {"CPU": cpu, f"node:{ip}": 1.0, "memory": 1e9}
    if head:
        resources["node:__internal_head__"] = 1.0
    if gpu:
        resources["GPU"] = gpu
    return {"node_id": node_id or f"id-{ip}-{start}", "node_ip": ip, "state": state, "is_head_node": head,
            "resources_total": resources, "start_time_ms": start}


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_internal_resources_are_dropped_and_totals_count_alive_only():
    state = get_state(lambda: [node("10.0.0.1", head=True), node("10.0.0.2", gpu=8), node("10.0.0.3", "DEAD")])
    assert state.alive[0].resources == {"CPU": 2.0, "memory": 1e9}
    assert state.totals() == {"CPU": 4.0, "GPU": 8.0, "memory": 2e9}
    summary = state.to_dict()
    assert (summary["alive_nodes"], summary["dead_nodes"], summary["gpus"]) == (2, 1, 8.0)


def test_restarted_node_newest_record_wins():
    old = node("10.0.0.2", start=1, node_id="old")
    new = node("10.0.0.2", start=5, node_id="new")
    dead = node("10.0.0.2", "DEAD", start=9, node_id="dead")
    state = get_state(lambda: [new, dead, old])
    assert state.alive_by_ip()["10.0.0.2"].node_id == "new"


def test_wait_for_returns_once_everything_joined():
    rounds = [[node("10.0.0.1", head=True)], [node("10.0.0.1", head=True), node("10.0.0.2")]]
    clock = FakeClock()
    state = wait_for(lambda: rounds.pop(0) if len(rounds) > 1 else rounds[0], min_nodes=2,
                     expected={"10.0.0.1": "head", "10.0.0.2": "worker1"}, timeout=30, clock=clock,
                     sleep=clock.sleep)
    assert len(state.alive) == 2
    assert clock.now == 1.0


def test_wait_for_timeout_names_missing_hosts():
    clock = FakeClock()

    def fetch():
        return [node("10.0.0.1", head=True), node("10.0.0.3", "DEAD")]

    with pytest.raises(ClusterWaitTimeout) as err:
        wait_for(fetch, min_nodes=3, min_gpus=8, timeout=10, clock=clock, sleep=clock.sleep,
                 expected={"10.0.0.1": "demo-head", "10.0.0.2": "demo-worker1", "10.0.0.3": "demo-worker2"})
    msg = str(err.value)
    assert "1 alive node(s) (wanted >= 3)" in msg
    assert "0 GPU(s) (wanted >= 8)" in msg
    assert "not registered alive: demo-worker1 (10.0.0.2), demo-worker2 (10.0.0.3)" in msg
    assert "demo-head" not in msg
    assert isinstance(err.value.state, ClusterState)
    assert clock.now == 10.0


EXPECTED = {"10.0.0.1": "demo-head", "10.0.0.2": "demo-worker1", "10.0.0.3": "demo-worker2"}


def test_wait_for_may_go_on_without_max_missing_hosts():
    """With max_missing the wait ends at once when at most that many expected hosts are missing: the caller names them
    (missing_hosts); one more missing still times out, saying how many may be."""
    clock = FakeClock()
    two = [node("10.0.0.1", head=True), node("10.0.0.2"), node("10.0.0.3", "DEAD")]
    state = wait_for(lambda: two, min_nodes=2, expected=EXPECTED, max_missing=1, timeout=30, clock=clock,
                     sleep=clock.sleep)
    assert clock.now == 0 and missing_hosts(state, EXPECTED) == ["demo-worker2"]
    with pytest.raises(ClusterWaitTimeout) as err:
        wait_for(lambda: two[:1], min_nodes=1, expected=EXPECTED, max_missing=1, timeout=5, clock=clock,
                 sleep=clock.sleep)
    assert ("not registered alive: demo-worker1 (10.0.0.2), demo-worker2 (10.0.0.3) (at most 1 may be missing)"
            in str(err.value))


def test_wait_for_unreachable_head_reports_last_error():
    clock = FakeClock()

    def fetch():
        raise ConnectionError("connection refused")

    with pytest.raises(ClusterWaitTimeout, match="could not read the cluster state in 5 s: connection refused"):
        wait_for(fetch, min_nodes=1, timeout=5, clock=clock, sleep=clock.sleep)


def test_lacking_resources():
    info = NodeInfo.from_state(node("10.0.0.2", cpu=2.0))
    assert lacking_resources(info, {"CPU": 2}) == {}
    assert lacking_resources(info, {"CPU": 4, "GPU": 1}) == {"CPU": (4.0, 2.0), "GPU": (1.0, 0.0)}


def test_format_table_puts_head_first():
    state = get_state(lambda: [node("10.0.0.2"), node("10.0.0.1", head=True)])
    lines = format_table(state).splitlines()
    assert lines[0].split() == ["NODE_IP", "STATE", "HEAD", "CPU", "GPU", "NODE_ID"]
    assert lines[1].startswith("10.0.0.1") and "yes" in lines[1]
    assert lines[-1] == "alive: 2/2  CPU: 4  GPU: 0"


class FakeGcsNodeInfo:
    """The fields of Ray's GcsNodeInfo protobuf that rayfleet reads (GcsClient.get_all_node_info's values)."""

    class GcsNodeState:
        @staticmethod
        def Name(value):
            return {0: "ALIVE", 1: "DEAD"}[value]

    def __init__(self, ip, state=0, head=False, start=0):
        self.node_id = bytes.fromhex("ab" * 28)
        self.node_manager_address = ip
        self.state = state
        self.is_head_node = head
        self.node_name = ip
        self.resources_total = {"CPU": 2.0, f"node:{ip}": 1.0}
        self.start_time_ms = start
        self.labels = {"rayfleet.io/admission": "passed"} if head else {}


def test_gcs_node_table_reads_like_the_state_api():
    from rayfleet.cluster import gcs_node

    state = get_state(lambda: [gcs_node(FakeGcsNodeInfo("10.0.0.1", head=True, start=5)),
                               gcs_node(FakeGcsNodeInfo("10.0.0.2", state=1))])
    head, dead = state.nodes
    assert head.node_id == "ab" * 28 and head.alive and head.is_head and head.resources == {"CPU": 2.0}
    assert head.start_time_ms == 5 and head.node_name == "10.0.0.1"
    assert head.admitted and not dead.admitted and head.labels == {"rayfleet.io/admission": "passed"}
    assert dead.state == "DEAD" and list(state.alive_by_ip()) == ["10.0.0.1"]


class FakeSnapshot:
    """GcsNodeInfo.state_snapshot: what the raylet last reported (NodeSnapshot.State)."""

    class State:
        @staticmethod
        def Name(value):
            return {0: "UNDEFINED", 1: "IDLE", 2: "ACTIVE", 3: "DRAINING"}[value]

    def __init__(self, state):
        self.state = state


class FakeDeathInfo:
    """GcsNodeInfo.death_info (NodeDeathInfo.Reason): why a dead node died."""

    class Reason:
        @staticmethod
        def Name(value):
            return {0: "UNSPECIFIED", 3: "AUTOSCALER_DRAIN_PREEMPTED"}[value]

    def __init__(self, reason=0, message=""):
        self.reason, self.reason_message = reason, message


def test_gcs_node_says_draining_and_why_a_node_died():
    from rayfleet.cluster import gcs_node

    draining = FakeGcsNodeInfo("10.0.0.2")
    draining.state_snapshot, draining.death_info = FakeSnapshot(3), FakeDeathInfo()
    dead = FakeGcsNodeInfo("10.0.0.3", state=1)
    dead.state_snapshot, dead.death_info = FakeSnapshot(1), FakeDeathInfo(3, "rayfleet health: gpu: ECC")
    assert (gcs_node(draining)["draining"], gcs_node(draining)["death_reason"]) == (True, "")
    assert gcs_node(dead)["draining"] is False
    assert (gcs_node(dead)["death_reason"], gcs_node(dead)["death_reason_message"]) == (
        "AUTOSCALER_DRAIN_PREEMPTED", "rayfleet health: gpu: ECC")
    assert gcs_node(FakeGcsNodeInfo("10.0.0.4"))["draining"] is False, "a Ray without these fields"


def test_address_picks_the_api(monkeypatch):
    from rayfleet import cluster

    seen = []
    monkeypatch.setattr(cluster, "state_api_fetcher", lambda a, **kw: seen.append(("state", a)))
    monkeypatch.setattr(cluster, "gcs_fetcher", lambda a, **kw: seen.append(("gcs", a)))
    cluster.fetcher("http://127.0.0.1:8265")
    cluster.fetcher("10.0.0.1:6379")
    assert seen == [("state", "http://127.0.0.1:8265"), ("gcs", "10.0.0.1:6379")]


def test_a_hosts_node_instances_are_found_by_name_and_expected_by_name():
    """Several nodes of one host (ray_node_instances) share its IP; each is named <ip>/<instance>. A node started
    without --node-name is named by its IP (Ray's default), so IP keys keep working."""
    gpu0 = dict(node("10.0.0.2", start=1, node_id="gpu0"), node_name="10.0.0.2/gpu0")
    gpu1 = dict(node("10.0.0.2", start=2, node_id="gpu1"), node_name="10.0.0.2/gpu1")
    head = dict(node("10.0.0.1", head=True), node_name="10.0.0.1")
    state = get_state(lambda: [head, gpu0, gpu1])
    assert state.alive_node("10.0.0.2", "10.0.0.2/gpu0").node_id == "gpu0"
    assert state.alive_node("10.0.0.2", "10.0.0.2/gpu1").node_id == "gpu1"
    assert state.alive_node("10.0.0.2", "10.0.0.2/gpu2") is None
    assert state.alive_node("10.0.0.1").is_head
    expected = {"10.0.0.1": "head", "10.0.0.2/gpu0": "worker1/gpu0", "10.0.0.2/gpu1": "worker1/gpu1",
                "10.0.0.2/gpu2": "worker1/gpu2"}
    from rayfleet.cluster import missing_hosts
    assert missing_hosts(state, expected) == ["worker1/gpu2"]


def test_nodes_proved_at_admission_and_nodes_from_outside_the_inventory_are_named():
    admitted = dict(node("10.0.0.1", head=True), labels={"rayfleet.io/admission": "passed"})
    started_by_hand = node("10.0.0.2")
    autoscaled = dict(node("10.0.0.9"), labels={"rayfleet.io/admission": "passed", "ray.io/node-id": "x"})
    gone = dict(node("10.0.0.3", "DEAD"), labels={"rayfleet.io/admission": "passed"})
    state = get_state(lambda: [admitted, started_by_hand, autoscaled, gone])
    summary = state.to_dict()
    assert summary["admitted_nodes"] == ["10.0.0.1", "10.0.0.9"]
    assert summary["unadmitted_nodes"] == ["10.0.0.2"]
    assert state.joined({"10.0.0.1": "head", "10.0.0.2": "worker1", "10.0.0.3": "worker2"}) == ["10.0.0.9"]
    assert summary["nodes"][0]["labels"] == {"rayfleet.io/admission": "passed"}
