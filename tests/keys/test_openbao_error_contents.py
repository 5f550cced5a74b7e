"""No error the OpenBao keyring raises carries the token or the AppRole secret id anywhere a logger, an error
reporter or a debugger could reach: not in its message, not in the exceptions chained to it (``__cause__``,
``__context__``), not in the locals of any frame of their tracebacks, followed through containers, attributes and
closures. The objects the caller made and holds (the keyring, its session and config, the hvac client) are not
searched: they hold the token by design, refuse pickling and show none of it in their repr."""

from __future__ import annotations

import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hvac
import pytest

from keys.openbao import OpenBaoConfig, OpenBaoKeyring
from keys.openbao.layout import entry_path
from keys.openbao.session import OpenBaoSession
from tests.support.openbao_fixtures import openbao_keyring_for

MARKS = "scratchvault/" + "ab" * 16 + "/owner-issued"
HOLDERS = (OpenBaoKeyring, OpenBaoSession, OpenBaoConfig, hvac.Client)
SKIPPED = (types.ModuleType, type, types.CodeType)


def failure(operation: Callable[[], object]) -> BaseException:
    try:
        operation()
    except Exception as error:
        return error
    raise AssertionError("the operation did not fail")


def reachable_text(error: BaseException) -> Iterator[str]:
    """Every string reachable from ``error`` (see the module's docstring), the frame that caught it left out."""
    seen: set[int] = set()
    pending: list[Any] = [error]
    while pending:
        item = pending.pop()
        if id(item) in seen or isinstance(item, HOLDERS + SKIPPED) or item is None:
            continue
        seen.add(id(item))
        if isinstance(item, str):
            yield item
        elif isinstance(item, bytes | bytearray):
            yield bytes(item).decode("latin-1")
        elif isinstance(item, dict):
            pending += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set | frozenset):
            pending += list(item)
        elif isinstance(item, BaseException):
            pending += [item.__cause__, item.__context__, *item.args, vars(item)]
            trace = item.__traceback__
            trace = trace.tb_next if item is error and trace is not None else trace  # the test's own frame
            while trace is not None:
                pending.append(dict(trace.tb_frame.f_locals))
                trace = trace.tb_next
        elif isinstance(item, types.FunctionType):
            cells = [cell.cell_contents for cell in item.__closure__ or () if _filled(cell)]
            pending += [*cells, item.__defaults__, item.__kwdefaults__]
        elif isinstance(item, types.MethodType):
            pending += [item.__self__, item.__func__]
        else:
            pending += [getattr(item, "__dict__", None),
                        *(getattr(item, slot, None) for cls in type(item).__mro__
                          for slot in getattr(cls, "__slots__", ()) if isinstance(slot, str))]


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # an empty cell raises ValueError
    except ValueError:
        return False
    return True


def assert_clean(error: BaseException, *secrets: str) -> None:
    texts = list(reachable_text(error))
    assert texts, "nothing was searched"
    for secret in secrets:
        assert not any(secret in text for text in texts), f"a secret is reachable from {type(error).__name__}"


def test_a_refused_request_carries_neither_token_nor_secret_id(openbao_server, openbao_secret_id):
    keyring = openbao_keyring_for(openbao_server, openbao_secret_id, mount="not-granted")
    error = failure(lambda: keyring.get_password(MARKS, "cd"))  # 403, a new login, 403 again
    assert_clean(error, keyring.session._client.token, Path(openbao_secret_id).read_text())


def test_a_refused_token_login_carries_no_token(openbao_server):
    admin = openbao_server.admin()
    token = admin.auth.token.create(policies=["default"], ttl="10m")["auth"]["client_token"]
    keyring = openbao_keyring_for(openbao_server, None, role_id=None, token=token)
    assert_clean(failure(lambda: keyring.set_password(MARKS, "cd", "1")), token)


@pytest.mark.parametrize("where", ["a wrong secret id", "an unreachable server", "an unknown CA"])
def test_a_failed_login_carries_no_secret_id(openbao_server, tmp_path, where):
    secret = tmp_path / "secret-id"
    secret.write_text(str(uuid.uuid4()) if where == "a wrong secret id" else
                      openbao_server.secret_id_file(f"errors-{uuid.uuid4().hex[:6]}"))
    if where != "a wrong secret id":
        secret.write_text(Path(secret.read_text()).read_text())
    changed = {"an unreachable server": {"addr": "https://127.0.0.1:9"}, "an unknown CA": {"cacert": None}}
    keyring = openbao_keyring_for(openbao_server, str(secret), **changed.get(where, {}))
    assert_clean(failure(lambda: keyring.get_password(MARKS, "cd")), secret.read_text())


def test_a_deleted_version_or_a_refused_rewrite_carries_no_token(openbao_keyring, openbao_server, openbao_secret_id):
    owner_key = "scratchvault/" + "ab" * 16 + "/owner-key"
    openbao_keyring.set_password(owner_key, "cd.1", "k")
    rewrite = failure(lambda: openbao_keyring.set_password(owner_key, "cd.1", "again"))
    path = entry_path(openbao_keyring.config.prefix, owner_key, "cd.1")
    openbao_server.admin().secrets.kv.v2.delete_latest_version_of_secret(path=path, mount_point="scratchvault")
    deleted = failure(lambda: openbao_keyring.get_password(owner_key, "cd.1"))
    for error in (rewrite, deleted):
        assert_clean(error, openbao_keyring.session._client.token, Path(openbao_secret_id).read_text())
