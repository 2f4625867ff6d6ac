"""``--protocol official`` beside the official scripts, run unchanged, item by item (issue 45).

Both sides talk to one deterministic judge on 127.0.0.1 that speaks the chat-completions API: its reply is
drawn from the prompt and temperature alone (a hash), so a prompt asked twice gets one answer and a
difference in what is asked shows up as a difference in what is scored. Seeded sets hold every edge the
issue names: BLINK idx repeated across task files, an empty task file, an unknown idx; MVP-Bench empty
Yes/No outputs, missing predictions, a whole float question_id; CODIS null and empty outputs, absent pairs;
MME-RealWorld as ``.json`` and ``.jsonl``.

The official scripts are not ours and are not kept here: ``--scripts`` names a folder holding them as
their repositories have them (``blink_evaluate.py`` = BLINK ``eval/evaluate.py``, ``mvp_evaluate.py`` =
MVP-Bench ``evaluate.py``, ``codis_eval.py`` = CODIS ``data/eval.py``, ``mme_eval.py`` = MME-RealWorld
``evaluation/eval_your_results.py``). They run in a temporary folder with stand-ins for the two libraries
this machine lacks (``jsonlines``; ``vlmeval``'s ``build_judge``, which here asks the local judge).

python benchmarks/official_harness.py --scripts DIR [--seed 7301]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import runpy
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from perceptforge.scorer.benchmarks import blink, codis, mme_realworld, mvp_bench
from perceptforge.scorer.judge import Judge

MVP_REPLIES = ("Yes", "No", "Unknown", "I think yes", "Yes, no doubt.", "Answer: Yes", "no.", "Yes/No")
CODIS_REPLIES = ("right", "wrong", "Right.", "not right", "wrong, not right")


def reply_for(prompt: str, temperature: float) -> str:
    """MVP-Bench's asks differ by temperature (0, 0.5, … 2: the script's), so the reply depends on it there;
    CODIS's script leaves the temperature to the API's default and we send 0, so there it depends on the
    prompt alone."""
    mvp = "two options of a question" in prompt
    digest = int(hashlib.sha256(f"{temperature if mvp else ''}\x00{prompt}".encode()).hexdigest(), 16)
    replies = MVP_REPLIES if mvp else CODIS_REPLIES
    return replies[digest % len(replies)]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        content = body["messages"][-1]["content"]
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        reply = reply_for(text, float(body.get("temperature", 1.0)))
        out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": reply}}]}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *_: object) -> None:
        pass


# stand-ins for the libraries the official scripts import and this machine lacks
JSONLINES = """import builtins, json
class _R:
    def __init__(self, f): self.f = builtins.open(f)
    def __enter__(self): return self
    def __exit__(self, *a): self.f.close()
    def __iter__(self): return (json.loads(x) for x in self.f if x.strip())
class _W:
    def __init__(self, f, mode): self.f = builtins.open(f, mode)
    def __enter__(self): return self
    def __exit__(self, *a): self.f.close()
    def write_all(self, rows): [self.f.write(json.dumps(r) + "\\n") for r in rows]
def open(f, mode="r"): return _R(f) if mode == "r" else _W(f, mode)
"""
VLMEVAL_MISC = """import os, openai
class _Judge:
    def __init__(self): self.c = openai.OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="x")
    def generate(self, prompt, temperature=0):
        r = self.c.chat.completions.create(model="judge", temperature=temperature,
                                           messages=[{"role": "user", "content": prompt}])
        return r.choices[0].message.content
def build_judge(**kw): return _Judge()
"""


def _stand_ins(folder: Path) -> None:
    (folder / "jsonlines.py").write_text(JSONLINES)
    pkg = folder / "vlmeval" / "evaluate"
    pkg.mkdir(parents=True)
    (folder / "vlmeval" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "misc.py").write_text(VLMEVAL_MISC)
    (pkg / "vqa_eval.py").write_text("def process_line(*a, **k): pass\n")
    (pkg / "coco_eval.py").write_text("class COCO_Caption_Scorer: pass\n")


def _holds_edges(benchmark: str, **edges: bool) -> None:
    """A tiny set must still hold every edge it is for (else the seed is no test of them)."""
    absent = [name for name, held in edges.items() if not held]
    if absent:
        raise SystemExit(f"{benchmark}: the tiny seeded set lacks {', '.join(absent)}: choose another seed")


def run_script(script: Path, cwd: Path, argv: list[str], env: dict[str, str]) -> dict:
    """The script run unchanged as __main__ in ``cwd``; its globals after the run (stdout swallowed)."""
    old = (os.getcwd(), sys.argv, dict(os.environ), list(sys.path))
    os.chdir(cwd)
    sys.argv = [str(script), *argv]
    os.environ.update(env)
    sys.path.insert(0, str(cwd))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return runpy.run_path(str(script), run_name="__main__")
    finally:
        os.chdir(old[0])
        sys.argv = old[1]
        os.environ.clear()
        os.environ.update(old[2])
        sys.path[:] = old[3]
        for name in [m for m in sys.modules if m in ("jsonlines",) or m.startswith("vlmeval")]:
            del sys.modules[name]


def blink_differences(scripts: Path, work: Path, rng: random.Random, tiny: bool = False) -> int:
    """Seeded answers and GPT4V task files (repeats inside and across files, an empty file, an unknown idx)."""
    per_task = 4 if tiny else 40
    answers = {f"val_{t}_{k}": f"({rng.choice('AB')})" for t in blink.OFFICIAL_TASK_ORDER for k in range(1, per_task)}
    (work / "val_answers.json").write_text(json.dumps(answers))
    folder = work / "outputs" / "GPT4V"
    folder.mkdir(parents=True)
    idxs = list(answers)
    for n, task in enumerate(blink.OFFICIAL_TASK_ORDER):
        rows = [] if n == 3 else [{"idx": i, "prediction": rng.choice(["(A)", "(B)", "(Z)", "(A) Point A"])}
                                  for i in idxs if blink.task_of(i) == task]  # fmt: skip
        rows += [{"idx": rng.choice(idxs), "prediction": rng.choice(["(A)", "(B)"])} for _ in range(5)]
        rows.append({"idx": f"val_{task}_999", "prediction": "(A)"})
        (folder / f"{task.replace('_', ' ')}.json").write_text(json.dumps({"val": rows}))
    run_script(scripts / "blink_evaluate.py", work, [], {})
    official = json.loads((work / "val_predictions" / "GPT4V.json").read_text())
    ours = blink.score([work / "val_answers.json"], sorted(folder.iterdir()), "official")
    return sum(item.correct != (official.get(item.id) == answers[item.id]) for item in ours.items)


def mme_differences(scripts: Path, work: Path, rng: random.Random, template: Path, tiny: bool = False) -> int:
    records = json.loads(template.read_text())[: 60 if tiny else None]
    outputs = ["", "A", "(b)", "Best answer: C", "The answer is D", "d", "E. none", "I cannot tell", "244"]
    for rec in records:
        rec["Output"] = rng.choice(outputs)
    differences = 0
    for name in ("seeded.json", "seeded.jsonl"):
        path = work / name
        text = json.dumps(records) if name.endswith(".json") else "".join(json.dumps(r) + "\n" for r in records)
        path.write_text(text)
        official = run_script(scripts / "mme_eval.py", work, ["--results_file", str(path)], {})["results"]
        ours = mme_realworld.score([path], [], "official")
        counts: dict[tuple[str, str, str], int] = {}
        for item, rec in zip(ours.items, records, strict=True):
            cat = rec["Category"].lower()
            cat = cat.split("/")[0] + "/attribute" if "attribute" in cat else cat
            key = (rec["Task"], rec["Subtask"], cat)
            counts[key] = counts.get(key, 0) + bool(item.correct)
        differences += sum(abs(counts.get((t, s, c), 0) - v["true"]) for t, subs in official.items()
                           for s, cats in subs.items() for c, v in cats.items())  # fmt: skip
    return differences


def codis_differences(
    scripts: Path, work: Path, rng: random.Random, data: Path, base_url: str, tiny: bool = False
) -> int:
    pairs = json.loads(data.read_text())
    if tiny:  # the first pairs of each category, as a data file of their own
        pairs = [
            p for c in sorted({p["category"] for p in pairs}) for p in [q for q in pairs if q["category"] == c][:4]
        ]
        data = work / "codis_data.json"
        data.write_text(json.dumps(pairs))
    outputs = []
    for pair in pairs:
        if rng.random() < (0.15 if tiny else 0.05):
            continue  # an absent pair: neither side counts it
        pick = [None, "", pair["answer"]["answer_1"], pair["answer"]["answer_2"], "not sure"]
        outputs.append({"id": pair["id"], "output": {"output_1": rng.choice(pick), "output_2": rng.choice(pick)}})
    if tiny:
        said = [x for o in outputs for x in o["output"].values()]
        _holds_edges("CODIS", absent=len(outputs) < len(pairs), null=None in said, empty="" in said)
    (work / "out.json").write_text(json.dumps(outputs))
    env = {"ANSWER_PATH": str(data), "OUTPUT_PATH": str(work / "out.json"), "OPENAI_API_KEY": "x",
           "OPENAI_BASE_URL": base_url}  # fmt: skip
    official = run_script(scripts / "codis_eval.py", work, [], env)
    from perceptforge.backends.chat import ChatClient

    judge = Judge(ChatClient(base_url=base_url, model="judge"), work / "cache")
    ours = codis.score([data], [work / "out.json"], "official", judge=judge)
    right: dict[str, int] = {}
    for item in ours.items:
        category = next(p["category"] for p in pairs if str(p["id"]) == item.id.split("#")[0])
        right[category] = right.get(category, 0) + bool(item.correct)
    return sum(abs(right.get(c, 0) - v[0]) for c, v in official["acc_q"].items() if c != "All")


def mvp_differences(scripts: Path, work: Path, rng: random.Random, ref: Path, base_url: str, tiny: bool = False) -> int:
    questions = ref / "all_questions.json"
    data = [json.loads(x) for x in questions.read_text().splitlines() if x.strip()]
    if tiny:  # every record of the first pairs (both images' Yes/No questions and the MCQs), as a file of their own
        ids = list(dict.fromkeys(rec["id"] for rec in data))[:24]
        data = [rec for rec in data if rec["id"] in ids]
        questions = work / "all_questions.json"
        questions.write_text("".join(json.dumps(rec) + "\n" for rec in data))
    outs = ["Yes", "No", "", "yes, it is", "I think so", "No.", "A", "(b) text", "C. x", "Maybe"]
    preds = []
    missing, floats = (0.15, 0.15) if tiny else (0.03, 0.02)  # tiny: enough of each edge in a few records
    for rec in data:
        if rng.random() < missing:
            continue
        qid = float(rec["question_id"]) if rng.random() < floats else rec["question_id"]
        preds.append({"question_id": qid, "output": rng.choice(outs)})
    if tiny:
        _holds_edges("MVP-Bench", missing=len(preds) < len(data), float_id=any(isinstance(p["question_id"], float)
                     for p in preds), empty=any(p["output"] == "" for p in preds))  # fmt: skip
    folder = work / "model_prediction"
    folder.mkdir()
    (folder / "seeded.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (folder / "mcq_seeded.jsonl").write_text("")
    env = {"OPENAI_BASE_URL": base_url}
    argv = ["--model_name", "seeded", "--qa_dir", str(questions), "--mcq_dir",
            str(ref / "mcq_questions.json")]  # fmt: skip
    with contextlib.suppress(ZeroDivisionError):  # evaluate_mcq on no circular predictions
        run_script(scripts / "mvp_evaluate.py", work, argv, env)
    evaluated = [json.loads(x) for x in (folder / "seeded_evaluated.jsonl").read_text().splitlines()]
    from perceptforge.backends.chat import ChatClient

    judge = Judge(ChatClient(base_url=base_url, model="judge"), work / "cache")
    ours = {i.id: i for i in mvp_bench.score([questions], [folder / "seeded.jsonl"], "official",
                                             judge=judge).items}  # fmt: skip
    differences = 0
    for e in evaluated:
        if e["type"].startswith("y/n"):
            rule = e["extracted (rule)"]
            pred = rule if rule.lower() in ("yes", "no") else e["extracted (GPT)"]
            correct = pred.lower() == e["answer"].lower()
        else:
            correct = e["extracted (rule)"].lower() == e["answer"].lower()
        differences += ours[str(int(e["question_id"]))].correct != correct
    return differences + sum(1 for i in ours.values() if i.method != "missing") - len(evaluated)


def run_all(scripts: Path, ref: Path, seed: int, tiny: bool = False) -> dict[str, int]:
    """Each benchmark's item differences between the official script and ``--protocol official`` on one
    seeded set (``tiny``: a few items of each, every edge still in), both sides asking one local judge."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    os.environ.setdefault("PERCEPTFORGE_HOME", tempfile.mkdtemp())
    runs = {
        "BLINK": lambda w, r: blink_differences(scripts, w, r, tiny),
        "MVP-Bench": lambda w, r: mvp_differences(scripts, w, r, ref / "mvp-bench", base_url, tiny),
        "CODIS": lambda w, r: codis_differences(scripts, w, r, ref / "codis" / "data.json", base_url, tiny),
        "MME-RealWorld": lambda w, r: mme_differences(
            scripts, w, r, ref / "mme-realworld" / "output_test_template.json", tiny
        ),
    }
    found = {}
    try:
        for name, run in runs.items():
            with tempfile.TemporaryDirectory() as tmp:
                _stand_ins(Path(tmp))
                found[name] = run(Path(tmp), random.Random(seed))
    finally:
        server.shutdown()
        server.server_close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripts", type=Path, required=True)
    parser.add_argument("--reference", type=Path, default=Path(__file__).resolve().parents[2] / "shared/reference")
    parser.add_argument("--seed", type=int, default=7301)
    parser.add_argument("--tiny", action="store_true", help="a few items of each benchmark (the test's size)")
    args = parser.parse_args()
    for name, differences in run_all(args.scripts.resolve(), args.reference.resolve(), args.seed, args.tiny).items():
        print(f"{name}: {differences} item differences (seed {args.seed})")


if __name__ == "__main__":
    main()
