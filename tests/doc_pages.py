"""The documentation's pages: the README (the front door) and the manual under docs/. Tests
that run a documented block find it by its heading, whichever page it is on."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))


def page_with(heading: str) -> str:
    """The text of the one page that has `heading` (a line of its own)."""
    found = [text for text in (p.read_text(encoding="utf-8") for p in PAGES)
             if heading in text.splitlines()]
    assert len(found) == 1, f"{heading!r} is on {len(found)} pages"
    return found[0]


def section(heading: str) -> str:
    """From `heading` to the end of its page."""
    text = page_with(heading)
    return text[text.index(heading):]


def block_under(heading: str) -> list[str]:
    """The non-blank lines of the first fenced block under `heading`."""
    block = section(heading)
    block = block[block.index("```\n") + 4:]
    return [line for line in block[:block.index("```")].splitlines() if line.strip()]
