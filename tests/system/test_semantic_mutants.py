"""The semantic mutants (tests/mutants/semantic.toml, run by ``bash scripts/run semantic-mutants`` and in CI) stay
applicable and measure something: each names an existing file where each text it replaces occurs once and
tests that exist, and the runner reports a change the tests cannot see as a survivor, not as killed."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.semantic_mutants import NOT_COPIED, ROOT, Mutant, mutants, run


def test_at_least_ten_mutants_each_applying_once_to_a_file_and_naming_existing_tests():
    found = mutants([])
    assert len(found) >= 10 and len({mutant.name for mutant in found}) == len(found)
    for mutant in found:
        text = (ROOT / mutant.file).read_text()
        assert [text.count(find) for find, _ in mutant.edits] == [1] * len(mutant.edits), mutant.name
        assert all((ROOT / test.split("::")[0]).is_file() for test in mutant.tests), mutant.name


def test_a_change_the_tests_cannot_see_survives(tmp_path: Path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=NOT_COPIED)
    unseen = Mutant("a longer busy timeout", "none", "vault/storage/sqlite/connections.py",
                    [['"busy_timeout = 30000"', '"busy_timeout = 30001"']],
                    ["tests/storage/sqlite/test_durability_settings.py"])
    assert run(unseen, tree)[0] == "SURVIVED"
    assert (tree / unseen.file).read_text() == (ROOT / unseen.file).read_text()  # the copy is put back
