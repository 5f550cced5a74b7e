"""The agent-framework adapters (vault/integrations/), each driven by its own loop and offline test model."""
