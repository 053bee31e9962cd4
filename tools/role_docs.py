#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write each role's README variable table from its meta/argument_specs.yml, so docs cannot drift.

The table goes between the markers below in roles/<role>/README.md (created if missing).
Defaults are read from defaults/main.yml (what the role really uses), descriptions and types from
the argument spec. `--check` exits 1 when a README is out of date (run by the unit tests).

Examples:
  tools/role_docs.py            # rewrite the tables
  tools/role_docs.py --check    # fail if any table is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- BEGIN ROLE VARIABLES (tools/role_docs.py) -->", "<!-- END ROLE VARIABLES -->"


def _text(value) -> str:
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    value = re.sub(r"[CIMVO]\(([^)]*)\)", r"`\1`", str(value))
    return value.replace("|", "\\|").replace("\n", " ").strip()


def _default(value) -> str:
    if value is None:
        return "*(none)*"
    if isinstance(value, str) and "{{" in value:
        return "*(computed)*"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text.removesuffix("...").strip()
    return f"`{text}`".replace("|", "\\|")


def table(role: Path) -> str:
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    lines = ["| Variable | Type | Default | Description |", "|---|---|---|---|"]
    for name, opt in spec.get("options", {}).items():
        kind = opt.get("type", "str")
        if kind == "list" and opt.get("elements"):
            kind = f"list of {opt['elements']}"
        desc = _text(opt.get("description", ""))
        if opt.get("choices"):
            desc += " Choices: " + ", ".join(f"`{c}`" for c in opt["choices"]) + "."
        if opt.get("required"):
            desc += " **Required.**"
        lines.append(f"| `{name}` | {kind} | {_default(defaults.get(name))} | {desc} |")
    return "\n".join(lines)


def render(role: Path) -> str:
    readme = role / "README.md"
    block = f"{BEGIN}\n{table(role)}\n{END}"
    if readme.exists():
        current = readme.read_text()
        if BEGIN in current and END in current:
            pre, rest = current.split(BEGIN, 1)
            return pre + block + rest.split(END, 1)[1]
        return current.rstrip() + "\n\n## Role variables\n\n" + block + "\n"
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    return (f"# rayfleet.cluster.{role.name}\n\n{_text(spec.get('short_description', ''))}.\n\n"
            f"{_text(spec.get('description', ''))}\n\n## Role variables\n\n{block}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if a README table is out of date")
    args = parser.parse_args(argv)
    stale = []
    for role in sorted(p.parent.parent for p in (ROOT / "roles").glob("*/meta/argument_specs.yml")):
        wanted = render(role)
        readme = role / "README.md"
        if readme.exists() and readme.read_text() == wanted:
            continue
        if args.check:
            stale.append(str(readme.relative_to(ROOT)))
        else:
            readme.write_text(wanted)
            print(f"wrote {readme.relative_to(ROOT)}")
    if stale:
        print("out of date (run tools/role_docs.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
