#!/usr/bin/env python3
"""Native backtraces: crashlens's unwinder and symbolizer against `gdb -batch -ex bt`, on the same cores.

    python bench/bench_unwind.py                          # the small cores + a 4 GiB one, best of 3
    python bench/bench_unwind.py --big-mib 1024 --runs 5 --out bench/out/unwind.md
    python bench/bench_unwind.py --core PROG:CORE ...     # your own cores as well (PROG for gdb)

The cores are made here, in a temporary folder under --tmp (default /tmp), with the programs of
fixtures/cores (gcc, g++, `ulimit -c unlimited`), and deleted at the end:
  deep        libdeep.so (-O2 -fomit-frame-pointer, stripped, a separate debug file beside it
              through .gnu_debuglink) faulting five frames deep under main
  deep big    the same program after allocating and touching --big-mib MiB: a core of that size
              with the same stack, so the two rows show whether the cost grows with the core
  abort       assert() -> abort() (SIGABRT through libc)
  terminate   an uncaught C++ exception -> std::terminate (libstdc++, demangling)
  threads     four threads, a worker faults: every thread (gdb: `thread apply all bt`)
  python      `python -X faulthandler -c 'import ctypes; ctypes.string_at(0)'`: through the
              signal frame, libffi and ~20 frames of libpython (DWARF lines and inlined calls)

Each command runs in its own subprocess, started by bench/measure.py's runner process, which
reports the command's wall time and peak RSS (getrusage of its children: the command's own, not
the bench's). The page cache is warm for every tool alike; per core and tool the
fastest of --runs rounds is shown. Python runs with its bytecode cache (PYTHONPYCACHEPREFIX in
the temporary folder, one warm-up run first), as an installed crashlens would.
(a) gdb -batch -nx -ex bt PROG CORE (`thread apply all bt` for the threads core): gdb loads the
    program, its libraries and their debug files, unwinds, prints the frames with file:line.
(b) crashlens: read_core() + Unwinder(core).backtrace() (backtraces() for the threads core) +
    culprit() + to_json(): CFI/fp/scan unwinding, symbols from .symtab/.dynsym/debug files,
    demangling, file:line and inlined calls from DWARF. "in call" is that part alone, without
    interpreter start-up and imports.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORES = REPO / "fixtures" / "cores"
sys.path.insert(0, str(CORES))
sys.path.insert(0, str(REPO / "bench"))
import crashers  # noqa: E402
from measure import measure  # noqa: E402

UNWIND = """
import json, sys, time
t0 = time.perf_counter()
from crashlens.binary.core import read_core
from crashlens.binary.unwind import Unwinder, culprit
from crashlens.report.json import backtrace_json
imported = time.perf_counter() - t0
t0 = time.perf_counter()
with read_core(sys.argv[1]) as core, Unwinder(core) as u:
    bts = u.backtraces() if sys.argv[2] == "all" else [u.backtrace()]
    c = culprit(bts[0])
    out = [backtrace_json(bt) for bt in bts]
seconds = time.perf_counter() - t0
f = bts[0].frames
print(json.dumps({"seconds": seconds, "import_seconds": imported, "threads": len(bts),
                  "frames": sum(len(b.frames) for b in bts), "named": sum(1 for b in bts for x in b.frames if x.function),
                  "lines": sum(1 for b in bts for x in b.frames if x.line),
                  "trust": sorted({x.trust for b in bts for x in b.frames}),
                  "top": [x.function or "??" for x in f[:3]], "culprit": c.function if c else None}))
"""


def _sh(cmd: list[str], cwd: Path | None = None) -> None:
    subprocess.run(cmd, check=True, capture_output=True, cwd=cwd)


def _crash(argv: list[str], cwd: Path) -> Path:
    t0 = time.perf_counter()
    c = crashers.crash(argv, cwd, timeout=900)
    if c.core is None:
        sys.exit(f"bench_unwind: {c.why}")
    print(f"made {cwd.name}: {c.core.stat().st_size / 2**20:.1f} MiB in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return c.core


def make_cores(work: Path, big_mib: int) -> list[tuple[str, Path, Path, str]]:
    """(name, program, core, "one"|"all") of every core."""
    out: list[tuple[str, Path, Path, str]] = []
    d = work / "deep"
    d.mkdir()
    lib = d / "libdeep.so"
    _sh(["gcc", "-shared", "-fPIC", "-O2", "-fomit-frame-pointer", "-fvisibility=hidden", "-g",
         str(CORES / "libdeep.c"), "-o", str(lib)])
    _sh(["objcopy", "--only-keep-debug", "libdeep.so", "libdeep.so.debug"], cwd=d)
    _sh(["objcopy", "--strip-all", "libdeep.so"], cwd=d)
    _sh(["objcopy", "--add-gnu-debuglink=libdeep.so.debug", "libdeep.so"], cwd=d)
    prog = d / "deep"
    _sh(["gcc", "-O2", "-g", str(CORES / "deep.c"), "-o", str(prog), f"-L{d}", "-ldeep", "-Wl,-rpath,$ORIGIN"])
    for name, argv in (("deep", []), (f"deep big ({big_mib} MiB)", [str(big_mib)])):
        sub = d / ("small" if not argv else "big")
        sub.mkdir()
        out.append((name, prog, _crash([str(prog), *argv], sub), "one"))
    d = work / "abort"
    d.mkdir()
    prog = crashers.build("abort", d, "-O1")
    out.append(("abort (assert)", prog, _crash([str(prog)], d), "one"))
    if shutil.which("g++"):
        d = work / "terminate"
        d.mkdir()
        prog = d / "terminate"
        _sh(["g++", "-O2", "-g", str(CORES / "terminate.cpp"), "-o", str(prog)])
        out.append(("C++ terminate", prog, _crash([str(prog)], d), "one"))
    d = work / "threads"
    d.mkdir()
    prog = crashers.build("threads", d, "-O1", "-pthread")
    out.append(("threads (all 4)", prog, _crash([str(prog)], d), "all"))
    d = work / "python"
    d.mkdir()
    exe = Path(os.path.realpath(sys.executable))
    out.append(("python faulthandler", exe,
                _crash([str(exe), "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"], d), "one"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big-mib", type=int, default=4096, help="size of the big core in MiB (default 4096)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tmp", default="/tmp", help="where the cores are made (and deleted)")
    ap.add_argument("--core", action="append", default=[], metavar="PROG:CORE", help="also measure this core")
    ap.add_argument("--out", help="also write the Markdown report here")
    args = ap.parse_args()

    free = shutil.disk_usage(args.tmp).free
    if free < (args.big_mib + 1024) << 20:
        sys.exit(f"bench_unwind: {args.tmp} has {free >> 20} MiB free, {args.big_mib + 1024} needed")
    work = Path(tempfile.mkdtemp(prefix="crashlens-bench-unwind-", dir=args.tmp))
    try:
        cores = make_cores(work, args.big_mib)
        for spec in args.core:
            prog, core = spec.split(":", 1)
            cores.append((Path(core).name, Path(prog), Path(core), "one"))
        env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONPYCACHEPREFIX=str(work / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        gdb = shutil.which("gdb")
        tools: list[tuple[str, object]] = []
        if gdb:
            tools.append(("gdb -batch -ex bt", lambda prog, core, mode: [
                gdb, "-batch", "-nx", "-ex", "thread apply all bt" if mode == "all" else "bt", str(prog), str(core)]))
        tools.append(("crashlens backtrace", lambda prog, core, mode: [sys.executable, "-c", UNWIND, str(core), mode]))
        measure(tools[-1][1](*cores[0][1:3], "one"), env)            # warm-up: byte-compile once
        best: dict[tuple[str, str], dict] = {}
        for name, prog, core, mode in cores:
            subprocess.run(["cat", str(core)], stdout=subprocess.DEVNULL, check=False)   # page cache warm for all
            for _ in range(args.runs):
                for tool, cmd in tools:
                    r = measure(cmd(prog, core, mode), env)   # type: ignore[operator]
                    key = (name, tool)
                    if key not in best or r["seconds"] < best[key]["seconds"]:
                        best[key] = r
        lines = [f"Host: {platform.node()} ({os.cpu_count()} CPUs), Python {platform.python_version()}, "
                 f"gdb {'present' if gdb else 'absent'}; best of {args.runs} runs; cores made by fixtures/cores.", "",
                 "| core | size | tool | wall s | in call ms | peak RSS MB | × gdb | result |",
                 "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
        for name, prog, core, mode in cores:
            size = core.stat().st_size / 2**20
            g = best.get((name, "gdb -batch -ex bt"))
            for tool, _cmd in tools:
                r = best[(name, tool)]
                incall, result, ratio = "", "", ""
                if tool.startswith("crashlens"):
                    try:
                        j = json.loads(r["stdout"].strip().splitlines()[-1])
                        incall = f"{j['seconds'] * 1e3:.0f}"
                        result = (f"{j['frames']} frames ({j['named']} named, {j['lines']} with a line; "
                                  f"{'/'.join(j['trust'])}); culprit {j['culprit']}")
                    except (ValueError, IndexError, KeyError):
                        result = f"rc {r['rc']}: no result"
                    if g:
                        ratio = f"{r['seconds'] / g['seconds']:.2f}"
                else:
                    frames = [ln for ln in r["stdout"].splitlines() if ln.startswith("#")]
                    result = f"{len(frames)} frames"
                lines.append(f"| {name} | {size:.1f} MiB | {tool} | {r['seconds']:.3f} | {incall} | "
                             f"{r['peak_rss_mb']:.0f} | {ratio} | {result} |")
        report = "\n".join(lines)
        print(report)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(report + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
