"""The SQLite store (the default): one private file on this host."""

from vault.storage.sqlite.files import backup, describe, vault_id_at
from vault.storage.sqlite.paths import default_path, prepare
from vault.storage.sqlite.store import SqliteStore

__all__ = ["SqliteStore", "backup", "default_path", "describe", "prepare", "vault_id_at"]
