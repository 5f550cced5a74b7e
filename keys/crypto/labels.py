"""Every domain-separation label of scratchvault, in one place.

Each label names one purpose and the format version it was introduced in, so no two derivations, MACs or AADs can
serialise to the same bytes. All are part of stored data (row formats, commitments, tags, ledgers): a label is
never renamed, only a new one added. ``tests/unit/test_crypto_labels_and_kdf.py`` pins every value.
"""

# format 1 rows: AADs of the parts sealed under a data key, and the hash of a row's immutable context
WRAP_V1 = b"scratchvault/wrap/v1"
META_V1 = b"scratchvault/meta/v1"
SUMMARY_V1 = b"scratchvault/summary/v1"
CHUNK_V1 = b"scratchvault/chunk/v1"
CONTEXT_V1 = b"scratchvault/context/v1"

# format 2 rows: the summary AAD and the HKDF info of a turn's summary key
SUMMARY_V2 = b"scratchvault/summary/v2"
TURN_SUMMARY_KEY_V2 = b"scratchvault/turn-summary-key/v2"

# format 3 rows: AADs of the wrapped data key and the summary
WRAP_V3 = b"scratchvault/wrap/v3"
SUMMARY_V3 = b"scratchvault/summary/v3"

# expiry epochs: the combiner's salt, the HKDF infos of the wrap and summary keys, the epoch key's commitment
EPOCH_COMBINER = b"scratchvault/epoch-combiner/v1"
EPOCH_WRAP = b"scratchvault/epoch-wrap/v1"
EPOCH_SUMMARY = b"scratchvault/epoch-summary/v1"
EPOCH_CHECK_KEY = b"scratchvault/epoch-check-key/v1"
EPOCH_KEY_CHECK = b"scratchvault/epoch-key-check/v1"

# owner key versions: the commitment the database records for each
OWNER_CHECK_KEY = b"scratchvault/key-check-key/v1"
OWNER_KEY_CHECK = b"scratchvault/key-check/v1"

# the index key: its subkeys, the tags and names it makes, and its commitment
OWNER_TAG = b"scratchvault/owner-tag/v1"
TURN_TAG = b"scratchvault/turn-tag/v1"
ROW_ID_KEY = b"scratchvault/row-id-key/v1"
LEDGER_KEY = b"scratchvault/deletion-ledger-key/v1"
LEDGER = b"scratchvault/deletions/v1"
AUDIT_KEY = b"scratchvault/audit-key/v1"
AUDIT_TAG = b"scratchvault/audit-tag/v1"
OWNER_NAME_KEY = b"scratchvault/owner-name-key/v1"
OWNER_NAME = b"scratchvault/owner-name/v1"
INDEX_KEY_CHECK = b"scratchvault/index-key-check/v1"
