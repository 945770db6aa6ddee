#!/usr/bin/env python3
"""Time crashlens against ``grep -c -E`` on one large log.

    python bench/bench_log.py /tmp/train-1g.log
    python bench/bench_log.py /tmp/train-1g.log --anchors Traceback 'CUDA error' --out bench/out/1g.md

Runs, one after the other, each in its own subprocess:

(a) ``grep -c -E '<alternation of the anchor words>' FILE``
(b) ``crashlens analyze --json FILE`` when a ``crashlens`` command is on PATH
    (or next to the running Python, as in an unactivated virtualenv);
    otherwise (or with ``--mode select``) a Python process that runs
    ``crashlens.text.select.select_lines`` over FILE with the same anchor
    words (escaped, so they are literal) and consumes every selected line.

For each it reports wall-clock seconds and peak RSS.  Every command is started
by a small runner process (this script with ``--measure``) that times it and
reads ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` afterwards, so each
figure covers exactly that one command.  The file is read once beforehand so
that every run finds it in the page cache (``--no-warm`` to skip that).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time

DEFAULT_ANCHORS = [
    "Traceback",
    "Error",
    "error:",
    "CUDA",
    "NCCL",
    "Killed",
    "Segmentation fault",
    "Illegal instruction",
    "out of memory",
    "Xid",
    "core dumped",
    "Assertion",
    "FAILED",
]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Consumes every line select_lines yields; prints the stats as JSON.
SELECT_SNIPPET = """
import dataclasses, json, re, sys
from crashlens.text.select import SelectStats, select_lines
path, anchors = sys.argv[1], sys.argv[2:]
stats = SelectStats()
with open(path, "rb", buffering=0) as f:
    for _ in select_lines(f, [re.escape(a) for a in anchors], stats=stats):
        pass
print(json.dumps(dataclasses.asdict(stats)))
"""


def measure(cmd: list[str], env: dict | None = None) -> dict:
    """Run cmd from a fresh runner process; wall seconds, peak RSS, output."""
    runner = [sys.executable, os.path.abspath(__file__), "--measure", "--", *cmd]
    res = subprocess.run(runner, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"runner failed ({res.returncode}): {res.stderr.strip()}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _measure_main(cmd: list[str]) -> int:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "cmd": cmd,
                "rc": res.returncode,
                "seconds": wall,
                "user": ru.ru_utime,
                "sys": ru.ru_stime,
                # Linux reports KiB, macOS bytes
                "peak_rss_mb": ru.ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10),
                "stdout": res.stdout.decode("utf-8", "replace")[-4000:],
                "stderr": res.stderr.decode("utf-8", "replace")[-2000:],
            }
        )
    )
    return 0


def ere_escape(word: str) -> str:
    return re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", word)


def warm(path: str) -> None:
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass


def best_of(runs: int, cmd: list[str], env: dict | None = None) -> dict:
    results = [measure(cmd, env) for _ in range(runs)]
    for r in results:
        if r["rc"] not in (0, 1):  # grep -c exits 1 when nothing matched
            raise SystemExit(f"{cmd[0]} failed ({r['rc']}): {r['stderr'].strip()}")
    best = min(results, key=lambda r: r["seconds"])
    best["all_seconds"] = [r["seconds"] for r in results]
    return best


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        return _measure_main(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="log file to analyse")
    ap.add_argument(
        "--anchors",
        nargs="+",
        default=DEFAULT_ANCHORS,
        metavar="WORD",
        help="anchor words (literal); default: %(default)s",
    )
    ap.add_argument(
        "--mode",
        choices=["auto", "cli", "select"],
        default="auto",
        help="auto: `crashlens analyze --json` if installed, else select_lines; "
        "cli / select: force one of them",
    )
    ap.add_argument("--runs", type=int, default=1, help="runs per tool, best is reported")
    ap.add_argument("--out", help="also write the Markdown report to this file")
    ap.add_argument("--no-warm", action="store_true", help="do not pre-read the file")
    args = ap.parse_args(argv)

    path = os.path.abspath(args.file)
    size = os.path.getsize(path)
    if not args.no_warm:
        warm(path)

    grep = shutil.which("grep")
    if grep is None:
        raise SystemExit("grep not found")
    alternation = "|".join(ere_escape(a) for a in args.anchors)
    g = best_of(args.runs, [grep, "-c", "-E", alternation, path])

    cli = shutil.which("crashlens")
    if cli is None:  # e.g. run as .venv/bin/python without activating the venv
        here = os.path.join(os.path.dirname(sys.executable), "crashlens")
        cli = here if os.access(here, os.X_OK) else None
    use_cli = args.mode == "cli" or (args.mode == "auto" and cli is not None)
    note = ""
    if use_cli:
        if cli is None:
            raise SystemExit("--mode cli: no `crashlens` command on PATH")
        tool = "crashlens analyze --json"
        c = best_of(args.runs, [cli, "analyze", "--json", path])
        if c["rc"] != 0:
            raise SystemExit(f"crashlens failed ({c['rc']}): {c['stderr'].strip()}")
        details = ""
    else:
        if args.mode == "auto":
            note = (
                "`crashlens` command not installed: timed "
                "`crashlens.text.select.select_lines` directly instead "
                "(every selected line consumed, nothing else done)."
            )
        env = dict(os.environ)
        src = os.path.join(REPO, "src")
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        tool = "select_lines (python)"
        c = best_of(args.runs, [sys.executable, "-c", SELECT_SNIPPET, path, *args.anchors], env)
        if c["rc"] != 0:
            raise SystemExit(f"select_lines run failed: {c['stderr'].strip()}")
        st = json.loads(c["stdout"].strip().splitlines()[-1])
        details = (
            f"select_lines: engine {st['engine']}, mode {st['mode']}, "
            f"{st['kept_lines']:,} of {st['total_lines']:,} lines kept, "
            f"{st['truncated_lines']} cut, {st['regex_anchors']} anchors on the regex fallback."
        )

    # Any child of a Python runner starts with the runner's RSS high-water
    # mark (the kernel keeps the larger of it and the exec'd program's), so
    # measure that floor with a command that does nothing.
    true_cmd = shutil.which("true") or "/bin/true"
    floor = measure([true_cmd])["peak_rss_mb"]

    gs = g["seconds"]
    rows = [
        ("`grep -c -E`", g),
        (f"`{tool}`", c),
    ]
    lines = [
        f"File: `{os.path.basename(path)}`, {size / 1e9:.2f} GB ({size:,} bytes); "
        f"{len(args.anchors)} anchors: {', '.join(args.anchors)}",
        "",
        "| tool | seconds | peak RSS MB | ratio to grep |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, r in rows:
        lines.append(
            f"| {name} | {r['seconds']:.2f} | {r['peak_rss_mb']:.1f} | {r['seconds'] / gs:.2f} |"
        )
    lines.append("")
    lines.append(f"grep matching lines: {g['stdout'].strip()}")
    if details:
        lines.append(details)
    if note:
        lines.append(note)
    lines.append(
        f"Peak RSS is measured with getrusage(RUSAGE_CHILDREN) in a Python runner; "
        f"a no-op command measured the same way shows {floor:.1f} MB (the floor)."
    )
    lines.append(
        f"Runs per tool: {args.runs} (best shown); page cache "
        f"{'not ' if args.no_warm else ''}warmed; {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, "
        f"LC_ALL={os.environ.get('LC_ALL', '')!s} LANG={os.environ.get('LANG', '')!s}."
    )
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
