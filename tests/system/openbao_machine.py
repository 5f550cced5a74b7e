"""One machine of the two-machine OpenBao test (tests/system/test_openbao_machines.py), run as its own process:
``python -m tests.system.openbao_machine LOCATION NOW OP ARGS...``. It opens the vault as an application would,
``Vault.open(location)``, its keyring chosen by PYTHON_KEYRING_BACKEND; prints one JSON result."""

from __future__ import annotations

import json
import sys

from vault import Principal, Vault, VaultError


def main(argv: list[str]) -> None:
    location, now, op, *args = argv
    with Vault.open(location, clock=lambda: float(now)) as vault:
        if op == "put":
            user, text, ttl = args
            row = vault.put(Principal(user), "t", 1, "tool", text, ttl_seconds=int(ttl))
            result: object = {"id": row.id, "expires_at": row.expires_at}
        elif op == "get":
            user, row_id = args
            try:
                result = {"content": vault.get(Principal(user), row_id).content}
            except VaultError as error:
                result = {"error": type(error).__name__}
        elif op == "shred":
            result = {"shredded": vault.shred_owner(args[0])}
        elif op == "gc":
            result = {"collected": vault.gc()}
        else:
            raise SystemExit(f"unknown op {op}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
