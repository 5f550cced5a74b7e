"""``python -m vault``: the scratchvault command."""

import sys

from vault.ops.cli import main

sys.exit(main())
