#!/usr/bin/env python3
"""Core files: crashlens' notes-only triage and crash-site analysis against gdb, on the same cores.

    python bench/bench_core.py                          # small cores + a 2 GiB one, best of 3
    python bench/bench_core.py --big-mib 4096 --runs 5 --out bench/out/core.md
    python bench/bench_core.py --core PROG:CORE ...     # your own cores as well (PROG for gdb)

The cores are made here, in a temporary folder under --tmp (default /tmp), by the programs of
fixtures/cores (gcc, `ulimit -c unlimited`), and deleted at the end:
  segv      a store through a null pointer (a ~300 KB core)
  python    `python -X faulthandler -c 'import ctypes; ctypes.string_at(0)'`: the handler
            re-raises SIGSEGV, so the real fault has to be recovered from the signal frame
  big       big.c with --big-mib MiB allocated and touched, then SIGSEGV (a core of that size)

Each command runs in its own subprocess, started by a small runner process (this script with
--measure) that waits for it with os.wait4: that child's peak RSS (ru_maxrss). The runner keeps
the measurement clean: Linux carries the parent's RSS high-water mark into a child across exec,
so the bench itself (which reads the cores to warm the page cache) must not be the parent.
Per core and tool the fastest of --runs rounds is shown.
(a) `gdb -batch -ex bt -ex 'x/i $pc' PROG CORE`: the backtrace and faulting instruction as people
    get them today (gdb reads the libraries and, where installed, their debug files).
(b) crashlens triage: read_core() + signalled_thread() + to_json(): threads, signal, siginfo,
    process, auxv, mapped files, XCR0: notes only, no memory.
(c) crashlens crash site: read_core() + crash_site(core, cpu_flags=/proc/cpuinfo): the crashing
    thread, signal-frame recovery, the instruction decoded from core memory or the mapped file,
    module, offset, function, ISA verdict.
For (b) and (c) the process also times the call itself, without interpreter start-up and
imports: the "in call" column.
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
sys.path.insert(0, str(REPO / "fixtures" / "cores"))
import crashers  # noqa: E402

TRIAGE = """
import json, sys, time
t0 = time.perf_counter()
from crashlens.binary.core import read_core
imported = time.perf_counter() - t0
t0 = time.perf_counter()
with read_core(sys.argv[1]) as core:
    thread, why = core.signalled_thread()
    summary = core.to_json()
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "import_seconds": imported, "thread": thread.tid if thread else None,
                  "signal": summary["signal"], "threads": len(summary["threads"]), "files": summary["files"],
                  "segments": summary["segments"]}))
"""

SITE = """
import json, sys, time
t0 = time.perf_counter()
from crashlens.binary.core import read_core
from crashlens.binary.crashsite import crash_site
imported = time.perf_counter() - t0
cpu = open("/proc/cpuinfo").read()
t0 = time.perf_counter()
with read_core(sys.argv[1]) as core:
    site = crash_site(core, cpu_flags=cpu)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "import_seconds": imported, "pc": hex(site.pc or 0), "method": site.method,
                  "where": site.location, "instruction": site.instruction.text if site.instruction else None,
                  "signal": site.signal_name, "cpu_supports": site.cpu_supports}))
"""


def _run_child(argv: list[str]) -> None:
    """--measure mode: run argv, print {wall, rss_kib, rc, stdout} as JSON."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read() if p.stdout else b""
    _pid, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stdout.close()  # type: ignore[union-attr]
    print(json.dumps({"wall": wall, "rss_kib": usage.ru_maxrss, "rc": p.returncode,
                      "stdout": out.decode("utf-8", "replace")}))


def measure(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Run argv under the runner; wall seconds, its peak RSS (KiB) and its stdout."""
    r = subprocess.run([sys.executable, __file__, "--measure", *argv], capture_output=True, text=True, env=env)
    return json.loads(r.stdout)


def make_cores(work: Path, big_mib: int) -> list[tuple[str, Path, Path]]:
    cores = []
    for name, flags, argv in (("segv", ("-O1",), ()), ("big", ("-O1",), (str(big_mib),))):
        d = work / name
        d.mkdir()
        prog = crashers.build(name, d, *flags)
        t0 = time.perf_counter()
        c = crashers.crash([str(prog), *argv], d, timeout=600)
        if c.core is None:
            sys.exit(f"bench_core: {c.why}")
        print(f"made {name}: {c.core.stat().st_size / 2**20:.1f} MiB in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        cores.append((name if name != "big" else f"big ({big_mib} MiB)", prog, c.core))
    d = work / "python"
    d.mkdir()
    c = crashers.crash([sys.executable, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"], d)
    if c.core is not None:
        cores.insert(1, ("python faulthandler", Path(sys.executable), c.core))
    return cores


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        _run_child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big-mib", type=int, default=2048, help="size of the big core in MiB (default 2048)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tmp", default="/tmp", help="where the cores are made (and deleted)")
    ap.add_argument("--core", action="append", default=[], metavar="PROG:CORE", help="also measure this core")
    ap.add_argument("--skip", nargs="*", default=[], choices=["gdb", "triage", "site"])
    ap.add_argument("--out", help="also write the Markdown report here")
    args = ap.parse_args()

    free = shutil.disk_usage(args.tmp).free
    if free < (args.big_mib + 1024) << 20:
        sys.exit(f"bench_core: {args.tmp} has {free >> 20} MiB free, {args.big_mib + 1024} needed")
    work = Path(tempfile.mkdtemp(prefix="crashlens-bench-core-", dir=args.tmp))
    try:
        cores = make_cores(work, args.big_mib)
        for spec in args.core:
            prog, core = spec.split(":", 1)
            cores.append((Path(core).name, Path(prog), Path(core)))
        env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        gdb = shutil.which("gdb")
        tools = []
        if gdb and "gdb" not in args.skip:
            tools.append(("gdb -batch -ex bt -ex 'x/i $pc'", lambda prog, core: [gdb, "-batch", "-nx", "-ex", "bt",
                                                                               "-ex", "x/i $pc", str(prog), str(core)]))
        if "triage" not in args.skip:
            tools.append(("crashlens triage (notes only)", lambda prog, core: [sys.executable, "-c", TRIAGE, str(core)]))
        if "site" not in args.skip:
            tools.append(("crashlens crash_site", lambda prog, core: [sys.executable, "-c", SITE, str(core)]))
        best: dict[tuple[str, str], dict] = {}
        for name, prog, core in cores:
            subprocess.run(["cat", str(core)], stdout=subprocess.DEVNULL, check=False)   # page cache warm for all
            for _ in range(args.runs):
                for tool, cmd in tools:
                    r = measure(cmd(prog, core), env)
                    key = (name, tool)
                    if key not in best or r["wall"] < best[key]["wall"]:
                        best[key] = r
        lines = [f"Host: {platform.node()} ({os.cpu_count()} CPUs), Python {platform.python_version()}, "
                 f"gdb {'present' if gdb else 'absent'}; best of {args.runs} runs; cores made by fixtures/cores.", "",
                 "| core | size | tool | wall s | in call ms | peak RSS MB | result |",
                 "| --- | ---: | --- | ---: | ---: | ---: | --- |"]
        for name, prog, core in cores:
            size = core.stat().st_size / 2**20
            for tool, _cmd in tools:
                r = best[(name, tool)]
                incall, result = "", ""
                if tool.startswith("crashlens"):
                    try:
                        j = json.loads(r["stdout"].strip().splitlines()[-1])
                        incall = f"{j['seconds'] * 1e3:.1f}"
                        if "where" in j:
                            result = f"{j['signal']} {j['method']} {j['where']} `{j['instruction']}`"
                        else:
                            result = f"{j['signal']}, {j['threads']} thread(s), {j['files']} files"
                    except (ValueError, IndexError, KeyError):
                        result = f"rc {r['rc']}: no result"
                else:
                    frames = [ln for ln in r["stdout"].splitlines() if ln.startswith("#")]
                    insn = next((ln for ln in r["stdout"].splitlines() if ln.startswith("=>")), "")
                    result = f"{len(frames)} frames; {' '.join(insn.split()[1:])[:60]}"
                lines.append(f"| {name} | {size:.1f} MiB | {tool} | {r['wall']:.3f} | {incall} | "
                             f"{r['rss_kib'] / 1024:.0f} | {result} |")
        report = "\n".join(lines)
        print(report)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(report + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
