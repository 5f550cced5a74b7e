"""Every key the code handles during a test, and where one of them turns up in an error's traceback.

``KeyRecorder`` wraps the places a key enters the cryptography: the AES-GCM and AES constructors of keys/crypto/aead.py
and ``hmac.new`` (every HKDF step, every blind-index and commitment MAC is an HMAC keyed by a key), and adds the
keys the keyring holds. ``traceback_leaks`` then searches an error, its causes and contexts: the traceback as
rendered with locals (``TracebackException(capture_locals=True)``, what Sentry and friends show) and every frame's
locals walked through containers and object attributes, for any recorded key raw, in hex or in Base64.

Walking stops at the opaque key handles of ``keys/`` (their class refuses pickling and shows no key in its repr:
the one place raw keys are meant to live) and at keyring backends (the keyring's own memory is out of scope).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import traceback
import types
from collections.abc import Iterator
from typing import Any

import pytest
from keyring.backend import KeyringBackend

import keys.crypto.aead

KEY_SIZE = 32
_NOT_WALKED = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type,
               types.CodeType, types.FrameType, types.TracebackType)


class KeyRecorder:
    """Records every 32-byte key given to AES-GCM, AES or HMAC while installed (``install``)."""

    def __init__(self) -> None:
        self.keys: set[bytes] = set()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> KeyRecorder:
        aesgcm, cipher, new = keys.crypto.aead.AESGCM, keys.crypto.aead.Cipher, hmac.new

        def recording_aesgcm(key: bytes) -> Any:
            self.note(key)
            return aesgcm(key)

        def recording_cipher(algorithm: Any, mode: Any) -> Any:
            self.note(algorithm.key)
            return cipher(algorithm, mode)

        def recording_hmac(key: bytes, msg: bytes | None = None, digestmod: Any = "") -> hmac.HMAC:
            self.note(key)
            return new(key, msg, digestmod)

        monkeypatch.setattr(keys.crypto.aead, "AESGCM", recording_aesgcm)
        monkeypatch.setattr(keys.crypto.aead, "Cipher", recording_cipher)
        monkeypatch.setattr(hmac, "new", recording_hmac)
        return self

    def note(self, key: bytes | bytearray | memoryview) -> None:
        if len(key) == KEY_SIZE:
            self.keys.add(bytes(key))

    def add_keyring(self, ring: Any) -> None:
        """The keys a MemoryKeyring holds (owner versions, the index key, epoch keys)."""
        for secret in ring.secrets.values():
            try:
                document = json.loads(secret)
            except ValueError:
                continue
            if isinstance(document, dict):
                found = [document["key"]] if "key" in document else list(document.get("keys", {}).values())
                for encoded in found:
                    try:
                        self.note(base64.b64decode(encoded))
                    except (binascii.Error, TypeError):
                        continue


def key_texts(key: bytes) -> set[str]:
    """How a key shows in text: escaped as a bytes repr shows it, hex (either case), Base64 and URL-safe Base64."""
    encoded = base64.b64encode(key).decode()
    return {repr(key)[2:-1], key.hex(), key.hex().upper(), encoded, encoded.rstrip("="),
            base64.urlsafe_b64encode(key).decode().rstrip("=")}


def rendered(error: BaseException) -> str:
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def chain(error: BaseException) -> Iterator[BaseException]:
    """The error and every cause and context behind it."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__]


def frame_locals(error: BaseException) -> Iterator[tuple[str, dict[str, Any]]]:
    for link in chain(error):
        tb = link.__traceback__
        while tb is not None:
            yield f"{tb.tb_frame.f_code.co_qualname}:{tb.tb_lineno}", dict(tb.tb_frame.f_locals)
            tb = tb.tb_next


def is_key_handle(value: object) -> bool:
    """An opaque key holder of keys/: a class of that package that overrides ``__reduce__`` to refuse pickling."""
    cls = type(value)
    return cls.__module__.startswith("keys.") and cls.__reduce__ is not object.__reduce__


def _children(value: object) -> list[object]:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    if isinstance(value, BaseException):
        return list(value.args)
    found = list(getattr(value, "__dict__", {}).values())
    for cls in type(value).__mro__:
        for name in cls.__dict__.get("__slots__", ()):
            found.append(getattr(value, name, None))
    return found


def _holds(value: object, wanted: set[bytes], texts: dict[str, bytes]) -> set[bytes]:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {key for key in wanted if key in data}
    if isinstance(value, str):
        return {key for text, key in texts.items() if text in value}
    return set()


def walked_leaks(error: BaseException, wanted: set[bytes]) -> list[str]:
    """Where a key sits in the locals of the error's frames, reached through containers and attributes."""
    texts = {text: key for key in wanted for text in key_texts(key)}
    found: list[str] = []
    seen: set[int] = set()
    for where, names in frame_locals(error):
        pending: list[tuple[str, object]] = [(f"{where} {name}", value) for name, value in names.items()]
        while pending:
            path, value = pending.pop()
            if id(value) in seen or isinstance(value, _NOT_WALKED) or is_key_handle(value):
                continue
            if isinstance(value, KeyringBackend):
                continue
            seen.add(id(value))
            if _holds(value, wanted, texts):
                found.append(path)
            pending += [(f"{path}.{type(child).__name__}", child) for child in _children(value)]
    return found


def traceback_leaks(error: BaseException, recorder: KeyRecorder) -> list[str]:
    """Every place a recorded key shows: in the rendered traceback, or in its frames' locals."""
    assert recorder.keys, "no key was recorded: the recorder is not wired to the code under test"
    text = rendered(error)
    shown = [f"rendered: {key.hex()[:8]}..." for key in recorder.keys if any(t in text for t in key_texts(key))]
    return shown + walked_leaks(error, recorder.keys)
