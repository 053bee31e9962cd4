# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.spot against a fake metadata endpoint on loopback (IMDSv2 and GCE semantics)."""

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from rayfleet.errors import RayfleetError
from rayfleet.raynode import RayNodeSettings
from rayfleet.spot import Notice, aws_notice, drain_command, gcp_notice, watch

NOW = dt.datetime(2026, 11, 23, 17, 0, 0, tzinfo=dt.timezone.utc)


class Metadata(BaseHTTPRequestHandler):
    notice = None  # set by the test: a JSON body for AWS, "TRUE"/"FALSE" for GCP

    def log_message(self, *args):
        pass

    def _send(self, code, body=""):
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body.encode())

    def do_PUT(self):
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self._send(200, "tok")
        return self._send(400)

    def do_GET(self):
        if self.path == "/latest/meta-data/spot/instance-action":
            if self.headers.get("X-aws-ec2-metadata-token") != "tok":
                return self._send(401)  # IMDSv2 only
            return self._send(200, self.notice) if self.notice else self._send(404)
        if self.path == "/computeMetadata/v1/instance/preempted":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self._send(403)
            return self._send(200, self.notice or "FALSE")
        return self._send(404)


@pytest.fixture()
def metadata():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Metadata.notice = None
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_aws_notice_through_imdsv2(metadata):
    assert aws_notice(metadata, now=lambda: NOW) is None
    Metadata.notice = json.dumps({"action": "terminate", "time": "2026-11-23T17:02:00Z"})
    notice = aws_notice(metadata, now=lambda: NOW)
    assert (notice.provider, notice.action, notice.deadline_s) == ("aws", "terminate", 120)


def test_gcp_preempted(metadata):
    assert gcp_notice(metadata) is None
    Metadata.notice = "TRUE"
    assert gcp_notice(metadata).deadline_s == 30


def test_drain_command_for_a_worker():
    settings = RayNodeSettings.from_mapping({"role": "worker", "node_ip": "10.0.0.11", "ray_bin": "/v/bin/ray",
                                             "head_address": "10.0.0.10"})
    cmd = drain_command(settings, "abc", Notice("aws", "terminate", 118, "{}"))
    assert cmd[:2] == ["/v/bin/ray", "drain-node"]
    assert "--address=10.0.0.10:6379" in cmd and "--node-id=abc" in cmd
    assert "--reason=DRAIN_NODE_REASON_PREEMPTION" in cmd and "--deadline-remaining-seconds=118" in cmd


def test_watch_retries_metadata_and_drain_errors_then_drains_once():
    reads = iter([OSError("timed out"), None, Notice("aws", "terminate", 100, "x"),
                  Notice("aws", "terminate", 90, "x")])
    drains, logs = [], []

    def read():
        item = next(reads)
        if isinstance(item, Exception):
            raise item
        return item

    def on_notice(notice):
        drains.append(notice.deadline_s)
        if len(drains) == 1:
            raise RayfleetError("GCS busy")
        return "node123"

    assert watch(read, on_notice, 0, log=logs.append, sleep=lambda s: None) == 0
    assert drains == [100, 90]
    assert any("metadata read failed" in m for m in logs) and any("drain failed" in m for m in logs)
    assert logs[-1].startswith("drained Ray node node123")


def test_every_node_instance_of_the_host_is_drained_and_a_failed_one_retried_alone():
    """A host with several Ray nodes (ray_node_instances) drains them all on one notice; one whose drain failed is
    drained again on the next notice, the others are not drained twice."""
    from rayfleet.spot import drainer

    nodes = [RayNodeSettings.from_mapping({"role": "worker", "node_ip": "10.0.0.11", "ray_bin": "/v/bin/ray",
                                           "head_address": "10.0.0.10", "node_name": f"10.0.0.11/{name}"})
             for name in ("gpu0", "gpu1")]
    calls, fail = [], {"10.0.0.11/gpu1"}

    def drain_one(settings, notice):
        calls.append(settings.node_name)
        if settings.node_name in fail:
            raise RayfleetError("GCS busy")
        return "id-" + settings.node_name.rsplit("/", 1)[1]

    on_notice = drainer(nodes, drain_one)
    notice = Notice("aws", "terminate", 100, "x")
    with pytest.raises(RayfleetError, match=r"10\.0\.0\.11/gpu1: GCS busy \(drained: id-gpu0\)"):
        on_notice(notice)
    fail.clear()
    assert on_notice(notice) == "id-gpu1"
    assert calls == ["10.0.0.11/gpu0", "10.0.0.11/gpu1", "10.0.0.11/gpu1"]
