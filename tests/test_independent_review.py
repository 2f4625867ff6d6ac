"""Independent review on real Label Studio servers: each annotator labels on a server of their own (no one can reach
another's annotation), agreement comes from those independent verdicts, and a reviewer settles the disputed items
in the owner's adjudication project on the main server."""

import json

import httpx
from helpers import annotate

from perceptforge.annotation.labeling import choice
from perceptforge.annotation.labelstudio import LabelStudio
from perceptforge.annotation.sync import pull, push
from perceptforge.flows.run import run as run_flow
from perceptforge.outputs.export import load_items

A, R = "Accept", "Reject"
TO = {"yes_no_pair": "natural", "single_mcq": "manipulated", "cross_mcq": "manipulated"}


def verdict(item, v: str) -> list[dict]:
    kind = item.question.kind
    reason = [choice("reject_reason", TO[kind], "The question is wrong or ambiguous")] if v == R else []
    return [choice("verdict", TO[kind], v), *reason]


def test_each_annotator_labels_alone_and_a_reviewer_settles_disputes(
    label_studio, independent_servers, prefect_api, sample_dir, tmp_path
):
    run = tmp_path / "run"
    run_flow("mvp", source=str(sample_dir), profile="local", out=str(run), seed=0, limit=1, categories=["S1"])
    ls = LabelStudio(label_studio.url, label_studio.admin.token, independent=independent_servers)
    server1, server2 = (m.url for m in ls.independent)
    solo1, solo2 = (LabelStudio(url, a.token) for url, a in zip((server1, server2), label_studio.independent))
    report = push(run, ls, label_studio.document_root)
    assert report["imported"] == 10  # 5 items, once on each annotator's own server
    again = push(run, ls, label_studio.document_root)
    assert (again["imported"], again["already_there"]) == (0, 10)
    own = report["annotator_projects"]
    assert set(own) == {"yes_no_pair", "single_mcq", "cross_mcq"}
    first = {k: v[server1] for k, v in own.items()}
    second = {k: v[server2] for k, v in own.items()}
    tasks1 = {t["data"]["item_id"]: t for pid in first.values() for t in solo1.export(pid)}
    tasks2 = {t["data"]["item_id"]: t for pid in second.values() for t in solo2.export(pid)}
    items = {i.id: i for i in load_items(run)}
    assert set(tasks1) == set(tasks2) == set(items)
    by = {(i.question.kind, getattr(i.question, "level", "")): i for i in items.values()}
    yn_low, yn_high = by["yes_no_pair", "low"], by["yes_no_pair", "high"]
    mine = annotate(solo1, tasks1[yn_low.id]["id"], verdict(yn_low, A))
    # the second annotator has no account where the first one's answer is, and none on the main server
    for url in (server1, label_studio.url):
        peek = httpx.get(
            f"{url}/api/annotations/{mine['id']}/",
            headers={"Authorization": f"Token {label_studio.independent[1].token}"},
        )
        assert peek.status_code == 401
    # and on their own server there is no annotation but their own
    assert all(not t["annotations"] for pid in second.values() for t in solo2.export(pid))

    # yn_low: both accept; yn_high: they disagree; the rest: both accept
    annotate(solo2, tasks2[yn_low.id]["id"], verdict(yn_low, A))
    annotate(solo1, tasks1[yn_high.id]["id"], verdict(yn_high, A))
    annotate(solo2, tasks2[yn_high.id]["id"], verdict(yn_high, R))
    for item in items.values():
        if item.id not in (yn_low.id, yn_high.id):
            annotate(solo1, tasks1[item.id]["id"], verdict(item, A))
            annotate(solo2, tasks2[item.id]["id"], verdict(item, A))

    summary = pull(run, ls)
    assert summary["status"] == {"disagreement": 1, "kept": 4}
    assert summary["agreement"]["overall"] == {"items": 5, "percent_agreement": 80.0, "cohens_kappa": 0.0}
    # the disputed item, and only it, went to the owner's adjudication project with both verdicts in view
    owner = label_studio.client()
    (review_task,) = owner.export(report["projects"]["yes_no_pair"])
    assert review_task["data"]["item_id"] == yn_high.id and review_task["annotations"] == []
    shown = review_task["data"]["independent_verdicts"]
    assert "solo1@example.com: Accept" in shown and "solo2@example.com: Reject (The question is wrong" in shown
    assert all(owner.export(report["projects"][k]) == [] for k in ("single_mcq", "cross_mcq"))

    annotate(owner, review_task["id"], verdict(yn_high, A))  # the reviewer keeps it
    summary = pull(run, ls)
    assert summary["status"] == {"kept": 5}
    assert summary["agreement"]["overall"]["percent_agreement"] == 80.0  # adjudication does not count as agreement
    decisions = {
        d["item_id"]: d for d in map(json.loads, (run / "verification" / "decisions.jsonl").read_text().splitlines())
    }
    settled = decisions[yn_high.id]
    assert settled["adjudication"] == {"reviewer": "admin@example.com", "verdict": A, "was": "disagreement"}
    assert [v["annotator"] for v in settled["verdicts"]] == ["solo1@example.com", "solo2@example.com"]
    assert settled["label_studio"]["task"] == review_task["id"]
    assert {a["server"] for a in settled["label_studio"]["annotators"]} == {server1, server2}
    assert len(owner.export(report["projects"]["yes_no_pair"])) == 1  # a second pull sends nothing again
    assert (run / "verification" / "items" / f"{yn_high.id}.json").exists()
