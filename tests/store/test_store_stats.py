"""Wilson interval: published values, edge cases, and its defining properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmsweb.store.stats import wilson_interval


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # Reference values (z = 1.96), e.g. Newcombe 1998 Table I / any Wilson calculator.
        (5, 10, 0.2366, 0.7634),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (81, 263, 0.2553, 0.3662),  # Newcombe 1998's worked example (81/263)
        (1, 1, 0.2065, 1.0),
    ],
)
def test_known_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4)
    assert hi == pytest.approx(high, abs=1e-4)


def test_no_trials_means_no_knowledge_and_bad_counts_are_refused() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(-1, 2)


def test_wider_z_gives_a_wider_interval() -> None:
    lo95, hi95 = wilson_interval(30, 50)
    lo99, hi99 = wilson_interval(30, 50, z=2.576)
    assert lo99 < lo95 < 0.6 < hi95 < hi99


@given(n=st.integers(1, 10_000), data=st.data())
def test_interval_contains_the_rate_and_stays_in_unit_range(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n))
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    # Symmetric: the failures' interval mirrors the successes'.
    flo, fhi = wilson_interval(n - k, n)
    assert flo == pytest.approx(1 - hi, abs=1e-12) and fhi == pytest.approx(1 - lo, abs=1e-12)
