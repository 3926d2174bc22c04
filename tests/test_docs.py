"""The pages people read: no user-facing page names an issue (the history is CHANGELOG.md), and every relative link
in them points at a file that exists, and at a heading of it where it names one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The user's pages: the README, the docs, the catalog's reference. CHANGELOG.md may name issues.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "manifests" / "README.md"]
LINKED = [*PAGES, REPO / "CHANGELOG.md"]

# "issue 38", "issues 33 and 35", "#38": an issue named. `serving check #1` in `trace`'s output is a check's number.
ISSUE = re.compile(r"\b(?:issues?|pull requests?|PRs?)\s*#?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)
NOT_AN_ISSUE = re.compile(r"serving check #\d+")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCED = re.compile(r"```.*?```", re.DOTALL)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def issues_named(text: str) -> list[str]:
    """Each place `text` names an issue."""
    return [m.group(0) for m in ISSUE.finditer(NOT_AN_ISSUE.sub("", text))]


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCED.sub("", page.read_text(encoding="utf-8")), re.MULTILINE):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file, or heading, is not there."""
    broken = []
    text = page.read_text(encoding="utf-8")
    for target in LINK.findall(CODE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not this repository's
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target} (no file {linked})")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {linked.name})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_user_facing_page_names_an_issue(page: Path) -> None:
    assert not issues_named(page.read_text(encoding="utf-8")), issues_named(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_at_what_exists(page: Path) -> None:
    assert not broken_links(page)


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    said = "Added by issue 38 (and Issues 33, #35), see PR 7; not `<#C0TRAIN01>`, `#1f77b4`, `#ml-training`, x#2"
    assert issues_named(said) == ["issue 38", "Issues 33", "#35", "PR 7"]
    assert issues_named("testing → staging, serving check #1") == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# A heading, with `code`\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/there.md) [ok](docs/there.md#a-heading-with-code) [web](https://example.org/x.md) "
        "[gone](docs/gone.md) [no heading](docs/there.md#elsewhere) `[in code](nowhere.md)`\n",
        encoding="utf-8",
    )
    assert [line.split(" ")[0] for line in broken_links(page)] == ["docs/gone.md", "docs/there.md#elsewhere"]


def test_the_history_is_kept_in_the_changelog() -> None:
    guide = (REPO / "docs" / "user-guide.md").read_text(encoding="utf-8")
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "What each change added" not in guide and "](../CHANGELOG.md)" in guide
    assert "](CHANGELOG.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert len(re.findall(r"^## ", changelog, re.MULTILINE)) >= 9  # one entry per change
