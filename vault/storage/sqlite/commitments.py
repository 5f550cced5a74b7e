"""Key commitments and the owner registry in the SQLite file (``keys.KeyCommitments``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vault.storage.sqlite.schema import blob

if TYPE_CHECKING:
    from vault.storage.sqlite.store import SqliteStore


class SqliteCommitments:
    """Key commitments and the owner registry (keys.KeyCommitments); writes join the thread's open transaction."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        """Stored key commitments of an owner, by version."""
        found = self._store.query("SELECT version, check_value FROM owner_keys WHERE owner_tag = ?", (owner_tag,))
        return {version: blob(value) for version, value in found}

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record an owner key commitment and register the owner."""
        self._store.atomic([("INSERT OR IGNORE INTO owner_keys (owner_tag, version, check_value) VALUES (?, ?, ?)",
                       (owner_tag, version, value)),
                      ("INSERT OR IGNORE INTO owners (owner_tag, sealed_name) VALUES (?, ?)",
                       (owner_tag, sealed_name))])

    def forget_owner_commitments(self, owner_tag: bytes, versions: set[int] | None) -> None:
        """Drop commitments of retired versions; None drops all of them and the owner's registration."""
        if versions is None:
            self._store.atomic([("DELETE FROM owner_keys WHERE owner_tag = ?", (owner_tag,)),
                          ("DELETE FROM owners WHERE owner_tag = ?", (owner_tag,))])
        else:
            self._store.atomic([("DELETE FROM owner_keys WHERE owner_tag = ? AND version = ?", (owner_tag, version))
                          for version in sorted(versions)])

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every registered owner."""
        return [(blob(tag), blob(name)) for tag, name in self._store.query("SELECT owner_tag, sealed_name FROM owners")]

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows (expired or not) each key version of an owner still wraps."""
        return dict(self._store.query(
            "SELECT key_version, count(*) FROM rows WHERE owner_tag = ? GROUP BY key_version", (owner_tag,)))

    def index_commitment(self) -> bytes | None:
        """The stored commitment of the index key."""
        return self._store.get_meta("index_key_check")

    def record_index_commitment(self, value: bytes) -> None:
        """Record the index key commitment."""
        self._store.atomic([("INSERT OR IGNORE INTO meta (name, value) VALUES ('index_key_check', ?)", (value,))])
