"""``python -m vault``: the scratchvault command."""

import sys

from vault.cli import main

sys.exit(main())
