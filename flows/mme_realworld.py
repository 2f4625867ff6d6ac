"""MME-RealWorld (§3.2): full-resolution images → drafted five-option questions about small targets that one
annotator authors and another reviews in Label Studio, then the release's JSON. Stages: ``flows/authored.py``."""

from __future__ import annotations

from perceptforge.data.authored_benchmark import AuthoredBenchmark
from perceptforge.data.schema import MMERealWorldContent
from perceptforge.flows.authored import AuthoredFamily

MME_REALWORLD = AuthoredBenchmark(
    name="mme-realworld",
    title="MME-RealWorld",
    prefix="mme_realworld",
    content=MMERealWorldContent,
    reviewers_setting="mme_realworld_reviewers",
    full_resolution=True,
    near_duplicates=False,
)


class MmeRealWorldFamily(AuthoredFamily):
    name = "mme-realworld"
    title = "MME-RealWorld"
    summary = (
        "Draft MME-RealWorld items (§3.2) from full-resolution images in SOURCE into OUT, for annotators to write "
        "and review."
    )
    benchmark = MME_REALWORLD
    audit_benchmark = "mme-realworld"
    scorer_benchmark = "mme-realworld"


FAMILY = MmeRealWorldFamily()
