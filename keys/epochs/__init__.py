"""Expiry epochs: the arithmetic of the schedule, one epoch's key, the keys in the keyring (made once, loaded,
destroyed), the keyring's marks of how far destruction went, the sweep of destroyed entries, and the lengths a
vault ever used. threat_model.md, "Expiry epochs"."""
