"""The cryptographic layer: the one AEAD (the only ``cryptography.hazmat`` import), the one HKDF helper, the field
encoding every AAD and derivation info uses, and every domain-separation label."""
