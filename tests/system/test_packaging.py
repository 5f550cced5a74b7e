"""Installing as the README says: a wheel built from a copy of the source tree (what ``python -m build`` or ``pip
install <clone>`` does, through the same PEP 517 backend) builds without setuptools' deprecation warnings, holds
the package and nothing of the tests, and declares its licence as an SPDX expression. The package is not on an
index, so no README command may install it by name."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.repository import ROOT

SOURCE_ONLY = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
                                     ".hypothesis")


def build_wheel(tmp_path: Path) -> tuple[Path, str]:
    """The wheel built from a clean copy of the tree, and the backend's whole output."""
    source, out = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(ROOT, source, ignore=SOURCE_ONLY)
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(out), str(source)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [wheel] = out.glob("scratchvault-*.whl")
    return wheel, result.stdout + result.stderr


def test_the_wheel_builds_without_deprecation_warnings_and_holds_only_the_package(tmp_path):
    wheel, output = build_wheel(tmp_path)
    assert "DeprecationWarning" not in output
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata_name] = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_name).decode()
    assert {name.split("/")[0] for name in names} == {"vault", "keys", metadata_name.split("/")[0]}
    assert "License-Expression: Apache-2.0" in metadata.splitlines()


def test_the_readme_never_installs_the_package_by_name_from_an_index():
    commands = re.findall(r"pip install [^\n`]*", (ROOT / "README.md").read_text())
    assert commands
    by_name = [command for command in commands if re.search(r"(^|[\s'\"])scratchvault(\[|\s|'|\"|$)", command)]
    assert by_name == []
