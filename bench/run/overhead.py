"""Overhead of `crashlens run` on a job that does not fail (issue 16): a training-step loop that
prints 100 lines a second, run bare and under `crashlens run`, alternately, N times each.

    python bench/run/overhead.py [--seconds 20] [--repeat 3] [--crashlens PATH]

Reports wall time and CPU time (user+sys of the job; of crashlens itself separately), the start-up
cost on `true`, and per line of output. Output goes to a pipe (as under a scheduler); the pty path
is measured with `script -qec` where `script` exists.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

JOB = r"""
import sys, time
n = int(sys.argv[1])
a = [[float(i * j % 7) for j in range(60)] for i in range(60)]
t0 = time.perf_counter()
for step in range(n):
    # a training step: ~10 ms of arithmetic
    s = 0.0
    for row in a:
        for x in row:
            s += x * 1.0001
    for _ in range(6):
        s = sum(r[0] for r in a) + s * 0.5
    print(f"step {step}: loss {s / 1e6:.6f} lr 3e-4 throughput {step / max(time.perf_counter() - t0, 1e-9):.1f} it/s", flush=True)
    # pace to 100 lines per second
    while time.perf_counter() - t0 < (step + 1) / 100:
        pass
"""


def timed(cmd: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--crashlens", default=shutil.which("crashlens") or "crashlens")
    args = ap.parse_args()
    lines = int(args.seconds * 100)
    tmp = tempfile.mkdtemp()
    job = os.path.join(tmp, "job.py")
    with open(job, "w") as f:
        f.write(JOB)
    bare = [sys.executable, job, str(lines)]
    runs = {"bare": [], "crashlens run": []}
    for i in range(args.repeat):
        runs["bare"].append(timed(bare))
        runs["crashlens run"].append(timed([args.crashlens, "run", "-q", "-o", os.path.join(tmp, f"b{i}"), "--", *bare]))
    start = {"bare": [], "crashlens run": []}
    for i in range(5):
        start["bare"].append(timed(["true"]))
        start["crashlens run"].append(timed([args.crashlens, "run", "-q", "-o", os.path.join(tmp, f"s{i}"), "--", "true"]))
    print(f"job: {lines} lines in ~{args.seconds:g} s (100 lines/s), {args.repeat} runs each, output to a pipe")
    for k, v in runs.items():
        print(f"  {k:14} wall {statistics.median(w for w, _ in v):7.2f} s   CPU {statistics.median(c for _, c in v):7.2f} s")
    bw = statistics.median(w for w, _ in runs["bare"]); cw = statistics.median(w for w, _ in runs["crashlens run"])
    bc = statistics.median(c for _, c in runs["bare"]); cc = statistics.median(c for _, c in runs["crashlens run"])
    print(f"  overhead: wall {100 * (cw - bw) / bw:+.2f} %, CPU {100 * (cc - bc) / bc:+.2f} % "
          f"({1000 * (cc - bc) / lines:.3f} ms CPU per line, start-up and sampling included)")
    sb = statistics.median(w for w, _ in start["bare"]); sc = statistics.median(w for w, _ in start["crashlens run"])
    scc = statistics.median(c for _, c in start["crashlens run"])
    print(f"start-up on `true`: bare {sb * 1000:.0f} ms, crashlens run {sc * 1000:.0f} ms wall ({scc * 1000:.0f} ms CPU)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
