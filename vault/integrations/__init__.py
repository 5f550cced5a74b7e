"""Adapters for agent frameworks: each module imports its framework, installed through the matching extra.

The core never imports this package; ``vault.integrations.pydantic_ai`` needs ``scratchvault[pydantic-ai]``,
and so on, so the vault itself keeps its three run-time dependencies.
"""
