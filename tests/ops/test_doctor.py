"""``scratchvault doctor`` says whether the keyring and the database files are safe, by exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from tests.storage.sqlite.layouts import legacy_file, not_a_vault
from tests.support.repository import ROOT
from vault import Principal, Vault
from vault.ops.doctor import diagnose
from vault.storage.sqlite.schema import SCHEMA_VERSION as SQLITE_SCHEMA


def doctor(db_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vault", "doctor", "--db", str(db_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=os.environ.copy(), check=False)


@pytest.fixture
def filled(db_path):
    with Vault.open(db_path, keyring_backend=MemoryKeyring()) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "hello")
    return db_path


def test_doctor_fails_on_a_database_others_may_write(filled):
    filled.chmod(0o666)
    result = doctor(filled)
    assert result.returncode == 1
    assert "FAIL  permissions" in result.stdout and "writable by group or others" in result.stdout
    assert "hello" not in result.stdout + result.stderr


def test_doctor_fails_on_a_missing_database(db_path):
    result = doctor(db_path)
    assert result.returncode == 1 and "no database" in result.stdout


@pytest.mark.real_keyring
def test_doctor_passes_a_private_database_with_the_secret_service(real_keyring, filled):
    result = doctor(filled)
    assert result.returncode == 0, result.stdout
    assert "SecretService" in result.stdout and "rows 1 " in result.stdout
    assert f"schema version {SQLITE_SCHEMA}" in result.stdout
    assert "row lookup: the seq each row id names" in result.stdout


def test_doctor_tells_a_file_made_before_schema_3_by_its_index_on_row_ids(db_path):
    with Vault.open(legacy_file(db_path), keyring_backend=MemoryKeyring()) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "hello")
    result = doctor(db_path)
    assert f"schema version {SQLITE_SCHEMA}, vault id" in result.stdout
    assert "row lookup: an index on row ids (a file made before schema 3" in result.stdout
    assert "hello" not in result.stdout + result.stderr


def test_doctor_names_the_seq_lookup_for_a_new_file_without_the_secret_service(db_path, keyring_backend):
    """The only other check of this line needs the Secret Service (skipped where there is none)."""
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "hello")
    lines, _ = diagnose(db_path)
    assert "      row lookup: the seq each row id names (no index on ids)" in lines


def test_doctor_fails_on_a_sqlite_file_that_is_no_vault(db_path):
    not_a_vault(db_path)
    lines, safe = diagnose(db_path)
    assert not safe and "FAIL  database: not a scratchvault database (SQLite, but no schema version)" in lines


def test_doctor_reports_free_space_against_the_default_reserve(db_path, keyring_backend):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "hello")
    lines, _ = diagnose(db_path)
    info = os.statvfs(db_path.parent)
    reserve = max(64 << 20, info.f_blocks * info.f_frsize // 100)
    status = "WARN" if info.f_bavail * info.f_frsize + (1 << 20) < reserve else "ok"
    disk = [line for line in lines if " disk: " in line]
    assert len(disk) == 1 and disk[0].startswith(f"{status:<6}disk: "), lines
    assert f"default reserve {reserve / (1 << 20):,.1f} MiB (max(64 MiB, 1%)), ballast 1.0 MiB" in disk[0]
