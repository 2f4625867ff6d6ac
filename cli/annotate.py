"""``perceptforge annotate``: human verification in Label Studio (serve, push, pull, verify)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from perceptforge.cli.app import console, new_app, waiting
from perceptforge.errors import PerceptforgeError
from perceptforge.flows.family import Family

app = new_app("Human verification in Label Studio: run a local server, add annotators, push candidates, pull verdicts.")

ANNOTATOR_POLL_S = 3.0  # how often a running `annotate serve` looks for annotators added since it started
URL = typer.Option(
    None, "--url", help="Label Studio URL (default: LABEL_STUDIO_URL, else the local server from `annotate serve`)"
)


DOCUMENT_ROOT = typer.Option(
    None, "--document-root", help="the server's local-files document root (default: the local server's)"
)


def served_root(given: Optional[Path]) -> Path:
    from perceptforge.annotation.server import local_setting

    root = local_setting(str(given) if given else None, "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT", "document_root")
    if not root:
        raise PerceptforgeError(
            "which folder does Label Studio serve files from? pass --document-root (the server's "
            "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT)"
        )
    return Path(root).resolve()


@app.command("serve")
def serve(
    port: int = typer.Option(8080, "--port"),
    venv: Path = typer.Option(Path(".venv-label-studio"), "--venv", help="the server's own virtual environment"),
    document_root: Path = typer.Option(
        Path("."), "--document-root", help="folder the server may serve images from (holds your run directories)"
    ),
) -> None:
    """Start Label Studio on 127.0.0.1 (first time: create its data folder and an admin account) until Ctrl-C."""
    from perceptforge.annotation.server import (
        Account,
        add_account,
        independent_accounts,
        move_annotators,
        read_local_credentials,
        start,
        state_folder,
        write_local_credentials,
    )

    data_dir = state_folder() / "data"
    local = read_local_credentials()
    account = (
        Account(local["email"], local["password"], local["token"])
        if local
        else Account.generate("admin@perceptforge.local")
    )
    if not (data_dir / "label_studio.sqlite3").exists():
        with waiting(
            f"initialising Label Studio's data folder {data_dir} and its admin account (`label-studio init`: about "
            "a minute, once); the server starts after it"
        ):
            add_account(venv, data_dir, document_root.resolve(), account)
    with waiting(f"starting Label Studio on 127.0.0.1:{port} (about 5 s)"):
        server = start(venv, data_dir, document_root.resolve(), port)
    servers = [server]
    # A plain `kill` (or make being stopped) must stop the servers too, not orphan them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        creds = write_local_credentials(server.url, account, document_root.resolve())
        if local:
            move_annotators(local["url"], server.url)
        console.print(f"Label Studio: [bold]{server.url}[/]  (log: {server.log})")
        console.print(f"sign in as {account.email}; password and API token are in {creds} (readable only by you)")
        started: set[str] = set()

        def start_new_annotators() -> None:
            """Each independent annotator's own server, the ones `add-annotator` made since the last look too."""
            for annotator in independent_accounts(server.url):
                if annotator["email"] in started:
                    continue
                with waiting(f"starting {annotator['email']}'s own Label Studio on {annotator['url']} (about 5 s)"):
                    servers.append(start(venv, Path(annotator["data_dir"]), root, annotator["port"]))
                started.add(annotator["email"])
                console.print(f"  {annotator['email']} labels at [bold]{annotator['url']}[/]")

        root = document_root.resolve()
        start_new_annotators()
        console.print("push a run with `perceptforge annotate push RUN_DIR`; Ctrl-C stops the servers")
        # an annotator added while this runs gets their server within a few seconds: no restart
        while server.process.poll() is None:
            time.sleep(ANNOTATOR_POLL_S)
            start_new_annotators()
    except KeyboardInterrupt:
        pass
    finally:
        for each in servers:
            each.stop()


@app.command("add-annotator")
def add_annotator_cmd(
    email: str = typer.Argument(..., help="the annotator's e-mail address (they sign in with it)"),
    venv: Path = typer.Option(Path(".venv-label-studio"), "--venv", help="the server's own virtual environment"),
    shared: bool = typer.Option(
        False,
        "--shared",
        help="an account on the main server (CODIS / MME-RealWorld authors and reviewers) instead of a server of "
        "the annotator's own, where nobody else's annotations can be seen",
    ),
) -> None:
    """Create an annotator account for the local server (`annotate serve`): by default on a Label Studio server of
    the annotator's own, which a running `annotate serve` starts within seconds; prints where its password is
    kept."""
    import json

    from perceptforge.annotation.server import add_annotator

    doing = (
        "on the main server"
        if shared
        else "and a Label Studio data folder of their own (`label-studio init`: about a minute)"
    )
    with waiting(f"creating an account for {email} {doing}"):
        path = add_annotator(venv, email, shared=shared)
    url = json.loads(path.read_text())["url"]
    when = "" if shared else " once a running `perceptforge annotate serve` has started their server (a few seconds)"
    console.print(
        f"{email} can sign in at {url}{when}; the password and API token are in {path} (readable only by you)",
        soft_wrap=True,  # a path broken over two lines cannot be copied
    )


PREDICT_ENDPOINT = typer.Option(
    None,
    "--predict-endpoint",
    help="CODIS runs: an OpenAI-compatible endpoint for the blind checks (no image, no context)",
)
MODEL = typer.Option(None, "--model", help="the model name at --predict-endpoint")


def _extra_checks(fam: Family, run_dir: Path, endpoint: Optional[str], model: Optional[str]):
    """The family's item checks through a model endpoint (CODIS's blind checks), or None when none is given."""
    if not endpoint:
        return None
    if not model:
        raise PerceptforgeError("--predict-endpoint needs --model")
    if fam.item_checks is None:
        raise PerceptforgeError(f"--predict-endpoint: {fam.title} items have no checks through a model")
    import importlib

    from perceptforge.backends.chat import ChatClient

    module, _, name = fam.item_checks.partition(":")
    check = getattr(importlib.import_module(module), name)
    client = ChatClient(base_url=endpoint, model=model)
    return lambda versions: check(versions, run_dir.resolve(), client)


@app.command("push")
def push_cmd(
    run_dir: Path = typer.Argument(..., help="run directory"),
    url: Optional[str] = URL,
    document_root: Optional[Path] = DOCUMENT_ROOT,
    predict_endpoint: Optional[str] = PREDICT_ENDPOINT,
    model: Optional[str] = MODEL,
    sample: Optional[str] = typer.Option(
        None,
        "--sample",
        help="push a seeded random sample of the items, stratified by category or task: a number (200) or a share "
        "(10%); a larger sample later extends this one; the verdicts then estimate the share of true items",
    ),
    sample_seed: int = typer.Option(0, "--sample-seed", help="the sample's seed (an extension takes the same one)"),
) -> None:
    """Create or update the run's projects and import the tasks they lack (never touches existing tasks): items
    to verify (MVP, BLINK-style), or, for a CODIS or MME-RealWorld run, an author and a review project with
    whatever tasks are due in them."""
    from perceptforge.annotation.labelstudio import connect
    from perceptforge.flows.registry import family_of_run

    fam = family_of_run(run_dir)
    checks = _extra_checks(fam, run_dir, predict_endpoint, model)
    if sample is not None:
        _draw_sample(fam, run_dir, sample, sample_seed)
    ls = connect(url)
    with console.status(f"pushing {run_dir} to {ls.url}"):
        report = fam.push(run_dir, ls, served_root(document_root), checks)
    if "sample" in report:
        console.print(f"the sample of {report['sample']} items (annotation/sample.json) is what is pushed")
    annotators = report.get("annotator_projects", {})
    for kind, pid in report["projects"].items():
        if kind not in annotators:
            console.print(f"  {kind}: {ls.url}/projects/{pid}/data")
            continue
        # independent review: each annotator labels on a server of their own; the owner's project adjudicates
        for server, own in annotators[kind].items():
            console.print(f"  {kind}: {server}/projects/{own}/data")
        console.print(f"  {kind} (adjudication): {ls.url}/projects/{pid}/data")
    console.print(f"imported {report['imported']} new tasks; {report['already_there']} were already there")


def _draw_sample(fam: Family, run_dir: Path, text: str, seed: int) -> None:
    """Draw (or extend) the run's verified sample before the push, and say what was drawn."""
    from perceptforge.logic.verified_sample import draw, parse_sample_size, read_sample, write_sample

    size = parse_sample_size(text)
    previous = read_sample(run_dir)
    record = draw(fam.strata(run_dir), size, seed, previous)
    write_sample(run_dir, record)
    grown = f" ({record['size'] - previous['size']} more than before)" if previous else ""
    per = ", ".join(f"{h} {len(s['drawn'])}/{s['population']}" for h, s in record["strata"].items())
    console.print(f"sample: {record['size']} items{grown}, seed {seed}: {per}", soft_wrap=True)


def _print_estimate(estimate: dict) -> None:
    from rich.table import Table

    table = Table(
        title=f"share of true items in the split, from the checked sample ({estimate['confidence']:.0%} interval)"
    )
    for col in ("stratum", "items", "checked", "true", "estimate", "interval"):
        table.add_column(col)
    for name, row in [*estimate["strata"].items(), ("all", estimate["overall"])]:
        share, ci = row["share"], row["interval"]
        table.add_row(
            name,
            str(row["population"]),
            str(row["checked"]),
            str(row["true"]),
            "—" if share is None else f"{share:.1%}",
            "—" if ci is None else f"{ci[0]:.1%} – {ci[1]:.1%}",
        )
    console.print(table)
    if estimate["not_counted"]:
        console.print(f"{estimate['not_counted']} sampled items not decided yet (not counted)")


def _print_verification(summary: dict) -> None:
    from rich.table import Table

    console.print(
        f"{summary['items']} items: "
        + ", ".join(f"{n} {s}" for s, n in summary["status"].items())
        + f"; {summary['corrected']} kept with corrections; {summary['invalid_annotations']} invalid annotations"
    )
    table = Table(title="agreement on accept / reject (two annotators)")
    for col in ("kind", "items", "% agreement", "Cohen's kappa"):
        table.add_column(col)
    for kind, row in summary["agreement"].items():
        table.add_row(
            kind,
            str(row["items"]),
            *("—" if row[k] is None else str(row[k]) for k in ("percent_agreement", "cohens_kappa")),
        )
    console.print(table)
    if "estimate" in summary:
        _print_estimate(summary["estimate"])


def _print_authoring(summary: dict, run_dir: Path) -> None:
    passed = f" ({summary['review_pass_rate']}% passed)" if summary["reviews"] else ""
    console.print(
        f"{summary['items']} items: "
        + ", ".join(f"{n} {s}" for s, n in summary["status"].items())
        + f"; {summary['reviews']} reviews{passed}, {summary['revisions']} revisions, "
        f"{summary['invalid_annotations']} invalid annotations"
    )
    agreement = summary["reviewer_agreement"]
    if agreement["items"]:
        console.print(
            f"reviewer agreement over {agreement['items']} pairs: {agreement['percent_agreement']}% "
            f"(Cohen's kappa {'—' if agreement['cohens_kappa'] is None else agreement['cohens_kappa']})"
        )
    for check, n in summary["flagged"].items():
        console.print(f"  [yellow]flagged[/] {n} item(s) by {check}")
    # paths whole on one line, so they can be copied
    console.print(f"decisions: [bold]{(run_dir / 'authoring' / 'decisions.jsonl').resolve()}[/]", soft_wrap=True)
    console.print(f"report:    [bold]{summary['report']}[/]", soft_wrap=True)


@app.command("pull")
def pull_cmd(
    run_dir: Path = typer.Argument(..., help="run directory"),
    url: Optional[str] = URL,
    predict_endpoint: Optional[str] = PREDICT_ENDPOINT,
    model: Optional[str] = MODEL,
) -> None:
    """Decide every item from its annotations; write RUN_DIR/verification/ and agreement into the summary.
    A CODIS or MME-RealWorld run: every item's versions and status into RUN_DIR/authoring/."""
    from perceptforge.annotation.labelstudio import connect
    from perceptforge.flows.registry import family_of_run

    fam = family_of_run(run_dir)
    checks = _extra_checks(fam, run_dir, predict_endpoint, model)
    ls = connect(url)
    with console.status(f"pulling annotations from {ls.url}"):
        summary = fam.pull(run_dir, ls, checks)
    if "reviewer_agreement" in summary:
        _print_authoring(summary, run_dir)
        return
    _print_verification(summary)
    console.print(f"decisions: [bold]{(run_dir / 'verification' / 'decisions.jsonl').resolve()}[/]", soft_wrap=True)


@app.command("verify")
def verify_cmd(
    run_dir: Path = typer.Argument(..., help="run directory"),
    url: Optional[str] = URL,
    document_root: Optional[Path] = typer.Option(None, "--document-root"),
    now: bool = typer.Option(False, "--now", help="pull what is there now instead of waiting"),
    timeout_s: float = typer.Option(3600, "--timeout", help="seconds to wait for every item's annotations"),
    poll_s: float = typer.Option(30, "--poll", help="seconds between looks"),
) -> None:
    """The verify flow: push, wait for two annotators per item (or --now), pull."""
    from perceptforge.settings import configure_prefect

    configure_prefect()
    from perceptforge.flows.verify import verify_flow

    summary = verify_flow(
        run_dir=str(run_dir.resolve()),
        document_root=str(served_root(document_root)),
        url=url,
        now=now,
        timeout_s=timeout_s,
        poll_s=poll_s,
    )
    if summary["still_waiting"]:
        console.print(f"[yellow]timed out:[/] {summary['still_waiting']} items still lack annotations")
    _print_verification(summary)
