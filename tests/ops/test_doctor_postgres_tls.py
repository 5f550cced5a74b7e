"""doctor over TCP, on a cluster of this module's own (the test server listens on a Unix socket only): plain TCP
fails, TLS without checking the server's certificate and name fails, sslmode=verify-full against the cluster's CA
passes; and a server with fsync off fails, one archiving its WAL is warned about (remanence)."""

from __future__ import annotations

import datetime
import glob
import ipaddress
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.postgres import PGCTL_ENV, unavailable
from vault import storage

pytestmark = pytest.mark.postgres


def _bin_dir() -> Path:
    """The PostgreSQL programs: beside the test command's pg_ctl, else Debian's newest."""
    if os.environ.get(PGCTL_ENV):
        return Path(os.environ[PGCTL_ENV]).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        unavailable("no PostgreSQL programs (/usr/lib/postgresql/*/bin) to start a TCP cluster with")
    return Path(found[-1]).parent


def _certificate(subject: str, key, issuer_key, issuer: x509.Name | None, ca: bool) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_tls_files(directory: Path) -> Path:
    """A CA, and a server certificate for localhost it signed; returns the CA's file (the client's sslrootcert)."""
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("scratchvault test CA", ca_key, ca_key, None, ca=True)
    server = _certificate("localhost", server_key, ca_key, ca.subject, ca=False)
    (directory / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (directory / "server.crt").write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key = directory / "server.key"
    key.write_bytes(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
    key.chmod(0o600)
    return directory / "ca.crt"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def tcp_cluster() -> Iterator[tuple[int, Path]]:
    """A throwaway cluster on 127.0.0.1 with TLS (fsync off, WAL archived to nowhere); (its port, the CA file)."""
    programs, root = _bin_dir(), Path(tempfile.mkdtemp(prefix="sv-tls-", dir="/tmp"))
    owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    run = lambda *argv: subprocess.run([*owner, *argv], cwd=root, check=True, capture_output=True,  # noqa: E731
                                       timeout=120)
    try:
        ca = _write_tls_files(root)
        if owner:
            shutil.chown(root, "postgres")
            for name in ("server.crt", "server.key"):
                shutil.chown(root / name, "postgres")
        run(str(programs / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=trust", "--no-sync")
        (root / "data" / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
        port = _free_port()
        settings = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='{root}' -c ssl=on "
                    f"-c ssl_cert_file='{root}/server.crt' -c ssl_key_file='{root}/server.key' -c fsync=off "
                    "-c archive_mode=on -c archive_command=/bin/true")
        run(str(programs / "pg_ctl"), "-D", str(root / "data"), "-w", "-t", "60", "-l", str(root / "log"), "-o",
            settings, "start")
    except (OSError, subprocess.SubprocessError) as error:
        shutil.rmtree(root, ignore_errors=True)
        unavailable(f"cannot start a TCP cluster: {error!r}")
    try:
        yield port, ca
    finally:
        subprocess.run([*owner, str(programs / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "stop"],
                       cwd=root, capture_output=True, timeout=60, check=False)
        shutil.rmtree(root, ignore_errors=True)


def findings(url: str) -> dict[str, tuple[str, str]]:
    """doctor's findings of ``url`` by their first word: (status, text)."""
    return {finding.text.split()[0].rstrip(":"): (finding.status, finding.text) for finding in storage.describe(url)}


@pytest.fixture(autouse=True)
def _no_libpq_environment(monkeypatch):
    for name in ("PGSSLMODE", "PGSSLROOTCERT", "PGHOST", "PGPORT"):
        monkeypatch.delenv(name, raising=False)


def test_plain_tcp_fails(tcp_cluster):
    port, _ = tcp_cluster
    status, text = findings(f"postgresql://postgres:CANARY-PW@127.0.0.1:{port}/postgres?sslmode=disable")["connection"]
    assert status == "FAIL" and f"TCP to 127.0.0.1:{port} without TLS" in text


@pytest.mark.parametrize("mode", ["require", "verify-ca"])
def test_tls_that_does_not_verify_the_server_s_name_fails(tcp_cluster, mode):
    port, ca = tcp_cluster
    url = f"postgresql://postgres@localhost:{port}/postgres?sslmode={mode}&sslrootcert={quote(str(ca))}"
    status, text = findings(url)["connection"]
    assert status == "FAIL" and f"with TLS but sslmode={mode}, which does not check" in text


def test_tls_with_the_certificate_and_name_verified_passes(tcp_cluster):
    port, ca = tcp_cluster
    found = findings(f"postgresql://postgres:CANARY-PW@localhost:{port}/postgres?sslmode=verify-full"
                     f"&sslrootcert={quote(str(ca))}")
    assert found["connection"] == ("ok", f"connection: TCP to localhost:{port}, TLS with the server's certificate "
                                         "and name verified")
    assert found["database"][1] == f"database: postgresql://postgres@localhost:{port}/postgres"  # no password
    assert found["fsync"] == ("FAIL", "fsync off: a crash can lose or corrupt acknowledged rows; turn it on")
    assert found["copies"][0] == "WARN" and "archive_mode on" in found["copies"][1]
