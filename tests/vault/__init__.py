"""The Vault through its public API: round trips, isolation, expiry, slices, inputs, record formats, audit."""
