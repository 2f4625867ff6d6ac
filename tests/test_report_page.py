"""report.html as a person uses it: every picture opens at full size, the pairs filter by category and by
verdict, and text from the run is escaped by the template (Jinja2 autoescaping)."""

import json
import re
from html.parser import HTMLParser


class Cards(HTMLParser):
    """The cards' data attributes, each image's src and the link around it, and the filters' options."""

    def __init__(self):
        super().__init__()
        self.cards, self.images, self.options, self._href, self._select = [], [], {}, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("class") == "card":
            self.cards.append(a)
        elif tag == "a":
            self._href = a.get("href")
        elif tag == "img" and self.cards:
            self.images.append((a["src"], self._href))
        elif tag == "select":
            self._select = a["id"]
            self.options[self._select] = []
        elif tag == "option" and self._select:
            self.options[self._select].append(a.get("value"))

    def handle_endtag(self, tag):
        if tag == "a":
            self._href = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data):
        if self._select and self.options[self._select] and self.options[self._select][-1] is None:
            self.options[self._select][-1] = data


def test_pictures_open_at_full_size_and_pairs_filter_by_category_and_verdict(demo_run):
    run, summary = demo_run
    page = Cards()
    page.feed((run / "report.html").read_text())
    items = [json.loads(p.read_text()) for p in (run / "items").glob("*.json")]
    categories = {f"{i['category']['low']} {i['category']['name']}" for i in items}
    assert len(page.cards) == len({i["lineage"]["artifacts"]["candidate"] for i in items})
    assert {c["data-category"] for c in page.cards} == categories
    assert page.options["f-category"] == ["", *sorted(categories)]
    # before any verification every pair is unverified, and the filter offers just that
    assert {c["data-verdicts"] for c in page.cards} == {"unverified"} and page.options["f-verdict"] == [
        "",
        "unverified",
    ]
    pairs = {i["lineage"]["artifacts"]["candidate"]: i["pair"] for i in items}
    assert len(page.images) == sum(
        3 if pair.get("mask") else 2 for pair in pairs.values()
    )  # natural, mask, manipulated
    assert all(href == src and (run / src).is_file() for src, href in page.images)


def test_text_from_the_run_is_escaped(demo_run, tmp_path):
    from conftest import copy_run

    from perceptforge.outputs.report import write_report
    from perceptforge.store.rundir import RunDir

    run = copy_run(demo_run[0], tmp_path / "run")
    for path in (run / "items").glob("*.json"):  # a value a model wrote, on every item of its pair
        item = json.loads(path.read_text())
        item["idea"]["new"] = "<script>alert(1)</script>"
        path.write_text(json.dumps(item))
    page = open(write_report(RunDir(run))).read()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert len(re.findall(r"<script>", page)) == 1  # the filter's own


def test_gates_are_shown_against_their_limits(demo_run):
    from perceptforge.outputs.report import gate_chips, gate_status

    assert gate_status(0.05, {"at_most": 0.1}) == "pass" and gate_status(0.09, {"at_most": 0.1}) == "near"
    assert gate_status(0.11, {"at_most": 0.1}) == "fail" and gate_status(11.0, {"at_least": 12.0}) == "fail"
    assert gate_status(12.5, {"at_least": 12.0}) == "near" and gate_status(0.997, {"at_least": 0.9}) == "pass"
    run, _ = demo_run
    record = json.loads((run / "gates" / "1-B1.json").read_text())
    chips = gate_chips(record)
    # every measurement with a limit (an ear's `ear_changed:left` takes `ear_changed`'s), none without one
    assert {c["name"].split(":")[0] for c in chips} == set(record["limits"]) & {
        m.split(":")[0] for m in record["measurements"]
    }
    assert all(c["status"] == "pass" or c["status"] == "near" for c in chips)  # the pair passed every gate
    page = (run / "report.html").read_text()
    assert page.count('class="gate ') >= len(chips) and "face_oval_changed" in page
