"""OpenBaoKeyring: a keyring backend that keeps the vault's keys in an OpenBao (or HashiCorp Vault) KV v2 mount.

Chosen only by name: pass an instance (``Vault.open(..., keyring_backend=OpenBaoKeyring())``) or set
``PYTHON_KEYRING_BACKEND=keys.openbao.OpenBaoKeyring``; its priority is positive only under that variable, so
keyring never picks it for another application.

Deletion is final: an entry is deleted with its metadata and every version (KV v2 ``delete_metadata_and_all_versions``),
so nothing is left to undelete; it is never soft-deleted, and a delete removes the metadata even when the read
found no live version. A latest version deleted or destroyed on the server (keys/openbao/entries.py) reads as
KeyUnavailable, never as absent: the key layer would otherwise write a new key over it, or skip its delete.

Every write carries check-and-set. Entries written once are written with cas 0: the server refuses the write when
the entry exists. Every other entry is read, merged with what it holds by its rule (keys/openbao/layout.py: a mark
or counter keeps the higher number, the lengths list the union) and written with cas set to the version read; when
another machine wrote in between, the server refuses and the write is re-applied over the new value. So two
machines raising one mark can never leave it lower than either raised it (a plain overwrite could), and a mount
with ``cas_required`` is served as any other. Before the first request the mount is checked to be KV version 2: on a
version 1 mount the ``data/`` paths would be plain entries that a delete of their metadata would not remove.
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
from keys.openbao.entries import DELETED_REMEDY, FIELD, Stored, delete_entry, read_entry, write_entry
from keys.openbao.layout import entry_path, mark_reader, merged, rewrite
from keys.openbao.session import CasRefused, OpenBaoSession

CAS_ATTEMPTS = 5  # writes re-applied after another machine's before this one gives up (KeyUnavailable)
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
        """The stored secret; None only when the entry is absent (KeyUnavailable when its latest version was
        deleted on the server, or it is not a scratchvault entry: never "absent", a new key would go over it)."""
        stored = self._read(service, username)
        if stored.deleted:
            raise KeyUnavailable(DELETED_REMEDY)
        if stored.absent:
            return None
        if stored.text is None:
            raise KeyUnavailable("a keyring entry of this vault in OpenBao is not a scratchvault entry (no text "
                                 f"'{FIELD}' field); restore it from a backup of the server, or delete it")
        return stored.text

    def set_password(self, service: str, username: str, password: str) -> None:
        """Store a secret by its entry's rule (the module's docstring): an entry written once is refused
        (KeyUnavailable) when it exists; a mark already as high, or a list already holding the lengths, is left as
        it is. A write whose check-and-set another machine beat is re-applied over that machine's value, never
        written blind: re-applying keeps both writes (the higher mark, both lengths), where failing would leave the
        caller to retry what the merge already does."""
        self._check_mount()
        rule, path, mount = rewrite(service, username), self.path(service, username), self.config.mount
        for _ in range(CAS_ATTEMPTS):
            if rule == "once":
                text, cas = password, 0
            else:
                stored = self._read(service, username)
                if stored.deleted:
                    raise KeyUnavailable(DELETED_REMEDY)
                text, cas = merged(rule, stored.text, password, mark_reader(service)), stored.version
                if not stored.absent and text == stored.text:
                    return
            if self._written(path, mount, text, cas):
                return
            if rule == "once":
                raise KeyUnavailable("an OpenBao entry that is written once already exists, and was not "
                                     "overwritten; retry (the key layer deletes an entry left by a write it gave up)")
        raise KeyUnavailable(f"other writers changed an OpenBao entry {CAS_ATTEMPTS} times while this one wrote it "
                             "(check-and-set refused each time); this write was not made: retry")

    def delete_password(self, service: str, username: str) -> None:
        """Delete an entry with all its versions and metadata, also when no live version is left (a deleted one
        could otherwise be undeleted); PasswordDeleteError when there was nothing at all."""
        stored = self._read(service, username)
        path, mount = self.path(service, username), self.config.mount
        self.session.call("delete a key", lambda client: delete_entry(client, mount, path))
        if stored.absent:
            raise PasswordDeleteError("no such entry")

    def _read(self, service: str, username: str) -> Stored:
        self._check_mount()
        path, mount = self.path(service, username), self.config.mount
        return self.session.call("read a key", lambda client: read_entry(client, mount, path))

    def _written(self, path: str, mount: str, text: str, cas: int) -> bool:
        """Whether the write landed; False when check-and-set refused it (nothing was written)."""
        try:
            self.session.call("write a key", lambda client: write_entry(client, mount, path, text, cas))
        except CasRefused:
            return False
        return True

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
