"""One logged-in connection to OpenBao: the token (from the environment, a file, or an AppRole login), renewed or
replaced before it expires, and every failure translated into KeyUnavailable with a remedy.

The token lives in the hvac client only: it is never formatted into an error, a log line or a repr. Errors name
the exception type and the HTTP status, never a server message (which could echo a request), and are raised outside
any handler: no hvac or requests exception (whose frames hold the request's token header and body) is chained to
them as ``__cause__`` or ``__context__``, and the secret id is gone from the login's frame before anything leaves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import hvac
import requests
from hvac import exceptions as bao_errors

from keys.errors import KeyUnavailable
from keys.openbao.config import SEE_DOCS, OpenBaoConfig, read_file

T = TypeVar("T")
RENEW_FRACTION = 0.5  # renew (or log in again) once half the token's lifetime has passed
NO_EXPIRY = float("inf")


def _client(addr: str, verify: str | bool, timeout: float) -> hvac.Client:
    """A client that talks to ``addr`` only: it follows no redirect (a 3xx would carry the token header and a
    written key to wherever it points), reads no proxy from the environment (a loopback ``http`` address would
    otherwise travel through one, in clear), and starts with no token: hvac would take VAULT_TOKEN or ~/.vault-token,
    perhaps another server's, and send it with the AppRole login."""
    session = requests.Session()
    session.trust_env = False
    session.verify = verify  # hvac takes a given session's own verify over its argument
    session.hooks["response"].append(_refuse_redirects)
    # the empty token is no password: it keeps hvac from picking one up from the environment
    return hvac.Client(url=addr, token="", verify=verify, timeout=timeout,  # nosec B106
                       allow_redirects=False, session=session)


class _Redirected(requests.exceptions.RequestException):
    """The server answered with a redirect: nothing it said is taken, and nothing is sent where it points."""


def _refuse_redirects(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    if response.is_redirect or 300 <= response.status_code < 400:
        raise _Redirected(f"redirect ({response.status_code})")


class CasRefused(Exception):
    """A write-once entry already exists on the server (check-and-set refused the write): nothing was written."""


class OpenBaoSession:
    """An hvac client that is logged in when a call needs it; thread-safe."""

    __slots__ = ("_client", "_config", "_lock", "_logins", "_renew_at", "_renewable", "_ttl")

    def __init__(self, config: OpenBaoConfig) -> None:
        self._config = config
        self._client = _client(config.addr, config.verify, config.timeout)
        self._lock = threading.Lock()
        self._renew_at: float | None = None  # monotonic time to renew at; None: not logged in
        self._ttl = 0.0
        self._renewable = False
        self._logins = 0  # how many logins this session made: tells a stale token's 403 from the current one's

    def __repr__(self) -> str:
        return f"OpenBaoSession(addr={self._config.addr!r}, login={self._config.login!r})"

    def __reduce__(self) -> Any:
        raise TypeError("an OpenBao session holds a token and cannot be pickled")

    @property
    def config(self) -> OpenBaoConfig:
        """The configuration this session connects with."""
        return self._config

    def bound_timeout(self, seconds: float) -> None:
        """Make every later request time out within ``seconds`` too (a vault's keyring_timeout), so that a request
        the vault gave up on ends by then, on the server's side as well."""
        with self._lock:
            if seconds >= self._config.timeout:
                return
            self._config = replace(self._config, timeout=seconds)
            client = _client(self._config.addr, self._config.verify, seconds)
            client.token = self._client.token
            self._client = client

    def call(self, action: str, operation: Callable[[hvac.Client], T]) -> T:
        """``operation`` on a logged-in client. A 403 under AppRole or a token file (the token revoked or expired
        early) logs in again (a new AppRole login, or the file read again) and tries once more: the refused request
        changed nothing on the server; a token the server still accepts (lookup-self) lacks a capability, and a new
        login would lack it too, so none is made. Threads refused at once log in once: a thread whose 403 answered a
        token another thread has since replaced retries with the new one (each AppRole login spends one of the
        secret id's uses)."""
        login = self.ensure_token()
        try:
            return self._translated(action, lambda: operation(self._client))
        except _Forbidden:
            retry = self._config.login != "token"
        if retry:
            with self._lock:
                if self._logins == login:  # the token refused is still the current one
                    if self._token_alive():  # a capability the policy lacks: a new login would lack it too
                        raise self._forbidden(action)
                    self._renew_at = None
            self.ensure_token()
            try:
                return self._translated(action, lambda: operation(self._client))
            except _Forbidden:
                pass
        raise self._forbidden(action)

    def unauthenticated(self, action: str, operation: Callable[[hvac.Client], T]) -> T:
        """``operation`` with whatever token the client holds (health and seal status need none)."""
        try:
            return self._translated(action, lambda: operation(self._client))
        except _Forbidden:
            pass
        raise self._forbidden(action)

    def token_state(self) -> tuple[float, bool]:
        """Seconds the token has left (inf for a token without expiry) and whether it is renewable."""
        self.ensure_token()
        data = self.call("look up the token", lambda client: client.auth.token.lookup_self())["data"]
        ttl = float(data.get("ttl") or 0)
        return (ttl if ttl > 0 else NO_EXPIRY), bool(data.get("renewable"))

    def ensure_token(self) -> int:
        """Log in, or renew the token, when it has none or half its lifetime is gone; the number of the login whose
        token the client now holds."""
        with self._lock:
            if self._renew_at is not None and time.monotonic() < self._renew_at:
                return self._logins
            if self._renew_at is not None and self._renewable and self._renew():
                return self._logins
            try:
                self._login()
                return self._logins
            except _Forbidden:
                self._renew_at = None
        raise KeyUnavailable("OpenBao refused the token (403): it was revoked or has expired, or lacks the default "
                             "policy (auth/token/lookup-self); set a new one (BAO_TOKEN or the token file), or use "
                             f"AppRole; {SEE_DOCS}")

    def _login(self) -> None:
        config = self._config
        self._logins += 1
        if config.role_id is not None and config.secret_id_file is not None:  # AppRole (config.login)
            secret_id = read_file(config.secret_id_file, "secret id")
            role_id = config.role_id
            try:
                auth = self._translated("log in with AppRole", lambda: self._client.auth.approle.login(
                    role_id=role_id, secret_id=secret_id, use_token=True, mount_point=config.approle_mount))["auth"]
            finally:
                del secret_id  # not in this frame, nor in the closure, when an error's traceback keeps them
            self._remember(float(auth.get("lease_duration") or 0), bool(auth.get("renewable")))
            return
        token = read_file(config.token_file, "token") if config.token_file is not None else config.token
        self._client.token = token
        del token
        data = self._translated("look up the token", lambda: self._client.auth.token.lookup_self())["data"]
        self._remember(float(data.get("ttl") or 0), bool(data.get("renewable")))

    def _token_alive(self) -> bool:
        """Whether the server still accepts the current token (lookup-self, which the default policy grants)."""
        try:
            self._translated("look up the token", lambda: self._client.auth.token.lookup_self())
        except (KeyUnavailable, _Forbidden):
            return False
        return True

    def _renew(self) -> bool:
        """Renew the token; False when the server will not (then the caller logs in again)."""
        try:
            auth = self._translated("renew the token", lambda: self._client.auth.token.renew_self())["auth"]
        except (KeyUnavailable, _Forbidden):
            return False
        granted = float(auth.get("lease_duration") or 0)
        if granted < self._ttl * RENEW_FRACTION:  # near the token's max TTL: a fresh login lasts longer
            return False
        self._remember(granted, bool(auth.get("renewable")))
        return True

    def _remember(self, ttl: float, renewable: bool) -> None:
        self._ttl, self._renewable = ttl, renewable
        self._renew_at = NO_EXPIRY if ttl <= 0 else time.monotonic() + ttl * RENEW_FRACTION

    def _translated(self, action: str, operation: Callable[[], T]) -> T:
        """``operation``, its failures translated (``_failure``) and raised outside the handler, unchained."""
        try:
            return operation()
        except (bao_errors.VaultError, requests.exceptions.RequestException) as error:
            failure = self._failure(action, error)
        raise failure

    def _failure(self, action: str, error: Exception) -> Exception:
        """What a failed request becomes: _Forbidden (a 403), CasRefused, else KeyUnavailable with a remedy."""
        addr = self._config.addr
        if isinstance(error, bao_errors.Forbidden):
            return _Forbidden()
        if isinstance(error, bao_errors.VaultDown):
            return KeyUnavailable(f"OpenBao at {addr} is sealed or not active and could not {action}: unseal it "
                                  "(bao operator unseal) or point BAO_ADDR at the active node, then retry")
        if isinstance(error, bao_errors.InvalidRequest):
            if "check-and-set" in str(error):
                return CasRefused()
            return KeyUnavailable(f"OpenBao refused to {action} (400); check that {self._config.mount} is a KV "
                                  f"version 2 mount; {SEE_DOCS}")
        if isinstance(error, bao_errors.Unauthorized):
            return KeyUnavailable(f"OpenBao did not accept the login to {action} (401): the secret id or token is "
                                  f"wrong or expired; issue a new one; {SEE_DOCS}")
        if isinstance(error, bao_errors.VaultError):
            return KeyUnavailable(f"OpenBao failed to {action} ({type(error).__name__}); check the server's log "
                                  "and 'scratchvault doctor'")
        if isinstance(error, requests.exceptions.SSLError):
            return KeyUnavailable(f"the TLS certificate of {addr} did not verify: set BAO_CACERT to the CA that "
                                  f"signed it; {SEE_DOCS}")
        if isinstance(error, requests.exceptions.Timeout):
            return KeyUnavailable(f"OpenBao at {addr} did not answer within {self._config.timeout:g} s ({action}); "
                                  "check the server and the network, then retry")
        if isinstance(error, _Redirected):
            return KeyUnavailable(f"OpenBao at {addr} answered with a redirect ({action}), which is never followed: "
                                  "point BAO_ADDR at the active node itself")
        return KeyUnavailable(f"OpenBao at {addr} could not be reached to {action} ({type(error).__name__}): "
                              "check BAO_ADDR and that the server runs ('bao status')")

    def _forbidden(self, action: str) -> KeyUnavailable:
        mount = self._config.mount
        return KeyUnavailable(f"OpenBao forbade this token to {action} (403): grant it the policy in "
                              f"docs/openbao.md on the mount {mount}, or, if it was revoked or expired, log in "
                              "again (a new token or secret id)")


class _Forbidden(Exception):
    """A 403 from the server, before the session decides whether a new login may help."""
