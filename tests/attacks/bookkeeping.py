"""What an attacker writes in a SQLite store's file besides rows: meta entries, key commitments, versions and the
owners' ledgers of deleted rows. Mixed into ``SqliteAttacker`` (tests/attacks/sqlite_attacker.py), whose
``_connection`` and ``_all`` it uses."""

from __future__ import annotations


class Bookkeeping:
    """The file's bookkeeping tables, read and overwritten behind the vault's back."""

    def ledgers(self) -> dict[bytes, tuple]:
        """Every owner's ledger of deleted rows as stored, (counter, body, tag) by owner tag."""
        return {owner_tag: tuple(rest) for owner_tag, *rest in self._all("SELECT owner_tag, counter, body, tag "
                                                                          "FROM deletions")}

    def write_ledger(self, owner_tag: bytes, ledger: tuple | None) -> None:
        """Store ``ledger`` (counter, body, tag) as the owner's ledger of deleted rows; None removes it."""
        with self._connection() as connection:
            connection.execute("DELETE FROM deletions WHERE owner_tag = ?", (owner_tag,))
            if ledger is not None:
                connection.execute("INSERT INTO deletions (owner_tag, counter, body, tag) VALUES (?, ?, ?, ?)",
                                   (owner_tag, *ledger))

    def set_meta(self, name: str, value: object) -> None:
        """Overwrite a vault-wide value."""
        with self._connection() as connection:
            assert connection.execute("UPDATE meta SET value = ? WHERE name = ?", (value, name)).rowcount == 1

    def delete_meta(self, name: str) -> None:
        """Delete a vault-wide value."""
        with self._connection() as connection:
            assert connection.execute("DELETE FROM meta WHERE name = ?", (name,)).rowcount == 1

    def record_commitment(self, owner_tag: bytes, version: int, value: bytes) -> None:
        """Record (or overwrite) the commitment of one owner key version."""
        with self._connection() as connection:
            connection.execute("INSERT OR REPLACE INTO owner_keys (owner_tag, version, check_value) VALUES (?, ?, ?)",
                               (owner_tag, version, value))

    def recorded_key_versions(self) -> dict[str, list[int]]:
        """Owner key versions the file records as committed and as tombstoned (every owner)."""
        with self._connection() as connection:
            return {"committed": [v for (v,) in connection.execute("SELECT version FROM owner_keys ORDER BY 1")],
                    "tombstoned": [v for (v,) in connection.execute("SELECT version FROM key_tombstones ORDER BY 1")]}

    def set_all_key_versions(self, value: object) -> None:
        """Overwrite the version of every key commitment, reservation and tombstone with ``value``."""
        with self._connection() as connection:
            for table in ("owner_keys", "key_reservations", "key_tombstones"):
                connection.execute(f"UPDATE OR REPLACE {table} SET version = ?", (value,))

    def set_all_commitments(self, value: object) -> None:
        """Overwrite every recorded owner key commitment with ``value``."""
        with self._connection() as connection:
            assert connection.execute("UPDATE owner_keys SET check_value = ?", (value,)).rowcount >= 1
