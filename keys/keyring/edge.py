"""The edge with the OS keyring: which backends are acceptable, and translation of their errors.

Any exception a backend raises becomes :class:`KeyUnavailable` with a remedy; a backend known to store
secrets in plaintext (or not at all) is refused before anything is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

import keyring
from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked, NoKeyringError, PasswordDeleteError

from keys.errors import InvalidArgument, KeyUnavailable
from keys.keyring.memory import TRIAL, trial_keyring
from keys.keyring.secret import Secret

REMEDY = (
    "on a Linux host without a desktop session, run a Secret Service such as GNOME Keyring "
    "(dbus-run-session; gnome-keyring-daemon --unlock --components=secrets), or pass "
    "keyring_backend= an acceptable keyring.backend.KeyringBackend; see README, 'Operations'"
)
# Backends that store nothing, fail everything, or keep secrets in a file readable by whoever reads HOME.
INSECURE_MODULE_PREFIXES = ("keyring.backends.fail", "keyring.backends.null", "keyrings.alt")


def _is_insecure(backend: KeyringBackend) -> bool:
    """Whether the backend's class, or any class it inherits from, is one of the refused backends."""
    modules = {cls.__module__ for cls in type(backend).__mro__}
    return any(m == p or m.startswith(p + ".") for m in modules for p in INSECURE_MODULE_PREFIXES)


def _children(backend: KeyringBackend) -> list[KeyringBackend]:
    """The backends a chainer would fall through to (a plaintext one among them is as bad as alone)."""
    try:
        return list(getattr(backend, "backends", None) or [backend])
    except Exception:  # a chainer's discovery can raise anything its plug-ins raise
        raise KeyUnavailable(f"the keyring backend could not list the backends it chains; {REMEDY}") from None


def resolve_backend(backend: KeyringBackend | str | None) -> KeyringBackend:
    """The backend to use: the given instance, this process's trial keyring when named ``"memory"`` (Vault.open
    warns that its keys die with the process), else keyring's choice, which must be a recommended one."""
    if isinstance(backend, str):
        if backend != TRIAL:
            raise InvalidArgument('keyring_backend must be a keyring.backend.KeyringBackend instance, or "memory" '
                                  "for a trial keyring")
        return trial_keyring()
    auto = backend is None
    if auto:
        try:
            backend = keyring.get_keyring()
        except Exception as error:  # keyring's own start-up can raise anything its config loads
            raise KeyUnavailable(f"the OS keyring could not be loaded ({type(error).__name__}); {REMEDY}") from None
    if not isinstance(backend, KeyringBackend):
        if not auto:
            raise InvalidArgument('keyring_backend must be a keyring.backend.KeyringBackend instance, or "memory" '
                                  "for a trial keyring")
        raise KeyUnavailable(f"keyring returned something that is not a KeyringBackend; {REMEDY}")
    for candidate in _children(backend):
        if _is_insecure(candidate):
            name = type(candidate).__module__ + "." + type(candidate).__name__
            raise KeyUnavailable(f"keyring backend {name} stores no secrets or stores them in plaintext; {REMEDY}")
    if auto:
        try:
            priority = backend.priority
        except Exception:  # a backend's priority probe raises when its service is unreachable
            priority = 0
        if not isinstance(priority, int | float) or priority < 1:
            name = type(backend).__module__ + "." + type(backend).__name__
            raise KeyUnavailable(f"no recommended OS keyring is available (found {name}); {REMEDY}")
    return backend


class KeyringEdge:
    """get/set/delete of one keyring backend, each bounded by a timeout, every failure KeyUnavailable."""

    __slots__ = ("_backend", "_lock", "_timeout", "_unfinished")

    def __init__(self, backend: KeyringBackend, timeout: float = 10.0) -> None:
        self._backend = backend
        self._timeout = timeout
        self._unfinished: set[tuple[str, str]] = set()  # entries whose timed-out write may still land
        self._lock = threading.Lock()

    @property
    def timeout(self) -> float:
        """Seconds one keyring call may take before it is KeyUnavailable."""
        return self._timeout

    @property
    def backend_name(self) -> str:
        """Module-qualified class name of the backend in use (for diagnostics; no secrets)."""
        return type(self._backend).__module__ + "." + type(self._backend).__name__

    def get(self, service: str, username: str) -> Secret | None:
        """The stored secret, or None when the entry does not exist."""
        value = self._call(self._backend.get_password, "read", service, username)
        if value is not None and not isinstance(value, str):
            del value  # whatever it is, it may hold the entry: not in this frame's locals when the error leaves
            raise KeyUnavailable(f"the keyring returned a non-text secret; {REMEDY}")
        return None if value is None else Secret(value)

    def set(self, service: str, username: str, secret: Secret,
            kept: Callable[[Secret | None], bool] | None = None) -> None:
        """Store a secret, then read it back: a backend that accepts a write and keeps nothing is caught here.
        ``kept`` says whether what is read back keeps the write's promise when that is more than equality: a mark
        another process (or machine) raised higher meanwhile keeps a promise of "at least this"."""
        self._write(self._backend.set_password, "write", service, username, secret)
        stored = self.get(service, username)
        if not (stored == secret or (kept is not None and kept(stored))):
            raise KeyUnavailable(
                f"the keyring accepted a key but did not return it on read-back; it does not persist secrets. {REMEDY}"
            )

    def delete(self, service: str, username: str) -> None:
        """Delete a secret; deleting one that is absent is not an error."""
        try:
            self._write(self._backend.delete_password, "delete", service, username)
        except _Refused:
            pass
        if self.get(service, username) is not None:
            raise KeyUnavailable(f"the keyring did not delete a key; {REMEDY}")

    def _write(self, operation: Callable[..., object], action: str, service: str, username: str,
               *rest: Secret) -> None:
        """A set or delete. While an earlier write to the same entry timed out and may still land, a new one
        is refused: the late write would otherwise overwrite it (a newer keyset, or a shred)."""
        entry = (service, username)
        with self._lock:
            if entry in self._unfinished:
                raise KeyUnavailable(f"an earlier write to this keyring entry timed out and has not finished; "
                                     f"retry once the keyring answers again. {REMEDY}")
        self._call(operation, action, service, username, *rest, entry=entry)

    def _call(self, operation: Callable[..., object], action: str, *args: str | Secret,
              entry: tuple[str, str] | None = None) -> Any:
        """Run one backend call in a helper thread, waiting at most the timeout: a hung D-Bus call must
        not hang the vault. A read that times out is harmless if it completes later; a write is remembered
        as unfinished (see ``_write``) until it does. A secret is revealed only in the helper thread's call."""
        outcome: list[tuple[Literal[True], object] | tuple[Literal[False], BaseException]] = []
        finished = threading.Event()

        def run() -> None:
            try:
                outcome.append((True, operation(*[arg.reveal() if isinstance(arg, Secret) else arg
                                                  for arg in args])))
            except BaseException as error:  # handed to the caller's thread below
                outcome.append((False, error))
            finally:
                with self._lock:
                    finished.set()
                    if entry is not None:
                        self._unfinished.discard(entry)

        worker = threading.Thread(target=run, name="scratchvault-keyring", daemon=True)
        worker.start()
        worker.join(self._timeout)
        if not outcome:
            with self._lock:
                if entry is not None and not finished.is_set():
                    self._unfinished.add(entry)
            raise KeyUnavailable(f"the OS keyring did not answer within {self._timeout:g} s ({action}); {REMEDY}")
        result = outcome[0]
        if result[0]:
            return result[1]
        value = result[1]
        if isinstance(value, PasswordDeleteError):
            raise _Refused
        if isinstance(value, Exception):
            raise _translate(value, action) from None
        # KeyboardInterrupt and the like are not keyring faults: raised as they are, without the backend's frames
        # (their locals hold what was being written) or an exception they were raised from
        value.__cause__ = value.__context__ = None
        raise value.with_traceback(None)


class _Refused(Exception):
    """The backend said there was nothing to delete."""


def _translate(error: Exception, action: str) -> KeyUnavailable:
    if isinstance(error, KeyUnavailable):  # a backend of this project (keys/openbao) already gives its own remedy
        return KeyUnavailable(str(error))
    if isinstance(error, KeyringLocked):
        return KeyUnavailable(f"the OS keyring is locked and could not {action}: unlock it (login or "
                              f"gnome-keyring-daemon --unlock) and retry; {REMEDY}")
    if isinstance(error, NoKeyringError):
        return KeyUnavailable(f"no OS keyring is available; {REMEDY}")
    return KeyUnavailable(f"the OS keyring failed to {action} a key ({type(error).__name__}); {REMEDY}")
