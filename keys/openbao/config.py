"""Where the OpenBao server is and how to log in, read as OpenBao's own tools read it, overridable in code.

Environment (the ``bao`` CLI's names first, then Vault's): ``BAO_ADDR``/``VAULT_ADDR``, ``BAO_CACERT``/
``VAULT_CACERT``, ``BAO_TOKEN``/``VAULT_TOKEN``. This package's own: ``SCRATCHVAULT_OPENBAO_TOKEN_FILE`` (a file
holding a token, read at each login), ``SCRATCHVAULT_OPENBAO_ROLE_ID`` and ``SCRATCHVAULT_OPENBAO_SECRET_ID_FILE``
(AppRole; the secret id is read from its file at each login), ``SCRATCHVAULT_OPENBAO_APPROLE_MOUNT`` (default
``approle``), ``SCRATCHVAULT_OPENBAO_MOUNT`` (the KV v2 mount, default ``scratchvault``),
``SCRATCHVAULT_OPENBAO_PREFIX`` (a folder inside it, default none) and ``SCRATCHVAULT_OPENBAO_TIMEOUT`` (seconds one
HTTP request may take, default 5). AppRole wins over a token file, which wins over a token.

Plain ``http://`` is accepted only for a literal loopback address (127.0.0.0/8, ::1; never a name); anything else
must be ``https://``, verified against ``cacert`` (else certifi's bundle of public CAs, not the system's store).
Turning verification off is not offered.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from urllib3.exceptions import LocationParseError
from urllib3.util import Url, parse_url

from keys.errors import KeyUnavailable

SEE_DOCS = "see docs/openbao.md"
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*")


@dataclass(frozen=True)
class OpenBaoConfig:
    """One server, one way to log in, one KV v2 mount (and folder) for this vault's entries. The token is kept out
    of the repr."""

    addr: str = ""
    cacert: str | None = None
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    role_id: str | None = field(default=None, repr=False)
    secret_id_file: str | None = None
    approle_mount: str = "approle"
    mount: str = "scratchvault"
    prefix: str = ""
    timeout: float = 5.0

    def __post_init__(self) -> None:
        if not self.addr:
            raise KeyUnavailable(f"no OpenBao address: set BAO_ADDR (or pass addr=); {SEE_DOCS}")
        parts = _as_requests_reads(self.addr)  # the scheme and host that requests connects to, nothing else
        if parts is None or parts.scheme not in ("https", "http") or not parts.host:
            raise KeyUnavailable(f"the OpenBao address must be an https:// URL; {SEE_DOCS}")
        if parts.auth is not None or urlsplit(self.addr).username is not None:
            raise KeyUnavailable(f"the OpenBao address must not hold a user name or password; {SEE_DOCS}")
        if parts.scheme == "http" and not is_loopback(parts.host.strip("[]")):
            raise KeyUnavailable("plain http to OpenBao is accepted only to a literal loopback address (127.0.0.1, "
                                 "[::1]; not a name such as localhost): the token and every key would cross the "
                                 f"network in clear; use https with BAO_CACERT; {SEE_DOCS}")
        for name in ("mount", "approle_mount"):
            if not _SEGMENT.fullmatch(getattr(self, name)):
                raise KeyUnavailable(f"the OpenBao {name} must be a path of letters, digits, '_', '-', '.'")
        if self.prefix and not _SEGMENT.fullmatch(self.prefix):
            raise KeyUnavailable("the OpenBao prefix must be a path of letters, digits, '_', '-', '.'")
        if not (isinstance(self.timeout, int | float) and 0 < self.timeout <= 600):
            raise KeyUnavailable("the OpenBao timeout must be a number of seconds in (0, 600]")
        if (self.role_id is None) != (self.secret_id_file is None):
            raise KeyUnavailable(f"AppRole needs both a role id and a secret-id file; {SEE_DOCS}")
        if self.role_id is None and self.token_file is None and not self.token:
            raise KeyUnavailable("no way to log in to OpenBao: set BAO_TOKEN, SCRATCHVAULT_OPENBAO_TOKEN_FILE, or "
                                 f"SCRATCHVAULT_OPENBAO_ROLE_ID with SCRATCHVAULT_OPENBAO_SECRET_ID_FILE; {SEE_DOCS}")

    @property
    def verify(self) -> str | bool:
        """What requests verifies the server's certificate with: the CA file, else certifi's public CAs."""
        return self.cacert if self.cacert else True

    @property
    def login(self) -> str:
        """How this configuration logs in: ``approle``, ``token-file`` or ``token``."""
        if self.role_id is not None:
            return "approle"
        return "token-file" if self.token_file is not None else "token"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> OpenBaoConfig:
        """The configuration the environment gives, each keyword argument replacing its setting."""
        env = os.environ if environ is None else environ

        def first(*names: str) -> str | None:
            return next((env[name] for name in names if env.get(name)), None)

        timeout = first("SCRATCHVAULT_OPENBAO_TIMEOUT")
        try:
            seconds = float(timeout) if timeout is not None else 5.0
        except ValueError:
            raise KeyUnavailable("SCRATCHVAULT_OPENBAO_TIMEOUT must be a number of seconds") from None
        settings: dict[str, object] = {
            "addr": first("BAO_ADDR", "VAULT_ADDR") or "",
            "cacert": first("BAO_CACERT", "VAULT_CACERT"),
            "token": first("BAO_TOKEN", "VAULT_TOKEN"),
            "token_file": first("SCRATCHVAULT_OPENBAO_TOKEN_FILE"),
            "role_id": first("SCRATCHVAULT_OPENBAO_ROLE_ID"),
            "secret_id_file": first("SCRATCHVAULT_OPENBAO_SECRET_ID_FILE"),
            "approle_mount": first("SCRATCHVAULT_OPENBAO_APPROLE_MOUNT") or "approle",
            "mount": first("SCRATCHVAULT_OPENBAO_MOUNT") or "scratchvault",
            "prefix": first("SCRATCHVAULT_OPENBAO_PREFIX") or "",
            "timeout": seconds,
        }
        unknown = set(overrides) - set(settings)
        if unknown:
            raise TypeError(f"unknown OpenBao settings: {', '.join(sorted(unknown))}")
        settings.update(overrides)
        return cls(**settings)  # type: ignore[arg-type]  # each field checks its own value in __post_init__


def _as_requests_reads(addr: str) -> Url | None:
    """``addr`` as urllib3 parses it, which is what requests connects to (urllib.parse may read another host out of
    the same text, e.g. one with a backslash); None when it does not parse."""
    try:
        return parse_url(addr)
    except LocationParseError:
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a literal loopback address (127.0.0.0/8, ::1). A name is never trusted, ``localhost``
    included: what it resolves to is up to /etc/hosts and the resolver, and plain http to it would carry the token."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_file(path: str, what: str) -> str:
    """A token or secret id from its file, stripped; KeyUnavailable (never the content) when unreadable or empty."""
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise KeyUnavailable(f"the OpenBao {what} file {path} could not be read ({type(error).__name__})") from None
    if not value:
        raise KeyUnavailable(f"the OpenBao {what} file {path} is empty")
    return value
