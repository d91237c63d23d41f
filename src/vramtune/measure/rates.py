"""The interval of a median from order statistics: standard library only (the trial child
imports it before JAX)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def median_interval(rates: Sequence[float], confidence: float = 0.95
                    ) -> tuple[float | None, float | None]:
    """Distribution-free interval of the median: order statistics X_(k), X_(n+1-k) with the
    largest k that keeps P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. (None, None) when
    there are too few rates for any interval at this confidence."""
    n = len(rates)
    alpha = (1 - confidence) / 2
    k, tail = 0, 0.0
    for j in range(n + 1):
        tail += math.comb(n, j) / 2 ** n
        if tail > alpha:
            break
        k = j + 1
    if k < 1:
        return None, None
    ordered = sorted(rates)
    return ordered[k - 1], ordered[n - k]
