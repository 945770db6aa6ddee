#!/usr/bin/env python3
"""Listing the CUDA images of real libraries: crashlens against cuobjdump.

For each library given, in one run:

1. ``cuobjdump -all --list-elf --list-ptx LIB`` (every SASS and PTX image, including
   ``__nv_relfatbin``);
2. a fresh Python process that runs ``crashlens.binary.fatbin.read_cuda_images`` on LIB and
   prints the same listing (``cuobjdump_listing``);

then compares the two listings line by line (printing any difference) and reports wall time
and peak RSS of each, and the ratios.

Each command runs under a small runner process (this script with ``--measure``) that times
it with ``time.perf_counter()`` and reads ``resource.getrusage(RUSAGE_CHILDREN)`` afterwards:
the runner has exactly one child, so ``ru_maxrss`` is that child's peak and the user/sys
times are its own. The crashlens figure includes interpreter start-up and imports.

Usage::

    .venv/bin/python bench/bench_fatbin.py /tmp/crashlens-materials/lib/libtorch_cuda.so ...
    .venv/bin/python bench/bench_fatbin.py LIB... --runs 5 --out bench/out/fatbin.md

cuobjdump comes from ``--cuobjdump``, ``$CRASHLENS_CUOBJDUMP`` or PATH.
"""

from __future__ import annotations

import argparse
import difflib
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

CRASHLENS_SNIPPET = """
import sys
from crashlens.binary.elf import ElfFile
from crashlens.binary.fatbin import cuobjdump_listing, read_cuda_images
with ElfFile(sys.argv[1]) as elf:
    images = read_cuda_images(elf)
lines = cuobjdump_listing(images)
if images.errors:
    lines += ["ERROR " + e for e in images.errors]
sys.stdout.write("\\n".join(lines) + "\\n")
"""


def measure(cmd: list[str], out_path: str, env: dict | None = None) -> dict:
    """Run cmd under a fresh runner process; its stdout goes to out_path."""
    runner = [sys.executable, os.path.abspath(__file__), "--measure", out_path, "--", *cmd]
    res = subprocess.run(runner, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise SystemExit(f"runner failed ({res.returncode}): {res.stderr.strip()}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _measure_main(out_path: str, cmd: list[str]) -> int:
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        res = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "rc": res.returncode,
                "seconds": wall,
                "user": ru.ru_utime,
                "sys": ru.ru_stime,
                "peak_rss_mb": ru.ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10),
                "stderr": res.stderr.decode("utf-8", "replace")[-2000:],
            }
        )
    )
    return 0


def listing(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n") for line in f if line.startswith(("ELF file", "PTX file", "ERROR "))]


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def find_cuobjdump(given: str | None) -> str | None:
    for candidate in (given, os.environ.get("CRASHLENS_CUOBJDUMP"), shutil.which("cuobjdump")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        return _measure_main(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("libraries", nargs="+", help="ELF files with CUDA fatbins")
    ap.add_argument("--cuobjdump", help="cuobjdump binary (default: $CRASHLENS_CUOBJDUMP, then PATH)")
    ap.add_argument("--runs", type=int, default=3, help="crashlens runs per library; the fastest counts (default 3)")
    ap.add_argument("--cuobjdump-runs", type=int, default=1, help="cuobjdump runs per library (default 1; it is slow)")
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="run crashlens with the caller's environment as is; by default it may write and use "
        "compiled bytecode (PYTHONPYCACHEPREFIX under the temp dir), as an installed package does",
    )
    ap.add_argument("--out", help="also write the Markdown report here")
    args = ap.parse_args(argv)

    cuobjdump = find_cuobjdump(args.cuobjdump)
    if cuobjdump is None:
        raise SystemExit("cuobjdump not found: pass --cuobjdump, set CRASHLENS_CUOBJDUMP or put it on PATH")
    version = subprocess.run([cuobjdump, "--version"], capture_output=True, text=True, check=False).stdout.strip().splitlines()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    if not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "crashlens-bench-pycache")
    crashlens_cmd = [sys.executable, "-c", CRASHLENS_SNIPPET]

    rows = []
    all_equal = True
    with tempfile.TemporaryDirectory(prefix="bench-fatbin-") as tmp:
        ref_out, our_out = os.path.join(tmp, "cuobjdump.txt"), os.path.join(tmp, "crashlens.txt")
        floor = measure(["true"], os.path.join(tmp, "true.txt"))["peak_rss_mb"]
        measure(crashlens_cmd + [args.libraries[0]], our_out, env)  # warm-up: imports, bytecode
        for lib in args.libraries:
            warm(lib)
            ref = min(
                (measure([cuobjdump, "-all", "--list-elf", "--list-ptx", lib], ref_out) for _ in range(args.cuobjdump_runs)),
                key=lambda r: r["seconds"],
            )
            theirs = listing(ref_out)
            ours_runs = [measure(crashlens_cmd + [lib], our_out, env) for _ in range(args.runs)]
            ours = min(ours_runs, key=lambda r: r["seconds"])
            if ours["rc"] != 0:
                raise SystemExit(f"crashlens failed on {lib}: {ours['stderr']}")
            mine = listing(our_out)
            equal = mine == theirs
            all_equal &= equal
            if not equal:
                print(f"\n{lib}: listings differ (--- cuobjdump, +++ crashlens):")
                for line in list(difflib.unified_diff(theirs, mine, "cuobjdump", "crashlens", lineterm="", n=1))[:60]:
                    print("  " + line)
            rows.append(
                {
                    "lib": os.path.basename(lib),
                    "mb": os.path.getsize(lib) / 1e6,
                    "elf": sum(line.startswith("ELF file") for line in theirs),
                    "ptx": sum(line.startswith("PTX file") for line in theirs),
                    "ref": ref,
                    "ours": ours,
                    "ours_all": sorted(r["seconds"] for r in ours_runs),
                    "equal": equal,
                }
            )

    lines = [
        "| library | MB | ELF | PTX | cuobjdump s | cuobjdump RSS MB | crashlens s | crashlens RSS MB | speed-up | RSS ratio | lists equal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    def num(x: float) -> str:
        return f"{x:.0f}" if x >= 10 else f"{x:.2g}"

    for r in rows:
        ref, ours = r["ref"], r["ours"]
        lines.append(
            f"| `{r['lib']}` | {num(r['mb'])} | {r['elf']} | {r['ptx']} | {ref['seconds']:.2f} | {ref['peak_rss_mb']:.0f} "
            f"| {ours['seconds']:.3f} | {ours['peak_rss_mb']:.1f} | {num(ref['seconds'] / ours['seconds'])}x "
            f"| {num(ref['peak_rss_mb'] / ours['peak_rss_mb'])}x | {'yes' if r['equal'] else '**NO**'} |"
        )
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    notes = [
        "",
        f"cuobjdump: {version[-1] if version else '?'} ({cuobjdump}); best of {args.cuobjdump_runs}.",
        (
            f"crashlens: Python {platform.python_version()}, best of {args.runs} fresh processes "
            f"(all runs: {'; '.join(', '.join(f'{s:.3f}' for s in r['ours_all']) for r in rows)} s); "
            + ("bytecode cache as the caller's environment has it." if args.no_bytecode_cache else "compiled bytecode cached.")
        ),
        f"Machine: {cpu}, {os.cpu_count()} CPUs. Page cache warm (each library read once before timing).",
        (
            f"Peak RSS: getrusage(RUSAGE_CHILDREN).ru_maxrss of the runner's only child; a no-op command "
            f"measured the same way shows {floor:.1f} MB (the floor every figure includes)."
        ),
    ]
    report = "\n".join(lines + notes)
    print()
    print(report)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(report + "\n")
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
