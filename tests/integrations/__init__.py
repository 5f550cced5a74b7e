"""The agent-framework adapters (vault/integrations/), each driven through its framework's own package."""
