"""The PostgreSQL attacker's reads and writes of the vault-wide records: ``meta``, the owner-key commitments and the
rows' key versions (a mixin of PostgresAttacker, over its connection and schema)."""

from __future__ import annotations

from tests.attacks.pg_cells import put_value


class PgKeyRecords:
    """The vault-wide records, read and overwritten behind the vault's back, through PostgresAttacker's
    ``_all``, ``_made``, ``_connection``, ``run`` and ``schema``."""

    def meta(self, name: str) -> object:
        """A vault-wide value, or None (None too before the vault made its tables)."""
        found = self._all("SELECT value FROM meta WHERE name = ?", name) if self._made("meta") else None
        return found[0][0] if found else None

    def commitments(self) -> list[tuple[bytes, int, bytes]]:
        if not self._made("owner_keys"):
            return []
        return self._all("SELECT owner_tag, version, check_value FROM owner_keys ORDER BY owner_tag, version")

    def key_versions(self) -> dict[int, int]:
        return dict(self._all("SELECT key_version, count(*) FROM rows GROUP BY key_version"))

    def set_meta(self, name: str, value: object) -> None:
        with self._connection() as connection:
            assert put_value(connection, self.schema, "meta", "value", value, "name = ?", (name,)) == 1

    def record_commitment(self, owner_tag: bytes, version: int, value: bytes) -> None:
        self.run(("INSERT INTO owner_keys (owner_tag, version, check_value) VALUES (?, ?, ?) ON CONFLICT "
                  "(owner_tag, version) DO UPDATE SET check_value = excluded.check_value", owner_tag, version, value))

    def set_all_key_versions(self, value: object) -> None:
        """Every key commitment, reservation and tombstone given version ``value``: one per owner is left in each
        table (as SQLite's UPDATE OR REPLACE leaves it)."""
        with self._connection() as connection:
            for table in ("owner_keys", "key_reservations", "key_tombstones"):
                connection.execute(f"DELETE FROM {table} a USING {table} b WHERE a.owner_tag = b.owner_tag "
                                   "AND a.version > b.version")
                put_value(connection, self.schema, table, "version", value, "true", ())

    def set_all_commitments(self, value: object) -> None:
        with self._connection() as connection:
            assert put_value(connection, self.schema, "owner_keys", "check_value", value, "true", ()) >= 1
