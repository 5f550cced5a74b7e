"""``scratchvault mcp``'s principal. A flag the host gave wins over its variable even when it is empty
(an unset shell variable in the host's launch line): the server refuses to start rather than serve the user or
turn another environment variable names."""

from __future__ import annotations

import pytest

from vault import InvalidArgument
from vault.ops import cli, mcp_command


@pytest.mark.parametrize("flags", [["--user", "", "--turn", "turn-1"], ["--user", "alice", "--turn", ""],
                                   ["--user", "alice", "--turn", "turn-1", "--actor", ""]])
def test_an_empty_flag_is_refused_not_replaced_by_its_variable(monkeypatch, flags):
    for name, value in (("USER", "bob"), ("TURN", "turn-of-bob"), ("ACTOR", "bobs-planner")):
        monkeypatch.setenv(f"SCRATCHVAULT_{name}", value)
    with pytest.raises(InvalidArgument):
        mcp_command.bound_principal(cli.build_parser().parse_args(["mcp", *flags]))
