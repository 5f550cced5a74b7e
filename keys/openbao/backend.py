"""OpenBaoKeyring: a keyring backend that keeps the vault's keys in an OpenBao (or HashiCorp Vault) KV v2 mount.

Chosen only by name: pass an instance (``Vault.open(..., keyring_backend=OpenBaoKeyring())``) or set
``PYTHON_KEYRING_BACKEND=keys.openbao.OpenBaoKeyring``; its priority is positive only under that variable, so
keyring never picks it for another application.

Deletion is final: an entry is deleted with its metadata and every version (KV v2 ``delete_metadata_and_all_versions``),
so nothing is left to undelete; it is never soft-deleted. Entries written once (keys/openbao/layout.py) are written
with check-and-set 0: the server refuses the write when the entry already exists. Before the first request the mount
is checked to be KV version 2: on a version 1 mount the ``data/`` paths would be plain entries that a delete of their
metadata would not remove.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from hvac import exceptions as bao_errors
from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import PasswordDeleteError

from keys.errors import KeyUnavailable
from keys.openbao.config import SEE_DOCS, OpenBaoConfig
from keys.openbao.layout import entry_path, written_once
from keys.openbao.session import CasRefused, OpenBaoSession

FIELD = "password"  # the one field of each KV entry
SELECTED_BY = ("keys.openbao.OpenBaoKeyring", "keys.openbao.backend.OpenBaoKeyring")


class OpenBaoKeyring(KeyringBackend):
    """Keys in OpenBao. ``OpenBaoKeyring()`` reads BAO_ADDR and the rest from the environment (keys/openbao/config.py);
    keyword arguments (``addr=``, ``cacert=``, ``token=``, ``role_id=``, ``secret_id_file=``, ``mount=``, ``prefix=``,
    ``timeout=`` ...) replace those settings, or pass a whole ``config=``."""

    def __init__(self, config: OpenBaoConfig | None = None, **overrides: Any) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # keyring's KeyringBackend.__init__ is unannotated
        if config is not None and overrides:
            raise TypeError("pass either config= or settings, not both")
        # read at first use, so that a keyring loaded by name (PYTHON_KEYRING_BACKEND) with a setting missing
        # says which one at the vault's first call, through the vault's own errors
        self._given, self._overrides = config, overrides
        self._made: OpenBaoSession | None = None
        self._mount_checked = False
        self._check_lock, self._session_lock = threading.Lock(), threading.Lock()

    @properties.classproperty
    def priority(cls) -> float:  # keyring's classproperty passes the class
        """1 when PYTHON_KEYRING_BACKEND names this class; otherwise unusable, so never auto-selected."""
        if os.environ.get("PYTHON_KEYRING_BACKEND") in SELECTED_BY:
            return 1
        raise RuntimeError("OpenBaoKeyring is used only when chosen (PYTHON_KEYRING_BACKEND or an instance)")

    def __repr__(self) -> str:
        if self._made is None:
            return "OpenBaoKeyring(not yet configured)"
        config = self.config
        return f"OpenBaoKeyring(addr={config.addr!r}, mount={config.mount!r}, prefix={config.prefix!r})"

    def __reduce__(self) -> Any:
        raise TypeError("an OpenBao keyring holds a token and cannot be pickled")

    def __copy__(self) -> OpenBaoKeyring:
        """A copy sharing this one's connection (keyring's with_properties makes one); pickling stays refused."""
        copied = type(self).__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    @property
    def config(self) -> OpenBaoConfig:
        """Where the keys are and how this backend logs in (the token is not in its repr)."""
        return self.session.config

    @property
    def session(self) -> OpenBaoSession:
        """The connection (for doctor and the tests); KeyUnavailable when the configuration is incomplete."""
        with self._session_lock:
            if self._made is None:
                config = self._given if self._given is not None else OpenBaoConfig.from_env(**self._overrides)
                self._made = OpenBaoSession(config)
            return self._made

    def bound_timeout(self, seconds: float) -> None:
        """Vault.open calls this with its keyring_timeout: no HTTP request outlives the vault's wait for it."""
        self.session.bound_timeout(seconds)

    def path(self, service: str, username: str) -> str:
        """The KV path (relative to the mount) of one entry."""
        return entry_path(self.config.prefix, service, username)

    def get_password(self, service: str, username: str) -> str | None:
        """The stored secret, or None."""
        self._check_mount()
        path, mount = self.path(service, username), self.config.mount

        def read(client: Any) -> str | None:
            try:
                response = client.secrets.kv.v2.read_secret_version(path=path, mount_point=mount,
                                                                    raise_on_deleted_version=True)
            except bao_errors.InvalidPath:
                return None
            value = (response.get("data") or {}).get("data") or {}
            if not isinstance(value.get(FIELD), str):  # never "absent": a new key would be written over it
                raise KeyUnavailable("a keyring entry of this vault in OpenBao is not a scratchvault entry "
                                     f"(no text '{FIELD}' field); restore it from a backup of the server, or "
                                     "delete it")
            return str(value[FIELD])

        return self.session.call("read a key", read)

    def set_password(self, service: str, username: str, password: str) -> None:
        """Store a secret; an entry written once is refused (KeyUnavailable) when it already exists."""
        self._check_mount()
        path, mount = self.path(service, username), self.config.mount
        cas = 0 if written_once(service, username) else None
        try:
            self.session.call("write a key", lambda client: client.secrets.kv.v2.create_or_update_secret(
                path=path, secret={FIELD: password}, cas=cas, mount_point=mount))
        except CasRefused:
            raise KeyUnavailable("an OpenBao entry that is written once already exists, and was not overwritten; "
                                 "retry (the key layer deletes an entry left by a write it gave up)") from None

    def delete_password(self, service: str, username: str) -> None:
        """Delete an entry with all its versions and metadata; PasswordDeleteError when there is none."""
        if self.get_password(service, username) is None:
            raise PasswordDeleteError("no such entry")
        path, mount = self.path(service, username), self.config.mount
        self.session.call("delete a key", lambda client: client.secrets.kv.v2.delete_metadata_and_all_versions(
            path=path, mount_point=mount))

    def _check_mount(self) -> None:
        """Once per instance: the mount must be KV version 2 (see the module's docstring)."""
        if self._mount_checked:
            return
        with self._check_lock:
            if self._mount_checked:
                return
            version = mount_version(self.session)
            if version != "2":
                raise KeyUnavailable(f"the OpenBao mount {self.config.mount} is not a KV version 2 engine (found "
                                     f"{version or 'none'}): enable one (bao secrets enable -path="
                                     f"{self.config.mount} kv-v2); {SEE_DOCS}")
            self._mount_checked = True


def mount_version(session: OpenBaoSession) -> str | None:
    """The KV version of the configured mount, as the bao CLI learns it (sys/internal/ui/mounts, which any token
    with a capability under the mount may read); None when there is no such mount."""
    mount = session.config.mount

    def read(client: Any) -> str | None:
        try:
            response = client.adapter.get(f"/v1/sys/internal/ui/mounts/{mount}")
        except bao_errors.InvalidPath:
            return None
        data = response.get("data") or {}
        if data.get("type") not in ("kv", "generic"):
            return None
        return str((data.get("options") or {}).get("version") or "1")

    return session.call("look up the KV mount", read)
