"""Push a run's items to Label Studio and pull the verdicts back.

Push is idempotent: tasks are keyed by item id, so pushing again imports only items the project lacks and
never touches a task that exists (annotated or not). Pull rebuilds everything it writes from the server's
export and the run's original items, so pulling twice writes the same bytes. Layout it adds::

    RUN_DIR/annotation/projects.json          project id per item kind (no credentials)
    RUN_DIR/verification/decisions.jsonl      one decision per item, sorted by item id: its Label Studio
                                              project and task, each verdict, reason and correction with
                                              the annotator who gave it
    RUN_DIR/verification/items/<id>.json      kept items, verified; corrected ones as a new version
    RUN_DIR/verification/summary.json         counts per status and kind, agreement (also in summary.json)

``push_groups``, ``decide_projects`` and ``write_verification`` serve BLINK-style runs too (annotation/blink.py),
whose groups are BLINK tasks instead of item kinds.

Independent review: when the connection names annotators' own servers (``LabelStudio.independent``; `annotate
add-annotator` makes one per annotator, and says why one server each), every group gets its project on each of
them, so no annotator can reach another's annotation, in the UI or through the API. The owner's project of the
group on the main server then holds only adjudication: pull decides each item from the independent annotations,
sends the items the annotators disagreed on (``disagreement``, ``conflict``) to it with both verdicts in view, and
a reviewer's annotation there settles them. Agreement is always computed from the independent verdicts.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from perceptforge.annotation.agreement import agreement_table
from perceptforge.annotation.decisions import Decision, decide
from perceptforge.annotation.labeling import config_text, controls
from perceptforge.annotation.labelstudio import LabelStudio, ServerGone
from perceptforge.annotation.task_data import local_files_url, task_for
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import dumps_canonical, exclusive, read_json, sha256_bytes, write_json, write_jsonl
from perceptforge.logic.verified_sample import drawn_ids, estimate, read_sample
from perceptforge.outputs.export import load_items
from perceptforge.outputs.report import write_report
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir

REQUIRED_ANNOTATORS = 2  # MVP-Bench §4.1: two annotators check every question
DISPUTED = ("disagreement", "conflict")  # what an adjudicating reviewer settles
TITLE_MAX = 50  # Label Studio refuses a longer project title


def adjudication_settings(settings: dict) -> dict:
    """The owner's project of a group under independent review: its config shows the annotators' verdicts
    (task field ``independent_verdicts``) above the same controls, and one reviewer decides."""
    config = settings["label_config"].replace(
        "<View>", '<View>\n  <Header value="Independent verdicts: $independent_verdicts" size="5"/>', 1
    )
    return {
        **settings,
        "title": settings["title"][: TITLE_MAX - len(" adjudication")] + " adjudication",
        "label_config": config,
        "maximum_annotations": 1,
        "overlap_cohort_percentage": 100,
    }


def annotator_settings(settings: dict) -> dict:
    """A group's project on one annotator's own server: one annotation per task, theirs."""
    return {**settings, "maximum_annotations": 1}


def project_title(run: RunDir, kind: str) -> str:
    # The run's path hash keeps two runs called "demo" in different places apart.
    tag = hashlib.sha256(str(run.path.resolve()).encode()).hexdigest()[:6]
    return f"perceptforge {run.path.name} {kind} {tag}"


def project_settings(run: RunDir, kind: str) -> dict:
    return {
        "title": project_title(run, kind),
        "description": f"perceptforge items of kind {kind} from {run.path.resolve()}",
        "label_config": config_text(kind),
        "expert_instruction": load_prompt("annotation/instructions").text,
        "show_instruction": True,
        "maximum_annotations": REQUIRED_ANNOTATORS,
        "overlap_cohort_percentage": 100,
        "show_collab_predictions": True,
        "sampling": "Sequential sampling",
    }


def server_key(url: str) -> str:
    return url.rstrip("/")


def recorded_id(record: dict, url: str) -> int | None:
    """The project id ``record`` (a projects.json entry) holds for the server at ``url``. A record written before
    ids were kept per server gives its one id; callers check its title before trusting it."""
    if "servers" in record:
        return record["servers"].get(server_key(url))
    return record.get("id")


def ensure_project(ls: LabelStudio, settings: dict, recorded: dict) -> dict:
    """The project for ``settings`` on ``ls``: the one ``recorded`` (from projects.json) for this server when its
    title is this run's, else one with its title, else a new one. Returns the record to keep (ids per server).
    When the settings changed since the recorded push, the project is updated; the labeling config is re-sent
    only when it changed (the server re-checks it against every stored annotation, and it stores it reformatted,
    so our hashes, not its text, tell)."""
    hashes = {
        "settings_sha256": sha256_bytes(dumps_canonical(settings).encode()),
        "config_sha256": sha256_bytes(settings["label_config"].encode()),
    }
    known_id = recorded_id(recorded, ls.url) if recorded else None
    project = ls.project(known_id) if known_id is not None else None
    if project is not None and project.get("title") != settings["title"]:
        project = None  # that id names another project on this server: never written to
    if project is None:
        project = next((p for p in ls.projects() if p["title"] == settings["title"]), None)
    if project is None:
        project = ls.create_project(settings)
    elif recorded.get("settings_sha256") != hashes["settings_sha256"]:
        same_config = recorded.get("config_sha256") == hashes["config_sha256"]
        ls.update_project(
            project["id"], {k: v for k, v in settings.items() if not (same_config and k == "label_config")}
        )
    servers = {**recorded.get("servers", {}), server_key(ls.url): project["id"]}
    return {"id": project["id"], "title": settings["title"], "servers": servers, **hashes}


def ensure_storage(ls: LabelStudio, project_id: int, images: Path) -> None:
    """Label Studio serves local files only under a storage registered for the project."""
    if not any(Path(s["path"]) == images for s in ls.local_storages(project_id)):
        ls.add_local_storage(project_id, images, "perceptforge run images")


def push(
    run_dir: Path,
    ls: LabelStudio,
    document_root: Path,
    chunk_size: int = 100,
    on_chunk: Callable[[int], None] | None = None,
) -> dict:
    """Create or update one project per item kind and import the items it does not have yet. Two pushes
    of one run to one server take turns (a lock file in the run directory), so the second finds the
    first one's projects and tasks instead of making its own."""
    with push_lock(run_dir, ls, document_root) as run:
        return _push_locked(run, ls, document_root, chunk_size, on_chunk)


@contextmanager
def push_lock(run_dir: Path, ls: LabelStudio, document_root: Path) -> Iterator[RunDir]:
    """The run, once its images are known to be servable and no other push of it to ``ls`` is running."""
    run = RunDir(Path(run_dir).resolve())
    try:
        local_files_url(run.path, document_root)
    except ValueError as exc:
        raise PerceptforgeError(str(exc)) from None
    server = hashlib.sha256(ls.url.rstrip("/").encode()).hexdigest()[:12]
    with exclusive(run.sub("annotation", f".push-{server}.lock")):
        yield run


def _push_locked(
    run: RunDir,
    ls: LabelStudio,
    document_root: Path,
    chunk_size: int,
    on_chunk: Callable[[int], None] | None,
) -> dict:
    by_kind: dict[str, list] = defaultdict(list)
    for item in load_items(run.path):
        by_kind[item.question.kind].append(item)
    overlays: dict[tuple[str, str], str] = {}
    return push_groups(
        run,
        ls,
        by_kind,
        lambda kind, _: project_settings(run, kind),
        lambda item: task_for(item, run, document_root, overlays),
        chunk_size,
        on_chunk,
    )


def push_groups(
    run: RunDir,
    ls: LabelStudio,
    groups: dict[str, list],
    settings: Callable[[str, list], dict],
    to_task: Callable[[Any], dict],
    chunk_size: int = 100,
    on_chunk: Callable[[int], None] | None = None,
) -> dict:
    """One project per group (``settings(group, its items)``), recorded in annotation/projects.json, and the
    group's items it lacks (by ``item.id``) imported as ``to_task(item)``. Call it under ``push_lock``. When a sample
    was drawn (annotation/sample.json, ``annotate push --sample``), only its items are pushed."""
    state_path = run.sub("annotation", "projects.json")
    known = read_json(state_path) if state_path.exists() else {}
    report: dict[str, Any] = {"server": ls.url, "projects": {}, "imported": 0, "already_there": 0}
    made: dict[str, dict] = {}
    making = threading.Lock()

    def task_of(item: Any) -> dict:
        """Each item's task is made once, however many servers it goes to."""
        with making:
            if item.id not in made:
                made[item.id] = to_task(item)
            return made[item.id]

    sample = drawn_ids(read_sample(run.path))
    if sample is not None:
        groups = {k: kept for k, v in groups.items() if (kept := [i for i in v if i.id in sample])}
        report["sample"] = len(sample)
    ordered = {kind: sorted(groups[kind], key=lambda i: i.id) for kind in sorted(groups)}
    specs = {kind: settings(kind, groups[kind]) for kind in ordered}
    for kind, items in ordered.items():
        if not ls.independent:
            known[kind] = ensure_project(ls, specs[kind], known.get(kind, {}))
            write_json(state_path, known)  # recorded at once, so a crash later cannot make a second project
            ensure_storage(ls, known[kind]["id"], run.sub("images"))
            _import_missing(ls, known[kind]["id"], items, task_of, chunk_size, on_chunk, report)
            report["projects"][kind] = known[kind]["id"]
            continue
        record = known.get(kind, {}) if known.get(kind, {}).get("independent") else {}
        owned = {**ensure_project(ls, adjudication_settings(specs[kind]), record), "independent": True}
        owned["annotators"] = dict(record.get("annotators", {}))
        known[kind] = owned
        write_json(state_path, known)
        ensure_storage(ls, owned["id"], run.sub("images"))  # the reviewer sees the same images
        report["projects"][kind] = owned["id"]
        report.setdefault("annotator_projects", {})[kind] = {}
    if ls.independent:
        recording = threading.Lock()

        def fill(member: LabelStudio) -> dict:
            """One annotator's server, every group: a thread per server, so N servers import side by side."""
            where, counts = server_key(member.url), {"imported": 0, "already_there": 0}
            for kind, items in ordered.items():
                made_there = ensure_project(
                    member, annotator_settings(specs[kind]), known[kind]["annotators"].get(where, {})
                )
                with recording:
                    known[kind]["annotators"][where] = made_there
                    write_json(state_path, known)
                    report["annotator_projects"][kind][where] = made_there["id"]
                ensure_storage(member, made_there["id"], run.sub("images"))
                _import_missing(member, made_there["id"], items, task_of, chunk_size, on_chunk, counts)
            return counts

        with ThreadPoolExecutor(len(ls.independent), thread_name_prefix="push") as pool:
            done = [pool.submit(fill, member) for member in ls.independent]
        for future in done:  # every server got what it could before the first failure is raised
            counts = future.result()
            report["imported"] += counts["imported"]
            report["already_there"] += counts["already_there"]
    return report


def _import_missing(
    ls: LabelStudio,
    project_id: int,
    items: list,
    to_task: Callable[[Any], dict],
    chunk_size: int,
    on_chunk: Callable[[int], None] | None,
    report: dict,
) -> None:
    """Import the ``items`` the project lacks (by item id) in chunks; counts go into ``report``."""
    present = {t["data"].get("item_id") for t in ls.export(project_id)}
    new = [to_task(item) for item in items if item.id not in present]
    done = 0
    for start in range(0, len(new), chunk_size):
        chunk = new[start : start + chunk_size]
        try:
            ls.import_tasks(project_id, chunk)
        except ServerGone as exc:
            # The server may have imported this chunk before its answer was lost; the next push
            # lists the project's tasks by item id first, so it neither repeats nor loses them.
            raise PerceptforgeError(
                f"{exc}. Pushed {report['imported'] + done} new tasks before that (the last "
                f"{len(chunk)} may or may not have arrived); run `perceptforge annotate push` again when the "
                "server is back: it adds only what is missing"
            ) from None
        done += len(chunk)
        if on_chunk:
            on_chunk(done)
    report["imported"] += done
    report["already_there"] += len(items) - len(new)


def pull(run_dir: Path, ls: LabelStudio) -> dict:
    """Decide every pushed item from its annotations; write decisions, kept items, and agreement."""
    run = RunDir(Path(run_dir).resolve())
    known = pushed_projects(run, ls)
    configs = {kind: controls(config_text(kind)) for kind in known}
    decisions = decide_projects(
        run,
        ls,
        known,
        {i.id: i for i in load_items(run.path)},
        lambda kind, item, annotations, names, required=REQUIRED_ANNOTATORS: decide(
            item, annotations, configs[kind], required, names
        ),
    )
    summary = write_verification(run, decisions)
    write_report(run)  # the contact sheet now shows each item's decision and the agreement table
    return summary


def pushed_projects(run: RunDir, ls: LabelStudio) -> dict:
    """annotation/projects.json's record per group, each with the id of its project on ``ls``, checked against the
    project's own title before anything is read: another server's ids are never taken for this one's."""
    state_path = run.sub("annotation", "projects.json")
    if not state_path.exists():
        raise PerceptforgeError(
            f"{run.path}: nothing pushed yet (no annotation/projects.json); run `perceptforge annotate push` first"
        )
    out = {}
    for group, record in read_json(state_path).items():
        pid = recorded_id(record, ls.url)
        project = ls.project(pid) if pid is not None else None
        if project is None or project.get("title") != record["title"]:
            raise PerceptforgeError(
                f"{run.path}: nothing of this run was pushed to {ls.url} (project {record['title']!r}"
                f"{'' if pid is None else f', recorded as id {pid}, is not there'}); run `perceptforge annotate "
                "push` to this server first"
            )
        out[group] = {**record, "id": pid}
    return out


# a decision, the line of decisions.jsonl it gives, and the project it came from
Decided = tuple[Decision, dict, str]


def decide_projects(
    run: RunDir,
    ls: LabelStudio,
    known: dict,
    items: dict[str, Any],
    decide_one: Callable[..., Decision],
) -> list[Decided]:
    """Every task of every ``known`` project decided by ``decide_one(group, item, annotations, names)``, in
    group then item-id order (``decide_one(…, required=1)`` decides from one adjudicating reviewer)."""
    names = ls.user_emails()
    decided: list[Decided] = []
    for kind in sorted(known):
        if known[kind].get("independent"):
            decided += _decide_independent(run, ls, kind, known[kind], items, decide_one)
            continue
        project_id = known[kind]["id"]
        for task in sorted(ls.export(project_id), key=lambda t: str(t["data"].get("item_id"))):
            item_id = task["data"].get("item_id")
            if item_id not in items:
                raise PerceptforgeError(
                    f"project {project_id} task {task['id']}: item {item_id!r} is not in {run.path}/items"
                )
            d = decide_one(kind, items[item_id], task.get("annotations", []), names)
            link = {"project": project_id, "task": task["id"], "url": ls.task_url(project_id, task["id"])}
            decided.append((d, d.record(link), kind))
    return decided


def _decide_independent(
    run: RunDir, ls: LabelStudio, kind: str, record: dict, items: dict[str, Any], decide_one: Callable[..., Decision]
) -> list[Decided]:
    """One group under independent review: each item decided from its annotators' own projects; a disputed item
    settled by the reviewer's annotation in the owner's (adjudication) project, or sent there when it is not yet."""
    members = {server_key(m.url): m for m in ls.independent}
    annotations: dict[str, list[dict]] = defaultdict(list)
    links: dict[str, list[dict]] = defaultdict(list)
    data: dict[str, dict] = {}
    names = ls.user_emails()
    for where, own in sorted(record["annotators"].items()):
        member = members.get(where)
        if member is None:
            raise PerceptforgeError(
                f"{run.path}: group {kind} was labelled independently on {where}, which this pull does not name "
                "(`annotate add-annotator` records, or LABEL_STUDIO_ANNOTATOR_URLS)"
            )
        (project_id,) = pushed_projects_of(run, member, {where: own}).values()
        # user ids are per server: each annotation is named through its own server's accounts
        local_names = member.user_emails()
        for task in member.export(project_id):
            item_id = task["data"].get("item_id")
            for a in task.get("annotations", []):
                who = local_names.get(a["completed_by"], f"user {a['completed_by']}")
                # ids are per server too: ordered by annotator, so their verdicts pair up in one order
                annotations[item_id].append({**a, "completed_by": who, "id": (who, where, a["id"])})
                names[who] = who  # type: ignore[index]
            data.setdefault(item_id, task["data"])
            links[item_id].append(
                {
                    "server": where,
                    "project": project_id,
                    "task": task["id"],
                    "url": member.task_url(project_id, task["id"]),
                }
            )
    owner_id = record["id"]
    reviewed = {t["data"].get("item_id"): t for t in ls.export(owner_id)}
    decided: list[Decided] = []
    to_review: list[dict] = []
    for item_id in sorted(annotations, key=str):
        if item_id not in items:
            raise PerceptforgeError(
                f"group {kind}: item {item_id!r} of the annotators' projects is not in {run.path}/items"
            )
        d = decide_one(kind, items[item_id], annotations[item_id], names)
        review = reviewed.get(item_id)
        if d.status in DISPUTED and review is None:
            to_review.append({**data[item_id], "independent_verdicts": verdict_line(d)})
        elif d.status in DISPUTED and review is not None:
            settle(d, decide_one(kind, items[item_id], review.get("annotations", []), names, required=1))
        link = {"project": owner_id, "annotators": links[item_id]}
        if review is not None:
            link.update(task=review["id"], url=ls.task_url(owner_id, review["id"]))
        decided.append((d, d.record(link), kind))
    if to_review:
        ls.import_tasks(owner_id, to_review)
    return decided


def verdict_line(d: Decision) -> str:
    """The independent verdicts as the adjudicating reviewer reads them."""
    reasons = dict(d.reject_reasons)
    parts = [f"{who}: {v}" + (f" ({reasons[who]})" if who in reasons else "") for who, v in d.verdicts]
    return "; ".join(parts) + (f" — {d.detail}" if d.detail else "")


def settle(d: Decision, review: Decision) -> None:
    """Apply an adjudicating reviewer's decision (``review``, from one annotation) to the disputed ``d``: the
    status, corrections and item become the reviewer's; the independent verdicts stay for agreement."""
    d.invalid += review.invalid
    if review.status not in ("kept", "rejected", "invalid_correction"):
        return  # no valid review yet: still disputed
    reviewer, verdict = review.verdicts[-1]
    d.adjudication = {"reviewer": reviewer, "verdict": verdict, "was": d.status}
    d.status, d.item, d.detail = review.status, review.item, review.detail
    d.corrections, d.corrected_by = review.corrections, review.corrected_by
    d.reject_reasons += review.reject_reasons


def pushed_projects_of(run: RunDir, ls: LabelStudio, records: dict) -> dict[str, int]:
    """Each record's project id on ``ls``, checked against its title (as ``pushed_projects``)."""
    out = {}
    for group, record in records.items():
        pid = recorded_id(record, ls.url)
        project = ls.project(pid) if pid is not None else None
        if pid is None or project is None or project.get("title") != record["title"]:
            raise PerceptforgeError(
                f"{run.path}: project {record['title']!r} is not on {ls.url} for this account; run "
                "`perceptforge annotate push` first"
            )
        out[group] = pid
    return out


def write_verification(run: RunDir, decided: list[Decided]) -> dict:
    """verification/ rebuilt from ``decided`` (kept items, decisions.jsonl, summary.json), the summary also
    merged into the run's summary.json under "verification"; returns the summary."""
    decisions = [d for d, _, _ in decided]
    pairs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for d, _, kind in decided:
        if len(d.verdicts) >= 2:
            pairs[kind].append((d.verdicts[0][1], d.verdicts[1][1]))
    out = run.sub("verification")
    # rebuilt whole: a decision that changed since the last pull leaves no stale kept item
    run.replace_records(
        "verification/items", {f"{d.item.id}.json": d.item.model_dump(mode="json") for d in decisions if d.item}
    )
    write_jsonl(out / "decisions.jsonl", [record for _, record, _ in decided])
    per_kind: dict[str, Counter] = defaultdict(Counter)
    for d in decisions:
        per_kind[d.kind][d.status] += 1
    summary = {
        "required_annotators": REQUIRED_ANNOTATORS,
        "items": len(decisions),
        "status": dict(sorted(Counter(d.status for d in decisions).items())),
        "status_per_kind": {k: dict(sorted(v.items())) for k, v in sorted(per_kind.items())},
        "corrected": sum(1 for d in decisions if d.corrections and d.status == "kept"),
        "invalid_annotations": sum(len(d.invalid) for d in decisions),
        "agreement": agreement_table(dict(pairs)),
    }
    sample = read_sample(run.path)
    if sample is not None:
        summary["estimate"] = estimate(sample, [record for _, record, _ in decided])
    write_json(out / "summary.json", summary)
    run_summary = run.sub("summary.json")
    if run_summary.exists():
        write_json(run_summary, {**json.loads(run_summary.read_text()), "verification": summary})
    return summary
