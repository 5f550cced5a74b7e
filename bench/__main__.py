"""``python -m bench [--quick] [--repeat N]``: run the benchmark and print the table of ratios (medians of N runs);
``--postgres URL``: the same against PostgreSQL (bench/pg_run.py); ``--load [--seconds N]``: the contention run of
bench/load.py instead, and with ``--postgres URL`` that run on SQLite and PostgreSQL side by side (bench/pg_load.py)."""

import sys

from bench.run import main

if __name__ == "__main__":  # not when a --load child process (spawned) imports its parent's main module
    sys.exit(main())
