"""RUN_DIR/report.html for a human-authored run (CODIS, MME-RealWorld): every item's latest version (the
draft until Label Studio has an authoring) with its picture, its content, its status, the reviews and the
automatic checks it failed; per-category and per-status bars; the quarantined sources with why.

Pictures are display copies only (``display/``: at most 768 px, the MME-RealWorld target outlined, and a crop
of the target at full resolution beside it); the item's own image stays the original file."""

from __future__ import annotations

import html
import json
from collections import Counter

from PIL import ImageDraw

from perceptforge.data.schema import AuthoredItem, CodisContent
from perceptforge.fileio import atomic_write_bytes, atomic_write_text
from perceptforge.outputs.report import CSS, bar_chart, quarantine_table
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir

DISPLAY_SIDE = 768
LETTERS = "ABCDE"


def latest_items(run: RunDir) -> list[AuthoredItem]:
    """Each item's latest version: from the last ``annotate pull`` when there was one, else the drafts."""
    folder = run.sub("authoring", "items") if run.sub("authoring", "items").is_dir() else run.sub("drafts")
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [AuthoredItem.model_validate_json(p.read_text()) for p in paths]


def display_images(run: RunDir, item: AuthoredItem) -> list[tuple[str, str]]:
    """(run-relative path, caption) of the display copies: the whole picture, and the target crop."""
    import io

    image = load_rgb(run.inside(item.image.path))
    target = getattr(item.content, "target", None)
    out: list[tuple[str, str]] = []
    scale = min(1.0, DISPLAY_SIDE / max(image.size))
    whole = image.resize((round(image.width * scale), round(image.height * scale))) if scale < 1 else image.copy()
    if target is not None:
        ImageDraw.Draw(whole).rectangle(
            [target.x0 * scale, target.y0 * scale, target.x1 * scale, target.y1 * scale], outline=(255, 0, 0), width=3
        )
    pad = 0.25
    crops = [(whole, f"{item.image.width}x{item.image.height} (display copy)")]
    if target is not None:
        w, h = target.x1 - target.x0, target.y1 - target.y0
        box = (
            max(0, int(target.x0 - pad * w)),
            max(0, int(target.y0 - pad * h)),
            min(image.width, int(target.x1 + pad * w) + 1),
            min(image.height, int(target.y1 + pad * h) + 1),
        )
        crops.append((image.crop(box), "the target at full resolution"))
    for k, (picture, caption) in enumerate(crops):
        buf = io.BytesIO()
        picture.save(buf, "JPEG", quality=85)
        rel = f"display/{item.version_id}-{k}.jpg"
        atomic_write_bytes(run.sub(rel), buf.getvalue())
        out.append((rel, caption))
    return out


def content_html(item: AuthoredItem) -> str:
    c = item.content
    if isinstance(c, CodisContent):
        return (
            f"<p><b>{html.escape(c.question)}</b></p><table>"
            + "".join(
                f"<tr><td>context {k}</td><td>{html.escape(ctx)}</td><td class='ok'>{html.escape(ans)}</td></tr>"
                for k, ctx, ans in ((1, c.context_1, c.answer_1), (2, c.context_2, c.answer_2))
            )
            + "</table>"
        )
    options = c.choices
    listed = "<br>".join(
        f"<span class='{'ok' if LETTERS[k] == c.answer else ''}'>({LETTERS[k]}) {html.escape(o)}</span>"
        for k, o in enumerate(options)
    )
    return f"<p><b>{html.escape(c.question)}</b></p><div>{listed}</div>"


def item_card(run: RunDir, item: AuthoredItem) -> str:
    figures = "".join(
        f"<figure><img src='{html.escape(rel, quote=True)}' loading='lazy'>"
        f"<figcaption>{html.escape(cap)}</figcaption></figure>"
        for rel, cap in display_images(run, item)
    )
    flags = "".join(f"<li class='bad'>{html.escape(c.name)}: {html.escape(c.detail)}</li>" for c in item.flags)
    reviews = "".join(
        f"<li class='{'ok' if r.passed else 'bad'}'>{html.escape(r.reviewer)}: "
        f"{'passed' if r.passed else 'failed'} {html.escape(r.comment)}</li>"
        for r in item.reviews
    )
    author = item.lineage.author or f"draft by {item.lineage.draft_backend.name}"
    url = item.lineage.task.get("url")
    link = f" · <a href='{html.escape(str(url), quote=True)}'>Label Studio task</a>" if url else ""
    return (
        f"<div class='card'><div><span class='id'>{html.escape(item.version_id)}</span>"
        f"<span class='tag'>{html.escape(category_label(item))}</span><span class='tag'>{item.status}</span>"
        f"source {html.escape(item.lineage.source_id)} · {html.escape(author)}{link}</div>"
        f"<div class='imgs'>{figures}</div>{content_html(item)}"
        + (f"<ul>{flags}</ul>" if flags else "")
        + (f"<ul>{reviews}</ul>" if reviews else "")
        + "</div>"
    )


def category_label(item: AuthoredItem) -> str:
    c = item.content
    return c.category if isinstance(c, CodisContent) else f"{c.domain or '(domain to choose)'} / {c.subtask}"


def write_authored_report(run: RunDir) -> str:
    summary = json.loads(run.sub("summary.json").read_text()) if run.sub("summary.json").exists() else {}
    items = latest_items(run)
    flow = summary.get("flow", "authored")
    body = (
        f"<h1>perceptforge {html.escape(flow)} run</h1><div class='meta'>seed {summary.get('seed')} · "
        f"{len(items)} items · drafter {html.escape(str(summary.get('drafter')))} · "
        f"{summary.get('counts', {}).get('quarantined', 0)} quarantined</div>"
        f"<div class='charts'>{bar_chart('items per category', dict(Counter(category_label(i) for i in items)))}"
        f"{bar_chart('items per status', dict(Counter(i.status for i in items)), '#55A868')}"
        f"{bar_chart('flagged checks', dict(Counter(c.name for i in items for c in i.flags)), '#C44E52')}</div>"
        + "".join(item_card(run, i) for i in items)
        + quarantine_table(run, run.quarantined())
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>perceptforge {html.escape(flow)} report</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>\n"
    )
    atomic_write_text(run.sub("report.html"), page)
    return str(run.sub("report.html"))
