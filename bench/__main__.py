"""``python -m bench [--quick]``: run the benchmark and print the table of ratios; ``--load [--seconds N]``: the
contention run of bench/load.py instead."""

import sys

from bench.run import main

if __name__ == "__main__":  # not when a --load child process (spawned) imports its parent's main module
    sys.exit(main())
