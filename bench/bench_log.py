#!/usr/bin/env python3
"""Time crashlens against ``grep -c -E`` on one large log.

    python bench/bench_log.py /tmp/train-1g.log
    python bench/bench_log.py /tmp/train-1g.log --runs 5 --sequential --out bench/out/1g.md

Runs, each in its own subprocess, in rounds (every tool once per round, so
that drift of a shared machine hits all of them alike):

(a) ``grep -c -E '<alternation of the anchor words>' FILE``;
(b) ``crashlens analyze --json FILE``, when a ``crashlens`` command is on PATH
    or next to the running Python (as in an unactivated virtualenv);
(c) a Python process that runs ``crashlens.text.select.select_lines`` over
    FILE with the anchors ``crashlens analyze`` uses (the rule base's) and
    consumes every selected line;
(d) the same with the anchor words of (a) (escaped, so literal).

For each it reports the best wall-clock seconds, for (c) and (d) also the
seconds spent in select_lines itself (measured inside the process, without
interpreter start-up, imports and rule loading), and the peak RSS.  With
``--sequential``, (b) to (d) run once more with ``CRASHLENS_SELECT_PROCS=1``:
select_lines' sequential path instead of its parallel scan.  Every command is
started by a small runner process (this script with ``--measure``) that times
it and reads ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` afterwards;
that is the peak of the largest single process of the command's tree
(select_lines' worker processes included), not a sum.  The file is read once
beforehand so that every run finds it in the page cache (``--no-warm`` to
skip that).
"""

from __future__ import annotations

from measure import _main as _runner_main, measure  # noqa: E402  (bench/measure.py)
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

# Consumes every line select_lines yields; prints the stats and the time
# spent in select_lines as JSON.  argv: FILE --rules | FILE WORD...
SELECT_SNIPPET = """
import dataclasses, json, re, sys, time
from crashlens.text.select import SelectStats, select_lines
path, words = sys.argv[1], sys.argv[2:]
if words == ["--rules"]:
    from crashlens.engine.collect import rule_anchors
    from crashlens.engine.rules import load_rules
    anchors = rule_anchors(load_rules())
else:
    anchors = [re.escape(a) for a in words]
stats = SelectStats()
t0 = time.perf_counter()
with open(path, "rb") as f:
    for _ in select_lines(f, anchors, stats=stats):
        pass
out = dataclasses.asdict(stats)
out["seconds"] = time.perf_counter() - t0
out["anchors"] = len(anchors)
print(json.dumps(out))
"""


def ere_escape(word: str) -> str:
    return re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", word)


def warm(path: str) -> None:
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass


def find_cli() -> str | None:
    cli = shutil.which("crashlens")
    if cli is None:  # e.g. run as .venv/bin/python without activating the venv
        here = os.path.join(os.path.dirname(sys.executable), "crashlens")
        cli = here if os.access(here, os.X_OK) else None
    return cli


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        return _runner_main(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="log file to analyse")
    ap.add_argument(
        "--anchors",
        nargs="+",
        default=DEFAULT_ANCHORS,
        metavar="WORD",
        help="anchor words (literal) for grep and select_lines (words); default: %(default)s",
    )
    ap.add_argument(
        "--skip",
        nargs="+",
        default=[],
        choices=["cli", "select-rules", "select-words"],
        help="tools not to run",
    )
    ap.add_argument(
        "--sequential",
        action="store_true",
        help="also run the crashlens tools with CRASHLENS_SELECT_PROCS=1 (no parallel scan)",
    )
    ap.add_argument("--runs", type=int, default=3, help="rounds; the best run of each tool is reported")
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
    env = dict(os.environ)
    src = os.path.join(REPO, "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("CRASHLENS_SELECT_PROCS", None)
    seq_env = dict(env, CRASHLENS_SELECT_PROCS="1")

    # (name, command, environment, kind)
    tools: list[tuple[str, list[str], dict | None, str]] = [
        ("`grep -c -E`", [grep, "-c", "-E", alternation, path], None, "grep")
    ]
    notes = []
    cli = find_cli()
    variants = [("", env)] + ([(", sequential", seq_env)] if args.sequential else [])
    for suffix, e in variants:
        if "cli" not in args.skip:
            if cli is None:
                if not suffix:
                    notes.append("`crashlens` command not installed: CLI not timed.")
            else:
                tools.append((f"`crashlens analyze --json`{suffix}", [cli, "analyze", "--json", path], e, "cli"))
        py = [sys.executable, "-c", SELECT_SNIPPET, path]
        if "select-rules" not in args.skip:
            tools.append((f"select_lines, rule anchors{suffix}", py + ["--rules"], e, "select"))
        if "select-words" not in args.skip:
            tools.append((f"select_lines, grep's words{suffix}", py + args.anchors, e, "select"))

    runs: dict[str, list[dict]] = {name: [] for name, *_ in tools}
    for _round in range(max(1, args.runs)):
        for name, cmd, e, kind in tools:
            r = measure(cmd, e)
            ok = (0, 1) if kind == "grep" else (0,)  # grep -c exits 1 when nothing matched
            if r["rc"] not in ok:
                raise SystemExit(f"{name} failed ({r['rc']}): {r['stderr'].strip()}")
            if kind == "select":
                r["select"] = json.loads(r["stdout"].strip().splitlines()[-1])
            runs[name].append(r)
    best = {name: min(rs, key=lambda r: r["seconds"]) for name, rs in runs.items()}
    g = best["`grep -c -E`"]
    gs = g["seconds"]

    # Any child of a Python runner starts with the runner's RSS high-water
    # mark (the kernel keeps the larger of it and the exec'd program's), so
    # measure that floor with a command that does nothing.
    true_cmd = shutil.which("true") or "/bin/true"
    floor = measure([true_cmd])["peak_rss_mb"]

    lines = [
        f"File: `{os.path.basename(path)}`, {size / 1e9:.2f} GB ({size:,} bytes); "
        f"grep words ({len(args.anchors)}): {', '.join(args.anchors)}",
        "",
        "| tool | seconds | in select_lines | peak RSS MB | ratio to grep |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    details = []
    for name, _cmd, _e, kind in tools:
        r = best[name]
        inner = ""
        if kind == "select":
            st = r["select"]
            inner = f"{min(x['select']['seconds'] for x in runs[name]):.2f}"
            details.append(
                f"{name}: {st['anchors']} anchors, engine {st['engine']}, mode {st['mode']}, "
                f"{st['kept_lines']:,} of {st['total_lines']:,} lines kept, "
                f"{st['truncated_lines']} cut, {st['regex_anchors']} anchors on the regex fallback."
            )
        lines.append(
            f"| {name} | {r['seconds']:.2f} | {inner} | {r['peak_rss_mb']:.1f} | {r['seconds'] / gs:.2f} |"
        )
    lines.append("")
    lines.append(f"grep matching lines: {g['stdout'].strip()}")
    lines.extend(details)
    lines.extend(notes)
    lines.append(
        "All runs (s): "
        + "; ".join(f"{name.replace('`', '')}: " + ", ".join(f"{r['seconds']:.2f}" for r in runs[name]) for name, *_ in tools)
        + "."
    )
    lines.append(
        f"Peak RSS is measured with getrusage(RUSAGE_CHILDREN) in a Python runner (largest single "
        f"process); a no-op command measured the same way shows {floor:.1f} MB (the floor)."
    )
    lines.append(
        f"Rounds: {args.runs} (best shown); page cache "
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
