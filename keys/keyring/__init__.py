"""The OS keyring side of the keys: the edge (timeouts, error translation), the entry layout every key uses, owner
key entries and marks, the cache of fetched keys, and the in-memory keyring of trials and tests."""
