"""The house rules, checked on the source text (tests/support/house_rules.py; nothing under test is imported):
no import cycle among the modules of vault/ and keys/, ``vault.Vault`` a plain class, at most six parameters per
function, and no issue numbers or commit names in comments, docstrings and the two documents. Each rule is also
shown failing and passing on a toy tree, so a rule that could never fail is caught too."""

from __future__ import annotations

from pathlib import Path

from tests.support.house_rules import (
    MAX_PARAMETERS,
    class_bases,
    history_references,
    import_cycles,
    import_graph,
    too_many_parameters,
)

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("vault", "keys")
CODE = ("vault", "keys", "bench", "scripts")
PROSE = ("vault", "keys", "tests")
DOCUMENTS = ("README.md", "threat_model.md")


def test_no_import_cycle_among_the_modules_of_vault_and_keys():
    """Imports inside functions count (they only defer a cycle); those under ``if TYPE_CHECKING:`` never run."""
    cycles = import_cycles(import_graph(ROOT, PACKAGES))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(cycle) for cycle in cycles)


def test_vault_inherits_nothing_but_object():
    bases = class_bases(ROOT, "vault", "Vault")
    assert bases in ([], ["object"]), f"vault.Vault's bases: {bases}"


def test_no_function_takes_more_than_six_parameters_besides_self():
    found = too_many_parameters(ROOT, CODE)
    assert not found, f"more than {MAX_PARAMETERS} parameters:\n" + "\n".join(found)


def test_no_issue_number_or_commit_name_in_comments_docstrings_or_documents():
    """The code and documents state what holds and why; which issue asked for it and which commit did it is the
    history's to tell."""
    found = history_references(ROOT, PROSE, DOCUMENTS)
    assert not found, "issue numbers or commit names:\n" + "\n".join(found)


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_cycle_rule_follows_relative_function_level_and_submodule_imports(tmp_path):
    base = {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/c.py": "X = 1\n"}
    cyclic = tree(tmp_path / "cyclic", {**base, "pkg/a.py": "def f():\n    from .sub import c\n",
                                        "pkg/sub/c.py": "from pkg import a\n"})
    assert import_cycles(import_graph(cyclic, ("pkg",))) == [["pkg.a", "pkg.sub.c"]]
    longer = tree(tmp_path / "longer", {**base, "pkg/a.py": "import pkg.b\n", "pkg/b.py": "from . import c\n",
                                        "pkg/c.py": "from ..pkg.a import x\n"})
    assert import_cycles(import_graph(longer, ("pkg",))) == [["pkg.a", "pkg.b", "pkg.c"]]
    typing_only = tree(tmp_path / "typing", {**base, "pkg/a.py": "from pkg.sub import c\n",
                                             "pkg/sub/c.py": "from typing import TYPE_CHECKING\n"
                                                             "if TYPE_CHECKING:\n    from pkg import a\n"})
    assert import_cycles(import_graph(typing_only, ("pkg",))) == []


def test_the_base_rule_follows_re_exports(tmp_path):
    derived = tree(tmp_path / "derived", {"v/__init__.py": "from .impl import Vault as Vault\n",
                                          "v/impl.py": "class Vault(Mixin, metaclass=Meta):\n    pass\n"})
    assert class_bases(derived, "v", "Vault") == ["Mixin", "metaclass=Meta"]
    plain = tree(tmp_path / "plain", {"v/__init__.py": "from v.impl import Vault\n", "v/impl.py": "class Vault:\n"
                                                                                                 "    pass\n"})
    assert class_bases(plain, "v", "Vault") == []


def test_the_parameter_rule_counts_keyword_only_and_star_arguments(tmp_path):
    names = ", ".join(f"p{n}" for n in range(MAX_PARAMETERS - 2))
    fine = tree(tmp_path / "fine", {"code/m.py": f"class C:\n    def f(self, {names}, *args, **kwargs): ...\n"})
    assert too_many_parameters(fine, ("code",)) == []
    over = tree(tmp_path / "over", {"code/m.py": f"async def f({names}, *args, key, **kwargs): ...\n"})
    assert too_many_parameters(over, ("code",)) == [f"code/m.py:1 f() takes {MAX_PARAMETERS + 1}"]


def test_the_history_rule_flags_issue_numbers_and_commit_names_but_not_data(tmp_path):
    flagged = tree(tmp_path / "flagged", {
        "code/m.py": '"""Fixed in 1a2b3c4d."""\nX = "deadbeef01"  # see issue 12\n',
        "README.md": "Done in PR #7.\n```\nhash 0123456789abcdef\n```\nA fix (#31).\n"})
    assert history_references(flagged, ("code",), ("README.md",)) == [
        "code/m.py:2 'issue 12'", "code/m.py:1 '1a2b3c4d'", "README.md:1 'PR #7'", "README.md:5 '#31'"]
    clean = tree(tmp_path / "clean", {
        "code/m.py": '"""Key 0x1a2b3c4d5e, digest sha256 of 64 digits: ' + "ab12" * 16 + '."""\n'
                     'VECTOR = "00112233445566778899aabbccddeeff"  # the test vector, step 3 of 4\n',
        "README.md": "# Title\nSee https://example.com/a#12 and &#123; and `deadbeef` and 1234567.\n"})
    assert history_references(clean, ("code",), ("README.md",)) == []
