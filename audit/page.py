"""``audit.html``: one self-contained page (inline SVG charts, thumbnails as data URLs) a person can open
anywhere: each check passed or failed with its figures, and every flagged item with its picture and why.
The page is a Jinja2 template (``templates/audit.html.j2``) with autoescaping: text read from a release is never
markup."""

from __future__ import annotations

import base64
import io
from functools import cache
from pathlib import Path
from typing import Any

from perceptforge.audit.items import AuditItem
from perceptforge.outputs.report import bar_chart

MAX_FLAGS_SHOWN = 300  # the JSON has all of them
CHARTS = (
    ("answer_letters", "answer letters"),
    ("expected_letters", "expected if uniform"),
    ("per_category_level", "items per category and level"),
)
# per-row tables among a check's figures: key → (title, whether its cells are counts of answer letters)
TABLES = {
    "per_category": ("per category", False),
    "answer_letters_per_category": ("answer letters per category", True),
    "true_items_estimate": ("share of true items, from the checked random sample", False),
}


@cache
def _template() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("perceptforge.audit", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template("audit.html.j2")


def thumbnail(path: str) -> str:
    """A small JPEG of the image as a data URL."""
    from PIL import Image

    with Image.open(path) as opened:
        small = opened.convert("RGB")
    small.thumbnail((128, 128))
    buf = io.BytesIO()
    small.save(buf, "JPEG", quality=80)
    return f"data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()}"


def shown(value: Any) -> str:
    """A figure as a person reads it: whole numbers without ``.0``, none as a dash, lists and mappings in words."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(shown(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {shown(v)}" for k, v in value.items())
    return str(value)


def letter_columns(rows: dict[str, dict]) -> list[str]:
    return sorted({letter for row in rows.values() for letter in row})


def table(key: str, rows: dict[str, dict]) -> dict:
    """A per-row figure as a table: answer letters in order A B C …, a letter a row never uses counted 0."""
    title, letters = TABLES[key]
    if letters:
        columns = letter_columns(rows)
        body = [(name, [shown(row.get(c, 0)) for c in columns]) for name, row in rows.items()]
    else:
        columns = list(dict.fromkeys(c for row in rows.values() for c in row))
        body = [(name, [shown(row.get(c)) for c in columns]) for name, row in rows.items()]
    return {"title": title, "columns": columns, "rows": body}


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def clauses(summary: str) -> list[str]:
    """A check's summary, one finding per line: split at ``; `` outside parentheses."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(summary):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth == 0 and summary[k + 1 : k + 2] == " ":
            parts.append(summary[start:k])
            start = k + 2
    parts.append(summary[start:])
    return [p.strip() for p in parts if p.strip()]


def check_view(check: dict) -> dict:
    state, state_text = {True: ("pass", "passed"), False: ("fail", "FAILED"), None: ("skip", "not checked")}[
        check["passed"]
    ]
    figures = check["figures"]
    return {
        "name": check["name"],
        "title": check["name"].replace("_", " "),
        "state": state,
        "state_text": state_text,
        # a summary of several findings reads as one line each
        "summary_lines": clauses(check["summary"]),
        "scalars": [(k.replace("_", " "), shown(v)) for k, v in figures.items() if not isinstance(v, dict)],
        "charts": [
            bar_chart(title, {str(k): v for k, v in figures[key].items()}) for key, title in CHARTS if figures.get(key)
        ],
        "tables": [table(key, figures[key]) for key in TABLES if figures.get(key)],
        "flagged": f"{plural(len(check['flags']), 'item')} flagged",
    }


def flag_view(flag: dict, items: dict[str, AuditItem]) -> dict:
    item = items.get(flag["item"])
    return {
        "check": flag["check"].replace("_", " "),
        "item": flag["item"],
        "question": item.question if item else "",
        "pictures": [thumbnail(p) for p in item.images if Path(p).is_file()] if item else [],
        "detail": [(k.replace("_", " "), shown(v)) for k, v in flag.items() if k not in ("item", "check")],
    }


def corpus_section(view: dict | None) -> dict | None:
    """The gate corpus's figures as the page shows them beside the human verification: a summary, whether they
    describe this split's gates, and a table of gates × defect kinds (the last column the good pairs stopped)."""
    if view is None:
        return None
    targets = view["targets"]
    summary = (
        f"On {plural(view['pairs'], 'pair')} labelled good or bad by looking ({view['bad']} bad, {view['good']} good; "
        f"measured {view['date']}), the gates stopped {shown(view['recall'])}% of the bad pairs"
        + (f" (target at least {shown(targets.get('recall %'))}%)" if targets.get("recall %") is not None else "")
        + f" and {shown(view['false_quarantines'])}% of the good ones"
        + (
            f" (false quarantines; target at most {shown(targets.get('false quarantines %'))}%)"
            if targets.get("false quarantines %") is not None
            else " (false quarantines)"
        )
        + f"; {plural(view['misses'], 'bad pair')} passed every gate."
    )
    if view["stale"] is None:
        state = ("skip", f"this split's gate limits are unknown; the figures are for limits {view['fingerprint']}")
    elif view["stale"]:
        state = (
            "fail",
            f"stale: measured with gate limits {view['fingerprint']}, this split was gated with "
            f"{view['split_fingerprint']}; rerun python benchmarks/gate_corpus/measure.py",
        )
    else:
        state = ("pass", f"measured with this split's gate limits ({view['fingerprint']})")
    rows = view["rows"]
    columns = list(dict.fromkeys(c for row in rows.values() for c in row))
    return {
        "summary": summary,
        "state": state[0],
        "state_text": state[1],
        "columns": columns,
        "rows": [(name, [shown(row.get(c)) for c in columns]) for name, row in rows.items()],
    }


def audit_page(doc: dict, items: dict[str, AuditItem]) -> str:
    flags = [f for c in doc["checks"] for f in c["flags"]]
    records = {i.pair or i.id for i in items.values()}
    questions = doc["items"]
    # the report counts items, the audit counts questions: a Yes/No pair item asks two
    note = (
        f"(A Yes/No pair asks two questions, one per image: {plural(len(records), 'item')} in the report's terms.)"
        if items and len(records) != questions
        else ""
    )
    return _template().render(
        verdict="passed" if doc["passed"] else "FAILED",
        passed=doc["passed"],
        counted=plural(questions, "question"),
        benchmark=doc["benchmark"],
        inputs=", ".join("this folder" if i == "." else i for i in doc["inputs"]),
        doc_items_note=note,
        notes=doc.get("notes", []),
        checks=[check_view(c) for c in doc["checks"]],
        corpus=corpus_section(doc.get("gate_corpus")),
        flags=[flag_view(f, items) for f in flags[:MAX_FLAGS_SHOWN]],
        more=max(0, len(flags) - MAX_FLAGS_SHOWN),
    )
