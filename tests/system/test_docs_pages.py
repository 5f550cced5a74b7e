"""The pages of docs/ hold to the README's rules: every Python block in them is an example a test runs as written
(through ``readme_block``, which finds a heading in the README or in docs/), imports only what the package and its
extras install, every page is reachable from the README, and every relative link of the README and of docs/ names
a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.installed import imported_roots, installable_roots, python_blocks
from tests.support.readme import documents
from tests.support.repository import ROOT

HEADING = re.compile(r"^#{1,6} .+$", re.M)
BLOCK = re.compile(r"^```python\n", re.M)
ASKED_FOR = re.compile(r"""readme_block\(\s*["'](#{1,6} [^"']+)["']""")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def pages() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md"))


def headings_tests_run() -> set[str]:
    """Every heading a test passes to ``readme_block``."""
    return {match for path in (ROOT / "tests").rglob("*.py") for match in ASKED_FOR.findall(path.read_text())}


def heading_of_each_block(text: str) -> list[str | None]:
    """For each Python block, the nearest heading line above it (None when it has none)."""
    found = []
    for block in BLOCK.finditer(text):
        above = HEADING.findall(text[:block.start()])
        found.append(above[-1] if above else None)
    return found


def test_docs_has_pages():
    assert {page.name for page in pages()} >= {"performance.md", "decisions.md", "testing.md", "operations.md"}


def test_every_python_block_in_docs_is_run_by_a_test():
    run = headings_tests_run()
    for page in pages():
        for heading in heading_of_each_block(page.read_text()):
            assert heading in run, f"docs/{page.name}: the Python block under {heading!r} is run by no test"


def test_the_python_of_docs_imports_only_what_the_package_and_its_extras_install():
    for page in pages():
        for block in python_blocks(page):
            outside = imported_roots(block) - installable_roots()
            assert not outside, f"docs/{page.name} imports {sorted(outside)}, which no extra installs"


def test_every_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert [page.name for page in pages() if f"](docs/{page.name})" not in readme] == []


def test_relative_links_name_files_that_exist():
    for document in documents():
        for target in LINK.findall(document.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (document.parent / target).exists(), f"{document.relative_to(ROOT)} links to missing {target}"


def test_each_heading_a_test_runs_is_in_exactly_one_document():
    texts = [path.read_text() for path in documents()]
    for heading in headings_tests_run():
        holders = sum(bool(re.search(rf"^{re.escape(heading)}$", text, re.M)) for text in texts)
        assert holders == 1, f"{heading!r} is a heading of {holders} documents"
