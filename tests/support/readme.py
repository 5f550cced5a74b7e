"""The documents' runnable examples, found by heading, so tests run them exactly as a reader would copy them.

A heading names one example wherever it lives: in README.md or in a page of docs/. Each heading a test asks for
must appear in exactly one of them, so moving an example between the two never leaves a test running a stale
copy."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.repository import ROOT


def documents() -> list[Path]:
    """README.md, then every page of docs/, in a fixed order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_block_after(text: str, heading: str) -> str | None:
    """The first Python block after the line ``heading`` in ``text``, or None when there is no such heading."""
    found = re.search(rf"^{re.escape(heading)}$", text, re.M)
    if not found:
        return None
    block = re.search(r"```python\n(.*?)```", text[found.end():], re.S)
    assert block, f"no python block after {heading!r}"
    return block.group(1)


def readme_block(heading: str) -> str:
    """The first Python block after the line ``heading`` (a whole Markdown heading line) in the README or in the
    one page of docs/ that has that heading."""
    blocks = {path.name: python_block_after(path.read_text(), heading) for path in documents()}
    found = {name: block for name, block in blocks.items() if block is not None}
    assert found, f"neither the README nor docs/ has the heading {heading!r}"
    assert len(found) == 1, f"the heading {heading!r} is in more than one document: {sorted(found)}"
    return next(iter(found.values()))
