"""What differs between the human-authored benchmarks (CODIS, MME-RealWorld), declared as a record."""

from __future__ import annotations

from dataclasses import dataclass

from perceptforge.data.schema import CodisContent, MMERealWorldContent


@dataclass(frozen=True)
class AuthoredBenchmark:
    """What differs between the human-authored benchmarks, as data the shared stages, Label Studio projects
    and export read (no code compares a benchmark's name). The families (``flows/codis.py``,
    ``flows/mme_realworld.py``) declare one each."""

    name: str  # run.json's flow, the lineage's benchmark, `perceptforge score <name>`
    title: str  # what people call it
    prefix: str  # its labeling configs (<prefix>_author, <prefix>_review) and annotator instructions
    content: type[CodisContent] | type[MMERealWorldContent]  # what an item says
    reviewers_setting: str  # the profile's authoring field: reviews each version needs
    full_resolution: bool  # sources below authoring.min_short_side are refused
    near_duplicates: bool  # near-duplicate questions across the split are flagged
