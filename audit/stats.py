"""Small statistics the audit needs, without scipy: the chi-square test against expected counts."""

from __future__ import annotations

import math
from collections.abc import Mapping


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square(df): the regularised upper incomplete gamma Q(df/2, x/2)."""
    if x <= 0:
        return 1.0
    a, z = df / 2, x / 2
    if z < a + 1:  # series for the lower function, then its complement
        term = total = 1 / a
        k = a
        while term > total * 1e-15:
            k += 1
            term *= z / k
            total += term
        return max(0.0, 1 - total * math.exp(-z + a * math.log(z) - math.lgamma(a)))
    # Lentz's continued fraction for the upper function
    b, c, d = z + 1 - a, 1e300, 1 / (z + 1 - a)
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return min(1.0, h * math.exp(-z + a * math.log(z) - math.lgamma(a)))


def chi_square(observed: Mapping[str, float], expected: Mapping[str, float]) -> tuple[float, int, float]:
    """Pearson's statistic over the cells with expected > 0, its degrees of freedom and p-value."""
    cells = [k for k, e in expected.items() if e > 0]
    stat = sum((observed.get(k, 0) - expected[k]) ** 2 / expected[k] for k in cells)
    df = max(len(cells) - 1, 1)
    return stat, df, chi2_sf(stat, df)
