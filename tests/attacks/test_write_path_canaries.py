"""Every kind of write leaves content, summaries and names only encrypted on disk, on the store under test: after
each of a put (text, JSON, bytes), a streamed put, extend_turn, a key rotation, a rewrap, a retirement and the
close, a canary scan (tests/support/canary_scan.py) reads every file the store keeps (SQLite: everything in the
vault's directory, the database, its WAL, shared memory and journal; PostgreSQL: after a CHECKPOINT, every file of
the cluster's data directory, table files, WAL and temporary files among them), every file in the process's
temporary directory and every file the process holds open, unlinked temporary files included. None may hold a
content canary, a summary canary, or the user id, actor, channel, turn or executor name, as UTF-8, UTF-16 or hex.

Canaries planted in plaintext by an attacker's own table beside the vault, in a file of the temporary directory and
in an unlinked temporary file must be found by every scan, or the scan proves nothing.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from keys import CHUNK_BYTES
from tests.attacks.stores import STORE
from tests.support.canary_scan import Canaries, Scan, files_under, open_files, scan, spelled
from tests.support.postgres import PGDATA_ENV, unavailable
from vault import Principal, Vault

PLANTED = {"plantedtable": "utf-8", "plantedtemp": "utf-16-le", "plantedunlinked": "hex"}
FILLER = "ordinary words of a fetched page " * 400


@pytest.fixture
def process_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary directory of the process's own for this test (the shared one holds other programs' files)."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    return private


@pytest.fixture
def store_files(vault_dir: Path, attacker) -> Callable[[], Iterator[Path]]:
    """The files the store keeps, as they are on disk now."""
    if STORE != "postgres":
        return lambda: files_under(vault_dir)
    datadir = os.environ.get(PGDATA_ENV)
    if not datadir:
        unavailable(f"{PGDATA_ENV} is not set: the cluster's data directory cannot be read")

    def on_disk() -> Iterator[Path]:
        attacker.checkpoint()  # what the server holds in its buffers reaches the table files
        return files_under(Path(datadir))

    return on_disk


@pytest.fixture
def planted(canaries: Canaries, attacker_for, location_named, process_temp_dir: Path) -> Iterator[None]:
    """Plaintext canaries where the scan must look: an attacker's table beside the vault's (its pages and WAL), a
    file in the temporary directory, an unlinked temporary file this process holds open."""
    beside = attacker_for(location_named("planted.db"))
    beside.run("CREATE TABLE planted (note TEXT)", ("INSERT INTO planted VALUES (?)", canaries.new("plantedtable")))
    (process_temp_dir / "planted").write_bytes(spelled(canaries.new("plantedtemp"), PLANTED["plantedtemp"]))
    with tempfile.TemporaryFile() as unlinked:
        unlinked.write(spelled(canaries.new("plantedunlinked"), PLANTED["plantedunlinked"]))
        unlinked.flush()
        yield


@pytest.fixture
def canaries() -> Canaries:
    return Canaries()


def writes(canaries: Canaries) -> list[tuple[str, Callable[[Vault], object]]]:
    """Each write path, named, with canaries in everything a caller passes and in what the summaries keep."""
    who = Principal(canaries.new("user"), actor=canaries.new("actor"), channel=canaries.new("channel"))
    turn, executor = canaries.new("turn"), canaries.new("executor")
    text = canaries.new("sumtxt") + " begins this page " + FILLER + canaries.new("content") + FILLER
    document = {canaries.new("sumkey"): [canaries.new("jsonvalue")] * 30}
    data = b"\x00\x01" + canaries.new("bytes").encode() * 3
    stream = (canaries.new("sumstr") + " " + "s" * (CHUNK_BYTES - 60) + canaries.new("acrosschunks")
              + "t" * CHUNK_BYTES * 2 + canaries.new("streamed"))

    def put_text(vault: Vault) -> None:
        rep = vault.put(who, turn, 1, executor, text)
        assert canaries.made["sumtxt"] in rep.summary and canaries.made["content"] not in rep.summary

    def put_json(vault: Vault) -> None:
        assert canaries.made["sumkey"] in vault.put(who, turn, 2, executor, document).summary

    def put_stream(vault: Vault) -> None:
        rep = vault.put(who, turn, 4, executor, io.StringIO(stream))
        assert canaries.made["sumstr"] in rep.summary and rep.size_bytes == len(stream)
        assert vault.get(who, rep.id).content == stream

    def summaries(vault: Vault) -> None:
        assert len(vault.list_for_turn(who, turn)) == 4

    return [("put text", put_text), ("put JSON", put_json),
            ("put bytes", lambda vault: vault.put(who, turn, 3, executor, data)),
            ("streamed put", put_stream), ("summaries listed", summaries),
            ("extend_turn", lambda vault: vault.extend_turn(who, turn, 7200)),
            ("rotate", lambda vault: vault.rotate_owner_key(who.user_id)),
            ("rewrap", lambda vault: vault.rewrap(who.user_id)),
            ("retire", lambda vault: vault.retire_old_key_versions(who.user_id)),
            ("close", lambda vault: vault.close())]


def leaks(found: Scan, canaries: Canaries) -> dict[str, set[str]]:
    """What the scan found other than the planted canaries, each of which must be found, in its form."""
    for name, form in PLANTED.items():
        assert found.found.pop(f"{name} as {form}", None), f"the scan missed the canary planted as {name}"
    return found.found


def store_files_read(found: Scan, db_path: Path | str) -> bool:
    """Whether the scan read where the store keeps rows: the database and its WAL, or the cluster's tables and
    WAL."""
    if STORE == "postgres":
        return all(any(f"/{part}/" in path for path in found.read) for part in ("base", "pg_wal"))
    return {str(db_path), f"{db_path}-wal"} <= found.read


def test_no_write_leaves_content_summaries_or_names_in_any_file(vault, db_path, canaries, planted, store_files,
                                                                process_temp_dir):
    for step, write in writes(canaries):
        write(vault)
        found = scan(canaries, [*store_files(), *files_under(process_temp_dir), *open_files()])
        assert step == "close" or store_files_read(found, db_path), f"{step}: read only {sorted(found.read)}"
        assert leaks(found, canaries) == {}, f"found on disk after {step}"
