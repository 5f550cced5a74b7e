"""What the PostgreSQL attacker knows of the server's sessions."""

from __future__ import annotations

import time

import psycopg

from tests.support.postgres import APP_ROLE


class PgSessions:
    """``url``: the attacker's superuser URL (set by PostgresAttacker)."""

    url: str

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until no session of the vault's role is left in the database. A SIGKILLed client's server session
        lives on until the server notices, and finishes what the client had already sent (a COMMIT among it): only
        then is what the database holds final, as a SQLite file is the moment its writer dies."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.url, autocommit=True) as connection:
            while connection.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND usename = %s", (APP_ROLE,)).fetchone()[0]:
                assert time.monotonic() < deadline, "a killed client's session never ended"
                time.sleep(0.02)
