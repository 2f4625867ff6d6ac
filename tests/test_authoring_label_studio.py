"""CODIS and MME-RealWorld authoring and cross-checking on a real Label Studio server (the label_studio fixture):
an author (admin) writes from drafts, two annotators review, a failed item comes back as a revision task."""

import json
import subprocess
from pathlib import Path

import yaml
from authored_sources import big_photo_source
from chat_server import ChatServer
from helpers import annotate, perceptforge_cmd, validate_config

from perceptforge.annotation.labeling import AUTHORING_KINDS, choice, config_text, rectangle_result, text
from perceptforge.audit.blind import codis_item_checks
from perceptforge.backends.chat import ChatClient
from perceptforge.configs.profile import resolve_profile_path
from perceptforge.flows.registry import family_of_run
from perceptforge.flows.run import run as run_flow
from perceptforge.scorer.benchmarks import codis, mme_realworld

YES, NO = "Yes", "No"


def push(run, ls, root, checks=None):
    """Through the run's family, as `perceptforge annotate push` does."""
    return family_of_run(run).push(run, ls, root, checks)


def pull(run, ls, checks=None):
    return family_of_run(run).pull(run, ls, checks)


def profile_with(tmp_path: Path, **authoring) -> str:
    doc = yaml.safe_load(resolve_profile_path("local").read_text())
    doc["authoring"] = {**doc.get("authoring", {}), **authoring}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def cli(env, *args):
    done = subprocess.run([*perceptforge_cmd(), *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def tasks_by_key(ls, run, kind):
    projects = json.loads((run / "annotation" / "projects.json").read_text())
    return {t["data"]["key"]: t for t in ls.export(projects[kind]["id"])}


def review(correct=YES, distinct=YES, rules=YES, comment=""):
    result = [choice("correct", "image", correct), choice("distinct", "image", distinct)]
    result.append(choice("follows_rules", "image", rules))
    return result + ([text("comment", "image", comment)] if comment else [])


def codis_answer(question, c1, a1, c2, a2, category="Attributes"):
    fields = {"question": question, "context_1": c1, "answer_1": a1, "context_2": c2, "answer_2": a2}
    return [*(text(k, "image", v) for k, v in fields.items()), choice("category", "image", category)]


def tree_bytes(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def items(run):
    return {p.stem: json.loads(p.read_text()) for p in (run / "authoring" / "items").glob("*.json")}


def test_every_authoring_config_is_valid_on_the_server(label_studio):
    ls = label_studio.client()
    scratch = ls.create_project({"title": "authoring config check", "label_config": config_text("codis_author")})["id"]
    for kind in AUTHORING_KINDS:
        validate_config(ls, scratch, config_text(kind))


def test_codis_write_review_revise_keep_export_and_score(label_studio, prefect_api, sample_dir, tmp_path, cli_env):
    run = tmp_path / "run"
    run_flow("codis", source=str(sample_dir), out=str(run), limit=3, profile=profile_with(tmp_path, codis_reviewers=2))
    ls, root = label_studio.client(), label_studio.document_root
    ann1, ann2 = (label_studio.client(a) for a in label_studio.annotators)

    first = push(run, ls, root)
    assert (first["imported"], first["already_there"]) == (3, 0)
    assert push(run, ls, root)["imported"] == 0  # keyed by the version each task makes: never twice
    authors = tasks_by_key(ls, run, "codis_author")
    assert len(authors) == 3 and all(k.endswith(".v1") for k in authors)
    ids = sorted(k.split(".")[0] for k in authors)
    a, b, c = ids
    # the draft arrives as a prediction the author edits, and the parent it revises is the draft
    assert authors[f"{a}.v1"]["predictions"] and authors[f"{a}.v1"]["data"]["parent"] == f"{a}.v0"

    annotate(
        ls, authors[f"{a}.v1"]["id"], codis_answer("Is the toy big?", "It is a model.", "No.", "It is real.", "Yes.")
    )
    annotate(
        ls,
        authors[f"{b}.v1"]["id"],
        codis_answer(
            "Is it cold outside?",
            "It is January in Oslo.",
            "Yes.",
            "It is July in Rome.",
            "No.",
            "Temporal Information",
        ),
    )
    annotate(
        ls,
        authors[f"{c}.v1"]["id"],
        codis_answer("Is the lamp on?", "It is night.", "Yes.", "It is noon.", "No.", "Temporal Information"),
    )
    assert push(run, ls, root)["imported"] == 3  # one review task per written version
    reviews = tasks_by_key(ls, run, "codis_review")
    assert set(reviews) == {f"{a}.v1", f"{b}.v1", f"{c}.v1"}
    annotate(ls, reviews[f"{a}.v1"]["id"], review())  # the author's own review does not count
    for who in (ann1, ann2):
        annotate(who, reviews[f"{a}.v1"]["id"], review())
    annotate(ann1, reviews[f"{b}.v1"]["id"], review(correct=NO, comment="in Oslo it can be mild; say it snows"))
    annotate(ann2, reviews[f"{b}.v1"]["id"], review())
    annotate(ann1, reviews[f"{c}.v1"]["id"], review())

    summary = pull(run, ls)
    assert summary["status"] == {"in_review": 1, "kept": 1, "revise": 1}
    state = items(run)
    assert state[a]["status"] == "kept" and len(state[a]["reviews"]) == 2
    assert {r["reviewer"] for r in state[a]["reviews"]} == {x.email for x in label_studio.annotators}
    assert state[b]["status"] == "revise" and state[c]["status"] == "in_review"

    assert push(run, ls, root)["imported"] == 1  # the revision task, with the reviewer's notes
    revision = tasks_by_key(ls, run, "codis_author")[f"{b}.v2"]
    assert "in Oslo it can be mild" in revision["data"]["review_notes"] and revision["data"]["parent"] == f"{b}.v1"
    annotate(
        ls,
        revision["id"],
        codis_answer(
            "Is it snowing?", "Snow covers the street.", "Yes.", "The street is dry.", "No.", "Temporal Information"
        ),
    )
    push(run, ls, root)
    v2 = tasks_by_key(ls, run, "codis_review")[f"{b}.v2"]
    for who in (ann1, ann2):
        annotate(who, v2["id"], review())

    summary = pull(run, ls)
    assert summary["status"] == {"in_review": 1, "kept": 2} and summary["revisions"] == 1
    assert summary["reviews"] == 2 + 2 + 1 + 2 and summary["review_pass_rate"] == round(100 * 6 / 7, 2)
    kept_b = items(run)[b]
    assert kept_b["version"] == 2 and kept_b["lineage"]["parent_id"] == f"{b}.v1"
    assert kept_b["lineage"]["author"] == label_studio.admin.email and kept_b["content"]["question"] == "Is it snowing?"
    v1 = json.loads((run / "authoring" / "versions" / f"{b}.v1.json").read_text())
    assert v1["status"] == "revise" and v1["lineage"]["parent_id"] == f"{b}.v0"
    decisions = [json.loads(line) for line in (run / "authoring" / "decisions.jsonl").read_text().splitlines()]
    assert [d["status"] for d in decisions] == ["kept", "kept", "in_review"]
    assert all(t["url"].startswith(label_studio.url) for d in decisions for t in d["tasks"])

    before = tree_bytes(run / "authoring")
    pull(run, ls)
    assert tree_bytes(run / "authoring") == before  # pulling twice writes the same bytes

    out = tmp_path / "split"
    cli(cli_env, "export", str(run), "--out", str(out), "--no-audit")
    data = json.loads((out / "data.json").read_text())
    assert [r["id"] for r in data] == [a, b]
    assert data[1]["answer"] == {"answer_1": "Yes.", "answer_2": "No."} and data[1]["question"] == "Is it snowing?"
    for r in data:
        assert (out / "images" / r["image_id"]).is_file()
    card = (out / "README.md").read_text()
    assert "| items kept | 2 |" in card and "| revisions | 1 |" in card
    predictions = tmp_path / "preds.json"
    predictions.write_text(
        json.dumps(
            [
                {"id": a, "output": {"output_1": "No, it is small", "output_2": "Yes"}},  # both right
                {"id": b, "output": {"output_1": "Yes", "output_2": "Yes"}},  # context 2 wrong
            ]
        )
    )
    scored = codis.score(data=[out / "data.json"], predictions=[predictions])
    assert scored.metrics["overall"]["Acc_p"] == 50.0 and scored.metrics["overall"]["Acc_q"] == 75.0


def test_a_codis_item_a_model_answers_without_its_context_is_flagged(label_studio, prefect_api, sample_dir, tmp_path):
    run = tmp_path / "run"
    run_flow("codis", source=str(sample_dir), out=str(run), limit=1, profile=profile_with(tmp_path, codis_reviewers=1))
    ls, root = label_studio.client(), label_studio.document_root
    push(run, ls, root)
    (task,) = tasks_by_key(ls, run, "codis_author").values()
    annotate(
        ls,
        task["id"],
        codis_answer("Who wears the suit?", "We fly together.", "My colleague.", "We met today.", "A stranger."),
    )

    def stub(request):  # a model that says "my colleague" whatever it is shown
        return "My colleague."

    with ChatServer(stub) as server:
        client = ChatClient(base_url=server.base_url, model="stub")
        checks = lambda versions: codis_item_checks(versions, run, client)  # noqa: E731
        push(run, ls, root, checks)
        asked = len(server.requests)
        summary = pull(run, ls, checks)
        assert len(server.requests) == asked  # answers are kept per version: a pull asks nothing again
    assert asked == 4  # two blind ways (no image, no context) × two contexts
    (item,) = items(run).values()
    flags = {c["name"]: c for c in item["checks"] if c["flagged"]}
    assert (
        "answerable_without_context" in flags
        and "answer 1 from the image alone" in flags["answerable_without_context"]["detail"]
    )
    assert "answerable_without_image" not in flags  # its answer to context 2 was wrong
    assert summary["flagged"] == {"answerable_without_context": 1}
    (review_task,) = tasks_by_key(ls, run, "codis_review").values()
    assert "answerable_without_context" in review_task["data"]["flags_text"]  # the reviewers see why


def test_mme_realworld_target_too_big_revised_kept_exported_byte_for_byte(label_studio, prefect_api, tmp_path, cli_env):
    source = big_photo_source(tmp_path / "src")
    run = tmp_path / "run"
    run_flow("mme-realworld", source=str(source), out=str(run))
    ls, root = label_studio.client(), label_studio.document_root
    reviewer = label_studio.client(label_studio.annotators[0])
    push(run, ls, root)
    (task,) = tasks_by_key(ls, run, "mme_realworld_author").values()
    key = next(iter(tasks_by_key(ls, run, "mme_realworld_author")))
    iid = key.split(".")[0]

    def written(box, answer="B"):
        result = [text("question", "image", "What colour is the red name plate?")]
        result += [text(f"option_{k}", "image", o) for k, o in zip("abcd", ("Blue", "Red", "Green", "White"))]
        result += [text("absent_object", "image", "red name plate"), text("subtask", "image", "color")]
        result += [choice("answer", "image", answer), choice("task", "image", "Perception")]
        result += [choice("domain", "image", "Monitoring"), choice("language", "image", "en")]
        return result + [rectangle_result("target", "image", box, 4000, 3000, "target")]

    annotate(ls, task["id"], written((0, 0, 2000, 1200)))  # a fifth of the image
    push(run, ls, root)
    (first_review,) = tasks_by_key(ls, run, "mme_realworld_review").values()
    assert "target_small: the target covers 20.0% of the image" in first_review["data"]["flags_text"]
    annotate(reviewer, first_review["id"], review(rules=NO, comment="draw the box around the plate only"))
    assert pull(run, ls)["status"] == {"revise": 1}
    push(run, ls, root)
    revision = tasks_by_key(ls, run, "mme_realworld_author")[f"{iid}.v2"]
    assert "draw the box around the plate only" in revision["data"]["review_notes"]
    annotate(ls, revision["id"], written((3100, 2300, 3500, 2600)))
    push(run, ls, root)
    second = tasks_by_key(ls, run, "mme_realworld_review")[f"{iid}.v2"]
    assert second["data"]["flags_text"] == "none flagged"
    annotate(reviewer, second["id"], review())
    summary = pull(run, ls)
    assert summary["status"] == {"kept": 1} and summary["flagged"] == {}

    out = tmp_path / "split"
    cli(cli_env, "export", str(run), "--out", str(out))  # with the audit, which reads the review figures
    audit = {c["name"]: c for c in json.loads((out / "audit.json").read_text())["checks"]}
    assert audit["human_verification"]["passed"] is True and audit["duplicates"]["passed"] is True
    (record,) = json.loads((out / "MME_RealWorld.json").read_text())
    assert record["Question_id"] == f"Perception/Monitoring/color/{iid}" and record["Ground truth"] == "B"
    assert record["Answer choices"][4] == "(E) The image does not feature the red name plate."
    assert (out / "images" / record["Image"]).read_bytes() == (source / "street.jpg").read_bytes()
    predictions = tmp_path / "preds.json"
    predictions.write_text(json.dumps([{"Question_id": record["Question_id"], "output": "The answer is (B)."}]))
    scored = mme_realworld.score(data=[out / "MME_RealWorld.json"], predictions=[predictions])
    assert scored.metrics["perception"]["Avg"] == 100.0
    predictions.write_text(json.dumps([{"Question_id": record["Question_id"], "output": "E"}]))
    assert (
        mme_realworld.score(data=[out / "MME_RealWorld.json"], predictions=[predictions]).metrics["perception"]["Avg"]
        == 0.0
    )


def test_run_push_and_pull_commands_on_an_authored_run(label_studio, sample_dir, tmp_path, cli_env):
    run = tmp_path / "run"
    made = cli(cli_env, "run", "codis", "--source", str(sample_dir), "--out", str(run), "--limit", "1")
    assert "annotate push" in made.stdout and "report.html" in made.stdout
    env = {
        **cli_env,
        "LABEL_STUDIO_URL": label_studio.url,
        "LABEL_STUDIO_API_KEY": label_studio.admin.token,
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(label_studio.document_root),
    }
    pushed = cli(env, "annotate", "push", str(run))
    assert "codis_author" in pushed.stdout and "imported 1 new tasks" in pushed.stdout
    pulled = cli(env, "annotate", "pull", str(run))
    assert "1 items: 1 draft" in pulled.stdout and "decisions.jsonl" in pulled.stdout
