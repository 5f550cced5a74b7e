"""Arguments of every type and size for fuzzing the public API (tests/vault/test_inputs.py, test_fuzz_api.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([2**63, -(2**63) - 1, 10**400, 2**53]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["", "\x00", "\ud800", "'; DROP TABLE rows; --", "head", "range", "0" * 32, "a\x00b"]),
    st.binary(max_size=40),
)
WIDE = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4),
    max_leaves=12,
)
FUZZ = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
