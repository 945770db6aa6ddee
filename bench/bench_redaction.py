#!/usr/bin/env python3
"""Redaction cost on a large report: a 200k-line log with 2,000 CUDA errors and tracebacks, each
with a GitHub token and an AWS key id, analysed; then what redaction adds to each output, and
the throughput of redact() on a raw 18 MiB log (the worst case: every output is far smaller).

    python bench/bench_redaction.py
"""
import io
import random
import string
import tempfile
import time
from pathlib import Path

from crashlens.pipeline import analyze_paths, Options
from crashlens.signature import signature
from crashlens.report.redact import redacted, Redactor
from crashlens.report import ci
from crashlens.report.markdown import render as render_md
from crashlens.report.bugreport.make import make_report, ReportOptions

rng = random.Random(2)
tok = lambda n: "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))
d = Path(tempfile.mkdtemp())
lines = [f"$ HF_TOKEN=hf_{tok(34)} torchrun --nproc-per-node 8 train.py --wandb-key {tok(40).lower()}"]
for i in range(200_000):
    r = rng.random()
    if r < 0.01:
        lines += ["Traceback (most recent call last):", f'  File "/work/app/train.py", line {i % 300}, in step',
                  f'    client.push(model, token="ghp_{tok(36)}")',
                  f"RuntimeError: CUDA error: an illegal memory access was encountered (step {i}, key AKIA{tok(16).upper()})"]
    else:
        lines.append(f"[rank{i%8}]: step {i}: loss {rng.random():.4f} tokens/s {rng.randint(1000, 9000)} mem 61.2GiB")
log = d / "train.log"
log.write_text("\n".join(lines) + "\n")
print(f"log: {log.stat().st_size / 2**20:.1f} MiB, {len(lines)} lines")
t = time.perf_counter(); a = analyze_paths([str(log)], Options()); t_an = time.perf_counter() - t
sig = signature(a)
n_ev = sum(len(c.evidence) for c in a.causes)
print(f"analyze: {t_an:.2f} s; {len(a.causes)} causes, {n_ev} evidence items")
t = time.perf_counter(); ra, rs, red = redacted(a, sig); t_red = time.perf_counter() - t
print(f"redacted(analysis): {t_red*1000:.0f} ms; {red.summary()}")
for name, fn in (("markdown", lambda: render_md(ra, rs, 3)),
                 ("terminal", lambda: ci.report_text(ra, rs, "terminal", 3, True)),
                 ("json", lambda: ci.report_text(ra, rs, "json"))):
    text = fn()
    r2 = Redactor()
    t = time.perf_counter(); r2(text); t2 = time.perf_counter() - t
    print(f"{name}: {len(text)/1024:.0f} KiB output, scrub after rendering {t2*1000:.0f} ms")
env = {"GITHUB_STEP_SUMMARY": str(d / "s.md"), "GITHUB_OUTPUT": str(d / "o.txt"), "GITHUB_WORKSPACE": str(d)}
for redact in (False, True):
    t = time.perf_counter()
    ci.emit(a, sig, github=True, junit=d / "j.xml", codequality=d / "c.json", redact=redact, env=env, out=io.StringIO(), err=io.StringIO())
    print(f"--github --junit --codequality, redact={redact}: {(time.perf_counter()-t)*1000:.0f} ms")
for redact in (False, True):
    t = time.perf_counter(); make_report(a, sig, ReportOptions(redact=redact)); print(f"report, redact={redact}: {(time.perf_counter()-t)*1000:.0f} ms")

lines = [f"[rank{i % 8}]: step {i}: loss {rng.random():.4f} tokens/s {rng.randint(1000, 9000)}" if i % 500 else
         f"export HF_TOKEN=hf_{tok(34)}" for i in range(400_000)]
text = "\n".join(lines)
t = time.perf_counter(); out, counts = Redactor().redact(text), None; dt = time.perf_counter() - t
print(f"redact() on a raw log of {len(text) / 2**20:.1f} MiB: {dt:.2f} s ({len(text) / 2**20 / dt:.1f} MiB/s)")
