# SPDX-License-Identifier: GPL-3.0-or-later
"""Every relative Markdown link in the README, docs/ and the roles' READMEs points at a file that exists (and, with an
#anchor, at a heading that exists), so moving or renaming a page cannot leave dead links behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "roles").glob("*/README.md")])

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The page without fenced code blocks (links there are examples, not links)."""
    return FENCE.sub("", text)


def links(text: str) -> list[str]:
    # Link texts may hold code spans (`[`x`](y)`), so find links first, in prose outside fenced blocks.
    return [m.group(1) for m in LINK.finditer(_prose(text))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(_prose(page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("//")


def test_the_pages_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert "README.md" in names and "docs/index.md" in names and "roles/ray/README.md" in names


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in links(page.read_text()):
        if not is_relative(target):
            continue
        path, _hash, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page.resolve()
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif root.resolve() not in (dest, *dest.parents):
            broken.append(f"{target}: outside the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading for '#{anchor}' in {dest.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_resolve(page):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize(("text", "expected"), [
    ("see [Stages](docs/stages.md) and [`x`](roles/x/README.md#role-variables)",
     ["docs/stages.md", "roles/x/README.md#role-variables"]),
    ("[site](https://example.invalid/) ![img](a.png)", ["https://example.invalid/", "a.png"]),
    ("```\n[not a link](nowhere.md)\n```\n[a link](here.md)", ["here.md"]),
])
def test_links_are_read_from_prose(text, expected):
    assert links(text) == expected


@pytest.mark.parametrize(("heading", "expected"), [
    ("NVML in-process vs `nvidia-smi`", "nvml-in-process-vs-nvidia-smi"),
    ("Troubleshooting: doctor, dashboard, logs", "troubleshooting-doctor-dashboard-logs"),
    ("Golden images: bake once, boot many", "golden-images-bake-once-boot-many"),
])
def test_anchors_follow_github(heading, expected):
    assert slug(heading) == expected


def test_dead_links_and_anchors_are_found(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "other.md").write_text("# Other page\n\n## A `code` section\n")
    (tmp_path / "outside.md").write_text("# Outside\n")
    page = repo / "docs" / "page.md"
    page.write_text("# Title\n\n[gone](missing.md) [ok](#title) [bad](#nothing) [there](other.md#a-code-section)\n"
                    "[wrong](other.md#b) [up](../../outside.md) [web](https://example.invalid/x.md)\n")
    assert broken_links(page, root=repo) == [
        "missing.md: no such file",
        "#nothing: no heading for '#nothing' in page.md",
        "other.md#b: no heading for '#b' in other.md",
        "../../outside.md: outside the repository",
    ]
