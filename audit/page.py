"""``audit.html``: one self-contained page (inline SVG charts, thumbnails as data URLs) a person can open
anywhere: each check passed or failed with its figures, and every flagged item with its picture."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from perceptforge.audit.items import AuditItem
from perceptforge.outputs.report import bar_chart

CSS = """body{font-family:sans-serif;margin:24px;color:#222} table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left;vertical-align:top}
.pass{color:#2a7a3a}.fail{color:#b22}.skip{color:#888} .charts{display:flex;flex-wrap:wrap;gap:24px}
img{max-height:96px;margin-right:4px} section{margin-bottom:28px}"""
MAX_FLAGS_SHOWN = 300  # the JSON has all of them


def thumbnail(path: str) -> str:
    from PIL import Image

    with Image.open(path) as opened:
        small = opened.convert("RGB")
    small.thumbnail((128, 128))
    buf = io.BytesIO()
    small.save(buf, "JPEG", quality=80)
    return f"<img src='data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()}'>"


def figures_table(figures: dict) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(json.dumps(v, ensure_ascii=False))}</td></tr>"
        for k, v in figures.items()
        if not isinstance(v, dict)
    )
    return f"<table>{rows}</table>" if rows else ""


def per_category_table(per_category: dict, counts: bool = False) -> str:
    """Categories as rows; ``counts``: a letter table, where a letter no answer uses is 0."""
    import pandas as pd

    frame = pd.DataFrame.from_dict(per_category, orient="index")
    if counts:
        frame = frame.reindex(sorted(frame.columns), axis=1).fillna(0).astype(int)
    return frame.to_html(border=0, na_rep="—")


def section(check: dict) -> str:
    state = {True: ("pass", "passed"), False: ("fail", "FAILED"), None: ("skip", "not checked")}[check["passed"]]
    figures = check["figures"]
    charts = "".join(
        bar_chart(title, {str(k): v for k, v in figures[key].items()})
        for key, title in (
            ("answer_letters", "answer letters"),
            ("expected_letters", "expected if uniform"),
            ("per_category_level", "items per category and level"),
        )
        if figures.get(key)
    )
    extra = "".join(
        f"<h3>{title}</h3>{per_category_table(figures[key])}"
        for key, title in (
            ("per_category", "per category"),
            ("answer_letters_per_category", "answer letters per category"),
            ("true_items_estimate", "share of true items, from the checked random sample"),
        )
        if figures.get(key)
    )
    return (
        f"<section><h2>{html.escape(check['name'])} <span class='{state[0]}'>{state[1]}</span></h2>"
        f"<p>{html.escape(check['summary'])}</p>{figures_table(figures)}<div class='charts'>{charts}</div>{extra}"
        f"<p>{len(check['flags'])} items flagged</p></section>"
    )


def audit_page(doc: dict, items: dict[str, AuditItem]) -> str:
    flags = [f for c in doc["checks"] for f in c["flags"]]
    rows = []
    for flag in flags[:MAX_FLAGS_SHOWN]:
        item = items.get(flag["item"])
        pictures = "".join(thumbnail(p) for p in item.images if Path(p).is_file()) if item else ""
        detail = {k: v for k, v in flag.items() if k not in ("item", "check")}
        rows.append(
            f"<tr><td>{html.escape(flag['check'])}</td><td>{html.escape(flag['item'])}<br>"
            f"{html.escape(item.question if item else '')}</td><td>{pictures}</td>"
            f"<td>{html.escape(json.dumps(detail, ensure_ascii=False))}</td></tr>"
        )
    more = f"<p>… and {len(flags) - MAX_FLAGS_SHOWN} more in audit.json</p>" if len(flags) > MAX_FLAGS_SHOWN else ""
    if not flags:
        more = "<p>none: no item failed a check</p>"
    verdict = "passed" if doc["passed"] else "FAILED"
    body = (
        f"<h1>perceptforge audit: {verdict}</h1><p>{doc['items']} questions of {html.escape(doc['benchmark'])} "
        f"from {html.escape(', '.join('this folder' if i == '.' else i for i in doc['inputs']))}</p>"
        + "".join(f"<p><strong>note:</strong> {html.escape(n)}</p>" for n in doc.get("notes", []))
        + "".join(section(c) for c in doc["checks"])
        + "<section><h2>flagged items</h2><table><tr><th>check</th><th>item</th><th>pictures</th><th>figures</th></tr>"
        + "".join(rows)
        + f"</table>{more}</section>"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>perceptforge audit</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>\n"
    )
