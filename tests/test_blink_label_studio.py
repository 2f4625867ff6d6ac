"""A BLINK-style run verified by people in a real Label Studio server on 127.0.0.1 (the label_studio fixture),
then exported with its verification: push, two annotators through the API, pull, export, audit."""

import json
import subprocess

import httpx
import pytest
from helpers import annotate, perceptforge_cmd, validate_config

from perceptforge.annotation.blink import pull, push
from perceptforge.annotation.labeling import choice, perception_config, text
from perceptforge.audit.run import audit
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import sha256_file
from perceptforge.outputs.blink_export import export_blink, load_perception_items

A, R = "Accept", "Reject"


def says(verdict: str, reason: str = "", answer: str = "") -> list[dict]:
    """One annotation's result in the perception_mcq controls."""
    result = [choice("verdict", "image_1", verdict)]
    if reason:
        result.append(text("reject_reason", "image_1", reason))
    if answer:
        result.append(choice("answer", "image_1", answer))
    return result


def files_in(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run([*perceptforge_cmd(), *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_blink_run_verified_in_label_studio_then_exported(label_studio, sample_dir, tmp_path, cli_env):
    run = tmp_path / "run"
    build = ["run", "blink", "--source", str(sample_dir), "--out", str(run), "--tasks", "jigsaw,counting"]
    run_cli(*build, "--limit", "2", env=cli_env)
    items = {i.id: i for i in load_perception_items(run)}
    c1, c2 = sorted(i for i in items if items[i].task == "Counting")
    j1, j2 = sorted(i for i in items if items[i].task == "Jigsaw")
    assert len(items) == 4 and len(items[j1].images) == 3 and len(items[c1].images) == 1
    unverified = export_blink(run, tmp_path / "unverified")
    with pytest.raises(PerceptforgeError, match="nothing verified yet"):
        export_blink(run, tmp_path / "nothing", only_verified=True)

    # push through the command (it sees a BLINK-style run), then again: nothing new
    env = {
        **cli_env,
        "LABEL_STUDIO_URL": label_studio.url,
        "LABEL_STUDIO_API_KEY": label_studio.admin.token,
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(label_studio.document_root),
    }
    assert "imported 4 new tasks" in run_cli("annotate", "push", str(run), env=env).stdout
    ls = label_studio.client()
    again = push(run, ls, label_studio.document_root)
    assert (again["imported"], again["already_there"]) == (0, 4) and set(again["projects"]) == {"Counting", "Jigsaw"}
    projects = again["projects"]
    scratch = ls.create_project({"title": "perception config check", "label_config": perception_config(1)})["id"]
    for n in range(1, 5):
        validate_config(ls, scratch, perception_config(n))
    # one project per task, showing as many images as its items have
    assert [ls.project(projects[t])["label_config"].count("<Image") for t in ("Counting", "Jigsaw")] == [1, 3]
    tasks = {t["data"]["item_id"]: t for pid in projects.values() for t in ls.export(pid)}
    assert sorted(tasks) == sorted(items)
    assert tasks[j1]["data"]["lineage"]["template_id"] == "jigsaw" and tasks[j1]["data"]["task"] == "Jigsaw"
    served = httpx.get(
        label_studio.url + tasks[j1]["data"]["image_3"], headers={"Authorization": f"Token {label_studio.admin.token}"}
    )
    assert served.status_code == 200 and served.content == (run / items[j1].images[2].path).read_bytes()

    ann1, ann2 = (label_studio.client(a) for a in label_studio.annotators)
    fixed = next(letter for letter in "ABCD" if letter != items[c1].answer)
    annotate(ann1, tasks[c1]["id"], says(A))  # both accept, one corrects the answer → kept, corrected
    annotate(ann2, tasks[c1]["id"], says(A, answer=fixed))
    annotate(ann1, tasks[c2]["id"], says(A))  # accept and reject → disagreement
    annotate(ann2, tasks[c2]["id"], says(R, "the flags are cut off at the edge"))
    annotate(ann1, tasks[j1]["id"], says(A, answer=items[j1].answer))  # both accept, the answer confirmed → kept
    annotate(ann2, tasks[j1]["id"], says(A))
    annotate(ann1, tasks[j2]["id"], says(R, "both pieces fit"))  # both reject → rejected
    annotate(ann2, tasks[j2]["id"], says(R, "the missing part is ambiguous"))

    summary = pull(run, ls)
    assert (summary["required_annotators"], summary["items"], summary["corrected"]) == (2, 4, 1)
    assert summary["status"] == {"disagreement": 1, "kept": 2, "rejected": 1}
    assert summary["status_per_kind"] == {
        "Counting": {"disagreement": 1, "kept": 1},
        "Jigsaw": {"kept": 1, "rejected": 1},
    }
    assert summary["invalid_annotations"] == 0
    # Counting (A,A), (A,R): 50 %, kappa 0; Jigsaw (A,A), (R,R): 100 %, kappa 1; overall p_o 3/4, p_e 1/2 → 0.5
    assert summary["agreement"] == {
        "Counting": {"items": 2, "percent_agreement": 50.0, "cohens_kappa": 0.0},
        "Jigsaw": {"items": 2, "percent_agreement": 100.0, "cohens_kappa": 1.0},
        "overall": {"items": 4, "percent_agreement": 75.0, "cohens_kappa": 0.5},
    }
    decisions = [json.loads(line) for line in (run / "verification" / "decisions.jsonl").read_text().splitlines()]
    assert [(d["item_id"], d["kind"], d["status"]) for d in decisions] == [
        (c1, "Counting", "kept"),
        (c2, "Counting", "disagreement"),
        (j1, "Jigsaw", "kept"),
        (j2, "Jigsaw", "rejected"),
    ]
    by_id = {d["item_id"]: d for d in decisions}
    assert by_id[c1]["corrections"] == [{"field": "answer", "value": fixed, "annotators": ["ann2@example.com"]}]
    assert by_id[c2]["verdicts"] == [
        {"annotator": "ann1@example.com", "verdict": A},
        {"annotator": "ann2@example.com", "verdict": R},
    ]
    assert by_id[c2]["reject_reasons"] == [
        {"annotator": "ann2@example.com", "reason": "the flags are cut off at the edge"}
    ]
    assert [r["reason"] for r in by_id[j2]["reject_reasons"]] == ["both pieces fit", "the missing part is ambiguous"]
    for d in decisions:
        link = d["label_studio"]
        assert link["task"] == tasks[d["item_id"]]["id"] and link["project"] == projects[d["kind"]]
        assert link["url"] == f"{label_studio.url}/projects/{link['project']}/data?task={link['task']}"
    kept = {p.stem: json.loads(p.read_text()) for p in sorted((run / "verification" / "items").glob("*.json"))}
    assert sorted(kept) == sorted([c1, j1])
    assert (kept[c1]["answer"], kept[c1]["version"], kept[c1]["verified"]) == (fixed, 2, True)
    assert kept[c1]["lineage"]["parent_id"] == c1
    assert kept[c1]["lineage"]["artifacts"] == {"verification": "verification/decisions.jsonl"}
    assert kept[j1] == {**items[j1].model_dump(mode="json"), "verified": True}
    assert json.loads((run / "items" / f"{c1}.json").read_text())["answer"] == items[c1].answer  # the original stays
    assert json.loads((run / "summary.json").read_text())["verification"] == summary

    written = {**files_in(run / "verification"), "summary.json": (run / "summary.json").read_bytes()}
    assert pull(run, ls) == summary
    assert {**files_in(run / "verification"), "summary.json": (run / "summary.json").read_bytes()} == written

    # every item exported: BLINK's layout exactly as without verification, decisions in items.jsonl
    out = tmp_path / "export"
    everything = export_blink(run, out, license="cc0-1.0")
    before, after = files_in(tmp_path / "unverified"), files_in(out)
    assert everything["official"] == unverified["official"]
    assert all(after[f] == before[f] for f in everything["official"])
    records = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert [(r["idx"], r["id"], r["answer"]) for r in records] == [
        ("val_Counting_1", c1, items[c1].answer),
        ("val_Counting_2", c2, items[c2].answer),
        ("val_Jigsaw_1", j1, items[j1].answer),
        ("val_Jigsaw_2", j2, items[j2].answer),
    ]
    assert [r["verification"] for r in records] == decisions
    assert all(r["lineage"]["source_id"] and r["lineage"]["prompts"] for r in records)

    # only the kept items, corrections applied, through the command into the same folder
    run_cli("export", str(run), "--out", str(out), "--only-verified", "--license", "cc-by-4.0", "--no-audit", env=env)
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    # the export's own bookkeeping (the CLI's marker: which family's export the folder holds) is not a split file
    assert set(manifest["files"]) == on_disk - {"manifest.json", ".perceptforge-export"}
    assert all(sha256_file(out / f) == digest for f, digest in manifest["files"].items())
    assert (manifest["benchmark"], manifest["items"], manifest["only_verified"]) == ("blink", 2, True)
    assert manifest["run"]["flow"] == "blink" and "val_answers.json" in manifest["official"]
    assert json.loads((out / "val_answers.json").read_text()) == {
        "val_Counting_1": f"({fixed})",
        "val_Jigsaw_1": f"({items[j1].answer})",
    }
    records = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert [(r["id"], r["version"], r["verification"]["status"]) for r in records] == [(c1, 2, "kept"), (j1, 1, "kept")]
    assert records[0]["lineage"]["parent_id"] == c1 and records[0]["verification"]["corrections"][0]["value"] == fixed
    assert json.loads((out / "verification.json").read_text()) == summary
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlicense: cc-by-4.0\n")
    assert "| Counting | 1 | 25.0% |" in card and "| Jigsaw | 1 | 50.0% |" in card
    assert "| Counting | 2 | 1 | 2 | 50.0% | 0.0 |" in card and "| Jigsaw | 2 | 1 | 2 | 100.0% | 1.0 |" in card
    assert "| overall | 4 | 2 | 4 | 75.0% | 0.5 |" in card and "| kept with a corrected answer | 1 |" in card
    sources = {r["id"]: r for r in map(json.loads, (run / "sources.jsonl").read_text().splitlines())}
    for source in sorted({s for i in (c1, j1) for s in items[i].sources}):
        assert f"- {source}: {sources[source]['licence']}" in card

    # `perceptforge audit` of the export finds the verification beside it
    doc = audit([out / "val_answers.json"], tmp_path / "audit", "blink")
    check = next(c for c in doc["checks"] if c["name"] == "human_verification")
    assert check["passed"] is False  # 75 % agreement, under the 80 % the thresholds ask for
    assert check["figures"]["kept_share"] == 50.0 and check["figures"]["agreement"] == summary["agreement"]
    assert "50.0% kept; 75.0% agreement" in check["summary"]


def test_a_blink_run_checked_by_sample_states_its_estimate(label_studio, sample_dir, tmp_path, cli_env):
    run = tmp_path / "run"
    run_cli(
        "run",
        "blink",
        "--source",
        str(sample_dir),
        "--out",
        str(run),
        "--tasks",
        "jigsaw,counting",
        "--limit",
        "2",
        env=cli_env,
    )
    env = {
        **cli_env,
        "LABEL_STUDIO_URL": label_studio.url,
        "LABEL_STUDIO_API_KEY": label_studio.admin.token,
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(label_studio.document_root),
    }
    pushed = run_cli("annotate", "push", str(run), "--sample", "50%", env=env).stdout
    assert "sample: 2 items, seed 0: Counting 1/2, Jigsaw 1/2" in pushed and "imported 2 new tasks" in pushed
    ls = label_studio.client()
    projects = json.loads((run / "annotation" / "projects.json").read_text())
    tasks = {t["data"]["item_id"]: t for p in projects.values() for t in ls.export(p["id"])}
    drawn = json.loads((run / "annotation" / "sample.json").read_text())["strata"]
    assert sorted(tasks) == sorted(i for s in drawn.values() for i in s["drawn"])
    ann1, ann2 = (label_studio.client(a) for a in label_studio.annotators)
    (jigsaw,) = drawn["Jigsaw"]["drawn"]
    for item_id, task in tasks.items():
        verdict = R if item_id == jigsaw else A
        annotate(ann1, task["id"], says(verdict, "both pieces fit" if verdict == R else ""))
        annotate(ann2, task["id"], says(verdict, "both pieces fit" if verdict == R else ""))
    estimate = pull(run, ls)["estimate"]
    assert {h: (r["checked"], r["true"]) for h, r in estimate["strata"].items()} == {
        "Counting": (1, 1),
        "Jigsaw": (1, 0),
    }
    assert estimate["overall"]["share"] == 0.5 and estimate["rejected"][0]["reasons"] == ["both pieces fit"]
    export_blink(run, tmp_path / "export")
    card = (tmp_path / "export" / "README.md").read_text()
    assert "### How many items are true: the checked sample" in card and "**50.0%**" in card and f"`{jigsaw}`" in card
