"""What differs between the SQL of the two stores for the key bookkeeping, and nothing else: how a statement names
its parameters, how it spells an empty byte string and the booleans, how it checks a column's stored type (SQLite
keeps any value in any column), and which clock stamps a reservation.

Statements are written once (vault/storage/sql/owner_records.py, epoch_records.py) with psycopg's named
parameters ``%(name)s`` and these tokens: ``{empty}``, ``{true}``, ``{false}``, ``{typed}`` (the stored types of
an epoch row's length, epoch and attempt are integers) and ``{now}`` (the clock a reservation is stamped with).
``render`` replaces them; no value ever enters a statement's text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_NAMED = re.compile(r"%\((\w+)\)s")


@dataclass(frozen=True, slots=True)
class Dialect:
    """The spelling of one store's SQL for what the bookkeeping statements need."""

    empty: str  # an empty byte string
    true: str
    false: str
    typed: str  # a predicate: an epoch row's length, epoch and attempt are stored as integers
    now: str  # the time a reservation is stamped with and judged by
    named: str  # how a named parameter is written, ``\1`` its name

    def render(self, template: str) -> str:
        """``template`` in this dialect (its tokens replaced, its parameters named this dialect's way)."""
        return _render(self, template)


@functools.lru_cache(maxsize=256)
def _render(dialect: Dialect, template: str) -> str:
    """Dialect.render, remembered: the bookkeeping has a few dozen statements, each rendered once per dialect."""
    text = template
    for token, value in (("{empty}", dialect.empty), ("{true}", dialect.true), ("{false}", dialect.false),
                         ("{typed}", dialect.typed), ("{now}", dialect.now)):
        text = text.replace(token, value)
    return _NAMED.sub(dialect.named, text)


SQLITE = Dialect(
    empty="x''", true="1", false="0",
    typed="(typeof(length) = 'integer' AND typeof(epoch) = 'integer' AND typeof(attempt) = 'integer')",
    now="%(now)s", named=r":\1")
# PostgreSQL's columns hold their declared types; a reservation is stamped, and judged abandoned, by the server's
# clock, which every host shares (a host whose clock runs ahead must not void another's reservation)
POSTGRES = Dialect(
    empty="'\\x'::bytea", true="true", false="false", typed="true",
    now="extract(epoch FROM clock_timestamp())", named=r"%(\1)s")
