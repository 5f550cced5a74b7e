"""The PostgreSQL store's statements (schema.py makes the tables they use)."""

from __future__ import annotations

# Every statement on one owner's records names its owner_tag (with Citus: routed to the one worker holding the owner)
SELECT_ROW = ("SELECT seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata "
              "FROM rows WHERE owner_tag = %s AND seq = %s")
SELECT_ROWS = ("SELECT seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata "
               "FROM rows WHERE owner_tag = %s AND seq = ANY(%s::bigint[])")  # SELECT_ROW for many seqs of one owner
# a snapshot's row lookup, with what a read asks next in the same snapshot: the head of the owner's deletion ledger
# and, for a row of at most one chunk, that chunk as the row holds it and as the chunks table does (a row written
# before schema 3; both: the reader refuses it), so a slice of a small row is one round trip, its COMMIT the other
SELECT_ROW_AHEAD = (
    "SELECT rows.seq, id, rows.owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
    "deletions.owner_tag IS NOT NULL, counter, deletions.tag, rows.chunk, chunks.sealed FROM rows "
    "LEFT JOIN deletions ON deletions.owner_tag = rows.owner_tag "
    "LEFT JOIN chunks ON chunks.owner_tag = rows.owner_tag AND chunks.seq = rows.seq AND chunks.idx = 0 "
    "AND rows.size_bytes <= %s WHERE rows.owner_tag = %s AND rows.seq = %s")
# a row's summary where it is: in the row, else (a row written before schema 3) in summaries, looked up only then
SELECT_TURN = ("SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
               "coalesce(rows.summary, (SELECT sealed FROM summaries WHERE summaries.owner_tag = rows.owner_tag "
               "AND summaries.seq = rows.seq)) FROM rows WHERE owner_tag = %s AND turn_tag = %s AND expires_at > %s "
               "ORDER BY rows.seq")
SELECT_TURN_SUMMARIES = (
    "SELECT rows.seq, id, key_version, expires_at, size_bytes, "
    "coalesce(rows.summary, (SELECT sealed FROM summaries WHERE summaries.owner_tag = rows.owner_tag "
    "AND summaries.seq = rows.seq)) "
    "FROM rows WHERE owner_tag = %s AND turn_tag = %s AND expires_at > %s ORDER BY rows.seq")
SELECT_SUMMARY = ("SELECT coalesce(summary, (SELECT sealed FROM summaries WHERE owner_tag = %(tag)s "
                  "AND seq = %(seq)s)) FROM rows WHERE owner_tag = %(tag)s AND seq = %(seq)s")
# chunks first..last: the one a row holds (as chunk 0), then those in the chunks table (the reader refuses a chunk
# found in both)
SELECT_CHUNKS = ("SELECT 0, chunk FROM rows WHERE owner_tag = %(tag)s AND seq = %(seq)s AND chunk IS NOT NULL "
                 "AND %(first)s = 0 UNION ALL SELECT idx, sealed FROM chunks WHERE owner_tag = %(tag)s "
                 "AND seq = %(seq)s AND idx BETWEEN %(first)s AND %(last)s ORDER BY 1")
TURN_HAS_ROWS = "SELECT 1 FROM rows WHERE owner_tag = %s AND turn_tag = %s AND expires_at > %s LIMIT 1"
SELECT_EXPIRING = ("SELECT seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata "
                   "FROM rows WHERE expires_at > %s AND expires_at <= %s")
SELECT_OLD_VERSION = ("SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, "
                      "metadata, coalesce(rows.summary, (SELECT sealed FROM summaries WHERE summaries.owner_tag = "
                      "rows.owner_tag AND summaries.seq = rows.seq)) FROM rows WHERE owner_tag = %s "
                      "AND (key_version <> %s OR octet_length(wrapped_key) <> %s) LIMIT %s")
# the owner's advisory lock, held to the end of the transaction: writers of one owner queue, others never wait
OWNER_LOCK = "SELECT pg_advisory_xact_lock(%s, %s)"
# a put's seq: from the sequence, never reused, in a statement of its own (with Citus the sequence lives on the
# coordinator, and a statement naming an owner's table goes whole to a worker)
NEXT_SEQ = "SELECT nextval('row_seq')"
# the commitment of the key version that will wrap the put's row (none once tombstoned), that key's row held FOR SHARE
# until the put commits: a shred or retirement deletes it, so it waits for the put, or the put sees it gone; and the
# epoch key's likewise (closing an epoch waits for the put)
COMMITMENTS = (
    "SELECT (SELECT check_value FROM owner_keys k WHERE owner_tag = %(tag)s AND version = %(v)s AND NOT EXISTS "
    "(SELECT 1 FROM key_tombstones t WHERE t.owner_tag = %(tag)s AND t.version = %(v)s) FOR SHARE OF k), "
    "(SELECT check_value FROM epoch_keys k WHERE length = %(len)s AND epoch = %(e)s AND NOT EXISTS (SELECT 1 "
    "FROM epoch_tombstones t WHERE t.length = %(len)s AND t.epoch = %(e)s AND t.attempt IN (0, k.attempt)) "
    "FOR SHARE OF k)")
INSERT_CHUNK = "INSERT INTO chunks (owner_tag, seq, idx, sealed) VALUES (%s, %s, %s, %s)"
# a row with its summary, and with its chunk when it has only one (else NULL: its chunks are in chunks)
INSERT_ROW = (
    "INSERT INTO rows (seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
    "summary, chunk) VALUES (%(seq)s, %(id)s, %(owner_tag)s, %(turn_tag)s, %(key_version)s, %(expires_at)s, "
    "%(size_bytes)s, %(wrapped_key)s, %(metadata)s, %(summary)s, %(chunk)s)")
# a row's new expiry or wrapped key with its re-sealed summary, one statement each (sent with the next statement);
# the summary goes into the row, and the copy a row written before schema 3 kept in summaries goes
UPDATE_EXPIRY = ("WITH old_summary AS (DELETE FROM summaries WHERE owner_tag = %(tag)s AND seq = %(seq)s) "
                 "UPDATE rows SET expires_at = %(expires_at)s, wrapped_key = %(wrapped_key)s, metadata = %(metadata)s, "
                 "summary = %(summary)s WHERE owner_tag = %(tag)s AND seq = %(seq)s")
UPDATE_WRAPPED_KEY = ("UPDATE rows SET key_version = %(version)s, wrapped_key = %(wrapped_key)s "
                      "WHERE owner_tag = %(tag)s AND seq = %(seq)s")
UPDATE_WRAPPED_KEY_AND_SUMMARY = (
    "WITH old_summary AS (DELETE FROM summaries WHERE owner_tag = %(tag)s AND seq = %(seq)s) "
    "UPDATE rows SET key_version = %(version)s, wrapped_key = %(wrapped_key)s, summary = %(summary)s "
    "WHERE owner_tag = %(tag)s AND seq = %(seq)s")
OWNER_USAGE = ("SELECT count(*), coalesce(sum(size_bytes), 0)::bigint "
               "+ coalesce((SELECT length(body) FROM deletions WHERE owner_tag = %(tag)s), 0) "
               "FROM rows WHERE owner_tag = %(tag)s")
UPSERT_LEDGER = ("INSERT INTO deletions (owner_tag, counter, body, tag) VALUES (%s, %s, %s, %s) ON CONFLICT "
                 "(owner_tag) DO UPDATE SET counter = excluded.counter, body = excluded.body, tag = excluded.tag")
# one row with its summary and chunks, if it still stores this id; its expiry returned (nothing: it was not there)
DELETE_ROW = ("WITH gone AS (DELETE FROM rows WHERE owner_tag = %(tag)s AND seq = %(seq)s AND id = %(id)s "
              "RETURNING seq, expires_at), "
              "chunks_gone AS (DELETE FROM chunks WHERE owner_tag = %(tag)s AND seq IN (SELECT seq FROM gone)), "
              "summary_gone AS (DELETE FROM summaries WHERE owner_tag = %(tag)s AND seq IN (SELECT seq FROM gone)) "
              "SELECT expires_at FROM gone")
# a batch of rows past a seq locked, rows another transaction is deleting skipped (two hosts' gc never collide),
# and deleted with their summaries and chunks in the same statement; returns how many were locked, how many rows
# went and the last seq (the next batch starts after it: it never walks again over the index entries of the rows
# the batches before it deleted, which stay in the index until a VACUUM)
DELETE_EXPIRED_BATCH = (
    "WITH batch AS (SELECT owner_tag, seq FROM rows WHERE expires_at <= %(now)s AND seq > %(after)s ORDER BY seq "
    "LIMIT %(size)s FOR UPDATE SKIP LOCKED), "
    "rows_gone AS (DELETE FROM rows r USING batch b WHERE r.owner_tag = b.owner_tag AND r.seq = b.seq RETURNING 1), "
    "chunks_gone AS (DELETE FROM chunks c USING batch b WHERE c.owner_tag = b.owner_tag AND c.seq = b.seq), "
    "summaries_gone AS (DELETE FROM summaries s USING batch b WHERE s.owner_tag = b.owner_tag AND s.seq = b.seq) "
    "SELECT (SELECT count(*) FROM batch), (SELECT count(*) FROM rows_gone), (SELECT max(seq) FROM batch)")
# one owner's batch: all its rows (a shred), or (``now`` not NULL) its expired ones (gc with Citus, where a locking
# statement must stay on one worker: EXPIRED_OWNERS, the one statement over every shard, says whose to collect)
DELETE_OWNER_BATCH = (
    "WITH batch AS (SELECT seq FROM rows WHERE owner_tag = %(tag)s AND seq > %(after)s "
    "AND (%(now)s::double precision IS NULL OR expires_at <= %(now)s) ORDER BY seq LIMIT %(size)s "
    "FOR UPDATE SKIP LOCKED), "
    "rows_gone AS (DELETE FROM rows WHERE owner_tag = %(tag)s AND seq = ANY(ARRAY(SELECT seq FROM batch)) "
    "RETURNING 1), "
    "chunks_gone AS (DELETE FROM chunks WHERE owner_tag = %(tag)s AND seq = ANY(ARRAY(SELECT seq FROM batch))), "
    "summaries_gone AS (DELETE FROM summaries WHERE owner_tag = %(tag)s AND seq = ANY(ARRAY(SELECT seq FROM batch))) "
    "SELECT (SELECT count(*) FROM batch), (SELECT count(*) FROM rows_gone), (SELECT max(seq) FROM batch)")
EXPIRED_OWNERS = "SELECT DISTINCT owner_tag FROM rows WHERE expires_at <= %s"
COUNTS = ("SELECT count(*), coalesce(sum(size_bytes), 0)::bigint, count(*) FILTER (WHERE expires_at <= %s) "
          "FROM rows")
BY_VERSION = ("SELECT key_version, count(*), coalesce(sum(size_bytes), 0)::bigint FROM rows GROUP BY key_version "
              "ORDER BY key_version")
IS_EMPTY = ("SELECT EXISTS (SELECT 1 FROM rows) OR EXISTS (SELECT 1 FROM owner_keys) OR EXISTS (SELECT 1 FROM "
            "deletions) OR EXISTS (SELECT 1 FROM meta WHERE name = 'index_key_check')")
