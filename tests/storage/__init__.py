"""The store contract any backend runs (contract.py), and each backend's own tests."""
