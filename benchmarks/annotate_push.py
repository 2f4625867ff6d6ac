"""What a team of annotators costs in Label Studio: `annotate serve` with N annotators added by `add-annotator`
(each on a server of their own), then `annotate push` of a run of M items, timed, all through the command line as a
user runs it.

    python benchmarks/annotate_push.py                       # 5 annotators, 1,000 items
    python benchmarks/annotate_push.py --annotators 2 --items 200 --work /tmp/push

Prints each `add-annotator`'s wall time, the wait until `serve` has started the new servers (no restart), the
first push's wall time (every item imported on 1 + N servers), a second push's (nothing new: the check that
nothing is missing) and the servers' resident memory. The M items are one real mvp run's items copied under new
ids (``scale_out.synthetic_run``); ``--base`` names that run, else the bundled sample's run is built first. A
second call with the same ``--work`` reuses its servers and annotators and pushes a new run folder.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]
CLI = [sys.executable, "-m", "perceptforge.cli"]


def cli(args: list[str], env: dict[str, str], cwd: Path) -> float:
    """Run one perceptforge command; its wall time (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(
            f"`perceptforge {' '.join(args)}` failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return time.perf_counter() - started


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(urls: list[str], timeout_s: float) -> float:
    started = time.perf_counter()
    while not all(healthy(u) for u in urls):
        if time.perf_counter() - started > timeout_s:
            sys.exit(f"servers not healthy after {timeout_s:.0f} s: {[u for u in urls if not healthy(u)]}")
        time.sleep(0.5)
    return time.perf_counter() - started


def rss_mib(root_pid: int) -> float:
    """Resident memory of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            rss = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS"))
            total += int(rss.split()[1])
        except (OSError, StopIteration):
            pass
    return total / 1024


def main() -> None:
    from scale_out import synthetic_run

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--annotators", type=int, default=5)
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--work", type=Path, default=Path("/tmp/perceptforge-annotate-push"))
    p.add_argument("--base", type=Path, help="an mvp run whose items are copied (default: the bundled sample's)")
    p.add_argument("--venv", type=Path, default=Path(".venv-label-studio").resolve())
    args = p.parse_args()
    work = args.work.resolve()
    accounts = work / "state" / "label-studio" / "annotators"
    # A folder of an earlier run keeps its servers and annotators (their `label-studio init`s are most of a
    # run's time); its next push goes to a new run folder, so every item is new to the servers again.
    reuse = sorted(accounts.glob("*.json")) if accounts.is_dir() else []
    if work.exists() and len(reuse) != args.annotators:
        sys.exit(f"{work} exists with {len(reuse)} annotators, not {args.annotators}; give a new --work folder")
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PERCEPTFORGE_STATE_DIR": str(work / "state")}
    base = args.base.resolve() if args.base else work / "base"
    if not args.base and not (base / "items").is_dir():
        t = cli(
            ["run", "mvp", "--source", str(HERE.parent / "data" / "sample"), "--out", str(base), "--seed", "0"],
            env,
            work,
        )
        print(f"base run (the bundled sample): {t:.0f} s")
    run = synthetic_run(base, args.items, work / f"run-{len(list(work.glob('run-*'))) + 1}")
    print(f"run to push: {len(list((run / 'items').glob('*.json')))} items ({base.name}'s items under new ids)")

    log = open(work / "serve.log", "w")
    serve = subprocess.Popen(
        [*CLI, "annotate", "serve", "--port", str(free_port()), "--venv", str(args.venv),
         "--document-root", str(work)],
        env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        creds = work / "state" / "label-studio" / "credentials.json"
        started = time.perf_counter()
        while not creds.exists() or not healthy(json.loads(creds.read_text())["url"]):
            if serve.poll() is not None:
                sys.exit(f"annotate serve exited; see {work / 'serve.log'}")
            time.sleep(1)
        print(f"annotate serve (init + start of the main server): {time.perf_counter() - started:.0f} s")
        if reuse:
            urls = [json.loads(r.read_text())["url"] for r in reuse]
            print(f"{len(urls)} annotators of an earlier run: their servers healthy {wait_for(urls, 300):.1f} s later")
        for k in range(0 if reuse else args.annotators):
            email = f"annotator{k + 1}@bench.local"
            t = cli(["annotate", "add-annotator", email, "--venv", str(args.venv)], env, work)
            record = json.loads((work / "state" / "label-studio" / "annotators" / f"{email}.json").read_text())
            print(
                f"add-annotator {email}: {t:.0f} s; serve started its server {wait_for([record['url']], 300):.1f} s later"
            )
        first = cli(["annotate", "push", str(run)], env, work)
        print(f"first push of {args.items} items to 1 + {args.annotators} servers: {first:.1f} s")
        again = cli(["annotate", "push", str(run)], env, work)
        print(f"second push (nothing new): {again:.1f} s")
        print(f"memory of serve and its {1 + args.annotators} servers: {rss_mib(serve.pid):.0f} MiB")
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(60)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    main()
