"""The scorer's speed, as issue 27 asks for it, measured in CPU time:

1. strict extraction beside VLMEvalKit's ``can_infer``, in this one process, on the same outputs: every
   released BLINK output (``--blink``: a folder of ``saved_outputs_<model>/`` folders, or of model folders
   as the BLINK repository's ``eval/saved_outputs/`` holds them; val and test), each given the item's
   number of options and, where BLINK words them the same for a task, their texts (``blink_tasks.yaml``;
   ``can_infer`` gets the same texts, or the letters where they are unknown). It prints both rates and the
   ratio ours/VLMEvalKit (best of ``--passes`` passes, interleaved so that the machine's other load falls
   on both; ours forgets the short outputs it remembers before each pass, and is also timed forgetting them
   before each output), and strict extraction's coverage and agreement against the official
   ``prediction`` letters over the same outputs. VLMEvalKit is not a dependency: ``--vlmevalkit`` names its source (the
   reference tarball, or a folder holding ``vlmeval/``), and only ``vlmeval/utils/matching_util.py`` is
   loaded, with a stand-in for the one logger it imports.
2. the whole ``perceptforge score perceptforge`` command (a new process, start-up included) on ``--n``
   items of our split, written as ``perceptforge export`` writes them, with ``--missing`` of the
   predictions left out: CPU seconds (user + system), items per CPU second, wall time, peak RSS; and the
   peak RSS on a tenth of the items, to show memory flat in the number of items.

python benchmarks/score_speed.py --blink DIR --vlmevalkit ../shared/reference/vlmevalkit/VLMEvalKit-e8e78f05.tar.gz
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import logging
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from pathlib import Path

MATCHING_UTIL = "vlmeval/utils/matching_util.py"

# outputs of a model answering our split's questions (as the measurement drew them)
MCQ_OUTPUTS = [
    "{L}",
    "({L})",
    "{L}.",
    "Answer: {L}",
    "**{L}**",
    "The answer is ({L}).",
    "I think it is {L}. The man changed his clothes.",
    "Looking at both images, the background was replaced, so the correct answer is:\n({L}) Substitute the background.",
    "I cannot tell.",
    "",
]
YES_NO_OUTPUTS = ["Yes", "No", "yes, it is.", "No, it is not.", "I think so.", "The woman is holding a gun."]
OPTIONS = [
    "Substitute the background.",
    "Replace the object held by the main subject.",
    "Change the main subject's clothes.",
    "Change the main subject's gesture.",
    "Introduce a group of people.",
]


def load_can_infer(source: Path):
    """VLMEvalKit's ``can_infer``, from its matching module alone (no VLMEvalKit install)."""
    if source.is_dir():
        code = (source / MATCHING_UTIL).read_text()
    else:
        with tarfile.open(source) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith(MATCHING_UTIL))
            code = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    for name in ("vlmeval", "vlmeval.smp"):
        sys.modules.setdefault(name, types.ModuleType(name))
    log = types.ModuleType("vlmeval.smp.log")
    log.get_logger = logging.getLogger  # type: ignore[attr-defined]
    sys.modules["vlmeval.smp.log"] = log
    module = types.ModuleType("matching_util")
    exec(compile(code, MATCHING_UTIL, "exec"), module.__dict__)  # noqa: S102 (the reference source, read above)
    return module.can_infer


def model_folders(folder: Path) -> list[Path]:
    named = sorted(p for p in folder.glob("saved_outputs_*") if p.is_dir())
    return named or sorted(p for p in folder.iterdir() if p.is_dir() and any(p.glob("*.json")))


def blink_outputs(folder: Path) -> tuple[list[tuple[str, int, list[str] | None, str | None]], int]:
    """(raw output, options, option texts, official letter or None) of every released output; model folders."""
    import yaml

    from perceptforge.scorer import benchmarks

    tasks = yaml.safe_load((Path(benchmarks.__file__).parent / "blink_tasks.yaml").read_text())
    work = []
    folders = model_folders(folder)
    for model in folders:
        for path in sorted(model.glob("*.json")):
            for part in json.loads(path.read_text()).values():
                for x in part:
                    info = tasks[re.match(r"(?:val|test)_(.+)_\d+$", x["idx"]).group(1)]
                    official = (x.get("prediction") or "").strip()
                    letter = official.strip("()") if re.fullmatch(r"\(?[A-E]\)?", official) else None
                    work.append((x["full_prediction"], info["options"], info.get("choices"), letter))
    return work, len(folders)


def extraction_side_by_side(folder: Path, source: Path, passes: int) -> None:
    from perceptforge.scorer import extract
    from perceptforge.scorer.extract import extract_choice

    can_infer = load_can_infer(source)
    work, n_models = blink_outputs(folder)
    choices = [{"ABCDEFGH"[k]: (c[k] if c else "ABCDEFGH"[k]) for k in range(n)} for _, n, c, _ in work]

    def ours() -> None:
        extract.forget_short_outputs()  # what a pass remembers, it learnt in that pass
        for output, n, options, _ in work:
            extract_choice(output, n, options)

    def afresh() -> None:  # nothing remembered: every output read by the rules
        for output, n, options, _ in work:
            extract.forget_short_outputs()
            extract_choice(output, n, options)

    def vlmevalkit() -> None:
        for (output, _, _, _), options in zip(work, choices):
            can_infer(output, dict(options))  # it lower-cases the texts in place: a fresh dict, as it is called

    best = {"ours": float("inf"), "afresh": float("inf"), "vlmevalkit": float("inf")}
    for _ in range(passes):
        for name, run in (("ours", ours), ("afresh", afresh), ("vlmevalkit", vlmevalkit)):
            gc.collect()
            started = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - started)
    rate = {name: len(work) / seconds for name, seconds in best.items()}
    print(
        f"strict extraction beside VLMEvalKit can_infer: {len(work):,} released BLINK outputs ({n_models} model "
        f"folders, val + test), best of {passes} passes, CPU time"
    )
    print(
        f"  ours {rate['ours']:,.0f} outputs/s, VLMEvalKit {rate['vlmevalkit']:,.0f} outputs/s: "
        f"ratio ours/VLMEvalKit {rate['ours'] / rate['vlmevalkit']:.3f}"
    )
    print(
        f"  (ours remembers short outputs within a pass; reading every output afresh: {rate['afresh']:,.0f} "
        f"outputs/s, ratio {rate['afresh'] / rate['vlmevalkit']:.3f})"
    )
    graded = [(extract_choice(o, n, c).value, letter) for o, n, c, letter in work if letter]
    read = [(got, letter) for got, letter in graded if got]
    agree = sum(got == letter for got, letter in read)
    print(
        f"  against the official letters ({len(graded):,} outputs with one): coverage "
        f"{100 * len(read) / len(graded):.2f}%, agreement {100 * agree / len(read):.3f}% "
        f"({len(read) - agree} disagreements)"
    )


def write_split(folder: Path, n: int, missing: float, seed: int) -> tuple[Path, Path]:
    """``n`` items of our split as ``perceptforge export`` writes val.jsonl (kinds in turn: single_mcq,
    cross_mcq, yes_no_pair), and predictions for them with a share left out."""
    rng = random.Random(seed)

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    data, preds = folder / "val.jsonl", folder / "predictions.jsonl"
    with open(data, "w") as fd, open(preds, "w") as fp:
        for k in range(n):
            kind = ("single_mcq", "cross_mcq", "yes_no_pair")[k % 3]
            low = rng.choice(["B3", "S1", "F2"])
            if kind == "yes_no_pair":
                question = {"answer_manipulated": "yes", "answer_natural": "no", "kind": kind, "level": "low",
                            "question": "Is the woman holding a gun?"}  # fmt: skip
            else:
                question = {"answer": rng.choice("ABCDE"), "kind": kind, "level": "high", "options": OPTIONS,
                            "question": "How have the pair of images been modified?"}  # fmt: skip
                if kind == "single_mcq":
                    question["image"] = "manipulated"
            item = {
                "category": {"high": "behaviour", "low": low, "name": "Behaviour-Object Association"},
                "edit": None,
                "id": f"item-{k:07d}",
                "idea": None,
                "lineage": {
                    "artifacts": {},
                    "backends": {"llm": {"model_id": "", "name": "template"}},
                    "parent_id": None,
                    "prompts": [{"id": "questions/yes_no", "sha256": sha("p"), "version": 1}],
                    "seed": 0,
                    "source_id": f"src-{k}",
                    "source_sha256": sha(f"s{k}"),
                    "template_id": low,
                    "template_version": 1,
                },  # fmt: skip
                "pair": {
                    side: {
                        "height": 512,
                        "path": f"images/{sha(side + str(k))}.png",
                        "sha256": sha(side + str(k)),
                        "width": 512,
                    }  # fmt: skip
                    for side in ("manipulated", "natural")
                }
                | {"mask": None},
                "question": question,
                "split": "val",
                "verified": True,
                "version": 1,
            }
            fd.write(json.dumps(item, separators=(",", ":"), sort_keys=True) + "\n")
            if kind == "yes_no_pair":
                for image in ("natural", "manipulated"):
                    if rng.random() >= missing:
                        fp.write(
                            json.dumps({"id": item["id"], "image": image, "output": rng.choice(YES_NO_OUTPUTS)}) + "\n"
                        )
            elif rng.random() >= missing:
                output = rng.choice(MCQ_OUTPUTS).format(L=rng.choice("ABCDE"))
                fp.write(json.dumps({"id": item["id"], "output": output}) + "\n")
    return data, preds


def whole_cli(n: int, missing: float, seed: int) -> dict:
    """The command in a process of its own: its CPU seconds, wall seconds and peak RSS (MiB)."""
    with tempfile.TemporaryDirectory() as tmp:
        data, preds = write_split(Path(tmp), n, missing, seed)
        command = [sys.executable, "-m", "perceptforge.cli", "score", "perceptforge", "--data", str(data),
                   "--predictions", str(preds), "--json", str(Path(tmp) / "scores.json")]  # fmt: skip
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if status:
            raise SystemExit(f"perceptforge score failed (status {status})")
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "rss": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blink", type=Path, help="folder of BLINK's released outputs (saved_outputs_<model>/)")
    parser.add_argument("--vlmevalkit", type=Path, help="VLMEvalKit's source: its tarball or a folder with vlmeval/")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--n", type=int, default=100_000, help="items of our split for the whole command")
    parser.add_argument("--missing", type=float, default=0.03, help="share of the predictions left out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    # The command first, while this process is small: a child's peak RSS counts the parent it was forked from.
    small, full = whole_cli(args.n // 10, args.missing, args.seed), whole_cli(args.n, args.missing, args.seed)
    print(
        f"whole CLI, perceptforge score on {args.n:,} items of our split ({args.missing:.0%} of the predictions "
        f"missing): {full['cpu']:.2f} s CPU ({args.n / full['cpu']:,.0f} items/s of CPU time), {full['wall']:.2f} s "
        f"wall, peak RSS {full['rss']:.0f} MiB ({args.n // 10:,} items: {small['rss']:.0f} MiB)"
    )
    if args.blink and args.vlmevalkit:
        extraction_side_by_side(args.blink, args.vlmevalkit, args.passes)


if __name__ == "__main__":
    main()
