"""The agent-framework adapters (vault/integrations/), each through its real framework with the framework's own
offline test models."""
