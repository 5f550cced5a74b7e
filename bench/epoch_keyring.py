"""How the OS keyring's get, set and delete of one entry cost as the number of entries of one service grows: the
number of epoch keys a vault keeps is the maximum row lifetime (30 days) over the epoch length.

``bash bench/epoch_keyring.sh [N ...]`` runs this module inside a private D-Bus session with a fresh GNOME Keyring
(the way scripts/run starts it) and a throwaway HOME; ``python -m bench.epoch_keyring`` alone uses whatever keyring
the session has. For each N (default 30, 720, 2880, 43200: 1-day, 1-hour, 15-minute and 1-minute epochs) it fills
the service up to N entries, then times, through ``keys.keyring.edge.KeyringEdge`` exactly as the vault calls it,
a get of a present entry, a get of an absent one, a set (write and read-back) and a delete (delete and check) of
one more entry; medians of ``--repeat`` calls. Filling stops at ``--fill-budget`` seconds in all (said so in the
output), since every write of a GNOME keyring rewrites its whole file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import keyring

from keys.crypto.aead import KEY_SIZE, random_bytes
from keys.keyring.edge import KeyringEdge, resolve_backend
from keys.keyring.entries import serialize_single_key

SIZES = (30, 720, 2880, 43200)


def _ms(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def _time_ops(edge: KeyringEdge, service: str, present: str, repeat: int) -> dict[str, float]:
    """Median milliseconds of each keyring call the epoch key store makes, with the service as it stands."""
    samples: dict[str, list[float]] = {"get": [], "get_absent": [], "set": [], "delete": []}
    for i in range(repeat):
        extra = f"probe.{i}"
        samples["get"].append(_ms(lambda: edge.get(service, present)))
        samples["get_absent"].append(_ms(lambda name=extra: edge.get(service, name)))
        entry = serialize_single_key(random_bytes(KEY_SIZE))
        samples["set"].append(_ms(lambda name=extra, secret=entry: edge.set(service, name, secret)))
        samples["delete"].append(_ms(lambda name=extra: edge.delete(service, name)))
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--fill-budget", type=float, default=1500.0, help="seconds of filling in all")
    args = parser.parse_args(argv)
    backend = resolve_backend(keyring.get_keyring())
    edge = KeyringEdge(backend, timeout=60.0)
    service = "scratchvault/" + random_bytes(16).hex() + "/epoch-key"
    print(f"backend {edge.backend_name}; service {service}; repeat {args.repeat}", flush=True)
    filled, fill_started, fill_seconds = 0, time.monotonic(), 0.0
    for size in sorted(args.sizes):
        batch_started, before = time.monotonic(), filled
        while filled < size and time.monotonic() - fill_started < args.fill_budget:
            backend.set_password(service, f"60.{filled}", serialize_single_key(random_bytes(KEY_SIZE)).reveal())
            filled += 1
        fill_seconds = time.monotonic() - batch_started
        capped = " (fill budget reached: capped)" if filled < size else ""
        ops = _time_ops(edge, service, "60.0", args.repeat)
        per_write = fill_seconds * 1000 / max(1, filled - before)
        print(f"N={filled:>6}{capped}: get {ops['get']:.1f} ms, get absent {ops['get_absent']:.1f} ms, "
              f"set {ops['set']:.1f} ms, delete {ops['delete']:.1f} ms; filling this step took {fill_seconds:.0f} s "
              f"({per_write:.1f} ms per entry added)", flush=True)
        if filled < size:
            break
    home = os.environ.get("HOME", "")
    for root, _, files in os.walk(os.path.join(home, ".local/share/keyrings")):
        for name in files:
            print(f"keyring file {name}: {os.path.getsize(os.path.join(root, name)) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
