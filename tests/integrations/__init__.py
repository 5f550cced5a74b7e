"""The agent-framework adapters, each through its real framework with the framework's own offline test models."""
