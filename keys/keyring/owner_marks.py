"""The keyring's own record of how far an owner's key versions go, so that what a shred or a retirement destroys never
rests on the database alone (threat_model.md, "What the database cannot move").

Three marks per owner tag, each a decimal number in a keyring entry of its own (service
``scratchvault/<vault_id hex>/owner-<kind>``, user the owner tag in hex), each only ever raised:

* ``issued``: the highest version an entry may have been written under, raised before a version above
  ALWAYS_PROBED is written; a shred asks the keyring for every version up to it.
* ``retired``: every version below it was retired, raised before a retirement's tombstones commit; no version below
  it is ever written again, and every sweep of the owner deletes their entries whatever the database says.
* ``swept``: every version below it is known gone from the keyring (raised after a sweep deleted them), so a sweep
  asks only for the versions between it and ``retired``.

A vault-wide entry (user ``adopted`` in the ``issued`` service) says the ``issued`` marks were written once from
the database's view, for owners whose versions passed ALWAYS_PROBED before the marks existed.
"""

from __future__ import annotations

from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.keyring.entries import MAX_VERSION
from keys.keyring.secret import Secret

ALWAYS_PROBED = 16  # versions a shred asks the keyring for whatever any record says
PROBE_GAP = 16  # versions past the issued mark a shred still asks for, and how far the database may number past it
_ADOPTED = "adopted"
_MAX_DIGITS = 10


class OwnerMarks:
    """Reads and raises (never lowers) the marks of one vault's owners."""

    __slots__ = ("_adopted", "_keyring", "_prefix")

    def __init__(self, keyring: KeyringEdge, vault_id: bytes) -> None:
        self._keyring, self._prefix = keyring, "scratchvault/" + vault_id.hex() + "/owner-"
        self._adopted = False  # once seen adopted, it stays so (the entry is never deleted): not asked again

    def read(self, kind: str, owner_tag: bytes) -> int:
        """A mark's value; 0 when it is absent or not a version number (an entry garbled by the keyring counts as
        none, so the probe still covers ALWAYS_PROBED). KeyUnavailable when the keyring fails."""
        return _parse(self._keyring.get(self._prefix + kind, owner_tag.hex()))

    def raise_to(self, kind: str, owner_tag: bytes, value: int) -> None:
        """Set a mark to ``value`` unless it already holds as much, and read it back (a keyring that drops a write
        is KeyUnavailable: the caller then writes nothing the mark should cover; a mark found higher, raised by
        another process meanwhile, holds as much)."""
        if self.read(kind, owner_tag) >= value:
            return
        self._keyring.set(self._prefix + kind, owner_tag.hex(), Secret(str(value)),
                          kept=lambda stored: _parse(stored) >= value)
        if self.read(kind, owner_tag) < value:
            raise KeyUnavailable("the OS keyring did not keep a key version mark it was given; check the keyring "
                                 "and retry")

    def adopted(self) -> bool:
        """Whether the ``issued`` marks were written from the database's view once already."""
        if not self._adopted:
            self._adopted = self._keyring.get(self._prefix + "issued", _ADOPTED) is not None
        return self._adopted

    def adopt(self, tops: list[tuple[bytes, int]]) -> None:
        """Raise each owner's ``issued`` mark to the highest version the database lists for it (``tops``), then
        record that it was done."""
        for owner_tag, top in tops:
            if ALWAYS_PROBED < top <= MAX_VERSION:
                self.raise_to("issued", owner_tag, top)
        self._keyring.set(self._prefix + "issued", _ADOPTED, Secret("1"))
        self._adopted = True

    def __repr__(self) -> str:
        return "<OwnerMarks>"


def owner_mark_value(text: str) -> int | None:
    """An owner mark as the keyring holds it (decimal, at most MAX_VERSION), or None for anything else."""
    if not (0 < len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value <= MAX_VERSION else None


def _parse(stored: Secret | None) -> int:
    """The mark an entry holds; a missing or unreadable one counts as 0 (nothing issued, retired or swept)."""
    return (owner_mark_value(stored.reveal()) if stored is not None else None) or 0
