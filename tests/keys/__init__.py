"""Keys: the keyring edge and its faults, the key lifecycle, row-id encryption, known-answer vectors."""
