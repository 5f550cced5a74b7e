# scripts/secret_service.sh — GNOME Keyring's Secret Service on the run's private D-Bus session
# bus, sourced by scripts/run. Everything here runs inside "dbus-run-session".
# Needs from scripts/run: die, step, on_exit, is_running, VENV.

# Call a method of the bus itself with one string argument; prints the literal reply.
bus_call() {
    dbus-send --session --print-reply=literal --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus "org.freedesktop.DBus.$1" "string:$2"
}

wait_for_bus_name() {
    for _ in {1..50}; do
        if [[ "$(bus_call NameHasOwner "$1")" == *true* ]]; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

start_secret_service() {
    local pw out line
    step "starting Secret Service"
    pw="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
    # --unlock reads the password on stdin, creates/unlocks the login keyring with it,
    # daemonizes once it is on the bus, and prints VAR=value lines (maybe none).
    out="$(printf '%s' "$pw" | gnome-keyring-daemon --unlock --components=secrets)" ||
        die "gnome-keyring-daemon failed to start"
    while IFS= read -r line; do
        if [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then
            export "${line?}"
        fi
    done <<<"$out"
    # The daemon claims org.freedesktop.secrets a moment after --unlock returns; wait for
    # it, or the first client would make the bus start a second daemon of its own.
    wait_for_bus_name org.freedesktop.secrets ||
        die "gnome-keyring-daemon started but never took org.freedesktop.secrets on the bus"
    # The daemon is not our child; ask the bus for its pid so we can stop it ourselves.
    KEYRING_PID="$(bus_call GetConnectionUnixProcessID org.freedesktop.secrets | awk '{print $2}')" ||
        die "could not get the pid of gnome-keyring-daemon from the bus"
    on_exit stop_secret_service
}

stop_secret_service() {
    [[ -n "${KEYRING_PID:-}" ]] || return 0
    kill "$KEYRING_PID" 2>/dev/null || return 0
    # Wait (up to 2 s) so no daemon outlives the run or holds our stdout/stderr open.
    for _ in {1..20}; do
        is_running "$KEYRING_PID" || return 0
        sleep 0.1
    done
    echo "scripts/run: gnome-keyring-daemon ignored SIGTERM; killing it" >&2
    kill -9 "$KEYRING_PID" 2>/dev/null || true
}

# Fail early and clearly if keyring would not use the Secret Service for real.
probe_secret_service() {
    "$VENV/bin/python" - <<'PY' || die "the Secret Service is not usable through the keyring package (see above)"
import secrets
import sys

import keyring
from keyring.backends import SecretService

kr = keyring.get_keyring()
if not isinstance(kr, SecretService.Keyring) or kr.priority < 1:
    sys.exit(f"keyring backend is {kr!r} (priority {getattr(kr, 'priority', '?')}), not SecretService")
token = secrets.token_hex(16)
keyring.set_password("scratchvault-probe", "probe", token)
if keyring.get_password("scratchvault-probe", "probe") != token:
    sys.exit("Secret Service round trip returned the wrong secret")
keyring.delete_password("scratchvault-probe", "probe")
if keyring.get_password("scratchvault-probe", "probe") is not None:
    sys.exit("Secret Service did not delete the probe secret")
PY
}
