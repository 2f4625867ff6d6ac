"""Score N synthetic MCQ predictions (MVP-Bench format) with extraction; print time and peak memory.

python benchmarks/score_speed.py --n 100000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

from perceptforge.scorer.benchmarks import mvp_bench

OUTPUTS = [
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


def write_synthetic(folder: Path, n: int, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    data, preds = folder / "questions.jsonl", folder / "predictions.jsonl"
    with open(data, "w") as fd, open(preds, "w") as fp:
        for qid in range(n):
            answer = rng.choice("ABCDE")
            question = "How have the pair of images been modified?\n" + "\n".join(
                f"{c}. option {c} of {qid}" for c in "ABCDE"
            )
            fd.write(
                json.dumps(
                    {
                        "question_id": qid,
                        "id": qid // 2,
                        "image": f"Cross_Images/{qid}.jpg",
                        "question": question,
                        "answer": answer,
                        "type": "mcq-cross",
                        "level": "low",
                    }
                )
                + "\n"
            )
            fp.write(
                json.dumps({"question_id": qid, "output": rng.choice(OUTPUTS).format(L=rng.choice("ABCDE"))}) + "\n"
            )
    return data, preds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, preds = write_synthetic(Path(tmp), args.n, args.seed)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        result = mvp_bench.score([data], [preds], "strict")
        elapsed = time.perf_counter() - t0
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"scored {len(result.items):,} MCQ predictions in {elapsed:.2f} s ({len(result.items) / elapsed:,.0f}/s)")
    print(
        f"vanilla accuracy {result.metrics['mcq']['vanilla']['cross_low']:.2f}%, parse failures {result.parse_failure_rate:.2f}%"
    )
    print(f"peak RSS {rss_after / 1024:.0f} MiB (before scoring {rss_before / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
