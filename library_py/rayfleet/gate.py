# SPDX-License-Identifier: GPL-3.0-or-later
"""The job-submission gate: has this cluster proved itself, recently, on the nodes alive now?

playbooks/preflight.yml leaves its verdict on the head (/etc/rayfleet/preflight.json), built by ``build_verdict`` and
written by the module rayfleet.cluster.preflight_verdict running on the head: ok, time and epoch (the head's clock),
problems, node_ids, missing_nodes (the inventory's Ray nodes that were not alive, when the preflight was allowed to
go on without them: preflight_allow_missing), and what the bandwidth check measured - bandwidth_measured, backend,
ranks, peak_busbw_gbps, min_busbw_gbps, bandwidth_note (why it was not measured). A job may be submitted only when
that verdict passed, measured the all-reduce bandwidth, is younger than ``--max-age`` seconds, and the alive Ray
nodes are exactly the ones it checked (a node that restarted has a new node id and was not checked). A node missing
- left out by the preflight, or gone since - shuts the gate too, unless ``--allow-missing`` (submit_allow_missing)
allows that many. The age is the head's clock against the head's clock: the gate runs on the head too.

playbooks/submit.yml runs this on the head in two ways:
  from the operator's machine   python -m rayfleet.gate --state F --max-age S --alive-json '["<node id>", ...]'
  from a submit host            as a Ray job (the Jobs API runs it on the head), reading the alive nodes
                                from Ray's state API:  python -m rayfleet.gate --state F --max-age S \\
                                                       --config /etc/rayfleet/ray-head.json
With submit_preflight=skip, submit.yml does not run the gate at all. The last line printed is JSON {"ok": bool,
"message": str}; the exit status is 0 when the gate is open, 3 when it is shut, 2 on a usage or Ray error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rayfleet.errors import RayfleetError

SHUT = 3
# A verdict dated further ahead of the head's clock than this was written before the clock was set back
FUTURE_SKEW_S = 300


def bandwidth(collective: Mapping[str, Any] | None, not_run: str = "") -> dict[str, Any]:
    """What the bandwidth check measured, as the verdict records it.

    ``collective`` is the collective check's result (rayfleet.collective's JSON, or the collective_check module's
    registered result); empty or skipped: it did not run, for the reason ``not_run``. The bandwidth counts as
    measured when the check produced a result across two ranks or more with a peak bus bandwidth: one rank moves
    no data, so its bus bandwidth is 0 by definition and proves nothing about the interconnect.
    """
    c = {} if not collective or collective.get("skipped") else dict(collective)
    ran = isinstance(c.get("ok"), bool)
    ranks = int(c["world_size"]) if ran and c.get("world_size") is not None else None
    peak = c.get("peak_busbw_gbps") if ran else None
    if not c:
        note = not_run or "the bandwidth check did not run"
    elif not ran:
        note = str(c.get("msg") or c.get("error") or "the bandwidth check returned no result")
    elif ranks is None:
        note = "the bandwidth check reported no ranks"
    elif ranks < 2:
        note = "one rank: an all-reduce on one rank moves no data, so it measures no bandwidth"
    elif peak is None:
        note = "the bandwidth check returned no peak bus bandwidth"
    else:
        note = ""
    measured = not note
    return {
        "bandwidth_measured": measured,
        "backend": c.get("backend") if ran else None,
        "ranks": ranks,
        "peak_busbw_gbps": float(peak) if measured else None,
        "min_busbw_gbps": c.get("min_busbw_gbps") if ran else None,
        "bandwidth_note": note,
    }


def build_verdict(problems: Iterable[str], node_ids: Iterable[str], collective: Mapping[str, Any] | None,
                  now: float, not_run: str = "", *, missing: Iterable[str] = (), admitted: Iterable[str] = (),
                  unadmitted: Iterable[str] = (), joined: Iterable[str] = ()) -> dict[str, Any]:
    """The verdict the preflight leaves on the head, stamped ``now`` (the head's clock).

    ``missing``: the inventory's Ray nodes the preflight went on without (not alive), by name.
    ``admitted`` / ``unadmitted``: the alive nodes (by name) that passed their admission checks before their Ray
    started, and those started otherwise; ``joined``: the alive nodes from outside the inventory.

    ``problems``: the findings of the node checks (GPUs, SSH, storage), each naming its node; the collective check's
    own problems, or why it could not run, are added. It passed when nothing was found and the collective check,
    if it ran, passed.
    """
    c = {} if not collective or collective.get("skipped") else dict(collective)
    found = [str(p) for p in problems]
    if isinstance(c.get("ok"), bool):
        found += [str(p) for p in c.get("problems") or []]
        if not c["ok"] and not c.get("problems"):
            found.append(str(c.get("msg") or "the bandwidth check failed without naming a problem"))
    elif c:
        found.append(str(c.get("msg") or c.get("error") or "the bandwidth check returned no result"))
    ok = not found and (not c or c.get("ok") is True)
    return {
        "ok": ok,
        "time": datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "epoch": int(now),
        "problems": found,
        "node_ids": sorted(set(node_ids)),
        "missing_nodes": sorted(set(missing)),
        "admitted_nodes": sorted(set(admitted)),
        "unadmitted_nodes": sorted(set(unadmitted)),
        "joined_nodes": sorted(set(joined)),
        **bandwidth(c, not_run),
    }


def decide(state: Mapping[str, Any] | None, alive_ids: Iterable[str], now: float, max_age_s: float,
           where: str, *, allow_missing: int = 0) -> tuple[bool, str]:
    """(open, message) for the verdict ``state`` (None: no verdict file at ``where``).

    ``allow_missing``: how many of the cluster's nodes may be missing - left out by the preflight (its
    ``missing_nodes``) or gone since (checked, not alive now) - for a job to go on the others."""
    alive = sorted(set(alive_ids))
    if state is None:
        return False, f"Not submitting: no preflight verdict on {where}; run playbooks/preflight.yml first"
    if not state.get("ok"):
        problems = "; ".join(str(p) for p in state.get("problems") or []) or "no problems recorded"
        return False, f"Not submitting: the last preflight FAILED: {problems}"
    peak = state.get("peak_busbw_gbps")
    if state.get("bandwidth_measured") is not True or not isinstance(peak, (int, float)):
        if "bandwidth_measured" not in state:
            why = "the verdict does not say: it was written by an older rayfleet"
        else:
            why = state.get("bandwidth_note") or "not measured"
        return False, (f"Not submitting: the last preflight on {where} passed without measuring the all-reduce "
                       f"bandwidth ({why}); run playbooks/preflight.yml with preflight_collective=true, or submit "
                       "with -e submit_preflight=skip to go without the gate")
    age = now - float(state.get("epoch") or 0)
    if age > max_age_s:
        return False, (f"Not submitting: the preflight is {int(age)} s old (submit_preflight_max_age_s "
                       f"{int(max_age_s)}); run playbooks/preflight.yml again")
    if age < -FUTURE_SKEW_S:
        return False, (f"Not submitting: the preflight on {where} is dated {state.get('time')}, {int(-age)} s ahead "
                       "of the head's clock (the clock was set back since); run playbooks/preflight.yml again")
    checked = sorted(set(state.get("node_ids") or []))
    gone = sorted(set(checked) - set(alive))
    new = sorted(set(alive) - set(checked))
    left_out = sorted(set(state.get("missing_nodes") or []))
    missing = len(left_out) + len(gone)
    if new or (missing > allow_missing and not left_out):
        return False, (f"Not submitting: the Ray nodes changed since the preflight (node ids "
                       f"{', '.join(gone) or 'none'} gone, {', '.join(new) or 'none'} new); run playbooks/preflight.yml"
                       " again" + ("" if new else f", or submit with -e submit_allow_missing={missing} to go on "
                                                  "without them"))
    without = ([f"the preflight went on without {len(left_out)} node(s): {', '.join(left_out)}"] if left_out else []
               ) + ([f"node ids {', '.join(gone)} gone since"] if gone else [])
    if missing > allow_missing:
        return False, (f"Not submitting: {'; '.join(without)} - more than submit_allow_missing={allow_missing} "
                       f"allows. Bring them back and run playbooks/preflight.yml again, or submit with "
                       f"-e submit_allow_missing={missing} to go on without them")
    return True, (f"Preflight of {state.get('time')} passed ({max(int(age), 0)} s ago) on these {len(alive)} nodes: "
                  f"peak bus bandwidth {float(peak):.3f} GB/s ({state.get('backend')}, "
                  f"{state.get('ranks')} ranks)."
                  + (f" Missing, within submit_allow_missing={allow_missing}: {'; '.join(without)}."
                     if missing else ""))


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
    parser.add_argument("--allow-missing", type=int, default=0,
                        help="how many of the cluster's nodes may be missing (submit_allow_missing; default 0)")
    args = parser.parse_args(argv)
    try:
        if args.alive_json is not None:
            alive = json.loads(args.alive_json)
            if not isinstance(alive, list) or not all(isinstance(i, str) for i in alive):
                raise RayfleetError(f"--alive-json: expected a JSON list of node id strings, got {args.alive_json!r}")
        else:
            alive = alive_from_ray(args.config)
        if args.allow_missing < 0:
            raise RayfleetError(f"--allow-missing: expected a count >= 0, got {args.allow_missing}")
        ok, message = decide(read_state(args.state), alive, time.time(), args.max_age, f"{args.host} ({args.state})",
                             allow_missing=args.allow_missing)
    except (RayfleetError, json.JSONDecodeError) as exc:
        print(json.dumps({"ok": False, "message": f"rayfleet.gate: {exc}"}))
        return 2
    print(json.dumps({"ok": ok, "message": message}))
    return 0 if ok else SHUT


if __name__ == "__main__":
    sys.exit(main())
