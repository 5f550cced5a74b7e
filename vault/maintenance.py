"""Scheduled key maintenance (README, "Scheduled key maintenance"): gc, then rotate, rewrap and retire every
registered owner's key, each step one of the Vault's own audited calls.

The maintenance object is given those calls as a :class:`MaintainedVault` (a protocol the Vault satisfies), so
this module never imports the Vault."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vault.errors import InvalidArgument, StorageError, VaultError
from vault.inputs import check_progress

Progress = Callable[[int], None]


class MaintainedVault(Protocol):
    """The audited calls one maintenance run is made of."""

    def gc(self, now: float | None = None, *, progress: Progress | None = None) -> int: ...

    def rotate_owner_key(self, user_id: str) -> int: ...

    def rewrap(self, user_id: str | None = None, *, batch: int = ..., progress: Progress | None = None) -> int: ...

    def retire_old_key_versions(self, user_id: str) -> int: ...

    def audit_tags(self, *, user_id: str | None = None, actor: str | None = None, channel: str | None = None,
                   turn_id: str | None = None) -> dict[str, str]: ...


@dataclass(frozen=True)
class Maintenance:
    """What one run of ``maintain_keys`` did: of ``owners``, how many were ``maintained`` (rotated, rewrapped and
    retired), rows re-wrapped, versions retired; ``failed`` holds each owner whose step failed, by audit tag."""

    owners: int
    expired_removed: int
    maintained: int
    rewrapped: int
    retired: int
    failed: tuple[tuple[str, VaultError], ...]

    def to_dict(self) -> dict[str, Any]:
        """The counts, and each failure as the owner's audit tag, the error's kind and its message."""
        return {"owners": self.owners, "expired_removed": self.expired_removed, "maintained": self.maintained,
                "rewrapped": self.rewrapped, "retired": self.retired,
                "failed": [{"user": tag, "error": type(error).__name__, "message": str(error)}
                           for tag, error in self.failed]}


class KeyMaintenance:
    """Runs maintenance over a vault's audited calls; ``owner_names`` lists the owners the keyring registers."""

    def __init__(self, vault: MaintainedVault, owner_names: Callable[[], list[str]]) -> None:
        self._vault, self._owner_names = vault, owner_names

    def run(self, progress: Progress | None) -> Maintenance:
        """One maintenance run; an owner whose step fails is reported and the others still run, while a
        StorageError (the database itself) stops the run. ``progress`` gets the running total of rows re-wrapped."""
        check_progress(progress)
        removed = self._vault.gc()
        owners, done = self._owner_names(), [0, 0, 0]
        failed: list[tuple[str, VaultError]] = []
        for user_id in owners:
            try:
                steps = self._maintain_owner(user_id, done[1], progress)
            except StorageError:
                raise
            except VaultError as error:
                if user_id in self._owner_names():  # else shredded meanwhile: nothing to keep
                    failed.append((self._vault.audit_tags(user_id=user_id)["user"], error))
                continue
            done = [total + step for total, step in zip(done, steps, strict=True)]
        maintained, rewrapped, retired = done
        return Maintenance(len(owners), removed, maintained, rewrapped, retired, tuple(failed))

    def _maintain_owner(self, user_id: str, before: int, progress: Progress | None) -> tuple[int, int, int]:
        """Rotate, rewrap and retire one owner; returns (1, rows re-wrapped, versions retired). A put of another
        process whose cached keyset still names the old primary (for up to its key_cache_seconds) can land after
        the rewrap: retire then refuses, so the rewrap and retire run once more."""
        shown = None if progress is None else (lambda rows: progress(before + rows))
        vault = self._vault
        vault.rotate_owner_key(user_id)
        rewrapped = vault.rewrap(user_id, progress=shown)
        try:
            return 1, rewrapped, vault.retire_old_key_versions(user_id)
        except InvalidArgument:
            rewrapped += vault.rewrap(user_id)
            return 1, rewrapped, vault.retire_old_key_versions(user_id)
