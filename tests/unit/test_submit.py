# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.submit: the submit host's rayfleet-submit-<cluster> turns `-- command` into one JSON extra var."""

import json
from pathlib import Path

from rayfleet.submit import playbook_argv


def test_submit_wrapper_passes_the_command_after_dashes_whole():
    argv = playbook_argv(["-e", "submit_id=x", "--", "python", "train.py", "--lr", "3e-4 x"], Path("/v/bin"))
    assert argv[:4] == ["/v/bin/ansible-playbook", "rayfleet.cluster.submit", "-e", "submit_id=x"]
    assert json.loads(argv[-1]) == {"submit_entrypoint": "python train.py --lr '3e-4 x'"}
    assert playbook_argv(["-e", "submit_entrypoint=true"], Path("/v/bin"))[2:] == ["-e", "submit_entrypoint=true"]
