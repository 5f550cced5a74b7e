"""The trial keyring, ``Vault.open(..., keyring_backend="memory")``: keys held by this process only. Chosen only by
name, never by default nor through keyring's own selection; every opening warns that the keys, and with them every
row stored, die with the process; a vault file it made opens again in this process, and in no other."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings

import pytest

from tests.support.repository import ROOT, child_env
from vault import InvalidArgument, Principal, TrialKeyringWarning, Vault
from vault.engine import AsyncScratchpad

ALICE = Principal("alice")


def test_the_trial_keyring_works_and_warns_that_keys_die_with_the_process(vault_dir):
    with pytest.warns(TrialKeyringWarning, match="die with this process") as caught:
        asked_on = sys._getframe().f_lineno + 1
        vault = Vault.open(vault_dir / "trial.db", keyring_backend="memory")
    with vault:
        row = vault.put(ALICE, "t", 1, "tool", "trial content").id
        assert vault.read(ALICE, row).content == "trial content"
    assert "trial" in str(caught[0].message) and "never for data you keep" in str(caught[0].message)
    assert (caught[0].filename, caught[0].lineno) == (__file__, asked_on)  # the caller's line, not the vault's


def test_a_trial_vault_opens_again_in_its_process_and_in_no_other(vault_dir):
    path = vault_dir / "trial.db"
    with pytest.warns(TrialKeyringWarning), Vault.open(path, keyring_backend="memory") as vault:
        row = vault.put(ALICE, "t", 1, "tool", "kept only as long as the keys").id
    with pytest.warns(TrialKeyringWarning), Vault.open(path, keyring_backend="memory") as vault:
        assert vault.read(ALICE, row).content == "kept only as long as the keys"
    probe = ("import sys\nfrom vault import Vault, KeyUnavailable\n"
             "try:\n    Vault.open(sys.argv[1], keyring_backend='memory')\nexcept KeyUnavailable:\n    sys.exit(3)\n")
    result = subprocess.run([sys.executable, "-c", probe, str(path)], cwd=ROOT, env=child_env(), capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 3, result.stderr
    assert "TrialKeyringWarning" in result.stderr and "die with this process" in result.stderr


def test_the_async_facade_takes_it_too(vault_dir):
    opened_on = sys._getframe().f_lineno + 3

    async def main() -> str:
        async with AsyncScratchpad.open(vault_dir / "trial.db", keyring_backend="memory") as pad:
            observed = await pad.observe(ALICE, "t", 1, "tool", "x" * 5000)
            return (await pad.call_tool(ALICE, "t", {"id": observed["id"], "n": 3}))["content"]

    with pytest.warns(TrialKeyringWarning) as caught:
        assert asyncio.run(main()) == "xxx"
    assert len(caught) == 1 and (caught[0].filename, caught[0].lineno) == (__file__, opened_on)  # the caller's line


@pytest.mark.parametrize("name", ["Memory", "memory ", "file", "", "keys.testing.MemoryKeyring"])
def test_no_other_name_is_taken(vault_dir, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and nothing warns: the trial keyring was not chosen
        with pytest.raises(InvalidArgument, match='"memory"'):
            Vault.open(vault_dir / "v.db", keyring_backend=name)
    assert not (vault_dir / "v.db").exists()


def test_it_is_never_chosen_by_default_nor_by_keyring_s_own_selection(tmp_path):
    """With no keyring reachable, Vault.open() refuses (no fallback to memory); naming the trial keyring's class
    to keyring's own selection is refused too: it has no priority, so it can never be auto-selected."""
    probe = ("import sys\nfrom vault import Vault, KeyUnavailable\n"
             "try:\n    Vault.open(sys.argv[1])\nexcept KeyUnavailable:\n    sys.exit(3)\n")
    for backend in ("keyring.backends.fail.Keyring", "keys.keyring.memory.MemoryKeyring"):
        result = subprocess.run([sys.executable, "-W", "error", "-c", probe, str(tmp_path / "v.db")], cwd=ROOT,
                                env=child_env(PYTHON_KEYRING_BACKEND=backend), capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 3, backend + result.stderr
