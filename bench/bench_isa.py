#!/usr/bin/env python3
"""Time crashlens' ISA census against ``objdump -d | grep -c zmm`` on one x86-64 library.

    python bench/bench_isa.py /tmp/crashlens-materials/lib/libtorch_cpu.so
    python bench/bench_isa.py LIB --runs 3 --out bench/out/isa.md
    python bench/bench_isa.py LIB --skip objdump          # crashlens only

Each command runs in its own subprocess, started by a small runner process (this script with
``--measure``) that times it and reads ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` afterwards:
the peak RSS of the largest single process of the command's tree (objdump for the pipeline,
the census' worker processes included for crashlens), not a sum.

(a) ``objdump -d --no-show-raw-insn FILE | grep -c zmm``: what people run today to see
    whether a library has AVX-512 code.
(b) ``isa_census(FILE)`` with an empty cache directory: the full census (decode, functions,
    verdicts), then written to the SQLite cache.
(c) ``isa_census(FILE)`` again with that cache directory: a cache hit keyed by build-id.
(d) ``isa_census(FILE, jobs=1)`` (with ``--serial``): the same census in one process.
(e) ``function_census(FILE, ADDRESS)``: the one function holding ADDRESS (by default the first
    AVX-512F instruction (b) found), in a fresh process, so no cache of any kind.

For (b) to (e) the measured process also times the call itself (no interpreter start-up or
imports): the "in call" column. The file is read once beforehand so that every run finds it in
the page cache (``--no-warm`` to skip that).
"""

from __future__ import annotations

from measure import _main as _runner_main, measure  # noqa: E402  (bench/measure.py)
import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CENSUS_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from crashlens.binary.isa import isa_census
imported = time.perf_counter() - t0
path, jobs = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
c = isa_census(path, jobs=jobs or None)
seconds = time.perf_counter() - t0
avx512f = c.extensions.get("AVX512F")
print(json.dumps({
    "seconds": seconds, "import_seconds": imported, "cached": c.cached, "jobs": c.jobs,
    "instructions": c.instructions, "functions": c.functions, "text_bytes": c.text_bytes,
    "level": c.level_name, "baseline": list(c.baseline), "dispatched": list(c.dispatched),
    "extensions": {n: [u.instructions, u.function_count, u.verdict, u.rule] for n, u in c.extensions.items()},
    "avx512f_instructions": avx512f.instructions if avx512f else 0,
    "avx512f_first": avx512f.first_addresses[0] if avx512f and avx512f.first_addresses else None,
    "timings": c.timings,
}))
"""

FUNCTION_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from crashlens.binary.isa import function_census, instruction_at
imported = time.perf_counter() - t0
path, address = sys.argv[1], int(sys.argv[2], 0)
t0 = time.perf_counter()
f = function_census(path, address)
seconds = time.perf_counter() - t0
t0 = time.perf_counter()
mnemonic, exts = instruction_at(path, address)
seconds_insn = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "import_seconds": imported, "instruction_seconds": seconds_insn,
                  "function": f.label, "start": f.start, "size": f.end - f.start,
                  "instructions": f.instructions, "extensions": f.extensions,
                  "instruction": [mnemonic, list(exts)]}))
"""


def _json_tail(run: dict, what: str) -> dict:
    if run["rc"] != 0:
        raise SystemExit(f"{what} failed ({run['rc']}): {run['stderr'].strip()[-1500:]}")
    return json.loads(run["stdout"].strip().splitlines()[-1])


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--runs", type=int, default=1, help="rounds; the table shows the best (default 1)")
    ap.add_argument("--jobs", type=int, default=0, help="census worker processes (default: all CPUs)")
    ap.add_argument("--address", help="address for function_census (default: first AVX-512F instruction)")
    ap.add_argument("--serial", action="store_true", help="also time the census in one process (jobs=1)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["objdump", "cached", "function"])
    ap.add_argument("--no-warm", action="store_true")
    ap.add_argument("--out", help="also write the Markdown report here")
    args = ap.parse_args(argv)

    path = os.path.abspath(args.file)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    if not args.no_warm:
        warm(path)
    floor = measure(["true"])["peak_rss_mb"]

    rows: dict[str, list[dict]] = {}
    info: dict[str, dict] = {}
    for rnd in range(args.runs):
        if "objdump" not in args.skip:
            if not shutil.which("objdump"):
                raise SystemExit("objdump is not on PATH (use --skip objdump)")
            r = measure(["bash", "-c", 'objdump -d --no-show-raw-insn "$1" | grep -c zmm', "_", path])
            r["result"] = r["stdout"].strip()
            rows.setdefault("objdump", []).append(r)
        with tempfile.TemporaryDirectory(prefix="crashlens-bench-cache-") as cache:
            cenv = dict(env, XDG_CACHE_HOME=cache)
            cmd = [sys.executable, "-c", CENSUS_SNIPPET, path, str(args.jobs)]
            r = measure(cmd, cenv)
            r["inner"] = _json_tail(r, "census")
            rows.setdefault("census", []).append(r)
            info["census"] = r["inner"]
            if "cached" not in args.skip:
                r = measure(cmd, cenv)
                r["inner"] = _json_tail(r, "cached census")
                if not r["inner"]["cached"]:
                    print("warning: the second census did not hit the cache", file=sys.stderr)
                rows.setdefault("cached", []).append(r)
        if args.serial:
            with tempfile.TemporaryDirectory(prefix="crashlens-bench-cache-") as cache:
                r = measure([sys.executable, "-c", CENSUS_SNIPPET.replace("isa_census(path, jobs=jobs or None)",
                                                                          "isa_census(path, jobs=1, cache=False)"),
                             path, "1"], dict(env, XDG_CACHE_HOME=cache))
                r["inner"] = _json_tail(r, "serial census")
                rows.setdefault("serial", []).append(r)
        if "function" not in args.skip:
            address = args.address or (hex(info["census"]["avx512f_first"]) if info["census"].get("avx512f_first")
                                       else None)
            if address:
                r = measure([sys.executable, "-c", FUNCTION_SNIPPET, path, address], env)
                r["inner"] = _json_tail(r, "function_census")
                rows.setdefault("function", []).append(r)
                info["function"] = r["inner"]

    best = {k: min(v, key=lambda r: r["seconds"]) for k, v in rows.items()}
    base = best.get("objdump")
    c = info["census"]
    labels = {
        "objdump": "`objdump -d --no-show-raw-insn | grep -c zmm`",
        "census": f"crashlens `isa_census`, first run (jobs={c['jobs']})",
        "cached": "crashlens `isa_census`, cached (build-id hit)",
        "serial": "crashlens `isa_census`, one process",
        "function": "crashlens `function_census` (one function)",
    }
    lines = [
        f"File: `{path}` ({os.path.getsize(path) / 1e6:.0f} MB, {c['text_bytes'] / 1e6:.0f} MB of code, "
        f"{c['instructions']:,} instructions, {c['functions']:,} functions)",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"runner RSS floor {floor:.1f} MB; best of {args.runs}",
        "",
        "| tool | wall s | in call s | CPU s | peak RSS MB | objdump / tool | result |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for key in ("objdump", "census", "cached", "serial", "function"):
        if key not in best:
            continue
        r = best[key]
        inner = r.get("inner", {})
        in_call = f"{inner['seconds']:.3f}" if "seconds" in inner else ""
        ratio = f"{base['seconds'] / r['seconds']:.1f}" if base else ""
        if key == "objdump":
            result = f"{r['result']} lines with zmm"
        elif key == "function":
            result = (f"{inner['function'][:40]}: {inner['instructions']} instructions, "
                      f"{len(inner['extensions'])} extensions; instruction_at {inner['instruction_seconds']:.3f} s")
        else:
            result = (f"{len(inner['extensions'])} extensions, AVX512F {inner['avx512f_instructions']:,} "
                      f"instructions, {inner['level']}" + (" (cache hit)" if inner.get("cached") else ""))
        lines.append(f"| {labels[key]} | {r['seconds']:.2f} | {in_call} | {r['user'] + r['sys']:.1f} | "
                     f"{r['peak_rss_mb']:.0f} | {ratio} | {result} |")
    lines += ["", "All runs (wall s): " + "; ".join(f"{k} " + ", ".join(f"{r['seconds']:.2f}" for r in v)
                                               for k, v in rows.items())]
    lines += ["", f"Census phases (first run, s): " + ", ".join(f"{k} {v:.2f}" for k, v in c["timings"].items())]
    lines += ["", f"Baseline: {', '.join(c['baseline']) or '-'}; dispatched: {', '.join(c['dispatched']) or '-'}"]
    lines += ["", "| extension | instructions | functions | verdict | rule |", "| --- | ---: | ---: | --- | --- |"]
    for name, (n, nf, verdict, rule) in c["extensions"].items():
        lines.append(f"| {name} | {n:,} | {nf:,} | {verdict} | {rule} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(report)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        sys.exit(_runner_main(sys.argv[3:] if sys.argv[2] == "--" else sys.argv[2:]))
    sys.exit(main())
