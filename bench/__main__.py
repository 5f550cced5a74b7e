"""``python -m bench [--quick]``: run the benchmark and print the table of ratios."""

import sys

from bench.run import main

sys.exit(main())
