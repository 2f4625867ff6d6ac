"""CODIS (§3.3): a folder of images → drafted items that annotators author and four others cross-check in
Label Studio, then CODIS's ``data.json``. The stages are in ``flows/authored.py``."""

from __future__ import annotations

from perceptforge.data.authored_benchmark import AuthoredBenchmark
from perceptforge.data.schema import CodisContent
from perceptforge.flows.authored import AuthoredFamily

CODIS = AuthoredBenchmark(
    name="codis",
    title="CODIS",
    prefix="codis",
    content=CodisContent,
    reviewers_setting="codis_reviewers",
    full_resolution=False,
    near_duplicates=True,
)


class CodisFamily(AuthoredFamily):
    name = "codis"
    title = "CODIS"
    summary = (
        "Draft CODIS items (CODIS §3.3) from SOURCE into OUT, for annotators to write and cross-check in Label Studio."
    )
    benchmark = CODIS
    audit_benchmark = "codis"
    scorer_benchmark = "codis"
    # CODIS's blind checks: the release's predict prompt with no image and with no context
    item_checks = "perceptforge.audit.blind:codis_item_checks"


FAMILY = CodisFamily()
