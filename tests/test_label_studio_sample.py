"""A verified random sample on a real Label Studio server: `annotate push --sample`, two annotators' verdicts
through the API, `annotate pull`, the estimate in the summary, the data card and the audit, and a larger sample
that pushes only the new items."""

import json
import math
import subprocess

from conftest import copy_run
from helpers import annotate, perceptforge_cmd
from scipy.stats import binomtest, norm

from perceptforge.annotation.labeling import choice
from perceptforge.outputs.export import load_items

A, R = "Accept", "Reject"
TO = {"yes_no_pair": "natural", "single_mcq": "manipulated", "cross_mcq": "manipulated"}


def reference_estimate(population: dict[str, int], checked: dict[str, int], true: dict[str, int]) -> dict:
    """Written out here from the formulas, apart from logic/verified_sample.py: per stratum scipy's Wilson interval;
    overall the stratified share and the Wilson interval at Kish's effective n."""
    strata = {
        h: [round(x, 4) for x in binomtest(true[h], checked[h]).proportion_ci(method="wilson")]
        for h in checked
        if checked[h]
    }
    covered = sum(population[h] for h in strata)
    w = {h: population[h] / covered for h in strata}
    p = sum(w[h] * true[h] / checked[h] for h in strata)
    n = 1 / sum(w[h] ** 2 / checked[h] for h in strata)
    z = norm.ppf(0.975)
    centre, half = (
        (p + z * z / (2 * n)) / (1 + z * z / n),
        z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)),
    )
    return {"strata": strata, "share": round(p, 4), "interval": [round(centre - half, 4), round(centre + half, 4)]}


def test_a_stratified_sample_is_checked_estimated_and_extended(label_studio, demo_run, tmp_path, cli_env):
    run = copy_run(demo_run[0], tmp_path / "run")  # the demo's 43 items
    items = {i.id: i for i in load_items(run)}
    assert len(items) >= 40
    env = {
        **cli_env,
        "LABEL_STUDIO_URL": label_studio.url,
        "LABEL_STUDIO_API_KEY": label_studio.token(),
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(label_studio.document_root),
    }

    def pf(*args):
        done = subprocess.run(
            [*perceptforge_cmd(), *map(str, args)], env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    pushed = pf("annotate", "push", run, "--sample", "20", "--sample-seed", "3")
    assert "sample: 20 items, seed 3" in pushed and "imported 20 new tasks" in pushed
    sample = json.loads((run / "annotation" / "sample.json").read_text())
    drawn = {i: h for h, s in sample["strata"].items() for i in s["drawn"]}
    assert len(drawn) == 20 and {items[i].category.low for i in drawn} == set(sample["strata"])
    projects = json.loads((run / "annotation" / "projects.json").read_text())
    ls = label_studio.client()
    tasks = {t["data"]["item_id"]: t for p in projects.values() for t in ls.export(p["id"])}
    assert set(tasks) == set(drawn)

    # known verdicts: three items rejected by both, one disputed (not counted), one with one annotation only
    # (not counted), the rest accepted by both
    ordered = sorted(drawn)
    rejected, disputed, single = ordered[:3], ordered[3], ordered[4]
    ann1, ann2 = (label_studio.client(a) for a in label_studio.annotators)

    def verdict(item_id, v):
        to = TO[items[item_id].question.kind]
        reason = [choice("reject_reason", to, "The question is wrong or ambiguous")] if v == R else []
        return [choice("verdict", to, v), *reason]

    for item_id in ordered:
        first = R if item_id in rejected else A
        second = R if item_id in rejected or item_id == disputed else A
        annotate(ann1, tasks[item_id]["id"], verdict(item_id, first))
        if item_id != single:
            annotate(ann2, tasks[item_id]["id"], verdict(item_id, second))
    pulled = pf("annotate", "pull", run)
    assert "share of true items in the split" in pulled

    estimate = json.loads((run / "verification" / "summary.json").read_text())["estimate"]
    population = {h: s["population"] for h, s in sample["strata"].items()}
    counted = [i for i in ordered if i not in (disputed, single)]
    checked = {h: sum(1 for i in counted if drawn[i] == h) for h in population}
    true = {h: sum(1 for i in counted if drawn[i] == h and i not in rejected) for h in population}
    reference = reference_estimate(population, checked, true)
    assert {h: r["interval"] for h, r in estimate["strata"].items() if r["checked"]} == reference["strata"]
    assert (estimate["overall"]["share"], estimate["overall"]["interval"]) == (
        reference["share"],
        reference["interval"],
    )
    assert (estimate["overall"]["checked"], estimate["overall"]["true"], estimate["not_counted"]) == (18, 15, 2)
    assert sorted(r["item_id"] for r in estimate["rejected"]) == rejected

    # the data card and the audit state it
    out = tmp_path / "export"
    pf("export", run, "--out", out)
    card = (out / "README.md").read_text()
    share, (low, high) = estimate["overall"]["share"], estimate["overall"]["interval"]
    assert (
        f"**{100 * share:.1f}%** (95% interval {100 * low:.1f}% – {100 * high:.1f}%), from 15 true of 18 checked"
        in card
    )
    assert all(f"`{i}`" in card for i in rejected)
    pf("audit", out)
    audit = json.loads((out / "audit.json").read_text())
    (check,) = [c for c in audit["checks"] if c["name"] == "human_verification"]
    assert f"{100 * share:.1f}% of the split's items are true" in check["summary"]
    assert sorted(f["item"] for f in check["flags"]) == rejected
    assert "share of true items, from the checked random sample" in (out / "audit.html").read_text()
    assert (run / "report.html").read_text().count("tag sampled") == 20

    # a larger sample pushes only the new items; the first twenty stay as they are
    grown = pf("annotate", "push", run, "--sample", "30", "--sample-seed", "3")
    assert "sample: 30 items (10 more than before)" in grown and "imported 10 new tasks; 20 were already there" in grown
    regrown = json.loads((run / "annotation" / "sample.json").read_text())
    assert all(set(s["drawn"]) <= set(regrown["strata"][h]["drawn"]) for h, s in sample["strata"].items())
    refused = subprocess.run(
        [*perceptforge_cmd(), "annotate", "push", str(run), "--sample", "40", "--sample-seed", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "extend it with that seed (--sample-seed 3), not 4" in refused.stderr
