"""Operator tooling: the ``scratchvault`` command, its subcommands, doctor and the demo."""
