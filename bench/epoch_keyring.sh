#!/usr/bin/env bash
# bench/epoch_keyring.sh [N ...] [--repeat R] [--fill-budget S]: run bench/epoch_keyring.py against a real
# GNOME Keyring started as scripts/run starts it (a private D-Bus session, a fresh HOME, the login keyring
# created and unlocked with a random password). Needs gnome-keyring-daemon, dbus-run-session and dbus-send.
# bench/epoch_keyring.sh --gc [--present P ...] [--ended N ...]: bench/epoch_gc.py instead (gc's cost per ended epoch).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
if [[ "${1:-}" != "__inner" ]]; then
    HOME_DIR="$(mktemp -d)"
    trap 'rm -rf "$HOME_DIR"' EXIT
    mkdir -m 700 "$HOME_DIR/run"
    HOME="$HOME_DIR" XDG_DATA_HOME="$HOME_DIR/.local/share" XDG_RUNTIME_DIR="$HOME_DIR/run" \
        dbus-run-session -- bash "$0" __inner "$@"
    exit $?
fi
shift
pw="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
out="$(printf '%s' "$pw" | gnome-keyring-daemon --unlock --components=secrets)"
while IFS= read -r line; do
    [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && export "${line?}"
done <<<"$out"
for _ in {1..50}; do
    dbus-send --session --print-reply=literal --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets | grep -q true && break
    sleep 0.1
done
pid="$(dbus-send --session --print-reply=literal --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets | awk '{print $2}')"
trap 'kill "$pid" 2>/dev/null || true' EXIT
cd "$ROOT"
if [[ "${1:-}" == "--gc" ]]; then
    shift
    "$PY" -m bench.epoch_gc "$@"
elif [[ "${1:-}" == "--openbao" ]]; then  # bench/openbao.sh: the OpenBao keyring against this GNOME Keyring
    shift
    "$PY" -m bench.openbao "$@"
else
    "$PY" -m bench.epoch_keyring "$@"
fi
