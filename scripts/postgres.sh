# scripts/postgres.sh — a throwaway PostgreSQL cluster for the tests, sourced by scripts/run.
#
# The cluster lives in a fresh temp dir, listens on a Unix socket in that dir only (no TCP), keeps
# fsync and synchronous_commit on (the durability tests and doctor need them), and is stopped and
# removed by the run's exit actions, also when the run fails or is interrupted. initdb and pg_ctl
# refuse root, so as root they run as the "postgres" account; as any other user they run as that user
# (no sudo needed, and the tests can read the data directory they scan for remanence).
# Needs from scripts/run: die, step, quietly, apt_install, on_exit.

# Sets PG_BIN to the bin dir of the newest PostgreSQL Debian installed; false when there is none.
find_postgres_bin() {
    local dir
    PG_BIN=""
    for dir in /usr/lib/postgresql/*/bin; do
        if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
            if [[ -z "$PG_BIN" ]] || [[ "$(printf '%s\n%s\n' "$PG_BIN" "$dir" | sort -V | tail -n1)" == "$dir" ]]; then
                PG_BIN="$dir"
            fi
        fi
    done
    [[ -n "$PG_BIN" ]]
}

ensure_postgres_package() {
    find_postgres_bin && return
    step "installing system packages (postgresql)"
    apt_install postgresql
    find_postgres_bin || die "the postgresql package is installed but no /usr/lib/postgresql/*/bin/initdb"
}

# Runs a PostgreSQL program as the account that owns the throwaway clusters (this one and Citus's), from the
# dir given first (the account may not be allowed into the caller's working directory).
as_postgres_in() {
    local dir="$1"
    shift
    if ((EUID == 0)); then
        (cd "$dir" && runuser -u postgres -- "$@")
    else
        (cd "$dir" && "$@")
    fi
}

# Exports SCRATCHVAULT_TEST_POSTGRES (a libpq URL for the superuser over the socket),
# SCRATCHVAULT_TEST_PGDATA, SCRATCHVAULT_TEST_PGCTL and SCRATCHVAULT_POSTGRES_REQUIRED=1.
start_postgres() {
    local started ms
    ensure_postgres_package
    started="$(date +%s%N)"
    PG_DIR="$(mktemp -d -t scratchvault-pg.XXXXXX)"
    on_exit stop_postgres
    # The socket's path (DIR/.s.PGSQL.5432) must fit in sun_path (107 bytes on Linux).
    ((${#PG_DIR} <= 90)) || die "temp dir path too long for a Unix socket: $PG_DIR (set TMPDIR to a shorter dir)"
    if ((EUID == 0)); then
        getent passwd postgres >/dev/null || die "no 'postgres' account (it comes with the postgresql package)"
        chown postgres: "$PG_DIR"
    fi
    # --no-sync: only initdb's own writes skip fsync (a throwaway cluster); the server keeps fsync on.
    quietly as_postgres_in "$PG_DIR" "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth-local=trust \
        --auth-host=reject --encoding=UTF8 --locale=C --no-sync ||
        die "initdb of the throwaway PostgreSQL cluster failed"
    quietly as_postgres_in "$PG_DIR" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -w -t 60 -l "$PG_DIR/log" \
        -o "-c listen_addresses='' -c unix_socket_directories='$PG_DIR' -c fsync=on -c synchronous_commit=on" \
        start || {
        cat "$PG_DIR/log" >&2 2>/dev/null || true
        die "the throwaway PostgreSQL cluster did not start (its log is above)"
    }
    ms=$((($(date +%s%N) - started) / 1000000))
    step "PostgreSQL $("$PG_BIN/pg_ctl" --version | awk '{print $3}') throwaway cluster up in ${ms} ms (socket in $PG_DIR)"
    export SCRATCHVAULT_TEST_POSTGRES="postgresql://postgres@/postgres?host=$PG_DIR"
    export SCRATCHVAULT_TEST_PGDATA="$PG_DIR/data"
    export SCRATCHVAULT_TEST_PGCTL="$PG_BIN/pg_ctl"
    export SCRATCHVAULT_POSTGRES_REQUIRED=1
}

# Prints the pid of the cluster's postmaster if it runs; a stale pid file (a test SIGKILLed the
# server) may name a reused pid, so only a process running our postgres binary counts.
postmaster_pid() {
    local pid
    pid="$(head -n1 "$PG_DIR/data/postmaster.pid" 2>/dev/null)" && [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    is_running "$pid" && [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$PG_BIN/postgres")" ]] ||
        return 1
    echo "$pid"
}

# Exit action: stop the cluster (fast, then immediate, then SIGKILL), wait until the server is
# gone, and remove its dir. Tests may have killed the server, so "none running" is not an error.
stop_postgres() {
    local pid
    [[ -n "${PG_DIR:-}" && -d "$PG_DIR" ]] || return 0
    if pid="$(postmaster_pid)"; then
        quietly as_postgres_in "$PG_DIR" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -w -t 20 -m fast stop ||
            quietly as_postgres_in "$PG_DIR" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -w -t 10 -m immediate stop ||
            true
        # pg_ctl returns once the pid file is gone, a moment before the postmaster's exit.
        for _ in {1..20}; do
            is_running "$pid" || break
            sleep 0.1
        done
        if is_running "$pid"; then
            echo "scripts/run: the throwaway PostgreSQL server ignored pg_ctl stop; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$PG_DIR"
}

# The suites that run a second time with the vault over PostgreSQL (SCRATCHVAULT_TEST_STORE=postgres: the
# vault fixtures open the throwaway cluster instead of a file; tests about the SQLite file itself skip there).
# Only their tests marked "store" run (--store-tests-only, tests/support/tiers.py): the others open a file by
# path, the server by the pg_* fixtures, or nothing, the same way in both passes.
PG_SUITES=(tests/vault tests/engine tests/attacks tests/keys tests/system/test_concurrency.py
    tests/system/test_crash.py tests/system/test_crash_operations.py tests/system/test_epoch_processes.py
    tests/system/test_load_bench.py)

# Runs them ("$1" = 1: only the test paths among the other arguments that lie in these suites, the ones the
# caller chose; a chosen test may be SQLite-only, so none running is not a failure then); returns pytest's status.
run_postgres_suites() {
    local selected="$1" rc=0 arg suite
    local chosen=() paths=0
    shift
    if ((selected)); then
        for arg in "$@"; do
            if [[ "$arg" != tests* ]]; then
                chosen+=("$arg")
                continue
            fi
            for suite in "${PG_SUITES[@]}"; do
                if [[ "$arg" == "$suite"* ]]; then
                    chosen+=("$arg")
                    paths=$((paths + 1))
                    break
                fi
            done
        done
        if ((paths == 0)); then
            echo "==> pytest over PostgreSQL: none of the chosen tests is in its suites"
            return 0
        fi
    fi
    echo "==> pytest: the tests of the vault, attack, key and crash suites that use the store, over PostgreSQL"
    if ((selected)); then
        SCRATCHVAULT_TEST_STORE=postgres "$VENV/bin/python" -m pytest --store-tests-only "${chosen[@]}" || rc=$?
        ((rc == 5)) && rc=0
    else
        SCRATCHVAULT_TEST_STORE=postgres "$VENV/bin/python" -m pytest --store-tests-only "${PG_SUITES[@]}" "$@" ||
            rc=$?
    fi
    return "$rc"
}
