#!/usr/bin/env python3
"""Time crashlens' ELF facts against ``readelf -d -V -n -W`` and pyelftools on one large library.

    python bench/bench_elf.py /tmp/crashlens-materials/lib/libtorch_cpu.so
    python bench/bench_elf.py LIB [LIB...] --runs 5 --out bench/out/elf.md

Runs, one after the other, each in its own subprocess:

(a) ``readelf -d -V -n -W FILE`` (dynamic section, version sections, notes);
(b) a Python process that runs ``crashlens.binary.elffacts.read_elf_facts(FILE)``: headers,
    dynamic section, NEEDED/SONAME/RPATH/RUNPATH, version needs and definitions, notes,
    .comment and the dynamic symbol count;
(c) a Python process that gets the same facts with pyelftools (ELFFile, DynamicSection,
    GNUVerNeedSection, GNUVerDefSection, NoteSection, num_symbols()).

For each it reports wall-clock seconds and peak RSS (a small runner process, this script with
``--measure``, times the command and reads ``getrusage(RUSAGE_CHILDREN)``), and for the Python
tools also the time spent in the work itself, without interpreter start-up and imports (first
call and best of ``--repeat`` calls in the same process). The file is read once beforehand so
that every run finds it in the page cache (``--no-warm`` to skip that). The script checks that
crashlens and pyelftools found the same facts.
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
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILE = "/tmp/crashlens-materials/lib/libtorch_cpu.so"


# -- workers: the Python tools, run as `bench_elf.py --worker TOOL FILE --repeat N` -----------------------
def _crashlens_facts(path: str) -> dict:
    from crashlens.binary.elffacts import read_elf_facts

    f = read_elf_facts(path)
    return {
        "needed": list(f.needed), "soname": f.soname, "rpath": f.rpath, "runpath": f.runpath,
        "verneed": f.required_versions, "verdef": [d.name for d in f.version_defs],
        "dynsym_count": f.dynsym_count, "build_id": f.build_id, "errors": list(f.errors),
    }


def _pyelftools_facts(path: str) -> dict:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection
    from elftools.elf.sections import NoteSection

    out: dict = {"needed": [], "soname": None, "rpath": None, "runpath": None, "verneed": {}, "verdef": [],
                 "dynsym_count": None, "build_id": None, "errors": []}
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        _ = (elf.elfclass, elf["e_machine"], elf["e_type"])
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_INTERP":
                out["interpreter"] = str(seg.get_interp_name())
            elif seg["p_type"] == "PT_GNU_STACK":
                out["stack_flags"] = seg["p_flags"]
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                for tag in sec.iter_tags():
                    t = tag.entry.d_tag
                    if t == "DT_NEEDED":
                        out["needed"].append(tag.needed)
                    elif t == "DT_SONAME":
                        out["soname"] = tag.soname
                    elif t == "DT_RPATH":
                        out["rpath"] = tag.rpath
                    elif t == "DT_RUNPATH":
                        out["runpath"] = tag.runpath
            elif isinstance(sec, GNUVerNeedSection):
                for verneed, auxes in sec.iter_versions():
                    out["verneed"].setdefault(verneed.name, []).extend(a.name for a in auxes)
            elif isinstance(sec, GNUVerDefSection):
                for verdef, auxes in sec.iter_versions():
                    names = [a.name for a in auxes]
                    out["verdef"].append(names[0] if names else "")
            elif isinstance(sec, NoteSection) and sec.name != ".gnu.build.attributes":
                for note in sec.iter_notes():     # same notes as crashlens (annobin's left out)
                    # pyelftools names a note's type without looking at its owner (a SystemTap
                    # note, type 3, reads as NT_GNU_BUILD_ID): check the owner here
                    if note["n_name"] == "GNU" and note["n_type"] == "NT_GNU_BUILD_ID" and not out["build_id"]:
                        out["build_id"] = note["n_desc"]
            elif sec["sh_type"] == "SHT_DYNSYM":
                out["dynsym_count"] = sec.num_symbols()
            elif sec.name == ".comment":
                sec.data()
    return out


def _worker(tool: str, path: str, repeat: int, extras: bool) -> int:
    t0 = time.perf_counter()
    if tool == "crashlens":
        import crashlens.binary.elffacts  # noqa: F401
        fn = _crashlens_facts
    else:
        import elftools.elf.elffile  # noqa: F401
        fn = _pyelftools_facts
    imports = time.perf_counter() - t0
    times, facts = [], None
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        facts = fn(path)
        times.append(time.perf_counter() - t)
    out = {"imports": imports, "first": times[0], "best": min(times), "facts": facts}
    if extras and tool == "crashlens":
        from crashlens.binary.elf import ElfFile
        from crashlens.binary.elffacts import DynamicSymbols, read_elf_facts
        with ElfFile(path) as elf:
            t = time.perf_counter()
            n = sum(1 for _ in DynamicSymbols(elf))
            out["iterate_symbols"] = (time.perf_counter() - t, n)
            syms = DynamicSymbols(elf)
            undefined = next((s.name for s in syms if not s.defined), None)
            defined = next((s.name for s in syms if s.defined and s.binding != "LOCAL"), None)
            t = time.perf_counter()
            syms2 = DynamicSymbols(elf)
            syms2.defines(defined or "x")
            out["defines"] = time.perf_counter() - t
            t = time.perf_counter()
            syms2.needs_symbol(undefined or "x")
            out["needs_symbol"] = time.perf_counter() - t
            t = time.perf_counter()
            comps = read_elf_facts(elf, components=True).components
            out["components"] = (time.perf_counter() - t, [f"{c.name} {c.version} ({c.where})" for c in comps or ()])
    if extras and tool == "pyelftools":
        from elftools.elf.elffile import ELFFile
        with open(path, "rb") as fh:
            t = time.perf_counter()
            n = sum(1 for _ in ELFFile(fh).get_section_by_name(".dynsym").iter_symbols())
            out["iterate_symbols"] = (time.perf_counter() - t, n - 1)
    print(json.dumps(out))
    return 0


# -- measuring --------------------------------------------------------------------------------------------
def warm(path: str) -> None:
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass


def evict(path: str) -> None:
    """Drop this one file's pages from the page cache (clean pages only; nothing else is touched)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def bench_file(path: str, args: argparse.Namespace, env: dict) -> list[str]:
    size = os.path.getsize(path)
    if not args.no_warm and not args.cold:
        warm(path)
    readelf = shutil.which("readelf")
    me = os.path.abspath(__file__)
    tools: list[tuple[str, list[str], str]] = []
    if readelf:
        tools.append(("`readelf -d -V -n -W`", [readelf, "-d", "-V", "-n", "-W", path], "readelf"))
    tools.append(("crashlens `read_elf_facts`", [sys.executable, me, "--worker", "crashlens", path,
                                                 "--repeat", str(args.repeat)], "crashlens"))
    tools.append(("pyelftools", [sys.executable, me, "--worker", "pyelftools", path,
                                 "--repeat", str(args.repeat)], "pyelftools"))
    runs: dict[str, list[dict]] = {name: [] for name, *_ in tools}
    for _round in range(max(1, args.runs)):
        for name, cmd, kind in tools:
            if args.cold:
                evict(path)
            r = measure(cmd, env)
            if r["rc"] != 0:
                raise SystemExit(f"{name} failed ({r['rc']}): {r['stderr'].strip()}")
            if kind != "readelf":
                r["inner"] = json.loads(r["stdout"].strip().splitlines()[-1])
            runs[name].append(r)
    best = {name: min(rs, key=lambda r: r["seconds"]) for name, rs in runs.items()}
    base_name = tools[0][0]
    base = best[base_name]["seconds"]
    floor = measure([shutil.which("true") or "/bin/true"])["peak_rss_mb"]

    lines = [f"File: `{os.path.basename(path)}`, {size / 1e6:.0f} MB ({size:,} bytes)", "",
             f"| tool | seconds (process) | in the work: first call | best of {args.repeat} | imports | peak RSS MB | "
             f"ratio to {base_name.split()[0].strip('`')} |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, _cmd, kind in tools:
        r = best[name]
        if kind == "readelf":
            inner = "| | |"
        else:
            first = min(x["inner"]["first"] for x in runs[name])
            bestw = min(x["inner"]["best"] for x in runs[name])
            imp = min(x["inner"]["imports"] for x in runs[name])
            inner = f"{first * 1000:.1f} ms | {bestw * 1000:.1f} ms | {imp * 1000:.0f} ms"
        lines.append(f"| {name} | {r['seconds']:.3f} | {inner} | {r['peak_rss_mb']:.1f} | {r['seconds'] / base:.2f} |")
    lines.append("")
    c = best["crashlens `read_elf_facts`"]["inner"]["facts"]
    p = best["pyelftools"]["inner"]["facts"]
    keys = ("needed", "soname", "rpath", "runpath", "verneed", "verdef", "dynsym_count", "build_id")
    diff = [k for k in keys if c.get(k) != p.get(k)]
    lines.append(f"crashlens and pyelftools agree on {', '.join(keys)}: "
                 + ("yes" if not diff else f"NO ({', '.join(diff)})")
                 + f"; {c['dynsym_count']:,} dynamic symbols, {len(c['needed'])} NEEDED, "
                 f"{sum(len(v) for v in c['verneed'].values())} required versions; crashlens errors: {c['errors'] or 'none'}.")
    inner_c = min(x["inner"]["best"] for x in runs["crashlens `read_elf_facts`"])
    inner_p = min(x["inner"]["best"] for x in runs["pyelftools"])
    lines.append(f"In the work itself pyelftools takes {inner_p / inner_c:.0f}x crashlens' time.")
    if args.extras:
        r = measure([sys.executable, me, "--worker", "crashlens", path, "--repeat", "1", "--extras"], env)
        x = json.loads(r["stdout"].strip().splitlines()[-1])
        q = measure([sys.executable, me, "--worker", "pyelftools", path, "--repeat", "1", "--extras"], env)
        y = json.loads(q["stdout"].strip().splitlines()[-1])
        lines.append("")
        lines.append("On demand (crashlens, in-process): iterating all "
                     f"{x['iterate_symbols'][1]:,} dynamic symbols with names and versions "
                     f"{x['iterate_symbols'][0]:.2f} s (pyelftools, names only: {y['iterate_symbols'][0]:.2f} s); "
                     f"`defines()` {x['defines'] * 1000:.1f} ms; `needs_symbol()` {x['needs_symbol'] * 1000:.1f} ms; "
                     f"components scan {x['components'][0] * 1000:.0f} ms, found: "
                     f"{', '.join(x['components'][1]) or 'none'}.")
    lines.append(f"All runs (s): " + "; ".join(
        f"{name.replace('`', '')}: " + ", ".join(f"{r['seconds']:.3f}" for r in runs[name]) for name, *_ in tools) + ".")
    lines.append(f"Peak RSS: getrusage(RUSAGE_CHILDREN) in a Python runner; a no-op command measured the same way "
                 f"shows {floor:.1f} MB (the floor).")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        return _runner_main(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    if argv[:1] == ["--worker"]:
        ap = argparse.ArgumentParser()
        ap.add_argument("tool", choices=["crashlens", "pyelftools"])
        ap.add_argument("file")
        ap.add_argument("--repeat", type=int, default=5)
        ap.add_argument("--extras", action="store_true")
        a = ap.parse_args(argv[1:])
        return _worker(a.tool, a.file, a.repeat, a.extras)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", default=[DEFAULT_FILE], help=f"ELF files (default: {DEFAULT_FILE})")
    ap.add_argument("--runs", type=int, default=3, help="rounds; the best run of each tool is reported")
    ap.add_argument("--repeat", type=int, default=5, help="calls inside each Python process (first and best reported)")
    ap.add_argument("--extras", action="store_true", help="also time symbol iteration, lookups and the components scan")
    ap.add_argument("--out", help="also write the Markdown report to this file")
    ap.add_argument("--no-warm", action="store_true", help="do not pre-read the files")
    ap.add_argument("--cold", action="store_true",
                    help="evict each file from the page cache (posix_fadvise DONTNEED) before every run; "
                         "the in-process 'best of' figures are then warm again")
    args = ap.parse_args(argv)

    env = dict(os.environ)
    src = os.path.join(REPO, "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    lines: list[str] = []
    for f in args.files:
        if not os.path.exists(f):
            raise SystemExit(f"{f}: no such file (see bench/README.md, 'bench_elf.py', to fetch one)")
        lines += bench_file(os.path.abspath(f), args, env) + [""]
    cache = "evicted before every run (--cold)" if args.cold else ("not warmed" if args.no_warm else "warmed")
    lines.append(f"Rounds: {args.runs} (best shown); page cache {cache}; "
                 f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs; "
                 f"readelf: {_readelf_version()}.")
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(report)
    return 0


def _readelf_version() -> str:
    exe = shutil.which("readelf")
    if not exe:
        return "not installed"
    return subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


if __name__ == "__main__":
    sys.exit(main())
