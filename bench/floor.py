"""The floor of a put: what it would cost if everything but its SQL and its AES-GCM calls were free.

``python -m bench.floor`` times, in one process and alternating as the benchmark times writes (each call after an
untimed ``os.sync()``), three puts of the same text: the plaintext baseline, a *bare* put made of exactly the
statements a vault put runs (against a vault file of its own) and the same seals (a data key's chunks and
metadata, a wrap, a turn key's summary, through ``keys/``), with fixed records in place of the real ones, and
the real ``Vault.put``. The bare put is the most any Python implementation of this row format could save: the gap
between it and the real put is the Python around the statements and the seals (docs/decisions.md, "What the put
targets cost").
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench.baseline import PlainStore
from bench.run import KIB, MIB, OWNER, text_of, timed_ms
from keys import CHUNK_BYTES
from keys.formats.data_key import DataKey
from keys.owner_keyset import OwnerKeyset
from keys.testing import MemoryKeyring
from vault import Vault
from vault.storage import RowKey, Store, StoredRow, open_store

AAD = bytes(100)  # the real AADs are 100-150 bytes
METADATA, SUMMARY = bytes(110), bytes(560)  # a 4 KiB text row's records, about


def bare_put(store: Store, keyset: OwnerKeyset, text: str) -> Callable[[], None]:
    """The vault's statements (through the store contract) and seals for ``text``, on ``store``, nothing else."""
    owner_tag, turn_tag, vault_id = bytes(32), bytes(range(32)), bytes(16)
    turn_key = keyset.turn_key(1, vault_id, turn_tag)

    def put() -> None:
        data = memoryview(text.encode())
        data_key = DataKey.generate()
        with store.transaction() as tx:
            seq, _, _ = tx.next_seq_and_commitments(owner_tag, 1)
            count = max(1, -(-len(data) // CHUNK_BYTES))
            for index in range(count):
                chunk = data[index * CHUNK_BYTES:][:CHUNK_BYTES]
                sealed = data_key.seal_chunk(index, index == count - 1, chunk, AAD)
                tx.insert_chunk(RowKey(owner_tag, seq), index, sealed)
            tx.insert_row(StoredRow(seq, os.urandom(16), owner_tag, turn_tag, 1, time.time() + 3600, len(data),
                                    keyset.wrap(data_key, AAD), data_key.seal_metadata(METADATA, AAD)),
                          turn_key.seal_summary(SUMMARY, AAD))

    return put


def medians_ms(operations: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Each operation ``runs`` times, interleaved, each after an untimed sync; medians in milliseconds."""
    samples: dict[str, list[float]] = {name: [] for name in operations}
    for _ in range(runs):
        for name, operation in operations.items():
            samples[name].append(timed_ms(operation, settle=True))
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    """Print baseline, bare and real put medians for 4 KiB and 1 MiB text, with ratios to the baseline."""
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--runs", type=int, default=201, help="runs of the 4 KiB case (1 MiB: a fifth of that)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="scratchvault-floor-") as scratch:
        directory = Path(scratch)
        os.chmod(directory, 0o700)
        plain = PlainStore(directory / "plain.db")
        bare_store = open_store(directory / "bare.db")
        with Vault.open(directory / "vault.db", keyring_backend=MemoryKeyring()) as vault:
            for size, runs in ((4 * KIB, args.runs), (MIB, max(5, args.runs // 5))):
                text = text_of(size)
                operations: dict[str, Callable[[], object]] = {
                    "baseline": partial(plain.put, "floor", 0, "x", text),
                    "bare put": bare_put(bare_store, OwnerKeyset.generate(), text),
                    "Vault.put": partial(vault.put, OWNER, "floor", 0, "x", text)}
                for operation in operations.values():  # files, caches and keys made before timing
                    operation()
                found = medians_ms(operations, runs)
                print(f"{size // KIB:>5} KiB: " + ", ".join(
                    f"{name} {ms:.3f} ms ({ms / found['baseline']:.2f}x)" for name, ms in found.items()))
        bare_store.close()
        plain.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
