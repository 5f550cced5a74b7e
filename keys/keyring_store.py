"""The edge with the OS keyring: which backends are acceptable, and translation of their errors.

Any exception a backend raises becomes :class:`KeyUnavailable` with a remedy; a backend known to store
secrets in plaintext (or not at all) is refused before anything is written.
"""

from __future__ import annotations

import keyring
from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked, NoKeyringError, PasswordDeleteError

from keys.errors import InvalidArgument, KeyUnavailable

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


def resolve_backend(backend: KeyringBackend | None) -> KeyringBackend:
    """The backend to use: the given instance, else keyring's choice, which must be a recommended one."""
    auto = backend is None
    if auto:
        try:
            backend = keyring.get_keyring()
        except Exception as error:  # keyring's own start-up can raise anything its config loads
            raise KeyUnavailable(f"the OS keyring could not be loaded ({type(error).__name__}); {REMEDY}") from None
    if not isinstance(backend, KeyringBackend):
        if not auto:
            raise InvalidArgument("keyring_backend must be a keyring.backend.KeyringBackend instance")
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


class KeyringStore:
    """get/set/delete of one keyring backend, with every failure translated to KeyUnavailable."""

    __slots__ = ("_backend",)

    def __init__(self, backend: KeyringBackend) -> None:
        self._backend = backend

    @property
    def backend_name(self) -> str:
        """Module-qualified class name of the backend in use (for diagnostics; no secrets)."""
        return type(self._backend).__module__ + "." + type(self._backend).__name__

    def get(self, service: str, username: str) -> str | None:
        """The stored secret, or None when the entry does not exist."""
        try:
            value = self._backend.get_password(service, username)
        except Exception as error:
            raise _translate(error, "read") from None
        if value is not None and not isinstance(value, str):
            raise KeyUnavailable(f"the keyring returned a non-text secret; {REMEDY}")
        return value

    def set(self, service: str, username: str, secret: str) -> None:
        """Store a secret, then read it back: a backend that accepts a write and keeps nothing is caught here."""
        try:
            self._backend.set_password(service, username, secret)
        except Exception as error:
            raise _translate(error, "write") from None
        if self.get(service, username) != secret:
            raise KeyUnavailable(
                f"the keyring accepted a key but did not return it on read-back; it does not persist secrets. {REMEDY}"
            )

    def delete(self, service: str, username: str) -> None:
        """Delete a secret; deleting one that is absent is not an error."""
        try:
            self._backend.delete_password(service, username)
        except PasswordDeleteError:
            if self.get(service, username) is not None:
                raise KeyUnavailable(f"the keyring refused to delete a key; {REMEDY}") from None
        except Exception as error:
            raise _translate(error, "delete") from None


def _translate(error: Exception, action: str) -> KeyUnavailable:
    if isinstance(error, KeyringLocked):
        return KeyUnavailable(f"the OS keyring is locked and could not {action}: unlock it (login or "
                              f"gnome-keyring-daemon --unlock) and retry; {REMEDY}")
    if isinstance(error, NoKeyringError):
        return KeyUnavailable(f"no OS keyring is available; {REMEDY}")
    return KeyUnavailable(f"the OS keyring failed to {action} a key ({type(error).__name__}); {REMEDY}")
