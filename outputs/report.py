"""RUN_DIR/report.html: a contact sheet of every pair (natural, mask overlay, manipulated, the value the
edit rendered, gate measurements, every item's id, question and answer), the quarantined units with their
reasons, measurements and rejected masks, the skipped categories with why, and bar charts of items per
category and level and of failures per stage. Self-contained: the images it shows are the run's own files,
linked by relative path (each opens at full size); the charts are inline SVG drawn by matplotlib. The page is a
Jinja2 template (``templates/report.html.j2``) with autoescaping, with a filter of the pairs by category and by
verdict (kept, rejected, unverified, sampled…), and the gates of each pair against their limits: pass, near or fail."""

from __future__ import annotations

import html
import io
import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from markupsafe import Markup
from PIL import Image

from perceptforge.fileio import atomic_write_text
from perceptforge.logic.gates import unedged_outline_pixels
from perceptforge.logic.verified_sample import drawn_ids, read_sample
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# No date, creator or format in the charts' SVG: a report of the same run is the same bytes.
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}

CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{margin-bottom:4px} .meta{color:#666;margin-bottom:18px}
.charts{display:flex;gap:32px;flex-wrap:wrap;margin-bottom:24px}
.card{background:#fff;border:1px solid #ddd;border-radius:8px;padding:12px;margin-bottom:16px}
.imgs{display:flex;gap:8px} .imgs figure{margin:0;text-align:center;font-size:12px;color:#555}
.imgs img{width:220px;height:220px;object-fit:contain;background:#eee;border-radius:4px}
table{border-collapse:collapse;font-size:13px;margin-top:8px;width:100%}
td{border-top:1px solid #eee;padding:4px 6px;vertical-align:top} .ok{color:#0a7d32;font-weight:600}
.tag{display:inline-block;background:#eef;border-radius:4px;padding:1px 6px;margin-right:6px;font-size:12px}
.id{font-family:ui-monospace,monospace;font-size:11px;color:#777;margin-right:6px}
.measure{font-size:12px;color:#555;margin:6px 0} .q td{font-size:12px}
.tag.kept{background:#d7f0dd} .tag.rejected,.tag.invalid_correction{background:#f6d5d5} .tag.conflict,.tag.disagreement{background:#fbe7c6}
.tag.sampled{background:#dde6ff;border:1px solid #6b86d6}
.gate{display:inline-block;border-radius:4px;padding:1px 6px;margin:2px 4px 2px 0;font-size:12px;border:1px solid}
.gate.pass{background:#eef7ef;border-color:#9cc9a5} .gate.near{background:#fff4d6;border-color:#e0b84c}
.gate.fail{background:#f9dede;border-color:#d47a7a;font-weight:600}
.filters{margin:0 0 14px;font-size:14px} .filters label{margin-right:12px} #f-count{color:#666}
figcaption a{color:#557}
"""


def bar_figure(counts: Mapping[str, float], colour: str = "#4C72B0") -> Figure:
    """One horizontal bar per label, top to bottom in the mapping's order, each with its value at its end."""
    from matplotlib.figure import Figure

    labels, values = [str(label) for label in counts], list(counts.values())
    fig = Figure(figsize=(4.5, 0.25 * len(labels) + 0.2), dpi=72)
    ax = fig.add_subplot()
    bars = ax.barh(range(len(labels)), values, height=0.8, color=colour)
    ax.set_yticks(range(len(labels)), labels, fontsize=9)
    ax.invert_yaxis()  # the first label on top, as the mapping reads
    # The values are written on the bars, so an x axis would only repeat them.
    ax.xaxis.set_visible(False)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.bar_label(bars, labels=[str(v) for v in values], padding=4, fontsize=9)
    ax.margins(x=0.12, y=0.02)  # room for the longest bar's value
    return fig


def bar_chart(title: str, counts: Mapping[str, float], colour: str = "#4C72B0") -> str:
    """A titled chart of ``counts`` as inline SVG, drawn by matplotlib.

    Text stays text (``svg.fonttype: none``): the page can be searched and the labels read in its source;
    a fixed hash salt and no date make the same counts give the same bytes on every run; labels are never
    read as mathtext, so a ``$`` in a category name is shown as written."""
    if not counts:
        return f"<div><h3>{html.escape(title)}</h3><p>none</p></div>"
    import matplotlib

    fig = bar_figure(counts, colour)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "perceptforge", "text.parse_math": False}):
        fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.05, transparent=True, metadata=SVG_METADATA)
    svg = buf.getvalue()
    return f"<div><h3>{html.escape(title)}</h3>{svg[svg.index('<svg') :]}</div>"


def image_src(run: RunDir, rel: str) -> str:
    """A run-relative image path for an ``src`` attribute: refused if it leaves the run, always escaped."""
    run.inside(rel)
    return html.escape(rel, quote=True)


def mask_overlay(run: RunDir, natural_path: str, mask_path: str, outline: bool = False) -> str:
    """Natural image with the mask tinted red, stored content-addressed; returns its path. With ``outline`` (a
    background edit), the points where the kept subject's outline runs through no edge of the photo are marked
    yellow: where a strip of the old scene may be kept or a part of the subject left out, for an annotator to
    look at closely."""
    natural = np.asarray(load_rgb(run.inside(natural_path)), np.float32)
    run.inside(mask_path)
    mask = run.load_mask(mask_path)
    tinted = natural.copy()
    tinted[mask] = tinted[mask] * 0.45 + np.array([255, 40, 40], np.float32) * 0.55
    if outline:
        import cv2

        points = unedged_outline_pixels(natural.astype(np.uint8), ~mask)
        tinted[cv2.dilate(points.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)] = (255, 230, 0)
    return run.store_image(Image.fromarray(tinted.astype(np.uint8))).path


def verification_by_item(run: RunDir) -> dict[str, dict]:
    """Human verification decisions (``annotate pull``) by item id; empty before any pull."""
    path = run.sub("verification", "decisions.jsonl")
    return {d["item_id"]: d for d in map(json.loads, path.read_text().splitlines())} if path.exists() else {}


def item_id_html(item_id: str, decision: dict) -> str:
    """The item id, linked to its Label Studio task once it was pushed and pulled."""
    url = decision.get("label_studio", {}).get("url")
    shown = html.escape(item_id)
    if url:
        shown = f"<a href='{html.escape(url, quote=True)}'>{shown}</a>"
    return f"<span class='id'>{shown}</span>"


def decision_html(decision: dict) -> str:
    """What the annotators said about an item: reject reasons and the corrections applied, each with who."""
    lines = [
        f"rejected by {html.escape(r['annotator'])}: {html.escape(r['reason'])}"
        for r in decision.get("reject_reasons", [])
    ]
    lines += [
        f"corrected {html.escape(c['field'])} → <b>{html.escape(c['value'])}</b> by {html.escape(', '.join(c['annotators']))}"
        for c in decision.get("corrections", [])
    ]
    if decision.get("detail"):
        lines.append(html.escape(decision["detail"]))
    return "".join(f"<div class='measure'>{line}</div>" for line in lines)


def verification_charts(verification: dict | None) -> str:
    """Decisions per status and agreement per question kind, once annotations were pulled."""
    if not verification:
        return ""

    def shown(v):  # undefined (no pairs, or kappa with one label throughout)
        return "—" if v is None else v

    rows = "".join(
        f"<tr><td>{html.escape(kind)}</td><td>{row['items']}</td><td>{shown(row['percent_agreement'])}</td>"
        f"<td>{shown(row['cohens_kappa'])}</td></tr>"
        for kind, row in verification["agreement"].items()
    )
    return (
        bar_chart("human verification", verification["status"], "#55A868")
        + f"<div><h3>agreement (accept / reject)</h3><table><tr><th>kind</th><th>items</th><th>%</th><th>kappa</th></tr>{rows}</table></div>"
    )


def rendered_text(rendered: dict | None) -> str:
    """What the edit put into the image, as a person reads it."""
    if not rendered:
        return "not recorded"
    how = {"donor": f"donor photo <b>{html.escape(str(rendered.get('donor')))}</b>", "prompt": "drawn from its text"}
    if rendered["how"] == "colour":
        colour = html.escape(str(rendered["colour"]), quote=True)
        swatch = f"<span style='display:inline-block;width:12px;height:12px;background:{colour}'></span>"
        return f"recoloured to {swatch} {colour} by {html.escape(rendered['backend'])}"
    return f"{how.get(rendered['how'], rendered['how'])} by {html.escape(rendered['backend'])}"


# Near a limit, on the passing side: above 80% of an "at most", below 110% of an "at least" (a share that must
# reach 0.9 has only 0.1 of room above it; 0.997 of it changed is comfortably through)
NEAR_MOST, NEAR_LEAST = 0.8, 1.1


def gate_status(value: float, limit: dict) -> str:
    """``pass``, ``near`` or ``fail``, against ``{at_most, at_least}``."""
    most, least = limit.get("at_most"), limit.get("at_least")
    if (most is not None and value > most) or (least is not None and value < least):
        return "fail"
    if (most is not None and value > most * NEAR_MOST) or (least is not None and value < least * NEAR_LEAST):
        return "near"
    return "pass"


def gate_chips(record: dict | None) -> list[dict]:
    """The pair's gate measurements that have a limit, each with it and its status, the failing and near ones first."""
    if not record:
        return []
    limits = record.get("limits", {})
    chips = []
    for name, value in sorted(record.get("measurements", {}).items()):
        limit = limits.get(name.split(":")[0])
        if limit is None:
            continue
        bound = f"≤ {limit['at_most']:.3g}" if limit.get("at_most") is not None else f"≥ {limit['at_least']:.3g}"
        chips.append({"name": name, "value": f"{value:.3g}", "bound": bound, "status": gate_status(value, limit)})
    order = {"fail": 0, "near": 1, "pass": 2}
    return sorted(chips, key=lambda c: order[c["status"]])


def measurements_text(*records: dict | None) -> str:
    values = {k: v for r in records if r for k, v in r.get("measurements", {}).items()}
    return " · ".join(f"{k} {v:.3g}" for k, v in sorted(values.items())) or "none"


def quarantine_table(run: RunDir, quarantined: list[dict]) -> str:
    """Every quarantined unit: its stage, reason, measurements and, for a rejected mask, the mask itself."""
    if not quarantined:
        return ""
    rows = []
    for q in sorted(quarantined, key=lambda r: r["unit"]):
        picture = ""
        if q.get("outlined"):  # a referee gate's failure: the pair, the failing region outlined
            picture = f"<img src='{image_src(run, q['outlined'])}' style='width:240px;height:120px;object-fit:contain'>"
        elif q.get("mask") and q.get("natural"):
            overlay = mask_overlay(run, q["natural"], q["mask"])
            picture = f"<img src='{image_src(run, overlay)}' style='width:120px;height:120px;object-fit:contain'>"
        rows.append(
            f"<tr><td class='id'>{html.escape(q['unit'])}</td><td>{html.escape(q['stage'])}</td>"
            f"<td>{html.escape(q['reason'])}: {html.escape(q.get('detail', ''))}</td>"
            f"<td>{html.escape(measurements_text(q))}</td><td>{picture}</td></tr>"
        )
    return (
        "<h2>quarantined units</h2><table class='q'><tr><th>unit</th><th>stage</th><th>why</th>"
        f"<th>measurements</th><th>mask</th></tr>{''.join(rows)}</table>"
    )


def skipped_list(skipped: dict[str, str], title: str = "categories this profile cannot render") -> str:
    if not skipped:
        return ""
    rows = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in sorted(skipped.items()))
    return f"<h2>{html.escape(title)}</h2><ul>{rows}</ul>"


def counted(n: int, noun: str) -> str:
    """``1 pair``, ``2 pairs``: the report's header reads as a sentence."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _template() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("perceptforge.outputs", "templates"),
        autoescape=select_autoescape(default=True),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template("report.html.j2")


def question_row(item: dict, decision: dict, sampled: bool) -> dict:
    """One item's line on its pair's card: its id (linked to its Label Studio task once pulled), kind, verdict
    badges, question, options and answer."""
    q = item["question"]
    if q["kind"] == "yes_no_pair":
        answer, options = f"natural: {q['answer_natural']} · manipulated: {q['answer_manipulated']}", []
    else:  # a single-image question says which image it asks about, as the annotator sees it
        answer = f"{q['answer']}" + (f" (on the {q['image']} image)" if q.get("image") else "")
        options = [("ABCDE"[k], o) for k, o in enumerate(q["options"])]
    badges = [str(decision["status"])] if decision.get("status") else []
    if sampled:  # in the random sample whose verdicts estimate the whole split
        badges.append("sampled")
    return {
        "id": Markup(item_id_html(item["id"], decision)),
        "kind": f"{q['kind']} {q.get('level', '')}",
        "badges": badges,
        "question": q["question"],
        "options": options,
        "decision": Markup(decision_html(decision)),
        "answer": answer,
    }


def pair_card(run: RunDir, unit_items: list[dict], verdicts: dict[str, dict], sampled: set[str]) -> dict:
    """One pair's card: the natural image, its mask, the manipulated one (each linked at full size), what the
    edit rendered, the gates' measurements and every item with its verdict."""
    first = unit_items[0]
    pair, idea = first["pair"], first["idea"]
    figs = [("natural", pair["natural"]["path"])]
    # a pair whose photo is missing from the run (a tampered or half-copied run) shows no overlay, not a traceback
    if pair.get("mask") and run.inside(pair["natural"]["path"]).is_file():
        background = first["edit"]["kind"] == "background_substitution"
        figs.append(("mask", mask_overlay(run, pair["natural"]["path"], pair["mask"]["path"], background)))
    figs.append(("manipulated", pair["manipulated"]["path"]))
    rows = [question_row(i, verdicts.get(i["id"], {}), i["id"] in sampled) for i in unit_items]
    cat, unit = first["category"], first["lineage"]["artifacts"]["candidate"].split("/")[-1][: -len(".json")]
    statuses = {b for r in rows for b in r["badges"]}
    return {
        "unit": unit,
        "category": f"{cat['low']} {cat['name']}",
        "old": idea["old"],
        "new": idea["new"],
        "edit_kind": first["edit"]["kind"],
        "rendered": Markup(rendered_text(first["edit"].get("rendered"))),
        "high_level": idea.get("high_level_value", ""),
        "gates": measurements_text(run.read_record(f"masks/{unit}.json"), run.read_record(f"gates/{unit}.json")),
        "gate_chips": gate_chips(run.read_record(f"gates/{unit}.json")),
        "figures": [{"name": n, "src": image_src(run, p)} for n, p in figs],
        "rows": rows,
        "verdicts": sorted(statuses | ({"unverified"} if not statuses - {"sampled"} else set())),
    }


def write_report(run: RunDir) -> str:
    summary = json.loads(run.sub("summary.json").read_text()) if run.sub("summary.json").exists() else {}
    items = (
        [json.loads(p.read_text()) for p in sorted(run.sub("items").glob("*.json"))]
        if run.sub("items").exists()
        else []
    )
    by_unit: dict[str, list[dict]] = defaultdict(list)
    for item in items:
        by_unit[item["lineage"]["artifacts"]["candidate"]].append(item)
    per_cat_level = Counter(f"{i['category']['low']} {i['question'].get('level', '')}" for i in items)
    quarantined = run.quarantined()
    failures = Counter(q["stage"] for q in quarantined)
    verdicts = verification_by_item(run)
    sampled = drawn_ids(read_sample(run.path)) or set()
    cards = [pair_card(run, unit_items, verdicts, sampled) for _, unit_items in sorted(by_unit.items())]
    charts = (
        bar_chart("items per category and level", dict(sorted(per_cat_level.items())))
        + bar_chart("failures per stage", dict(sorted(failures.items())), "#C44E52")
        + verification_charts(summary.get("verification"))
    )
    page = _template().render(
        css=Markup(CSS),
        profile=str(summary.get("profile")),
        seed=summary.get("seed"),
        pairs=counted(len(by_unit), "pair"),
        items=counted(len(items), "item"),
        quarantined=sum(failures.values()),
        charts=Markup(charts),
        categories=sorted({c["category"] for c in cards}),
        verdicts=sorted({v for c in cards for v in c["verdicts"]}),
        cards=cards,
        quarantine=Markup(quarantine_table(run, quarantined)),
        skipped=Markup(skipped_list(summary.get("skipped_categories", {}))),
    )
    atomic_write_text(run.sub("report.html"), page)
    return str(run.sub("report.html"))
