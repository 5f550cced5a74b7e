"""The OpenBao keyring against GNOME Keyring, in one run: Vault.open, a new owner's first put, a cold key read
(the first get after an open: index key and owner key from the keyring), and gc's cost per ended epoch.

``bash bench/openbao.sh`` starts a private OpenBao server (TLS on 127.0.0.1, raft, AppRole; as scripts/run does)
and a GNOME Keyring in a private D-Bus session, then runs this module; alone, ``python -m bench.openbao`` measures
OpenBao from the environment (BAO_ADDR, AppRole or a token) and the session's keyring when it has one. Medians of
``--repeat`` in milliseconds; SQLite in a temporary directory.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from keyring.backend import KeyringBackend

from keys.openbao import OpenBaoKeyring
from vault import Principal, Vault

EPOCH, SKEW = 3600, 300
T0 = 1_800_000_000.0


def _since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def measure(backend: KeyringBackend, repeat: int, epochs: int) -> dict[str, float]:
    """Median milliseconds of each measured call on one backend."""
    now = [T0]

    def clock() -> float:
        return now[0]

    samples: dict[str, list[float]] = {"open": [], "first put": [], "cold read": []}
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "bench.db"
        Vault.open(path, keyring_backend=backend, clock=clock).close()
        for _ in range(repeat):
            start = time.perf_counter()
            vault = Vault.open(path, keyring_backend=backend, clock=clock)
            samples["open"].append(_since(start))
            owner = Principal(f"bench-{uuid.uuid4().hex[:8]}")
            start = time.perf_counter()
            row = vault.put(owner, "t", 1, "x", "v").id
            samples["first put"].append(_since(start))
            vault.close()
            with Vault.open(path, keyring_backend=backend, clock=clock) as reopened:
                start = time.perf_counter()
                reopened.get(owner, row)
                samples["cold read"].append(_since(start))
        with Vault.open(path, keyring_backend=backend, clock=clock) as vault:
            owner = Principal("bench-gc")
            for epoch in range(epochs):
                vault.put(owner, "t", epoch, "x", "expires", ttl_seconds=60 + epoch * EPOCH)
            vault.gc()
            start = time.perf_counter()
            vault.gc()
            baseline = _since(start)
            now[0] = T0 + epochs * EPOCH + EPOCH + SKEW + 60
            start = time.perf_counter()
            vault.gc()
            ended = _since(start)
    result = {name: statistics.median(values) for name, values in samples.items()}
    result["gc per ended epoch"] = max(0.0, ended - baseline) / epochs
    return result


def backends() -> dict[str, KeyringBackend | str]:
    """OpenBao from the environment, and the session's OS keyring (or why there is none)."""
    found: dict[str, KeyringBackend | str] = {}
    try:
        found["OpenBao"] = OpenBaoKeyring()
    except Exception as error:  # not configured here
        found["OpenBao"] = f"not configured ({type(error).__name__}: {error})"
    try:
        from keyring.backends import SecretService

        gnome = SecretService.Keyring()
        found["GNOME Keyring"] = gnome if gnome.priority >= 1 else "no Secret Service"
    except Exception as error:  # no D-Bus session
        found["GNOME Keyring"] = f"unavailable ({type(error).__name__}); run bash bench/openbao.sh"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=20, help="ended epochs gc destroys in the gc measurement")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    for name, backend in backends().items():
        if isinstance(backend, str):
            print(f"{name}: skipped, {backend}")
            continue
        results[name] = measure(backend, args.repeat, args.epochs)
    names = ["open", "first put", "cold read", "gc per ended epoch"]
    print(f"{'ms (median of ' + str(args.repeat) + ')':<28}" + "".join(f"{name:>20}" for name in names))
    for backend_name, values in results.items():
        print(f"{backend_name:<28}" + "".join(f"{values[name]:>20.2f}" for name in names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
