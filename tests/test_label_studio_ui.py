"""The real labeling UI in headless Chromium (Debian's package; Playwright drives it, no browser download)."""

import json
import shutil

import pytest

from perceptforge.annotation.sync import pull, push
from perceptforge.flows.run import run as run_flow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Offline machine: without these, Chromium keeps trying to reach Google's services at start.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture(scope="module")
def browser():
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_labeling(page, url: str, account, project: int) -> None:
    """Sign in as ``account`` and open the project's labeling stream at its first task."""
    page.goto(f"{url}/user/login/")
    page.fill("input[name=email]", account.email)
    page.fill("input[name=password]", account.password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    page.goto(f"{url}/projects/{project}/data?labeling=1")
    page.get_by_text("Labeling Instructions").wait_for()  # the project's instructions open first
    page.keyboard.press("Escape")


def test_an_annotator_accepts_an_item_in_the_labeling_ui(label_studio, browser, prefect_api, sample_dir, tmp_path):
    from playwright.sync_api import expect

    run = tmp_path / "run"
    run_flow("mvp", source=str(sample_dir), profile="local", out=str(run), seed=0, limit=1, categories=["S1"])
    ls = label_studio.client()
    project = push(run, ls, label_studio.document_root)["projects"]["yes_no_pair"]
    annotator = label_studio.annotators[0]
    me = label_studio.client(annotator).whoami()["id"]

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)  # a busy 2-core machine renders the labeling UI slowly
    open_labeling(page, label_studio.url, annotator, project)
    # the pipeline's answers arrive pre-filled from the prediction
    expect(page.locator("input[name=yes]:checked, input[name=no]:checked")).to_have_count(2, timeout=30_000)
    page.locator("label").filter(has_text="Accept").first.click()
    with page.expect_response(lambda r: "/annotations" in r.url and r.request.method == "POST") as response:
        page.get_by_test_id("bottombar-submit-button").click()
    assert response.value.status == 201
    page.close()

    annotated = [t for t in ls.export(project) if t["annotations"]]
    assert len(annotated) == 1
    annotation = annotated[0]["annotations"][0]
    assert annotation["completed_by"] == me
    assert {r["from_name"]: r["value"]["choices"][0] for r in annotation["result"]}["verdict"] == "Accept"
    pull(run, ls)
    decisions = [json.loads(line) for line in (run / "verification" / "decisions.jsonl").read_text().splitlines()]
    decided = next(d for d in decisions if d["item_id"] == annotated[0]["data"]["item_id"])
    assert (decided["status"], decided["verdicts"]) == (
        "incomplete",
        [{"annotator": annotator.email, "verdict": "Accept"}],
    )


def test_an_author_submits_a_codis_item_from_its_draft_in_the_labeling_ui(
    label_studio, browser, prefect_api, sample_dir, tmp_path
):
    """The CODIS author project in the real UI: the draft arrives pre-filled, the author changes the question and
    submits; pull reads it back as version 1 by that author."""
    from playwright.sync_api import expect

    from perceptforge.flows.registry import family_of_run

    run = tmp_path / "codis"
    run_flow("codis", source=str(sample_dir), out=str(run), limit=1)
    ls = label_studio.client()
    project = family_of_run(run).push(run, ls, label_studio.document_root)["projects"]["codis_author"]
    draft = json.loads(next((run / "drafts").glob("*.json")).read_text())
    annotator = label_studio.annotators[1]

    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.set_default_timeout(60_000)
    open_labeling(page, label_studio.url, annotator, project)
    # the draft's texts and category arrive pre-filled from the prediction
    expect(page.get_by_text(draft["content"]["context_1"])).to_be_visible(timeout=30_000)
    expect(page.locator("input[name='Relationships']:checked, input[type=checkbox]:checked")).to_have_count(1)
    # a pre-filled text is a region: its edit button turns it into a field; Enter keeps the new text
    region = page.get_by_test_id("textarea-region").filter(has_text=draft["content"]["question"])
    region.hover()
    region.get_by_test_id("htx-textbox-edit-button").click()
    field = region.locator("textarea, input[type=text]").first
    field.fill("Does the astronaut own the suit she wears?")
    page.keyboard.press("Enter")  # the field keeps focus; the locator above no longer matches the new text
    expect(page.get_by_text("Does the astronaut own the suit she wears?")).to_be_visible()
    with page.expect_response(lambda r: "/annotations" in r.url and r.request.method == "POST") as response:
        page.get_by_test_id("bottombar-submit-button").click()
    assert response.value.status == 201
    page.close()

    family_of_run(run).pull(run, ls)
    (item,) = [json.loads(p.read_text()) for p in (run / "authoring" / "items").glob("*.json")]
    assert item["version"] == 1 and item["status"] == "in_review"
    assert item["lineage"]["author"] == annotator.email and item["lineage"]["parent_id"] == f"{draft['id']}.v0"
    assert item["content"]["question"] == "Does the astronaut own the suit she wears?"
    # what the author did not touch is the draft's
    assert item["content"]["context_1"] == draft["content"]["context_1"]
    assert item["content"]["category"] == draft["content"]["category"]


def sign_in(page, url: str, account) -> bool:
    """Sign in through the login form; True when the server let the account in."""
    page.goto(f"{url}/user/login/")
    page.fill("input[name=email]", account.email)
    page.fill("input[name=password]", account.password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    return "/user/login" not in page.url


def test_an_independent_annotator_cannot_reach_the_other_ones_answer(
    label_studio, independent_servers, browser, prefect_api, sample_dir, tmp_path
):
    """Two annotators, each on a server of their own: the first accepts an item; the second, signed in in the real
    UI, labels the same item with nothing of the first one's answer in view, and cannot sign in where it is."""
    from playwright.sync_api import expect

    from perceptforge.annotation.labelstudio import LabelStudio

    run = tmp_path / "run"
    run_flow("mvp", source=str(sample_dir), profile="local", out=str(run), seed=0, limit=1, categories=["S1"])
    ls = LabelStudio(label_studio.url, label_studio.admin.token, independent=independent_servers)
    server1, server2 = (m.url for m in ls.independent)
    solo1, solo2 = label_studio.independent
    projects = push(run, ls, label_studio.document_root)["annotator_projects"]["yes_no_pair"]
    first = LabelStudio(server1, solo1.token)
    task1 = first.export(projects[server1])[0]
    first.call(
        "annotating",
        lambda: first.sdk().annotations.create(
            task1["id"],
            result=[
                {"from_name": "verdict", "to_name": "natural", "type": "choices", "value": {"choices": ["Reject"]}},
                {
                    "from_name": "reject_reason",
                    "to_name": "natural",
                    "type": "choices",
                    "value": {"choices": ["The question is wrong or ambiguous"]},
                },
            ],
        ),
    )

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    # where the first answer is (the first annotator's server) and on the main server, the second cannot sign in
    assert not sign_in(page, server1, solo2) and not sign_in(page, label_studio.url, solo2)
    answer = page.goto(f"{server1}/api/annotations/1/")
    assert answer.status in (401, 403) and "wrong or ambiguous" not in page.content()
    page.goto(f"{server1}/projects/{projects[server1]}/data?task={task1['id']}")
    assert "/user/login" in page.url and "wrong or ambiguous" not in page.content()
    # on their own server the same item waits unlabelled, with no one else's answer to compare
    assert sign_in(page, server2, solo2)
    page.goto(f"{server2}/projects/{projects[server2]}/data?labeling=1")
    page.get_by_text("Labeling Instructions").wait_for()
    page.keyboard.press("Escape")
    expect(page.locator("input[name=yes]:checked, input[name=no]:checked")).to_have_count(2, timeout=30_000)
    expect(page.get_by_text("Compare All")).to_have_count(0)
    expect(page.locator("input[name=Accept]:checked, input[name=Reject]:checked")).to_have_count(0)
    annotations = page.request.get(f"{server2}/api/tasks/?project={projects[server2]}").json()
    assert all(t.get("total_annotations", 0) == 0 for t in annotations.get("tasks", annotations))
    page.close()


def test_an_outline_opens_as_a_suggestion_and_is_submitted_in_the_labeling_ui(
    label_studio, browser, sample_dir, tmp_path
):
    """`sources outline push`: the photo with the region's box and its outline so far; submitted unchanged, pull
    writes nothing new."""
    from perceptforge.annotation import outlines

    folder = tmp_path / "photos"
    shutil.copytree(sample_dir, folder)
    ls = label_studio.client()
    project = outlines.push(folder, ls, label_studio.document_root)["project"]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    open_labeling(page, label_studio.url, label_studio.annotators[0], project)
    # the suggestion's two regions (the box and the outline) are listed, ready to correct
    page.get_by_text("Outline:").first.wait_for()
    page.locator(".lsf-outliner-item, .lsf-region-item").first.wait_for(timeout=30_000)
    page.screenshot(path=str(tmp_path / "outline_task.png"))
    with page.expect_response(lambda r: "/annotations" in r.url and r.request.method == "POST") as response:
        page.get_by_test_id("bottombar-submit-button").click()
    assert response.value.status == 201
    page.close()
    (task,) = [t for t in ls.export(project) if t["annotations"]]
    assert [r["type"] for r in task["annotations"][0]["result"]] == ["rectanglelabels", "polygonlabels"]
    report = outlines.pull(folder, ls)
    assert (report["changed"], report["removed"], report["unchanged"]) == ([], [], 1)
    assert (folder / "annotations.json").read_bytes() == (sample_dir / "annotations.json").read_bytes()
