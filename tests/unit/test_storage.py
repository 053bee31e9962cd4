# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.storage, the node-side shared-storage probe of the health check: it reads the shared_storage role's
record (tests/unit/plugins/modules/test_storage_check.py checks that it reaches the module's verdicts)."""

from __future__ import annotations

import json

import pytest
from rayfleet import storage
from rayfleet.errors import RayfleetError


def test_the_record_of_the_shared_storage_role_is_read(tmp_path):
    record = tmp_path / "shared-storage.json"
    assert storage.load_config(record) is None
    record.write_text(json.dumps({"paths": ["/mnt/shared"], "mounts": [
        {"path": "/mnt/shared", "server": "10.0.0.1", "export": "/srv/x", "type": "nfs"}],
        "user": "rayfleet", "timeout": 3, "kernel_client": False}))
    config = storage.load_config(record)
    assert config.mounts == (storage.Mount("/mnt/shared", "10.0.0.1", "/srv/x", "nfs"),)
    assert (config.user, config.timeout, config.kernel_client) == ("rayfleet", 3.0, False)
    record.write_text(json.dumps({"paths": []}))
    assert storage.load_config(record).mounts == ()
    record.write_text(json.dumps({"paths": ["/mnt/shared"]}))
    with pytest.raises(RayfleetError, match="not how to probe them"):
        storage.load_config(record)


def test_a_hung_probe_is_killed_after_the_timeout():
    rc, out = storage.run_limited(["sleep", "30"], 0.3)
    assert (rc, out) == (124, "no answer in 0.3s")
