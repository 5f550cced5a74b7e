"""The README's runnable examples, found by heading, so tests run them exactly as a reader would copy them."""

from __future__ import annotations

import re

from tests.support.repository import ROOT


def readme_block(heading: str) -> str:
    """The first Python block after the line ``heading`` (a whole Markdown heading line) in the README."""
    text = (ROOT / "README.md").read_text()
    found = re.search(rf"^{re.escape(heading)}$", text, re.M)
    assert found, f"README has no heading {heading!r}"
    block = re.search(r"```python\n(.*?)```", text[found.end():], re.S)
    assert block, f"README has no python block after {heading!r}"
    return block.group(1)
