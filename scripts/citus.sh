# scripts/citus.sh — a throwaway Citus cluster for the tests (a coordinator and two workers), sourced by scripts/run.
#
# No package registry these machines reach carries Citus, so it is built from the source tarball beside the
# checkout (../shared/vendor/citus-12.1.12.tar.gz; SCRATCHVAULT_VENDOR_DIR names another directory) when the
# newest PostgreSQL Debian installed has no Citus yet: the headers it needs come from apt (only those missing),
# the build tree is kept in the user's cache (~/.cache/scratchvault, keyed by the tarball's sha256; outside the
# checkout, which the mutants copy) and installed from there, so a later run with the extension installed builds
# nothing, and one whose install vanished (a new machine image with the cache restored) only reinstalls. Where the
# installed PostgreSQL is older than the archive's, apt upgrades it to the headers' version (the same major; servers
# already running keep their binary until restarted).
#
# Each node is a cluster of its own in one fresh temp dir, owned by "postgres" when run as root (initdb and
# pg_ctl refuse root), with shared_preload_libraries = 'citus', listening on 127.0.0.1 only (a free port each)
# and on a Unix socket in that dir. Authentication is trust, for 127.0.0.1 and the socket only: the coordinator
# opens its own connections to the workers, as the role of the session it serves, so any password scheme
# would need every test role's password copied into pg_dist_authinfo on every node; these clusters are a test
# machine's, reachable from it alone, and gone with the run. wal_level is logical: Citus's rebalancer moves a shard
# by logical replication while the vault goes on writing to it (tests/citus/test_rebalance.py). fsync and synchronous_commit stay on, as on the
# PostgreSQL cluster. Everything is stopped and removed by the run's exit actions, also on failure.
# Needs from scripts/run: die, step, quietly, apt_install, on_exit, is_running, ROOT, VENV;
# from scripts/postgres.sh: find_postgres_bin, ensure_postgres_package.

CITUS_VERSION=12.1.12
CITUS_DATABASE=scratchvault_citus
CITUS_NODES=(coordinator worker1 worker2)
# Shards per distributed table (Citus's default is 32). Every test of the Citus suites opens a vault in a schema of
# its own, which distributes its 8 owner tables and makes 5 reference tables: opening and dropping one took some
# 4.5 s at 32 shards over two workers on a busy 2-core machine, some 1.5 s at 4, which still puts shards of every
# table on both workers (2 saved another tenth).
CITUS_SHARD_COUNT=4
# What the build needs beyond build-essential: PostgreSQL's server headers and the headers they include.
CITUS_BUILD_PACKAGES=(build-essential libkrb5-dev liblz4-dev libzstd-dev libxml2-dev libxslt1-dev
    libselinux1-dev libpam0g-dev libssl-dev libreadline-dev)

# Prints the directory holding the Citus tarball: SCRATCHVAULT_VENDOR_DIR, else shared/vendor beside this
# checkout, else beside the main checkout of a git worktree (whose own parent may be elsewhere).
citus_vendor_dir() {
    local common candidate
    if [[ -n "${SCRATCHVAULT_VENDOR_DIR:-}" ]]; then
        echo "$SCRATCHVAULT_VENDOR_DIR"
        return
    fi
    candidate="$ROOT/../shared/vendor"
    if [[ ! -f "$candidate/citus-$CITUS_VERSION.tar.gz" ]] &&
        common="$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)"; then
        candidate="$(dirname "$common")/../shared/vendor"
    fi
    echo "$candidate"
}

# True when the PostgreSQL of PG_BIN has the Citus extension installed (its library and control file).
citus_installed() {
    [[ -f "$("$PG_BIN/pg_config" --pkglibdir)/citus.so" &&
        -f "$("$PG_BIN/pg_config" --sharedir)/extension/citus.control" ]]
}

# The Debian packages of CITUS_BUILD_PACKAGES not installed yet, and PostgreSQL's server headers, one a line.
missing_citus_build_packages() {
    local package major
    major="$("$PG_BIN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
    for package in "${CITUS_BUILD_PACKAGES[@]}" "postgresql-server-dev-$major"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q '^install ok installed$' || echo "$package"
    done
}

# Runs "$@" as root: directly, or through sudo.
as_root() {
    if ((EUID == 0)); then
        "$@"
    else
        sudo "$@"
    fi
}

# Builds and installs Citus into the PostgreSQL of PG_BIN unless it is there already (see the header). Without the
# LLVM bitcode PostgreSQL's JIT could inline (with_llvm=no): it doubles the build, and the tests never JIT.
ensure_citus_extension() {
    local vendor tarball sum build started missing=()
    ensure_postgres_package
    citus_installed && return
    vendor="$(citus_vendor_dir)"
    tarball="$vendor/citus-$CITUS_VERSION.tar.gz"
    [[ -f "$tarball" ]] || die "no Citus installed for $("$PG_BIN/pg_config" --version) and no source to build" \
        "it from at $tarball (set SCRATCHVAULT_VENDOR_DIR to the directory holding citus-$CITUS_VERSION.tar.gz)"
    mapfile -t missing < <(missing_citus_build_packages)
    if ((${#missing[@]})); then
        started="$(date +%s)"
        step "installing what the Citus build needs (${missing[*]})"
        apt_install "${missing[@]}"
        step "apt: $(($(date +%s) - started)) s"
    fi
    sum="$(sha256sum "$tarball" | cut -c1-16)"
    build="${XDG_CACHE_HOME:-$HOME/.cache}/scratchvault/citus-$CITUS_VERSION-$sum"
    if [[ ! -f "$build/.built" ]]; then
        started="$(date +%s)"
        step "building Citus $CITUS_VERSION from $tarball (cached in $build)"
        rm -rf "$build"
        mkdir -p "$build"
        tar -xzf "$tarball" -C "$build" --strip-components=1 || die "could not unpack $tarball"
        (cd "$build" && quietly ./configure --without-libcurl PG_CONFIG="$PG_BIN/pg_config" &&
            quietly make -j"$(nproc)" with_llvm=no) || die "the Citus build failed (its output is above)"
        touch "$build/.built"
        step "Citus built in $(($(date +%s) - started)) s"
    fi
    (cd "$build" && quietly as_root make install with_llvm=no) || die "make install of Citus failed (its output is above)"
    citus_installed || die "Citus was installed but $("$PG_BIN/pg_config" --pkglibdir)/citus.so is not there"
}

# Prints three ports free on 127.0.0.1 now, one a line (the kernel's choice; a clash at start fails the run).
free_ports() {
    "$VENV/bin/python" - <<'EOF'
import socket
sockets = [socket.socket() for _ in range(3)]
for each in sockets:
    each.bind(("127.0.0.1", 0))
print("\n".join(str(each.getsockname()[1]) for each in sockets))
EOF
}

# Makes, configures and starts the cluster of node "$1" on port "$2", with the test database and the extension.
start_citus_node() {
    local node="$1" port="$2" data="$CITUS_DIR/$1"
    quietly as_postgres_in "$CITUS_DIR" "$PG_BIN/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=reject \
        --encoding=UTF8 --locale=C --no-sync || die "initdb of the Citus $node failed"
    printf '%s\n' "local all all trust" "host all all 127.0.0.1/32 trust" >"$data/pg_hba.conf"
    cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$CITUS_DIR'
shared_preload_libraries = 'citus'
wal_level = logical
citus.shard_count = $CITUS_SHARD_COUNT
fsync = on
synchronous_commit = on
EOF
    quietly as_postgres_in "$CITUS_DIR" "$PG_BIN/pg_ctl" -D "$data" -w -t 60 -l "$CITUS_DIR/$node.log" start || {
        cat "$CITUS_DIR/$node.log" >&2 2>/dev/null || true
        die "the Citus $node did not start (its log is above)"
    }
    quietly as_postgres_in "$CITUS_DIR" "$PG_BIN/createdb" -h "$CITUS_DIR" -p "$port" -U postgres "$CITUS_DATABASE" ||
        die "could not create the test database on the Citus $node"
    citus_sql "$port" "CREATE EXTENSION citus" || die "CREATE EXTENSION citus failed on the Citus $node"
}

# Runs SQL "$2" as the superuser in the test database of the node on port "$1".
citus_sql() {
    quietly as_postgres_in "$CITUS_DIR" "$PG_BIN/psql" -X -v ON_ERROR_STOP=1 -h "$CITUS_DIR" -p "$1" -U postgres \
        -d "$CITUS_DATABASE" -c "$2"
}

# Starts the coordinator and two workers, makes the test database with the extension on each, tells the
# coordinator its own address and the workers', and exports what the tests need (also in $CITUS_DIR/env):
# SCRATCHVAULT_TEST_CITUS (the coordinator's superuser URL), SCRATCHVAULT_TEST_CITUS_WORKERS (the workers'
# URLs), SCRATCHVAULT_TEST_CITUS_PGDATA (the data dirs: coordinator, then workers), SCRATCHVAULT_TEST_CITUS_PGCTL
# and SCRATCHVAULT_CITUS_REQUIRED=1.
start_citus() {
    local started ms ports i failed="" pids=() urls=() dirs=()
    ensure_citus_extension
    started="$(date +%s%N)"
    CITUS_DIR="$(mktemp -d -t scratchvault-citus.XXXXXX)"
    on_exit stop_citus
    ((${#CITUS_DIR} <= 90)) || die "temp dir path too long for a Unix socket: $CITUS_DIR (set TMPDIR to a shorter dir)"
    if ((EUID == 0)); then
        chown postgres: "$CITUS_DIR"
    fi
    mapfile -t ports < <(free_ports)
    ((${#ports[@]} == 3)) || die "could not find three free ports on 127.0.0.1 for Citus"
    # the three nodes at once (each waits mostly on its own fsyncs)
    for i in 0 1 2; do
        start_citus_node "${CITUS_NODES[i]}" "${ports[i]}" &
        pids+=($!)
    done
    for i in 0 1 2; do  # all waited for before any failure ends the run: the clean-up must find every postmaster
        wait "${pids[i]}" || failed+=" ${CITUS_NODES[i]}"
    done
    [[ -z "$failed" ]] || die "the Citus${failed} did not start (why is said above)"
    for i in 0 1 2; do
        urls+=("postgresql://postgres@127.0.0.1:${ports[i]}/$CITUS_DATABASE")
        dirs+=("$CITUS_DIR/${CITUS_NODES[i]}")
    done
    citus_sql "${ports[0]}" "SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]});
        SELECT citus_add_node('127.0.0.1', ${ports[1]}); SELECT citus_add_node('127.0.0.1', ${ports[2]})" ||
        die "the Citus coordinator did not take its workers"
    cat >"$CITUS_DIR/env" <<EOF
export SCRATCHVAULT_TEST_CITUS='${urls[0]}'
export SCRATCHVAULT_TEST_CITUS_WORKERS='${urls[1]} ${urls[2]}'
export SCRATCHVAULT_TEST_CITUS_PGDATA='${dirs[*]}'
export SCRATCHVAULT_TEST_CITUS_PGCTL='$PG_BIN/pg_ctl'
export SCRATCHVAULT_CITUS_REQUIRED=1
EOF
    # shellcheck source=/dev/null
    source "$CITUS_DIR/env"
    ms=$((($(date +%s%N) - started) / 1000000))
    step "Citus $CITUS_VERSION: a coordinator and two workers up in ${ms} ms (ports ${ports[*]}, dirs in $CITUS_DIR)"
}

# Prints the pid of node "$1"'s postmaster if it runs our postgres binary (a pid file may name a reused pid).
citus_postmaster_pid() {
    local pid
    pid="$(head -n1 "$CITUS_DIR/$1/postmaster.pid" 2>/dev/null)" && [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    is_running "$pid" && [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$PG_BIN/postgres")" ]] ||
        return 1
    echo "$pid"
}

# Exit action: stop every node (fast, then immediate, then SIGKILL) and remove the dir. A test may have stopped
# a node itself, so "none running" is not an error.
stop_citus() {
    local node pid
    [[ -n "${CITUS_DIR:-}" && -d "$CITUS_DIR" ]] || return 0
    for node in "${CITUS_NODES[@]}"; do
        pid="$(citus_postmaster_pid "$node")" || continue
        quietly as_postgres_in "$CITUS_DIR" "$PG_BIN/pg_ctl" -D "$CITUS_DIR/$node" -w -t 20 -m fast stop ||
            quietly as_postgres_in "$CITUS_DIR" "$PG_BIN/pg_ctl" -D "$CITUS_DIR/$node" -w -t 10 -m immediate stop \
                || true
        for _ in {1..20}; do
            is_running "$pid" || break
            sleep 0.1
        done
        if is_running "$pid"; then
            echo "scripts/run: the Citus $node ignored pg_ctl stop; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$CITUS_DIR"
}

# The suites the Citus pass runs again with the vault on the coordinator (SCRATCHVAULT_TEST_STORE=postgres, its
# superuser URL as SCRATCHVAULT_TEST_POSTGRES: tests/support/postgres.py's Citus mode): the store contract, owner
# isolation, tampering and held parts, expiry and erasure, and two hosts on one database. Their tests marked
# "store" or "postgres" run (tests/support/tiers.py); tests/support/citus_pass.py names the ones left out, and why.
CITUS_SUITES=(
    # the harness's own checks (tests/support/postgres.py, its Citus mode among them)
    tests/storage/test_postgres_cluster.py
    # the store contract (tests/storage/contract*.py) and the PostgreSQL store's tests built on its support
    tests/storage/postgres/test_postgres_store.py tests/storage/postgres/test_owner_locks.py
    tests/storage/postgres/test_postgres_reads_and_gc.py tests/storage/postgres/test_reservation_clocks.py
    tests/storage/postgres/test_key_races.py
    # owner isolation
    tests/vault/test_isolation.py tests/vault/test_isolation_through_key_lifecycle.py
    # tampering and held parts (not test_held_part_placement.py: one row's parts rearranged within the row, each
    # on a copy of the vault distributed anew; the PostgreSQL pass runs it)
    tests/attacks/test_tampering.py tests/attacks/test_summary_tampering.py tests/attacks/test_held_parts.py
    # expiry and erasure
    tests/vault/test_expiry.py tests/vault/test_expiry_erasure.py tests/vault/test_epoch_destruction.py
    # two hosts (processes, each with its own HOME, one Secret Service) on one database
    tests/system/test_postgres_hosts.py
)

# The Citus pass, when the whole suite runs ("$1" = 0; chosen tests ran in the first pass, with the cluster up):
# tests/citus against the cluster, and CITUS_SUITES with the vault on the coordinator. The plain cluster's data dir
# and pg_ctl are not this server's, so they are unset. Returns pytest's status (5 when no test ran).
run_citus_suites() {
    (($1 == 0)) || return 0
    shift
    echo "==> pytest: the Citus suites and the vault's store, isolation, tamper, expiry and two-host suites on a" \
        "coordinator and two workers"
    env -u SCRATCHVAULT_TEST_PGDATA -u SCRATCHVAULT_TEST_PGCTL SCRATCHVAULT_TEST_STORE=postgres \
        SCRATCHVAULT_TEST_POSTGRES="$SCRATCHVAULT_TEST_CITUS" SCRATCHVAULT_TEST_POSTGRES_CITUS=1 \
        SCRATCHVAULT_POSTGRES_REQUIRED=1 \
        "$VENV/bin/python" -m pytest -m "store or postgres or citus" tests/citus "${CITUS_SUITES[@]}" "$@"
}
