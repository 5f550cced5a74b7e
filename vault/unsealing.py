"""The last step of the access path: a row whose owner, turn, expiry and ledger were already checked has its data
key unwrapped and its metadata opened, and the metadata must agree with the row's clear columns."""

from __future__ import annotations

from keys import OpenedRow, RowRecipe
from vault.errors import IntegrityError
from vault.row.format import Metadata
from vault.storage import StoredRow


class RowUnsealer:
    """Opens checked rows with a vault's row recipe; ``max_chunks`` bounds the chunk list a metadata record may hold."""

    def __init__(self, recipe: RowRecipe, max_chunks: int) -> None:
        self._recipe, self._max_chunks = recipe, max_chunks

    def unseal(self, user_id: str, row: StoredRow) -> tuple[OpenedRow, Metadata]:
        """Unwrap the data key and open the metadata of a row whose owner was already checked."""
        opened = self._recipe.open(user_id, row)
        metadata = Metadata.decode(opened.metadata, self._max_chunks)
        if (metadata.user_id != user_id or metadata.expires_at != row.expires_at
                or metadata.size_bytes != row.size_bytes):
            raise IntegrityError("row metadata does not match the stored row")
        return opened, metadata
