# SPDX-License-Identifier: GPL-3.0-or-later
"""The job-submission gate: has this cluster proved itself, recently, on the nodes alive now?

playbooks/preflight.yml leaves its verdict on the head (/etc/rayfleet/preflight.json: ok, time, epoch, problems,
node_ids). A job may be submitted only when that verdict passed, is younger than ``--max-age`` seconds, and the
alive Ray nodes are exactly the ones it checked (a node that restarted has a new node id and was not checked).

playbooks/submit.yml runs this on the head in two ways:
  from the operator's machine   python -m rayfleet.gate --state F --max-age S --alive-json '["<node id>", ...]'
  from a submit host            as a Ray job (the Jobs API runs it on the head), reading the alive nodes
                                from Ray's state API:  python -m rayfleet.gate --state F --max-age S \\
                                                       --config /etc/rayfleet/ray-head.json
The last line printed is JSON {"ok": bool, "message": str}; the exit status is 0 when the gate is open, 3 when
it is shut, 2 on a usage or Ray error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rayfleet.errors import RayfleetError

SHUT = 3


def decide(state: Mapping[str, Any] | None, alive_ids: Iterable[str], now: float, max_age_s: float,
           where: str) -> tuple[bool, str]:
    """(open, message) for the verdict ``state`` (None: no verdict file at ``where``)."""
    alive = sorted(set(alive_ids))
    if state is None:
        return False, f"Not submitting: no preflight verdict on {where}; run playbooks/preflight.yml first"
    if not state.get("ok"):
        problems = "; ".join(str(p) for p in state.get("problems") or []) or "no problems recorded"
        return False, f"Not submitting: the last preflight FAILED: {problems}"
    age = now - float(state.get("epoch") or 0)
    if age > max_age_s:
        return False, (f"Not submitting: the preflight is {int(age)} s old (submit_preflight_max_age_s "
                       f"{int(max_age_s)}); run playbooks/preflight.yml again")
    checked = sorted(set(state.get("node_ids") or []))
    if checked != alive:
        gone = ", ".join(sorted(set(checked) - set(alive))) or "none"
        new = ", ".join(sorted(set(alive) - set(checked))) or "none"
        return False, (f"Not submitting: the Ray nodes changed since the preflight (node ids {gone} gone, {new} new);"
                       " run playbooks/preflight.yml again")
    return True, f"Preflight of {state.get('time')} passed ({int(age)} s ago) on these {len(alive)} nodes."


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise RayfleetError(f"{path}: not valid JSON ({exc}); run playbooks/preflight.yml again") from None
    if not isinstance(data, dict):
        raise RayfleetError(f"{path}: expected a JSON object; run playbooks/preflight.yml again")
    return data


def alive_from_ray(config: str) -> list[str]:
    """Alive node ids through Ray's state API at the head's dashboard (settings file: address and token)."""
    from rayfleet.cluster import get_state, state_api_fetcher
    from rayfleet.raynode import load_settings

    settings = load_settings(config)
    state = get_state(state_api_fetcher(settings.dashboard_url, auth_token_path=settings.auth_token_path))
    return [n.node_id for n in state.nodes if n.alive]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.gate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state", required=True, type=Path, help="the preflight's verdict file on the head")
    parser.add_argument("--max-age", required=True, type=float, help="seconds a verdict stays valid")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--alive-json", help="the alive Ray node ids, a JSON list")
    source.add_argument("--config", help="the head's settings file: read the alive nodes from Ray's state API")
    parser.add_argument("--host", default="the head", help="the head's name, for the messages")
    args = parser.parse_args(argv)
    try:
        if args.alive_json is not None:
            alive = json.loads(args.alive_json)
            if not isinstance(alive, list) or not all(isinstance(i, str) for i in alive):
                raise RayfleetError(f"--alive-json: expected a JSON list of node id strings, got {args.alive_json!r}")
        else:
            alive = alive_from_ray(args.config)
        ok, message = decide(read_state(args.state), alive, time.time(), args.max_age, f"{args.host} ({args.state})")
    except (RayfleetError, json.JSONDecodeError) as exc:
        print(json.dumps({"ok": False, "message": f"rayfleet.gate: {exc}"}))
        return 2
    print(json.dumps({"ok": ok, "message": message}))
    return 0 if ok else SHUT


if __name__ == "__main__":
    sys.exit(main())
