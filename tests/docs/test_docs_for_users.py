"""The README and the user guides read as guides, not as a lab notebook: no commit hashes, no
before/after tables; measurements live on the Performance pages (and commit hashes in
CHANGELOG.md's History), so a reader finds what they get, not how it came to be."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
GUIDES = (
    "README.md",
    "docs/getting-started.md",
    "docs/contributing.md",
    "docs/real-model.md",
    "docs/fake-llm.md",
)
COMMIT = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
"""A short or full commit hash (hex with both a digit and a letter, so no word or number)."""
BEFORE_AFTER_ROW = re.compile(r"^\|.*\|\s*(before|after)\b[^|]*\|", re.I | re.M)


def _nav_sections() -> dict[str, list[str]]:
    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # mkdocs' !!python tags
    nav = yaml.load((REPO / "mkdocs.yml").read_text("utf-8"), Loader=_Loader)["nav"]
    sections: dict[str, list[str]] = {}
    for entry in nav:
        ((title, value),) = entry.items()
        pages = [next(iter(p.values())) for p in value] if isinstance(value, list) else [value]
        sections[title] = pages
    return sections


def test_the_readme_and_the_user_guides_name_no_commit() -> None:
    found = {guide: COMMIT.findall((REPO / guide).read_text("utf-8")) for guide in GUIDES}
    assert not {g: h for g, h in found.items() if h}, found


def test_the_readme_and_the_user_guides_hold_no_before_after_table() -> None:
    rows = {guide: BEFORE_AFTER_ROW.findall((REPO / guide).read_text("utf-8")) for guide in GUIDES}
    assert not {g: r for g, r in rows.items() if r}, rows


def test_measured_pages_sit_under_performance_and_concepts_explain() -> None:
    sections = _nav_sections()
    performance = set(sections["Performance"])
    measured = {p.name for p in (REPO / "docs").glob("performance*.md")}
    assert measured <= performance, measured - performance
    for page in sections["Concepts"]:
        text = (REPO / "docs" / page).read_text("utf-8")
        assert not re.search(r"^#+ Measured", text, re.M), (
            f"{page}: a measurement write-up under Concepts"
        )
        assert not COMMIT.search(text), f"{page}: names a commit"
