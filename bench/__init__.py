"""Benchmarks: the vault against a plaintext SQLite baseline, in one process, on the same data."""
