"""Small statistics shared by the eval stage and the report (pure Python, no imports)."""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a success rate (95% for z=1.96).

    Chosen over the normal approximation because eval sets are small and rates
    sit near 0 or 1, where p +- z*sqrt(p(1-p)/n) collapses to a zero-width
    interval or leaves [0, 1]. With n = 0 nothing is known: (0.0, 1.0).
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # At p = 0 or 1 the bound is exactly 0 or 1; float rounding would give 0.9999999999999999.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return (low, high)
