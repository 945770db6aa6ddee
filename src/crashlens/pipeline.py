"""The pipeline: inputs -> lines -> evidence -> rules -> ranked causes -> Analysis.

Each stage is a function of the previous stage's dataclasses (model.py); this module only
wires them:

    inputs.collect_inputs         paths -> InputFiles
    engine.collect                text inputs -> Lines -> evidence (tracebacks, kernel, outcomes)
    parsers.environment, .distributed   environment facts, collective progress
    binary.stage                  cores -> CrashReports and `crash` evidence
    inspect.inspect_libraries     libraries involved -> LibraryFacts and `library` evidence
    engine.match, engine.rank     rules -> firings -> ranked causes
    engine.codepath               the code path of the top cause
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from .binary.stage import match_gpu_modules, read_crashes
from .engine.advice import fit_remedies
from .engine.codepath import code_path, exception_for, gpu_crash, gpu_fault
from .engine.collect import FULL_BELOW, collect_evidence, cpu_flags_from_file
from .engine.match import EvidenceSet, evaluate
from .engine.similar import propose as propose_similar
from .engine.rank import rank
from .engine.rules import load_rules
from .inputs import collect_inputs
from .model import Analysis, Evidence, InputFile
from .parsers.distributed import parse_collectives
from .parsers.environment import parse_environment

__all__ = ["Options", "analyze_inputs", "analyze_paths", "analyze_text", "cpu_flags_from_file",
           "text_analyzer"]


@dataclass(frozen=True)
class Options:
    rules_dir: Path | None = None
    full_below: int = FULL_BELOW  # bytes of a text input read in full; beyond, lines around hits
    lib_paths: tuple[Path, ...] = ()  # where to look for libraries named in the evidence
    sysroot: Path | None = None  # re-root absolute library paths (a copy of the crashed machine's /)
    gpu: str | None = None  # the device, when the logs do not say (sm_90, 9.0, H100…)
    cpu_flags: frozenset[str] | None = None  # the CPU's flags, when the logs do not list them
    max_libraries: int = 32  # libraries inspected per analysis


def analyze_inputs(inputs: Sequence[InputFile], notes: Sequence[str] = (), opts: Options = Options(),
                   extra: Sequence[Evidence] = ()) -> Analysis:
    rules = load_rules(opts.rules_dir)
    col = collect_evidence(inputs, rules, opts.full_below)
    col.items.extend(extra)
    env, env_evidence = parse_environment(col.lines)
    col.items.extend(parse_collectives(col.lines))
    cpu_flags = opts.cpu_flags if opts.cpu_flags is not None else (env.get("cpu_flags") or None)
    crashes, crash_evidence, crash_notes = read_crashes(inputs, cpu_flags=cpu_flags, lib_paths=opts.lib_paths,
                                                        sysroot=opts.sysroot)
    col.items.extend(crash_evidence)
    col.notes.extend(crash_notes)
    ev = EvidenceSet.build(col.structures, [*col.items, *env_evidence])
    from .inspect import inspect_libraries

    libraries, lib_evidence, lib_notes = inspect_libraries(
        inputs, col.items, ev.lines, env, gpu=opts.gpu, cpu_flags=cpu_flags, lib_paths=opts.lib_paths,
        sysroot=opts.sysroot, max_libraries=opts.max_libraries)
    ev.items.extend(lib_evidence)
    match_gpu_modules([col.items, ev.items], [lib.path for lib in libraries])  # the GPU module's host file
    col.notes.extend(lib_notes)
    firings = evaluate(rules, ev)
    exceptions = [e for e in col.items if e.kind in ("exception", "stack")]
    causes, secondary, primary = rank(firings, exceptions, rules, env, col.items)
    causes = propose_similar(causes, ev.lines, col.items, rules)
    causes = fit_remedies(causes, col.lines)
    if primary is None and causes:
        primary = causes[0].evidence[0]
    crash = crashes[0] if crashes else None
    fault = gpu_fault(col.items)
    path = code_path(exception_for(primary, col.items), causes[0] if causes else None, crash, fault, col.items)
    return Analysis(
        inputs=tuple(inputs),
        causes=tuple(causes),
        primary_error=primary,
        secondary_errors=tuple(secondary),
        code_path=path,
        environment=env,
        notes=tuple([*notes, *col.notes]),
        exceptions=tuple(e for e in col.items if e.kind == "exception"),
        libraries=tuple(libraries),
        crash=crash,
        gpu_crash=gpu_crash(fault),
        stats={"inputs": col.stats, "rules": len(rules.rules), "rules_fired": len(firings),
               "lines": len(col.lines)},
    )


STDIN = "-"  # the path that means standard input (`cat run.log | crashlens analyze -`)
_STDIN_DEVICE, _STDIN_NAME = "/dev/stdin", "<stdin>"


def analyze_paths(paths: Sequence[str | os.PathLike[str]], opts: Options = Options()) -> Analysis:
    """Analyse files, folders and archives; `-` is standard input (read once, named `<stdin>`)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    stdin = any(os.fspath(p) == STDIN for p in paths)
    inputs, notes = collect_inputs([_STDIN_DEVICE if os.fspath(p) == STDIN else p for p in paths])
    if stdin:  # the device is read like any named pipe; it is shown as <stdin>
        def shown(name: str) -> str:
            return _STDIN_NAME + name[len(_STDIN_DEVICE):] if name.startswith(_STDIN_DEVICE) else name

        inputs = [replace(i, name=shown(i.name)) for i in inputs]
        notes = [n.replace(_STDIN_DEVICE, _STDIN_NAME) for n in notes]
    return analyze_inputs(inputs, notes, opts)


def analyze_text(text: str, name: str = "<text>", opts: Options = Options(), extra: Sequence[Evidence] = ()) -> Analysis:
    """Analyse a string as if it were one log file (rule examples and tests use this)."""
    data = text.encode("utf-8")
    inp = InputFile(name, "text", len(data), lambda: io.BytesIO(data))
    return analyze_inputs([inp], (), opts, extra)


def text_analyzer(rules_dir: Path | None = None) -> Callable[[str, Sequence[Evidence]], Analysis]:
    """analyze_text with a rule directory, as engine.examples runs the rules' inline examples."""
    opts = Options(rules_dir=rules_dir)

    def run(text: str, extra: Sequence[Evidence] = ()) -> Analysis:
        return analyze_text(text, "example.log", opts, extra)

    return run
