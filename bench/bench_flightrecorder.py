"""Flight Recorder dumps: crashlens against PyTorch's own analyzer (fr_trace), side by side.

    python bench/bench_flightrecorder.py [--python PY_WITH_TORCH] [--ranks 64] [--entries 2000]

1. The real dumps of fixtures/run-bundles-nccl (2 × H200): each tool's verdict and time.
2. Scale: N ranks × M collectives, made from the real rank-0 dump of the hang (its entries
   repeated with increasing sequence ids, one rank stopping one collective short): time and peak
   memory of `crashlens analyze DIR` and of `python -m torch.distributed.flight_recorder.fr_trace`.
These scaled dumps measure speed only, never accuracy.
"""

from __future__ import annotations

import argparse
import copy
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NCCL = ROOT / "fixtures" / "run-bundles-nccl"
sys.path.insert(0, str(ROOT / "src"))


def timed(cmd: list[str], cwd: str | None = None) -> tuple[float, int, str]:
    """Wall time, peak RSS (KiB, /usr/bin/time) and what the command printed (stdout and stderr:
    fr_trace reports through logging, on stderr)."""
    with tempfile.NamedTemporaryFile("r") as t:
        t0 = time.perf_counter()
        res = subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%M", *cmd], capture_output=True, text=True, cwd=cwd)
        wall = time.perf_counter() - t0
        got = t.read().strip().splitlines()
    rss = int(got[-1]) if got and got[-1].isdigit() else 0
    return wall, rss, res.stdout + res.stderr


def verdict_fr(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith(("Not all ranks", "missing ranks", "Collective", "collective:"))]
    return " | ".join(lines[:3]) or out.strip().splitlines()[-1][:120] if out.strip() else "(nothing)"


def verdict_cl(out: str) -> str:
    import json

    try:
        d = json.loads(out[:out.rfind("}") + 1] if "}" in out else out)
    except ValueError:
        return "(no JSON)"
    fr = [e for c in d.get("causes", []) for e in c.get("evidence", []) if "Flight Recorder" in (e.get("text") or "")]
    return fr[0]["text"][:160] if fr else (d["causes"][0]["category"] if d.get("causes") else "(no cause)")


def scaled(out: Path, ranks: int, entries: int) -> None:
    from crashlens.parsers.flightrecorder import load_dump

    base = load_dump((NCCL / "hang" / "nccl_trace_rank_0").read_bytes())
    proto = base["entries"][0]
    for r in range(ranks):
        doc = copy.deepcopy(base)
        last = entries - (1 if r == ranks - 1 else 0)          # the last rank never enqueues the last one
        doc["entries"] = []
        for s in range(1, last + 1):
            e = dict(proto)
            e.update(collective_seq_id=s, record_id=s - 1, op_id=s, state="completed" if s < entries else "scheduled")
            doc["entries"].append(e)
        doc["pg_config"]["0"]["ranks"] = str(list(range(ranks)))
        doc["pg_status"]["0"] = {"last_enqueued_collective": last, "last_started_collective": -1,
                                 "last_completed_collective": min(last, entries - 1)}
        (out / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(doc))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable, help="a Python with torch (for fr_trace)")
    ap.add_argument("--crashlens", default=shutil.which("crashlens") or "crashlens")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--entries", type=int, default=2000)
    a = ap.parse_args()
    fr = [a.python, "-m", "torch.distributed.flight_recorder.fr_trace", "-p", "nccl_trace_rank_"]
    tmp = Path(tempfile.mkdtemp())
    print("real dumps (fixtures/run-bundles-nccl):")
    for case in ("hang", "mismatch"):
        d = tmp / case
        d.mkdir()
        for f in (NCCL / case).glob("nccl_trace_rank_*"):
            shutil.copy(f, d)
        w1, m1, o1 = timed([a.crashlens, "analyze", "--json", str(d)])
        w2, m2, o2 = timed([*fr, str(d)], cwd=str(tmp))
        print(f"  {case:9} crashlens {w1:5.2f} s {m1 // 1024:4d} MiB: {verdict_cl(o1)}")
        print(f"  {'':9} fr_trace  {w2:5.2f} s {m2 // 1024:4d} MiB: {verdict_fr(o2)}")
    d = tmp / "scaled"
    d.mkdir()
    scaled(d, a.ranks, a.entries)
    size = sum(f.stat().st_size for f in d.iterdir())
    w1, m1, o1 = timed([a.crashlens, "analyze", "--json", str(d)])
    w2, m2, o2 = timed([*fr, str(d)], cwd=str(tmp))
    print(f"scaled: {a.ranks} ranks x {a.entries} collectives ({size / 2**20:.1f} MiB of dumps)")
    print(f"  crashlens {w1:6.2f} s {m1 // 1024:5d} MiB: {verdict_cl(o1)}")
    print(f"  fr_trace  {w2:6.2f} s {m2 // 1024:5d} MiB: {verdict_fr(o2)}")
    print(f"  ratio crashlens/fr_trace: wall {w1 / w2:.2f}x, peak RSS {m1 / max(m2, 1):.2f}x")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
