"""A keyring entry in transit between the key code and the keyring backend: its repr and str redact it, so a
frame holding one shows nothing in a traceback rendered with its locals (Sentry's default). ``reveal`` is called
only where the entry is parsed or handed to the backend, in frames no raised exception keeps."""

from __future__ import annotations

import hmac
from typing import NoReturn


class Secret:
    """A keyring entry's text; compared in constant time; never shown, pickled or hashed."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def reveal(self) -> str:
        """The entry's text: for the backend call and the parser only."""
        return self._text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._text.encode("utf-8", "surrogatepass"),
                                                                 other._text.encode("utf-8", "surrogatepass"))

    __hash__ = None  # type: ignore[assignment]  # unhashable: typeshed declares __hash__ a method

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
