"""Small statistics the audit needs: the chi-square test against expected counts, its p-value by scipy."""

from __future__ import annotations

from collections.abc import Mapping


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square(df), by ``scipy.stats.chi2.sf``."""
    from scipy.stats import chi2  # imported here: scipy.stats takes a second to import, and only the audit needs it

    return float(chi2.sf(x, df))


def chi_square(observed: Mapping[str, float], expected: Mapping[str, float]) -> tuple[float, int, float]:
    """Pearson's statistic over the cells with expected > 0, its degrees of freedom and p-value.

    The statistic is summed here rather than by ``scipy.stats.chisquare``, which refuses observed and
    expected totals that differ (cells with nothing expected are left out here, their counts with them)
    and gives no p-value for a single cell (0 degrees of freedom), where this test reports df 1."""
    cells = [k for k, e in expected.items() if e > 0]
    stat = sum((observed.get(k, 0) - expected[k]) ** 2 / expected[k] for k in cells)
    df = max(len(cells) - 1, 1)
    return stat, df, chi2_sf(stat, df)
