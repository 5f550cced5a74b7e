"""The whole system: processes, crashes, soak, upgrades across releases, docs and threat model checked."""
