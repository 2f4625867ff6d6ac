"""The blind baseline (BLINK's caption-only test): the model answers with every image replaced by a grey
one of the same size. Accuracy far above random means the questions can be answered without looking.
CODIS pairs are asked twice blind instead: without the image, and without the context."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

from perceptforge.audit.checks import Check, pct
from perceptforge.audit.items import AuditItem, split_files
from perceptforge.backends.chat import ChatClient
from perceptforge.data.schema import AuthoredItem, CheckResult
from perceptforge.fileio import write_json
from perceptforge.outputs.authored_export import codis_record
from perceptforge.scorer import benchmarks
from perceptforge.scorer.predict import predict


def answerer(client: ChatClient) -> str:
    """A short name for the endpoint and model whose blind answers a file holds: another model's are not reused."""
    return hashlib.sha256(f"{client.base_url}\n{client.model}".encode()).hexdigest()[:12]


def chance(item: AuditItem) -> float:
    """The probability a random answer is right: 1/n for an MCQ, 1/2 for a Yes/No question."""
    return 1 / len(item.options) if item.options else 0.5


def data_files(paths: list[Path], benchmark: str) -> list[Path]:
    if benchmark != "perceptforge":
        return paths
    return [f for p in paths for f in (split_files(p) if p.is_dir() else [p])]


def blind_baseline(
    paths: list[Path],
    benchmark: str,
    items: list[AuditItem],
    client: ChatClient,
    out: Path,
    t: dict,
    images: Path | None = None,
    mode: str = "grey",
) -> Check:
    """Predict every question blind (resumable: ``out/blind_<mode>.jsonl`` keeps what was answered), score it
    with the benchmark's scorer, and compare each category's accuracy with random."""
    module = benchmarks.get(benchmark)
    if not hasattr(module, "requests"):
        return Check("blind_baseline", None, f"{benchmark}: no predict requests to run blind")
    files = data_files(paths, benchmark)
    predictions = out / f"blind_{mode}-{answerer(client)}.jsonl"
    for data in files:
        predict(benchmark, data, images or data.parent, client, predictions, blind=mode, strict=True)
    result = module.score(data=files, predictions=[predictions])
    correct = {s.id: s.correct for s in result.items}
    by_category: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    for item in items:
        if item.id in correct:
            by_category[item.category].append((correct[item.id], chance(item)))
    per_category = {
        cat: {
            "items": len(rows),
            "blind": pct(sum(c for c, _ in rows), len(rows)),
            "random": pct(sum(r for _, r in rows), len(rows)),
        }
        for cat, rows in sorted(by_category.items())
    }
    everything = [row for rows in by_category.values() for row in rows]
    accuracy, random = (
        pct(sum(c for c, _ in everything), len(everything)),
        pct(sum(r for _, r in everything), len(everything)),
    )
    gain = round((accuracy or 0) - (random or 0), 2)
    over = [
        c for c, row in per_category.items() if (row["blind"] or 0) - (row["random"] or 0) > t["max_gain_over_random"]
    ]
    what = {"grey": "grey images", "none": "no image", "no_context": "no context"}[mode]
    return Check(
        "blind_baseline" if mode == "grey" else f"blind_baseline ({what})",
        gain <= t["max_gain_over_random"],
        f"{client.model} with {what}: {accuracy}% vs random {random}% ({gain:+} points; goal at most "
        f"+{t['max_gain_over_random']})" + (f"; over the goal: {', '.join(over)}" if over else ""),
        {
            "model": client.model,
            "mode": mode,
            "accuracy": accuracy,
            "random": random,
            "gain_over_random": gain,
            "per_category": per_category,
        },
    )


def codis_item_checks(versions: list[AuthoredItem], run_path: Path, client: ChatClient) -> dict[str, list[CheckResult]]:
    """CODIS §3.3's rule per written item, asked of a model: with the contexts but no image, an item whose two
    answers both come out right is answerable without the image; with the image but no context, an answer
    that names one of the two is the image alone deciding. Answers are kept in ``RUN_DIR/checks/`` by
    version, so a version is asked once however often the run is pulled."""
    from perceptforge.scorer.benchmarks import codis

    folder = run_path / "checks"
    data = folder / "codis_versions.json"
    # each version under its version id, its image by the run's file name (the scorer reads it as is)
    write_json(data, [codis_record(v, Path(v.image.path).name, v.version_id) for v in versions])
    right: dict[str, dict[str, bool]] = {}
    for mode in ("none", "no_context"):
        answers = folder / f"blind_{mode}-{answerer(client)}.jsonl"
        predict("codis", data, run_path / "images", client, answers, blind=mode, strict=True)
        right[mode] = {s.id: s.correct for s in codis.score(data=[data], predictions=[answers]).items}
    found: dict[str, list[CheckResult]] = {}
    for v in versions:
        no_image = [right["none"].get(f"{v.version_id}#{c}", False) for c in (1, 2)]
        no_context = [right["no_context"].get(f"{v.version_id}#{c}", False) for c in (1, 2)]
        found[v.version_id] = [
            CheckResult(
                name="answerable_without_image",
                flagged=all(no_image),
                detail=f"{client.model} gave both answers from the contexts alone" if all(no_image) else "",
            ),
            CheckResult(
                name="answerable_without_context",
                flagged=any(no_context),
                detail=f"{client.model} gave answer {no_context.index(True) + 1} from the image alone"
                if any(no_context)
                else "",
            ),
        ]
    return found
