"""The documentation's pages: the README (the front door) and the manual under docs/. Tests
that run a documented block find it by its heading, whichever page it is on."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "docs" / "measurements").glob("*.md")))


def heading_line(text: str, heading: str) -> str | None:
    """The heading line of `text` that starts with `heading` ("### Seeing a run" finds
    "### Seeing a run: `jobs/report.py`"), if there is one."""
    return next((line for line in text.splitlines() if line.startswith(heading)), None)


def page_with(heading: str) -> str:
    """The text of the one page that has a heading line starting with `heading`."""
    found = [text for text in (p.read_text(encoding="utf-8") for p in PAGES)
             if heading_line(text, heading)]
    assert len(found) == 1, f"{heading!r} is on {len(found)} pages"
    return found[0]


def section(heading: str) -> str:
    """From `heading`'s line to the end of its page."""
    text = page_with(heading)
    return text[text.index(heading_line(text, heading) or heading):]


def block_under(heading: str) -> list[str]:
    """The non-blank lines of the first fenced block under `heading`."""
    block = section(heading)
    block = block[block.index("```\n") + 4:]
    return [line for line in block[:block.index("```")].splitlines() if line.strip()]
