"""What ``scratchvault doctor`` reports of an OpenBao keyring: the server reachable and unsealed, its version, TLS, the
token's remaining time and renewability, its capabilities on the vault's paths (exactly the policy's:
keys/openbao/policy.py; more is a warning, as is any capability that could undo a guarantee), the KV engine, and
whether an audit device is enabled. Reads only; never the token."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from keys.errors import KeyUnavailable
from keys.openbao.backend import OpenBaoKeyring, mount_version
from keys.openbao.config import is_loopback
from keys.openbao.policy import DATA_CAPABILITIES, METADATA_CAPABILITIES
from keys.openbao.session import NO_EXPIRY

Finding = tuple[str, str]  # (ok | warn | FAIL, text)
SHORT_TOKEN_SECONDS = 300


def report(keyring: OpenBaoKeyring) -> list[Finding]:
    """Every finding; a server that cannot be reached, or a token that cannot be used, ends the report there."""
    findings: list[Finding] = []
    try:
        findings.append(_tls(keyring))
        findings.append(_health(keyring))
        if findings[-1][0] == "FAIL":
            return findings
        findings += _login_files(keyring)
        findings += [_token(keyring), *_capabilities(keyring), _engine(keyring), _audit(keyring)]
    except KeyUnavailable as error:
        findings.append(("FAIL", f"OpenBao: {error}"))
    return findings


def _tls(keyring: OpenBaoKeyring) -> Finding:
    config = keyring.config
    host = urlsplit(config.addr).hostname or ""
    if urlsplit(config.addr).scheme == "http":
        return ("warn", f"OpenBao at {config.addr}: plain http, accepted only because {host} is a literal loopback "
                        "address (127.0.0.0/8 or ::1; a name such as localhost is refused)")
    return ("ok", f"OpenBao at {config.addr}: TLS verified against {config.cacert or 'certifi CAs'}"
            + ("" if not is_loopback(host) else " (loopback)"))


def _health(keyring: OpenBaoKeyring) -> Finding:
    health = keyring.session.unauthenticated("read the server's health", lambda client: client.sys.read_health_status(
        method="GET"))
    if not isinstance(health, dict):
        return ("FAIL", "OpenBao: the health endpoint gave no answer")
    version = health.get("version", "?")
    if health.get("sealed") or not health.get("initialized", True):
        return ("FAIL", f"OpenBao {version}: sealed or not initialised; unseal it (bao operator unseal)")
    if health.get("standby"):
        return ("warn", f"OpenBao {version}: reachable, unsealed, a standby node (requests are forwarded)")
    return ("ok", f"OpenBao {version}: reachable, unsealed, active")


def _login_files(keyring: OpenBaoKeyring) -> list[Finding]:
    """A secret-id or token file that others on the machine can read lets them log in as this machine."""
    config, findings = keyring.config, []
    for what, path in (("secret id", config.secret_id_file), ("token", config.token_file)):
        if path is not None and os.path.exists(path) and os.stat(path).st_mode & 0o077:
            findings.append(("warn", f"the {what} file {path} is readable or writable by others on this machine "
                                     f"(mode {os.stat(path).st_mode & 0o777:o}): chmod 0600 it"))
    return findings


def _token(keyring: OpenBaoKeyring) -> Finding:
    left, renewable = keyring.session.token_state()
    login = keyring.config.login
    if left == NO_EXPIRY:
        return ("warn", f"token ({login}): never expires (a root or periodic token?); prefer AppRole with a TTL")
    how = "renewable" if renewable else "not renewable"
    again = " (AppRole logs in again before it ends)" if login == "approle" else ""
    if left < SHORT_TOKEN_SECONDS and login != "approle" and not renewable:
        return ("warn", f"token ({login}): {left:.0f} s left, {how}; give the vault a new token soon")
    return ("ok", f"token ({login}): {left:.0f} s left, {how}{again}")


def _capabilities(keyring: OpenBaoKeyring) -> list[Finding]:
    config = keyring.config
    folder = f"{config.prefix}/" if config.prefix else ""
    wanted = {f"{config.mount}/data/{folder}scratchvault/doctor": set(DATA_CAPABILITIES),
              f"{config.mount}/metadata/{folder}scratchvault/doctor": set(METADATA_CAPABILITIES)}
    found: dict[str, Any] = keyring.session.call("read the token's capabilities", lambda client: client.adapter.post(
        "/v1/sys/capabilities-self", json={"paths": list(wanted)}))
    findings: list[Finding] = []
    for path, needed in wanted.items():
        granted = set(found.get(path) or found.get("data", {}).get(path) or [])
        if "root" in granted or not needed <= granted:
            missing = sorted(needed - granted) if "root" not in granted else []
            if missing:
                findings.append(("FAIL", f"token capabilities on {path}: {sorted(granted)}, missing {missing}; "
                                         "grant the policy in docs/openbao.md"))
                continue
        extra = sorted(granted - needed)
        findings.append(("warn", f"token capabilities on {path}: {sorted(granted)}, more than needed ({extra})")
                        if extra else ("ok", f"token capabilities on {path}: exactly {sorted(needed)}"))
    return [*findings, _outside(keyring, f"{folder}scratchvault/doctor")]


def _outside(keyring: OpenBaoKeyring, entry: str) -> Finding:
    """Capabilities the vault never uses that would let a token undo its guarantees: rewrite the mount's settings
    (delete_version_after), soft-delete, undelete or destroy versions, or change policies and mounts."""
    mount = keyring.config.mount
    paths = [f"{mount}/config", *(f"{mount}/{verb}/{entry}" for verb in ("delete", "undelete", "destroy")),
             f"sys/mounts/{mount}", f"sys/mounts/{mount}/tune", "sys/policies/acl/scratchvault", "auth/token/create"]
    found: dict[str, Any] = keyring.session.call("read the token's capabilities", lambda client: client.adapter.post(
        "/v1/sys/capabilities-self", json={"paths": paths}))
    extra = [f"{path} {sorted(granted)}" for path in paths
             if (granted := set(found.get(path) or found.get("data", {}).get(path) or ["deny"])) != {"deny"}]
    return (("warn", f"token capabilities beyond the vault's paths: {'; '.join(extra)}") if extra
            else ("ok", "token capabilities beyond the vault's paths: none"))


def _engine(keyring: OpenBaoKeyring) -> Finding:
    mount = keyring.config.mount
    version = mount_version(keyring.session)
    if version != "2":
        return ("FAIL", f"KV mount {mount}: {'absent' if version is None else 'version ' + version}; the vault needs "
                        f"KV version 2 (bao secrets enable -path={mount} kv-v2)")
    try:
        settings = keyring.session.call("read the KV settings", lambda client: client.secrets.kv.v2.read_configuration(
            mount_point=mount))["data"]
    except KeyUnavailable:
        return ("warn", f"KV mount {mount}: version 2; its settings are not readable with this token: check with "
                        f"'bao read {mount}/config' that delete_version_after is 0s")
    shown = ", ".join(f"{name}={settings.get(name)}" for name in ("max_versions", "cas_required",
                                                                  "delete_version_after"))
    if str(settings.get("delete_version_after") or "0s") not in ("0", "0s"):
        return ("FAIL", f"KV mount {mount}: delete_version_after is set ({shown}): each key's version lapses into "
                        "a deleted one that reads as unavailable and that a token could undelete; set it to 0 "
                        f"(bao write {mount}/config delete_version_after=0s)")
    return ("ok", f"KV mount {mount}: version 2 ({shown}); deletions remove every version and the metadata")


def _audit(keyring: OpenBaoKeyring) -> Finding:
    try:
        devices = keyring.session.call("list the audit devices", lambda client: client.sys.list_enabled_audit_devices())
    except KeyUnavailable:
        return ("warn", "audit devices: not visible to this token (sys/audit needs a privileged token); check with "
                        "'bao audit list' that one is enabled")
    names = sorted((devices.get("data") or devices or {}).keys()) if isinstance(devices, dict) else []
    names = [name for name in names if name.endswith("/")]
    if not names:
        return ("warn", "audit devices: none enabled; add one to the server's config (docs/openbao.md)")
    return ("ok", f"audit devices: {', '.join(names)}")
