"""Authoring and cross-checking of a human-authored run (CODIS §3.3, MME-RealWorld §3.2) in Label Studio.

Two projects per run: *author* (write an item from the model's draft, or revise it) and *review* (cross-check
a written version: correct? distinct? within the rules?). Every item is a chain of versions::

    draft (v0) ──author task {id}.v1──▶ v1 ──review──▶ kept
                                          └─ a reviewer says no ─▶ author task {id}.v2 (the notes) ──▶ v2 ──review──▶ …

Tasks are keyed by the version they make (author) or check (review), so ``push`` — which creates whatever is
due: author tasks for drafts and revisions, review tasks for written versions — imports each task once however
often it runs. ``pull`` only reads: it rebuilds every version from the two projects' exports and the drafts,
runs the automatic checks (cached per version), and writes::

    RUN_DIR/authoring/versions/<id>.v<n>.json   every written version (v0, the draft, stays in drafts/)
    RUN_DIR/authoring/items/<id>.json           each item's latest version and its status
    RUN_DIR/authoring/decisions.jsonl           per item: status, versions, author, reviews, task links
    RUN_DIR/authoring/summary.json              counts per status, reviews, revisions, reviewer agreement

so pulling twice writes the same bytes. A version needs the profile's number of reviews
(``authoring.codis_reviewers``: the paper's four; ``mme_realworld_reviewers``: one) by accounts other than
its author; all must pass for it to be kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from perceptforge.annotation.agreement import agreement_table
from perceptforge.annotation.labeling import (
    answers,
    choice,
    config_text,
    controls,
    rectangle,
    rectangle_result,
    result_errors,
    text,
)
from perceptforge.annotation.labelstudio import LabelStudio, ServerGone
from perceptforge.annotation.sync import ensure_project, ensure_storage, project_title, push_lock, pushed_projects
from perceptforge.annotation.task_data import local_files_url
from perceptforge.configs.profile import Authoring, load_profile
from perceptforge.data.authored_benchmark import AuthoredBenchmark
from perceptforge.data.schema import (
    AuthoredItem,
    Box,
    CheckResult,
    CodisContent,
    MMERealWorldContent,
    Review,
)
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import read_json, write_json, write_jsonl
from perceptforge.logic import authored
from perceptforge.outputs.authored_report import display_images, write_authored_report
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir

MODEL_VERSION = "perceptforge-draft"
# extra checks that need a model (the CODIS blind checks): versions → version id → their results
ExtraChecks = Callable[[list[AuthoredItem]], dict[str, list[CheckResult]]]


def authoring_settings(run: RunDir) -> Authoring:
    """The run's own profile (written by the flow): how many reviews, the check thresholds."""
    return load_profile(str(run.sub("profile.yaml"))).authoring


def reviewers_needed(run: RunDir, benchmark: AuthoredBenchmark) -> int:
    return int(getattr(authoring_settings(run), benchmark.reviewers_setting))


def project_names(benchmark: AuthoredBenchmark) -> tuple[str, str]:
    return f"{benchmark.prefix}_author", f"{benchmark.prefix}_review"


def project_settings(run: RunDir, project: str, benchmark: AuthoredBenchmark, reviews: int) -> dict:
    return {
        "title": project_title(run, project),
        "description": f"perceptforge {benchmark.name} items ({project.rsplit('_', 1)[1]}) from {run.path.resolve()}",
        "label_config": config_text(project),
        "expert_instruction": load_prompt(f"annotation/{benchmark.prefix}_instructions").text,
        "show_instruction": True,
        "maximum_annotations": reviews if project.endswith("review") else 1,
        "overlap_cohort_percentage": 100,
        "show_collab_predictions": True,
        "sampling": "Sequential sampling",
    }


# --- what a task shows, and what an annotation says -------------------------------------------------------


def prefill(item: AuthoredItem) -> list[dict]:
    """The version an author starts from (the draft, or the version under revision) in the config's controls."""
    c = item.content
    if isinstance(c, CodisContent):
        fields = {k: getattr(c, k) for k in ("question", "context_1", "answer_1", "context_2", "answer_2")}
        return [*(text(k, "image", v) for k, v in fields.items()), choice("category", "image", c.category)]
    result = [text("question", "image", c.question), text("absent_object", "image", c.absent_object)]
    result += [text(f"option_{k}", "image", o) for k, o in zip("abcd", c.options)]
    result += [
        choice("answer", "image", c.answer),
        choice("task", "image", c.task),
        choice("language", "image", c.language),
    ]
    result += [text("subtask", "image", c.subtask)] + ([choice("domain", "image", c.domain)] if c.domain else [])
    if c.target is not None:
        box = (c.target.x0, c.target.y0, c.target.x1, c.target.y1)
        result.append(rectangle_result("target", "image", box, item.image.width, item.image.height, "target"))
    return result


def flags_text(item: AuthoredItem) -> str:
    return "; ".join(f"{c.name}: {c.detail}" for c in item.flags) or "none flagged"


def author_task(parent: AuthoredItem, run: RunDir, root: Path, notes: str) -> dict:
    """The task that writes version ``parent.version + 1``, prefilled with ``parent``."""
    data = {
        "item_id": parent.id,
        "key": f"{parent.id}.v{parent.version + 1}",
        "version": parent.version + 1,
        "parent": parent.version_id,
        "image": local_files_url(run.sub(parent.image.path), root),
        "width": parent.image.width,
        "height": parent.image.height,
        # a first writing shows what the draft's checks flagged (a draft the contexts alone decide)
        "review_notes": notes or (flags_text(parent) if parent.flags else "(first writing)"),
        "lineage": parent.lineage.model_dump(mode="json"),
    }
    return {"data": data, "predictions": [{"model_version": MODEL_VERSION, "result": prefill(parent)}]}


def review_task(version: AuthoredItem, run: RunDir, root: Path) -> dict:
    c = version.content
    data: dict[str, Any] = {
        "item_id": version.id,
        "key": version.version_id,
        "version": version.version,
        "author": version.lineage.author or "",
        "image": local_files_url(run.sub(version.image.path), root),
        "question": c.question,
        "flags_text": flags_text(version),
    }
    if isinstance(c, CodisContent):
        data["pair_text"] = (
            f"Context 1: {c.context_1} → {c.answer_1}\nContext 2: {c.context_2} → {c.answer_2}\nCategory: {c.category}"
        )
    else:
        shown = display_images(run, version)
        data |= {
            "options_text": "\n".join(f"({'ABCDE'[k]}) {o}" for k, o in enumerate(c.choices))
            + f"\nAnswer: ({c.answer})",
            "domain": c.domain or "",
            "subtask": c.subtask,
            "target_crop": local_files_url(run.sub(shown[-1][0]), root),
        }
    return {"data": data}


# what an annotator may type before the object: "(E)", the option's own words, "the"
_E_PREFIX = re.compile(r"^(\(E\)\s*)?(the image does not feature\s+)?(the\s+)?", re.IGNORECASE)


def content_of(
    result: list[dict], benchmark: AuthoredBenchmark, width: int, height: int
) -> CodisContent | MMERealWorldContent:
    """An author's annotation as content; ValueError (naming the field) when it is not a valid item."""
    a = answers(result)
    try:
        if benchmark.content is CodisContent:
            return CodisContent(**{k: a.get(k, "") for k in CodisContent.model_fields})
        box = rectangle(result, "target", width, height)
        return MMERealWorldContent(
            question=a.get("question", ""),
            options=[a.get(f"option_{k}", "") for k in "abcd"],
            absent_object=_E_PREFIX.sub("", a.get("absent_object", "")).rstrip(". "),
            answer=a.get("answer", ""),
            task=a.get("task", "Perception"),
            domain=a.get("domain"),
            subtask=a.get("subtask", ""),
            language=a.get("language", "en"),
            target=Box(x0=box[0], y0=box[1], x1=box[2], y1=box[3]) if box else None,
        )
    except ValidationError as exc:
        raise ValueError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


def review_of(result: list[dict], who: str) -> Review:
    a = answers(result)
    return Review(
        reviewer=who,
        correct=a.get("correct") == "Yes",
        distinct=a.get("distinct") == "Yes",
        follows_rules=a.get("follows_rules") == "Yes",
        comment=a.get("comment", ""),
    )


def revision_notes(reviews: list[Review]) -> str:
    lines = []
    for r in reviews:
        if not r.passed:
            said_no = [
                n for n, ok in (("correct", r.correct), ("distinct", r.distinct), ("rules", r.follows_rules)) if not ok
            ]
            lines.append(f"{r.reviewer} ({', '.join(said_no)}): {r.comment or 'no comment'}")
    return "\n".join(lines)


# --- the chain of versions, rebuilt from the server -----------------------------------------------------


@dataclass
class Chain:
    """One item's versions, oldest first (the draft at 0), and what its last version waits for."""

    versions: list[AuthoredItem]
    invalid: list[dict] = field(default_factory=list)  # annotations that were not valid items, with why
    pairs: list[tuple[str, str]] = field(default_factory=list)  # reviewer pairs' verdicts (agreement)

    @property
    def latest(self) -> AuthoredItem:
        return self.versions[-1]


def valid_annotations(task: dict, config: dict, names: dict[int, str], invalid: list[dict]) -> list[tuple[str, dict]]:
    """(annotator, annotation) of the task's submitted, valid annotations, the latest per annotator, by id."""
    latest: dict[int, dict] = {}
    for a in sorted(task.get("annotations", []), key=lambda a: a["id"]):
        if a.get("was_cancelled"):
            continue
        errors = result_errors(a.get("result", []), config)
        if errors:
            invalid.append({"task": task["id"], "annotation": a["id"], "errors": errors})
            continue
        latest[a["completed_by"]] = a
    ordered = sorted(latest.values(), key=lambda a: a["id"])
    return [(names.get(a["completed_by"], f"user {a['completed_by']}"), a) for a in ordered]


def project_tasks(ls: LabelStudio, projects: dict, benchmark: AuthoredBenchmark) -> dict[str, dict[str, dict]]:
    """Each project's tasks by key (one export per project): project name → key → task."""
    found: dict[str, dict[str, dict]] = {}
    for project in project_names(benchmark):
        pid = projects.get(project, {}).get("id")
        found[project] = {t["data"]["key"]: t for t in ls.export(pid)} if pid else {}
    return found


def chains(
    run: RunDir,
    ls: LabelStudio,
    projects: dict,
    tasks: dict[str, dict[str, dict]],
    benchmark: AuthoredBenchmark,
    extra_checks: ExtraChecks | None = None,
) -> dict[str, Chain]:
    """Every item's chain of versions from the drafts and both projects' tasks (``project_tasks``)."""
    author_project, review_project = project_names(benchmark)
    settings, needed = authoring_settings(run), reviewers_needed(run, benchmark)
    max_fraction = settings.max_target_fraction
    drafts = {
        d.id: d
        for d in (AuthoredItem.model_validate_json(p.read_text()) for p in sorted(run.sub("drafts").glob("*.json")))
    }
    names = ls.user_emails()
    author_config, review_config = controls(config_text(author_project)), controls(config_text(review_project))
    found: dict[str, Chain] = {}
    for iid in sorted(drafts):
        chain = Chain([drafts[iid]])
        while True:
            current = chain.latest
            task = tasks[author_project].get(f"{iid}.v{current.version + 1}")
            if task is None:
                break
            written = valid_annotations(task, author_config, names, chain.invalid)
            content = None
            for who, annotation in reversed(written):  # the latest valid item wins
                try:
                    content = content_of(annotation["result"], benchmark, current.image.width, current.image.height)
                    author = who
                    break
                except ValueError as exc:
                    chain.invalid.append({"task": task["id"], "annotation": annotation["id"], "errors": [str(exc)]})
            if content is None:
                break
            pid = projects[author_project]["id"]
            version = current.model_copy(
                update={
                    "version": current.version + 1,
                    "status": "in_review",
                    "content": content,
                    "checks": authored.checks_for(content, current.image.width, current.image.height, max_fraction),
                    "reviews": [],
                    "lineage": current.lineage.model_copy(
                        update={
                            "parent_id": current.version_id,
                            "author": author,
                            "task": {"project": pid, "task": task["id"], "url": ls.task_url(pid, task["id"])},
                        }
                    ),
                }
            )
            chain.versions.append(version)
            review = tasks[review_project].get(version.version_id)
            given = valid_annotations(review, review_config, names, chain.invalid) if review else []
            reviews = [review_of(a["result"], who) for who, a in given if who != author][:needed]
            verdicts = ["pass" if r.passed else "fail" for r in reviews]
            chain.pairs += list(combinations(verdicts, 2))
            if len(reviews) < needed:
                chain.versions[-1] = version.model_copy(update={"reviews": reviews})
                break
            status = "kept" if all(r.passed for r in reviews) else "revise"
            chain.versions[-1] = version.model_copy(update={"reviews": reviews, "status": status})
            if status == "kept":
                break
        found[iid] = chain
    add_split_checks(found, settings, benchmark, extra_checks)
    return found


def add_split_checks(
    found: dict[str, Chain], settings: Authoring, benchmark: AuthoredBenchmark, extra: ExtraChecks | None
) -> None:
    """Checks over the whole split (near-duplicate CODIS questions) and the model's (blind checks), added to
    each item's written versions."""
    written = [v for c in found.values() for v in c.versions if v.version > 0]
    per_version: dict[str, list[CheckResult]] = extra(written) if extra and written else {}
    if benchmark.near_duplicates:
        threshold = settings.near_duplicate_similarity
        latest = {iid: c.latest for iid, c in found.items() if c.latest.version > 0}
        dupes = authored.near_duplicates({iid: v.content.question for iid, v in latest.items()}, threshold)
        for iid, v in latest.items():
            hit = dupes.get(iid)
            per_version.setdefault(v.version_id, []).append(
                CheckResult(
                    name="near_duplicate",
                    flagged=hit is not None,
                    value=hit[1] if hit else None,
                    detail=f"its question is {hit[1]:.0%} like item {hit[0]}'s" if hit else "",
                )
            )
    for chain in found.values():
        chain.versions = [
            v.model_copy(update={"checks": [*v.checks, *per_version.get(v.version_id, [])]}) for v in chain.versions
        ]


# --- push and pull ----------------------------------------------------------------------------------------


def _projects(run: RunDir) -> dict:
    path = run.sub("annotation", "projects.json")
    return read_json(path) if path.exists() else {}


def push(
    run_dir: Path,
    ls: LabelStudio,
    document_root: Path,
    benchmark: AuthoredBenchmark,
    extra_checks: ExtraChecks | None = None,
) -> dict:
    """Create the run's two projects (once) and import every task that is due and not there yet: an author
    task per draft and per version a reviewer failed, a review task per written version."""
    with push_lock(run_dir, ls, document_root) as run:
        return _push_locked(run, ls, document_root, benchmark, extra_checks)


def _push_locked(
    run: RunDir, ls: LabelStudio, document_root: Path, benchmark: AuthoredBenchmark, extra_checks: ExtraChecks | None
) -> dict:
    needed = reviewers_needed(run, benchmark)
    known = _projects(run)
    state = run.sub("annotation", "projects.json")
    author, review = project_names(benchmark)
    for project in (author, review):
        known[project] = ensure_project(ls, project_settings(run, project, benchmark, needed), known.get(project, {}))
        write_json(state, known)  # at once: a crash later cannot make a second project
        ensure_storage(ls, known[project]["id"], run.sub("images"))
    run.sub("display").mkdir(exist_ok=True)
    ensure_storage(ls, known[review]["id"], run.sub("display"))
    due: dict[str, list[dict]] = {author: [], review: []}
    there = project_tasks(ls, known, benchmark)
    for chain in chains(run, ls, known, there, benchmark, extra_checks).values():
        latest = chain.latest
        if latest.status == "draft":
            due[author].append(author_task(latest, run, document_root, ""))
        elif latest.status == "revise":
            due[author].append(author_task(latest, run, document_root, revision_notes(latest.reviews)))
        elif latest.status == "in_review":
            due[review].append(review_task(latest, run, document_root))
    report: dict[str, Any] = {"server": ls.url, "projects": {}, "imported": 0, "already_there": 0}
    for project, tasks in due.items():
        pid = known[project]["id"]
        new = [t for t in tasks if t["data"]["key"] not in there[project]]
        if new:
            try:
                ls.import_tasks(pid, new)
            except ServerGone as exc:
                raise PerceptforgeError(
                    f"{exc}. Pushed {report['imported']} new tasks before that (the last {len(new)} may or may not "
                    "have arrived); run `perceptforge annotate push` again when the server is back: it adds only "
                    "what is missing"
                ) from None
        report["projects"][project] = pid
        report["imported"] += len(new)
        report["already_there"] += len(tasks) - len(new)
    return report


def pull(run_dir: Path, ls: LabelStudio, benchmark: AuthoredBenchmark, extra_checks: ExtraChecks | None = None) -> dict:
    """Rebuild every item's versions and status from the server; write versions, items, decisions, summary."""
    run = RunDir(Path(run_dir).resolve())
    known = pushed_projects(run, ls)
    found = chains(run, ls, known, project_tasks(ls, known, benchmark), benchmark, extra_checks)
    out = run.sub("authoring")
    run.replace_records(
        "authoring/versions",
        {f"{v.version_id}.json": v.model_dump(mode="json") for c in found.values() for v in c.versions[1:]},
    )
    run.replace_records(
        "authoring/items", {f"{iid}.json": c.latest.model_dump(mode="json") for iid, c in found.items()}
    )
    records: list[dict[str, Any]] = []
    statuses: Counter[str] = Counter()
    pairs: list[tuple[str, str]] = []
    reviews = passes = 0
    for iid, chain in sorted(found.items()):
        latest = chain.latest
        statuses[latest.status] += 1
        pairs += chain.pairs
        written = chain.versions[1:]
        reviews += sum(len(v.reviews) for v in written)
        passes += sum(r.passed for v in written for r in v.reviews)
        records.append(
            {
                "item": iid,
                "status": latest.status,
                "version": latest.version,
                "source": latest.lineage.source_id,
                "authors": sorted({v.lineage.author for v in written if v.lineage.author}),
                "revisions": max(0, len(written) - 1),
                "reviews": [
                    {"version": v.version, "reviewer": r.reviewer, "passed": r.passed, "comment": r.comment}
                    for v in written
                    for r in v.reviews
                ],
                "flags": [c.name for c in latest.flags],
                "tasks": [v.lineage.task for v in written],
                "invalid_annotations": chain.invalid,
            }
        )
    write_jsonl(out / "decisions.jsonl", records)
    summary = {
        "benchmark": benchmark.name,
        "items": len(found),
        "status": dict(sorted(statuses.items())),
        "reviews_needed": reviewers_needed(run, benchmark),
        "reviews": reviews,
        "review_pass_rate": round(100 * passes / reviews, 2) if reviews else None,
        "revisions": sum(r["revisions"] for r in records),
        "flagged": dict(sorted(Counter(f for r in records for f in r["flags"]).items())),
        "reviewer_agreement": agreement_table({"review": pairs})["review"],
        "invalid_annotations": sum(len(r["invalid_annotations"]) for r in records),
    }
    write_json(out / "summary.json", summary)
    summary["report"] = write_authored_report(run)
    return summary
