# SPDX-License-Identifier: GPL-3.0-or-later
"""Render the preflight's cluster health report: Markdown, HTML and a bus bandwidth plot (PNG).

Reads the JSON the preflight role writes (the collective_check result plus the cluster summary) and
writes report.md, report.html and busbw.png next to it. The plot needs matplotlib on the controller;
without it the reports say so and everything else is still written (exit 0).

  python preflight_report.py artifacts/preflight/<head>/result.json
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path


def _fmt_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def plot(data: dict, path: Path) -> str:
    """Write the busbw-vs-size plot; return '' or why there is no plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: matplotlib is not installed on the controller ({exc})"
    rows = data["collective"].get("rows") or []
    if not rows:
        return "no plot: the collective check produced no measurements"
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.plot([r["size"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o", label="busbw, all nodes")
    floor = data["collective"].get("min_busbw_gbps")
    if floor:
        ax.axhline(floor, color="tab:red", linestyle="--", label=f"floor {floor:g} GB/s")
    for pair in data["collective"].get("pairs") or []:
        ax.scatter([pair["size"]], [pair["busbw_gbps"]], marker="x",
                   label=f"pair {pair['nodes'][0]} - {pair['nodes'][1]}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    c = data["collective"]
    ax.set_title(f"all_reduce, {c.get('world_size')} ranks on {len(c.get('nodes') or [])} nodes, "
                 f"{c.get('backend')} ({c.get('transport', {}).get('network') or 'network unknown'})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return ""


def _rows_table(rows: list[dict]) -> list[list[str]]:
    return [[_fmt_size(r["size"]), str(r["count"]), f"{r['time_us']:.1f}", f"{r['algbw_gbps']:.3f}",
             f"{r['busbw_gbps']:.3f}", str(r["wrong"])] for r in rows]


ROW_HEAD = ["size", "count (float)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"]


def _verdict(data: dict) -> tuple[bool, list[str]]:
    """The role's verdict (data["ok"]) and every problem: each node's GPU findings, then the collective's."""
    c = data["collective"]
    problems = [f"{host}: {p}" for host, g in sorted((data.get("gpus") or {}).items()) for p in g.get("problems") or []]
    problems += list(c.get("problems") or [])
    if c.get("error"):
        problems.append(f"the collective check could not run: {c['error']}")
    return bool(data.get("ok")) and not problems, problems


GPU_HEAD = ["node", "NVML", "GPUs", "Ray GPUs", "driver / CUDA", "GPU names", "findings"]


def _gpu_rows(data: dict) -> list[list[str]]:
    rows = []
    for host, g in sorted((data.get("gpus") or {}).items()):
        names = sorted({x.get("name", "") for x in g.get("gpus") or []})
        findings = (g.get("problems") or []) + (g.get("warnings_found") or [])
        rows.append([host, "yes" if g.get("available") else f"no: {g.get('reason') or g.get('msg') or '?'}",
                     str(g.get("count", 0)), "-" if g.get("ray_gpus") is None else f"{g['ray_gpus']:g}",
                     f"{g.get('driver_version') or '-'} / {g.get('cuda_driver_version') or '-'}",
                     ", ".join(names) or "-", "; ".join(findings) or "-"])
    return rows


def _storage_line(storage: dict) -> str:
    """One line: each node's mounts and their state (the shared_storage role's probe)."""
    parts = []
    for host, mounts in sorted(storage.items()):
        for m in mounts or []:
            reason = f" ({m['reason']})" if m.get("state") != "ok" and m.get("reason") else ""
            parts.append(f"{host} {m.get('path')} {m.get('state')}{reason}")
    return ", ".join(parts) if parts else "no mounts checked"


def markdown(data: dict, plot_note: str) -> str:
    c, cluster = data["collective"], data["cluster"]
    verdict = data.get("verdict") or {}
    ok, problems = _verdict(data)
    out = [f"# Cluster health: {'PASS' if ok else 'FAIL'}", "",
           f"- checked: {data['time']} from `{data['head']}`",
           f"- Ray {cluster.get('ray_version', '?')}: {cluster.get('alive_nodes', '?')} alive node(s), "
           f"{cluster.get('cpus', 0):g} CPU, {cluster.get('gpus', 0):g} GPU",
           "- SSH from the head as the cluster user (strict host keys): "
           + (", ".join(f"{h} {v}" for h, v in sorted(data["ssh"].items())) if data.get("ssh") else "not checked"),
           "- shared storage: " + _storage_line(data.get("storage") or {}),
           f"- instance type: `{data.get('instance_type') or 'unknown'}`; floor: "
           + (f"{c['min_busbw_gbps']:g} GB/s ({data.get('floor_source') or 'set in the inventory'})"
              if c.get("min_busbw_gbps") is not None
              else "none known for this hardware (bandwidth reported, not gated)"),
           (f"- all-reduce: backend {c.get('backend', '?')}, {c.get('world_size', '?')} rank(s), network "
            f"{c.get('transport', {}).get('network') or 'unknown'}; peak bus bandwidth "
            f"**{c.get('peak_busbw_gbps', 0):.3f} GB/s** (sizes >= {_fmt_size(c.get('large_bytes') or 0)})"
            if c.get("rows") else "- all-reduce: not measured (" + (
                verdict.get("bandwidth_note")
                or "a node failed its GPU check, the check could not run, or preflight_collective is false") + ")")]
    if verdict.get("missing_nodes"):
        out.append(f"- **missing**, not checked (preflight_allow_missing): {', '.join(verdict['missing_nodes'])}; "
                   "playbooks/submit.yml refuses this verdict unless submit_allow_missing allows as many")
    if verdict and not verdict.get("bandwidth_measured"):
        out.append(f"- submission gate: bandwidth not measured ({verdict.get('bandwidth_note') or 'no reason given'}):"
                   " playbooks/submit.yml refuses this verdict unless submit_preflight=skip")
    out.append("")
    if problems:
        out += ["## Problems", ""] + [f"- {p}" for p in problems] + [""]
    gpu_rows = _gpu_rows(data)
    if gpu_rows:
        out += ["## GPUs (NVML, per node)", "", "| " + " | ".join(GPU_HEAD) + " |", "|" + "---|" * len(GPU_HEAD)]
        out += ["| " + " | ".join(r) + " |" for r in gpu_rows] + [""]
    out += ["## Nodes", "", "| " + " | ".join(NODE_HEAD) + " |", "|" + "---|" * len(NODE_HEAD)]
    out += ["| " + " | ".join(r) + " |" for r in _node_rows(c)]
    out += ["", "## All-reduce sweep (all nodes)", "", "| " + " | ".join(ROW_HEAD) + " |",
            "|" + "---|" * len(ROW_HEAD)]
    out += ["| " + " | ".join(r) + " |" for r in _rows_table(c.get("rows") or [])]
    if c.get("pairs"):
        out += ["", "## Node pairs", "", "| pair | size | busbw (GB/s) | slow |", "|---|---|---|---|"]
        out += [f"| {_pair_name(p)} | {_fmt_size(p['size'])} | {p['busbw_gbps']:.3f} | "
                f"{'yes' if _pair_slow(p, c) else ''} |" for p in c["pairs"]]
    lines = _localization_lines(c.get("pair_findings") or {})
    if lines:
        out += ["", "## Pair tests", ""] + [f"- {line}" for line in lines]
    out += ["", "## Plot", "", plot_note or "![bus bandwidth vs message size](busbw.png)", "",
            f"Versions: {json.dumps(c.get('versions') or {})}. Raw result: `result.json`.", ""]
    return "\n".join(out)


def _pair_name(pair: dict) -> str:
    retest = " (re-test)" if pair.get("phase", "ring") != "ring" else ""
    return f"{pair['nodes'][0]} - {pair['nodes'][1]}{retest}"


def _pair_slow(pair: dict, c: dict) -> bool:
    if "slow" in pair:
        return bool(pair["slow"])
    return tuple(pair["nodes"]) in {tuple(p["nodes"]) for p in (c.get("pair_findings") or {}).get("slow_pairs", [])}


def _localization_lines(findings: dict) -> list[str]:
    """How the pair tests ran and what they found beyond the pairs: re-tests that cleared a node, hosts' nodes."""
    lines = []
    if findings.get("single_host"):
        lines.append(f"not run: every node is on host {findings['single_host']}, where a pair would measure the "
                     "host's loopback, not a network link")
    if findings.get("rounds"):
        lines.append(f"{findings.get('first_pass')}, then halves and re-tests with nodes that passed: "
                     f"{findings['rounds']} round(s), {findings.get('pair_tests')} pair test(s); slow below "
                     f"{findings.get('threshold_gbps', 0):.3f} GB/s")
    if findings.get("suspects"):
        lines.append("slow, confirmed by a re-test with a node that passed: " + ", ".join(findings["suspects"]))
    if findings.get("cleared"):
        lines.append("passed on re-test (a slow first-pass measurement, not a slow node): "
                     + ", ".join(findings["cleared"]))
    if findings.get("unresolved"):
        lines.append("not pinned (no node that passed to re-test them with): " + ", ".join(findings["unresolved"]))
    for host in findings.get("hosts") or []:
        lines.append(f"host {host['name']} ({host['host']}): "
                     + ", ".join(f"{name} {verdict}" for name, verdict in host["nodes"].items()))
    return lines


NODE_HEAD = ["name", "IP", "ranks", "GPU ids", "NCCL (bootstrap address, NCCL_SOCKET_IFNAME)"]


def _nccl_cell(node: dict) -> str:
    probe = node.get("nccl") or {}
    if not probe.get("available"):
        return "-"
    boot = probe.get("bootstrap") or {}
    where = boot.get("address") or f"bootstrap failed: {boot.get('error', '?')}"
    return f"{probe.get('version', '?')} ({where}, {probe.get('socket_ifname') or 'unset'})"


def _node_rows(c: dict) -> list[list[str]]:
    return [[n["name"], n["ip"], ", ".join(map(str, n["ranks"])), ", ".join(n["gpu_ids"]) or "-", _nccl_cell(n)]
            for n in c.get("nodes") or []]


def _table_html(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def html_report(data: dict, plot_note: str) -> str:
    c = data["collective"]
    ok, problems = _verdict(data)
    md = markdown(data, plot_note)
    # the summary: the list between the title and the first section
    summary = [line[2:] for line in md.split("\n\n")[1].splitlines() if line.startswith("- ")]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>rayfleet cluster health</title><style>"
        "body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}.pass{color:#070}.fail{color:#b00}"
        "</style></head><body>",
        f"<h1>Cluster health: <span class='{'pass' if ok else 'fail'}'>{'PASS' if ok else 'FAIL'}</span></h1>",
        "<ul>" + "".join(f"<li>{html.escape(s.replace('**', '').replace('`', ''))}</li>" for s in summary) + "</ul>",
    ]
    if problems:
        parts.append("<h2>Problems</h2><ul>" + "".join(f"<li>{html.escape(p)}</li>" for p in problems) + "</ul>")
    if _gpu_rows(data):
        parts.append("<h2>GPUs (NVML, per node)</h2>" + _table_html(GPU_HEAD, _gpu_rows(data)))
    parts.append("<h2>Nodes</h2>" + _table_html(NODE_HEAD, _node_rows(c)))
    parts.append("<h2>All-reduce sweep (all nodes)</h2>" + _table_html(ROW_HEAD, _rows_table(c.get("rows") or [])))
    if c.get("pairs"):
        parts.append("<h2>Node pairs</h2>" + _table_html(
            ["pair", "size", "busbw (GB/s)", "slow"],
            [[_pair_name(p), _fmt_size(p["size"]), f"{p['busbw_gbps']:.3f}", "yes" if _pair_slow(p, c) else ""]
             for p in c["pairs"]]))
    lines = _localization_lines(c.get("pair_findings") or {})
    if lines:
        parts.append("<h2>Pair tests</h2><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>")
    parts.append("<h2>Plot</h2>" + (f"<p>{html.escape(plot_note)}</p>" if plot_note else
                                    "<img src='busbw.png' alt='bus bandwidth vs message size'>"))
    parts.append("</body></html>")
    return "\n".join(parts)


def render(result_path: Path) -> list[Path]:
    data = json.loads(result_path.read_text())
    out_dir = result_path.parent
    png = out_dir / "busbw.png"
    if png.exists():
        png.unlink()
    note = plot(data, png)
    written = [out_dir / "report.md", out_dir / "report.html"]
    written[0].write_text(markdown(data, note))
    written[1].write_text(html_report(data, note))
    return written + ([png] if png.exists() else [])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    for path in render(Path(argv[0])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
