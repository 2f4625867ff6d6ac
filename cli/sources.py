"""``perceptforge sources check``: before any run, which sources can serve which category or task, and why not."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from perceptforge.cli.annotate import DOCUMENT_ROOT, URL, served_root
from perceptforge.cli.app import console, new_app
from perceptforge.errors import PerceptforgeError, shown
from perceptforge.fileio import write_json
from perceptforge.flows.family import RunRequest
from perceptforge.flows.registry import family

app = new_app("Check a source folder before a run: what each image can serve, and why not.")


@app.callback()
def _group() -> None:
    """Check a source folder before a run."""


@app.command("check")
def check(
    source: Path = typer.Argument(..., help="source directory with images and their annotation file"),
    flow: str = typer.Option("mvp", "--flow", help="the family to check for: mvp or blink"),
    profile: str = typer.Option("local", "--profile", help="bundled profile name (local, gpu) or a YAML path"),
    select: Optional[str] = typer.Option(None, "--only", help="comma-separated categories or tasks (default: all)"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the table as JSON here"),
) -> None:
    """A table of which sources can serve which category (mvp) or task (blink) on this profile, each reason a
    source cannot, and a summary per category: the checks a run makes in its plan, without running."""
    fam = family(flow)
    with tempfile.TemporaryDirectory() as nowhere:  # the plan reads, never writes; it wants a run directory name
        request = RunRequest(
            source=str(source), out=str(Path(nowhere) / "run"), profile=profile, select=selected_ids(select, "--only")
        )
        found = fam.source_check(fam.plan(request))
    what = "category" if fam.select_option == "--categories" else "task"
    verdicts = found.verdicts
    sources = sorted({sid for column in verdicts.values() for sid in column}, key=_natural)
    console.print(f"[bold]{fam.name}[/]: which {what} each source of {source} can serve (✓) on profile {profile}")
    if len(sources) <= 24:  # a matrix a terminal can show: one row per category or task, one column per source
        table = Table()
        table.add_column(what)
        for sid in sources:
            table.add_column(escape(shown(sid)), justify="center")
        for column, by_source in verdicts.items():
            table.add_row(column, *("✓" if by_source.get(sid) is None else "✗" for sid in sources))
        console.print(table)
    for sid in sources:
        for column, by_source in verdicts.items():
            if by_source.get(sid) is not None:
                console.print(
                    f"  source {escape(shown(sid))} · {column}: {escape(shown(by_source[sid]))}", soft_wrap=True
                )
    for sid, why in sorted(found.bystanders.items(), key=lambda kv: _natural(kv[0])):
        console.print(f"  source {escape(shown(sid))}: {escape(shown(why))}", soft_wrap=True)
    console.print(f"[bold]per {what}:[/]")
    for column, by_source in verdicts.items():
        ok = sum(why is None for why in by_source.values())
        reasons = Counter(why for why in by_source.values() if why is not None)
        detail = "; ".join(f"{n} × {escape(shown(why))}" for why, n in reasons.most_common())
        line = f"  {column}: {ok} of {len(by_source)} sources" + (f" ({detail})" if detail else "")
        console.print(line, soft_wrap=True)
    for column, why in found.skipped.items():
        console.print(f"  {column}: none on this profile ({escape(shown(why))})", soft_wrap=True)
    if json_out:
        write_json(json_out, {"verdicts": verdicts, "skipped": found.skipped, "bystanders": found.bystanders})


def selected_ids(text: Optional[str], option: str) -> Optional[list[str]]:
    """The ids a comma-separated option names; None (all) only when it is not given: a selection that names none
    (``','``, ``''``) is a mistake, never a request for everything."""
    if text is None:
        return None
    ids = [c.strip() for c in text.split(",") if c.strip()]
    if not ids:
        raise PerceptforgeError(
            f"{option} {text!r} names no id: give comma-separated ids, or leave {option} out for all"
        )
    return ids


def _natural(sid: str) -> tuple:
    return (0, int(sid), "") if sid.isdigit() else (1, 0, sid)


outline_app = new_app("Draw the outlines of a source folder's regions in Label Studio, and write them back.")
app.add_typer(outline_app, name="outline")
ANNOTATION_FILE = typer.Option("annotations.json", "--annotation-file", help="the annotation file, in the folder")


@outline_app.command("push")
def outline_push(
    source: Path = typer.Argument(..., help="source directory with images and their annotation file"),
    url: Optional[str] = URL,
    document_root: Optional[Path] = DOCUMENT_ROOT,
    annotation_file: str = ANNOTATION_FILE,
) -> None:
    """One task per region whose outline a run uses (the subject, a `hair` region): its photo, its box, and its
    outline so far as a suggestion to correct. Pushing again adds only regions it lacks."""
    from perceptforge.annotation import outlines
    from perceptforge.annotation.labelstudio import connect

    ls = connect(url)
    with console.status(f"pushing the outlines of {source} to {ls.url}"):
        report = outlines.push(source, ls, served_root(document_root), annotation_file)
    console.print(f"imported {report['imported']} new tasks; {report['already_there']} were already there")
    console.print(f"draw them at [bold]{report['url']}[/], then `perceptforge sources outline pull {source}`")


@outline_app.command("pull")
def outline_pull(
    source: Path = typer.Argument(..., help="source directory with images and their annotation file"),
    url: Optional[str] = URL,
    annotation_file: str = ANNOTATION_FILE,
) -> None:
    """Write each region's newest drawn outline into the annotation file as its `segmentation`."""
    from perceptforge.annotation import outlines
    from perceptforge.annotation.labelstudio import connect

    ls = connect(url)
    with console.status(f"pulling outlines from {ls.url}"):
        report = outlines.pull(source, ls, annotation_file)
    for key in report["changed"]:
        console.print(f"  outline of image/annotation {escape(key)}: written")
    for key in report["removed"]:
        console.print(f"  outline of image/annotation {escape(key)}: removed (submitted with no polygon)")
    console.print(
        f"{len(report['changed'])} written, {len(report['removed'])} removed, {report['unchanged']} unchanged, "
        f"{report['waiting']} not drawn yet"
    )
