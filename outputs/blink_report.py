"""RUN_DIR/report.html for a BLINK-style run: every item under its task, its images with the marks drawn
in, the question, the choices with the answer marked, and the random-choice accuracy; the quarantined
units and the skipped tasks with why; a bar chart of items per task."""

from __future__ import annotations

import html
import json

from perceptforge.fileio import atomic_write_text
from perceptforge.outputs.report import CSS, bar_chart, counted, image_src, quarantine_table, skipped_list
from perceptforge.store.rundir import RunDir

LETTERS = "ABCDE"
# BLINK's items are judged on their marks (a label's place, a box's edge): shown at up to 440 px, not as the
# MVP report's 220 px thumbnails; a click opens the image at full size.
BLINK_CSS = ".imgs{flex-wrap:wrap} .imgs img{width:auto;height:auto;max-width:440px;max-height:440px}"


def item_card(run: RunDir, item: dict) -> str:
    figures = "".join(
        f"<figure><a href='{image_src(run, im['path'])}'><img src='{image_src(run, im['path'])}' loading='lazy'></a>"
        f"<figcaption>image {k + 1} · {im['width']}×{im['height']}</figcaption></figure>"
        for k, im in enumerate(item["images"])
    )
    choices = " · ".join(
        f"<span class='{'ok' if LETTERS[k] == item['answer'] else ''}'>({LETTERS[k]}) {html.escape(c)}</span>"
        for k, c in enumerate(item["choices"])
    )
    return (
        f"<div class='card'><div><span class='id'>{html.escape(item['id'])}</span>"
        f"<span class='tag'>{html.escape(item['task'])}</span><span class='tag'>{html.escape(item['variant'])}</span>"
        f"sources {html.escape(', '.join(item['sources']))} · random choice {item['random_choice']:.1f}%</div>"
        f"<div class='imgs'>{figures}</div><p>{html.escape(item['question'])}</p>"
        f"<div>{choices} — answer <b class='ok'>({item['answer']})</b></div></div>"
    )


def write_blink_report(run: RunDir) -> str:
    summary = json.loads(run.sub("summary.json").read_text()) if run.sub("summary.json").exists() else {}
    items = sorted(
        (json.loads(p.read_text()) for p in run.sub("items").glob("*.json")) if run.sub("items").exists() else [],
        key=lambda i: (i["task"], i["sources"], i["variant"], i["id"]),
    )
    sections, task = [], None
    for item in items:
        if item["task"] != task:
            task = item["task"]
            sections.append(f"<h2>{html.escape(task)}</h2>")
        sections.append(item_card(run, item))
    body = (
        f"<h1>perceptforge BLINK-style run</h1><div class='meta'>seed {summary.get('seed')} · {counted(len(items), 'item')} · "
        f"random choice over tasks {summary.get('random_choice_overall')}% · {summary.get('counts', {}).get('quarantined', 0)} quarantined</div>"
        f"<div class='charts'>{bar_chart('items per task', summary.get('items_per_task', {}))}</div>"
        + "".join(sections)
        + quarantine_table(run, run.quarantined())
        + skipped_list(summary.get("skipped_tasks", {}), "tasks skipped")
    )
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>perceptforge BLINK report</title><style>{CSS}{BLINK_CSS}</style></head><body>{body}</body></html>\n"
    atomic_write_text(run.sub("report.html"), page)
    return str(run.sub("report.html"))
