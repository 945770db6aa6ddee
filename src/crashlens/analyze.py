"""The pipeline: inputs -> lines -> evidence -> rules -> ranked causes -> Analysis.

Each stage is a function of the previous stage's dataclasses; this module only wires them.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import regex as re

from .engine.match import EvidenceSet, evaluate
from .engine.rank import rank
from .engine.rules import RuleBase, load_rules
from .inputs import collect_inputs
from .binary.elf import ElfFile
from .model import Analysis, Cause, Evidence, Frame, InputFile, Line, Loc
from .parsers.distributed import parse_collectives
from .parsers.environment import parse_environment
from .parsers.kernel import parse_kernel
from .parsers.outcomes import parse_outcome
from .parsers.tracebacks import parse_tracebacks
from .text.normalize import normalize
from .text.select import SelectStats, select_lines

# Lines worth keeping around any rule hit in a huge log: tracebacks, stacks, environment.
STRUCTURE_ANCHORS = (
    r"Traceback \(most recent call last\)",
    r"Fatal Python error",
    r"Exception raised from",
    r"NVRM",
    r"(?i)(?:driver|cuda|cudnn|pytorch|torch|python) version",
    r"NVIDIA-SMI",
    r"(?i)compute capability",
    r"^(?:flags|Flags:)",
    r"Root Cause \(first observed failure\)",
    r"(?i)\b(?:killed|core dumped|segmentation fault|aborted)\b",
)


@dataclass(frozen=True)
class Options:
    rules_dir: Path | None = None
    full_below: int = 8 << 20  # bytes of a text input read in full; beyond, lines around hits
    lib_paths: tuple[Path, ...] = ()  # where to look for libraries named in the evidence
    sysroot: Path | None = None  # re-root absolute library paths (a copy of the crashed machine's /)
    gpu: str | None = None  # the device, when the logs do not say (sm_90, 9.0, H100…)
    cpu_flags: frozenset[str] | None = None  # the CPU's flags, when the logs do not list them
    max_libraries: int = 32  # libraries inspected per analysis


@dataclass
class _Collected:
    lines: list[Line] = field(default_factory=list)
    items: list[Evidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, object] = field(default_factory=dict)


_STRUCTURE = tuple(re.compile(p) for p in STRUCTURE_ANCHORS)


def _anchors(rules: RuleBase) -> list[re.Pattern[str]]:
    """Compiled patterns whose lines (and their surroundings) a huge log must keep."""
    out = list(_STRUCTURE)
    for r in rules.rules:
        for part in (r.match, r.support, r.requires):
            for c in part:
                if c.pattern is not None and "line" in c.kinds:
                    out.append(c.pattern)
    return out


class _Utf8Recoder(io.RawIOBase):
    """A binary stream of UTF-8, decoded incrementally from a stream in another encoding."""

    def __init__(self, raw, encoding: str) -> None:
        import codecs

        self.raw = raw
        self.decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self.pending = b""
        self.error = None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self.pending:
            chunk = self.raw.read(1 << 20)
            self.pending = self.decoder.decode(chunk or b"", final=not chunk).encode("utf-8")
            if not chunk:
                self.error = getattr(self.raw, "error", None)
                break
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def read_text_input(inp: InputFile, anchors: Sequence[re.Pattern[str]], opts: Options, out: _Collected) -> None:
    stats = SelectStats()
    try:
        stream = inp.open()
    except OSError as exc:
        out.notes.append(f"{inp.name}: could not be read: {exc.strerror or exc}")
        return
    encoding = str(inp.facts.get("encoding") or "")
    if encoding.startswith(("utf-16", "utf-32")):
        # PowerShell and Windows tools write UTF-16; detection reports it only from a
        # byte-order mark, which the "utf-16"/"utf-32" codecs consume
        stream = io.BufferedReader(_Utf8Recoder(stream, encoding[:6]), 1 << 20)
    try:
        for lineno, raw in select_lines(stream, anchors, full_below=opts.full_below, stats=stats):
            out.lines.append(normalize(raw, inp.name, lineno))
    except OSError as exc:
        out.notes.append(f"{inp.name}: read stopped at line {stats.total_lines}: {exc}")
    finally:
        err = getattr(stream, "error", None) or getattr(getattr(stream, "raw", None), "error", None)
        stream.close()
    if err:
        out.notes.append(f"{inp.name}: {err}; the lines before it were analysed")
    if stats.mode == "selected":
        out.notes.append(
            f"{inp.name}: {stats.total_lines:,} lines ({stats.total_bytes / 2**20:,.0f} MiB); analysed "
            f"{stats.kept_lines:,} lines: the head, the tail and windows around {stats.engine} hits")
    if stats.truncated_lines:
        out.notes.append(f"{inp.name}: {stats.truncated_lines} over-long line(s) were cut")
    out.stats[inp.name] = {"lines": stats.total_lines, "bytes": stats.total_bytes, "kept": stats.kept_lines,
                           "mode": stats.mode}


def collect_evidence(inputs: Iterable[InputFile], rules: RuleBase, opts: Options) -> _Collected:
    out = _Collected()
    anchors = _anchors(rules)
    for inp in inputs:
        if inp.kind == "text":
            start = len(out.lines)
            read_text_input(inp, anchors, opts, out)
            src_lines = out.lines[start:]
            out.items.extend(parse_tracebacks(src_lines))
            for ln in src_lines:
                for parse in (parse_kernel, parse_outcome):
                    e = parse(ln)
                    if e is not None:
                        out.items.append(e)
        elif inp.kind in ("elf", "elf-core"):
            what = "core dump" if inp.kind == "elf-core" else "ELF binary"
            out.items.append(Evidence("input", f"{inp.name}: {what}", Loc(inp.name), facts={"kind": inp.kind, **inp.facts}))
            if inp.kind == "elf" and "!" in inp.name:
                out.notes.append(f"{inp.name}: ELF inside an archive; extract it to inspect it")
        elif inp.kind == "empty":
            out.notes.append(f"{inp.name}: empty file, skipped")
        elif inp.kind == "binary":
            out.notes.append(f"{inp.name}: binary data that is neither text nor ELF, skipped")
        elif inp.kind == "unreadable":
            out.notes.append(f"{inp.name}: {inp.note or 'could not be read'}")
    return out


def cpu_flags_from_file(path: str) -> set[str] | None:
    """CPU flags from a /proc/cpuinfo or lscpu text file (None when it lists none)."""
    from .inputs import collect_inputs

    inputs, _ = collect_inputs([path])
    col = _Collected()
    for inp in inputs:
        if inp.kind == "text":
            read_text_input(inp, [], Options(), col)
    env, _ = parse_environment(col.lines)
    flags = env.get("cpu_flags")
    return set(flags) if flags else None


def inspect_libraries(inputs: Sequence[InputFile], items: Sequence[Evidence], lines: Sequence[Evidence],
                      env: dict, opts: Options) -> tuple[list[Any], list[Evidence], list[str]]:
    """Find the libraries the evidence involves, inspect them, and return library evidence."""
    from .inputs.libraries import locate, named_libraries

    given = [(i.name, None) for i in inputs if i.kind == "elf" and "!" not in i.name]
    names = given + [(n, e) for n, e in named_libraries([*items, *lines])]
    refs = locate(names, inputs=inputs, lib_paths=opts.lib_paths, sysroot=opts.sysroot)
    if any(r.path for r in refs):
        from .inspect import inspect_file, library_evidence
    gpu = opts.gpu
    if gpu is None:
        for g in env.get("gpus") or []:
            gpu = g.get("sm") or g.get("compute_capability") or g.get("name")
            if gpu:
                break
    flags = set(opts.cpu_flags) if opts.cpu_flags is not None else (set(env["cpu_flags"]) if env.get("cpu_flags") else None)
    # the x86 census costs seconds on big libraries: only when the crash is about CPU instructions
    want_isa = any(e.kind in ("dmesg", "outcome", "crash") and (e.facts.get("event") == "invalid-opcode" or e.facts.get("signal") == "SIGILL")
                   for e in items)
    reports, evidence, notes, seen = [], [], [], set()
    missing = [r.name for r in refs if r.path is None and r.evidence is not None and "/" in r.name]
    for ref in refs:
        if ref.path is None:
            continue
        real = os.path.realpath(ref.path)
        if real in seen:
            continue
        seen.add(real)
        if len(reports) >= opts.max_libraries:
            notes.append(f"more than {opts.max_libraries} libraries involved; the rest were not inspected")
            break
        r = inspect_file(ref.path, gpu=gpu, driver=env.get("driver_version"), cpu_flags=flags, isa=want_isa)
        reports.append(r)
        if r.facts is not None:
            evidence.append(library_evidence(r))
        if ref.evidence is not None and ref.evidence.facts.get("event") == "invalid-opcode":
            crash = trap_site(ref.evidence, ref.path, flags)
            if crash is not None:
                evidence.append(crash)
        notes += [f"{ref.path}: {e}" for e in r.errors[:3]]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        notes.append(f"libraries named in the evidence were not found on this machine ({shown}); "
                     "pass --sysroot or --lib-path to inspect them")
    return reports, evidence, notes


def trap_site(trap: Evidence, path: str, cpu_flags: set[str] | None) -> Evidence | None:
    """A dmesg `trap invalid opcode … in libX.so[base+size]` without a core: decode the
    instruction from the library file and judge it against the CPU flags. The offset within
    the executable mapping is placed at the file's first executable segment."""
    from .binary.crashsite import SIGILL, decode_instruction, isa_verdict
    from .errors import CrashlensError

    offset = trap.facts.get("offset")
    try:
        offset = int(offset, 0) if isinstance(offset, str) else offset
    except ValueError:
        return None
    if not isinstance(offset, int):
        return None
    try:
        with ElfFile(path) as elf:
            text = next((s for s in elf.segments if s.type == 1 and s.flags & 1), None)  # PT_LOAD, PF_X
            if text is None:
                return None
            vaddr = (text.vaddr & ~0xFFF) + offset
            file_off = (text.offset & ~0xFFF) + offset
            code = elf.read(file_off, min(15, elf.size - file_off), "code at the trap")
            ins = decode_instruction(code, vaddr, source=f"{os.path.basename(path)}+{offset:#x}")
            function = None
            try:
                from .binary.isa import decode_at

                function = getattr(decode_at(elf, vaddr), "function", None)
                function = getattr(function, "name", function)
            except CrashlensError:
                pass
    except (CrashlensError, OSError):
        return None
    supports, reason = isa_verdict(ins, signo=SIGILL, cpu_flags=cpu_flags)
    facts = {"signal": "SIGILL", "instruction": ins.text, "mnemonic": ins.mnemonic, "cpu_supports": supports,
             "reason": reason, "required_isa": " ".join(ins.extensions) or None, "module": path,
             "module_name": os.path.basename(path), "offset": hex(offset), "function": function,
             "method": "dmesg trap + library file"}
    text = f"dmesg trap in {os.path.basename(path)}+{offset:#x}: {ins.text}"
    return Evidence("crash", text, Loc(path), facts=facts)


def _resolver(opts: Options, build_ids: dict[str, str] | None = None):
    """path in the crashed process -> a file here: under --sysroot, as is, or by name under
    --lib-path; when that file is missing or its build-id differs from the one the core
    recorded (build_ids: path -> build-id), the file with that build-id under --lib-path."""
    from .inputs.libraries import build_id_index, locate

    by_id: dict[str, str] | None = None

    def resolve(path: str) -> str | None:
        nonlocal by_id
        (ref,) = locate([(path, None)], lib_paths=opts.lib_paths, sysroot=opts.sysroot)
        want = (build_ids or {}).get(path)
        if want and opts.lib_paths:
            found = ref.path
            if found is not None:
                from .binary.elffacts import read_elf_facts
                from .errors import CrashlensError

                try:
                    if read_elf_facts(found).build_id == want:
                        return found
                except CrashlensError:
                    pass
            if by_id is None:
                by_id = build_id_index(opts.lib_paths)
            return by_id.get(want, found)
        return ref.path

    return resolve


def _is_python(core: Any) -> bool:
    exe = (core.auxv.execfn if core.auxv else None) or (core.process.command if core.process else "") or ""
    return os.path.basename(exe).startswith("python")


def _core_python_frames(core: Any, inp: InputFile, site: Any, resolve: Any) -> tuple[list[Frame] | None, str]:
    """Python frames of the crashing thread when the core is a Python process's and pystack can read it."""
    if not _is_python(core) or "!" in inp.name or not os.path.isfile(inp.name):
        return None, ""
    from .binary.pyframes import python_frames

    exe = resolve(core.auxv.execfn) if core.auxv and core.auxv.execfn else None
    if exe is None:
        mods = [m.path for m in core.modules if os.path.basename(m.path).startswith("python")]
        exe = resolve(mods[0]) if mods else None
    if exe is None:
        return None, "Python frames: the interpreter binary was not found (pass --sysroot/--lib-path)"
    tid = core.threads[site.thread_index].tid if site.thread_index is not None else None
    return python_frames(inp.name, exe, tid)


def analyze_cores(inputs: Sequence[InputFile], env: dict, opts: Options) -> tuple[list[dict], list[Evidence], list[str]]:
    """The crash site of every core among the inputs: `crash` evidence for the rules and the
    JSON `crash` object."""
    crashes: list[dict] = []
    if not any(inp.kind == "elf-core" for inp in inputs):
        return crashes, [], []
    from .binary.core import open_core, read_core
    from .binary.crashsite import crash_site
    from .errors import CrashlensError

    evidence: list[Evidence] = []
    notes: list[str] = []
    flags = set(opts.cpu_flags) if opts.cpu_flags is not None else (set(env["cpu_flags"]) if env.get("cpu_flags") else None)
    for inp in inputs:
        if inp.kind != "elf-core":
            continue
        try:
            plain = "!" not in inp.name and not inp.facts.get("codecs") and os.path.isfile(inp.name)
            core = read_core(inp.name) if plain else open_core(inp.open(), name=inp.name)
        except (CrashlensError, OSError) as exc:
            notes.append(f"{inp.name}: core not readable: {exc}")
            continue
        with core:
            try:
                build_ids = {m.path: m.build_id for m in core.modules if m.build_id}
                resolve = _resolver(opts, build_ids)
                site = crash_site(core, file_resolver=resolve, cpu_flags=flags)
            except CrashlensError as exc:
                notes.append(f"{inp.name}: crash site not found: {exc}")
                continue
            notes += [f"{inp.name}: {n}" for n in core.notes[:5]]
            j = site.to_json()
            try:
                from .binary.unwind import backtrace, culprit

                bt = backtrace(core, start=dict(site.registers) if site.method == "signal-frame" else None,
                               file_resolver=resolve, sysroot=opts.sysroot)
                j["backtrace_list"] = bt.to_json()
                notes += [f"{inp.name}: backtrace: {n}" for n in bt.notes[:3]]
                if site.signal_name == "SIGABRT" or site.signal_name == "SIGILL":
                    c = culprit(bt)
                    if c is not None:
                        j["culprit_module"] = c.module
                        j["culprit_function"] = c.function
                if not j.get("function") and bt.frames and bt.frames[0].function:
                    j["function"] = bt.frames[0].function  # named from a debug file the crash site did not use
            except CrashlensError as exc:
                notes.append(f"{inp.name}: backtrace not available: {exc}")
            j["source"] = inp.name
            j["command"] = core.process.command if core.process else None
            j["args"] = core.process.args if core.process else None
            py, py_note = _core_python_frames(core, inp, site, resolve)
            if py is not None:
                j["python_frames"] = [{"file": f.file, "line": f.line, "function": f.function, "kind": f.kind} for f in py]
            if py_note and (py is not None or _is_python(core)):
                notes.append(f"{inp.name}: {py_note}")
            j["threads_list"] = [{"index": t.index, "tid": t.tid, "pc": hex(t.pc) if t.pc is not None else None,
                                  "crashed": t.index == site.thread_index}
                                 for t in core.threads]
            j["modules_list"] = []
            for m in core.modules:
                here = resolve(m.path)
                mismatch = None
                if here and m.build_id:
                    try:
                        from .binary.elffacts import read_elf_facts

                        local = read_elf_facts(here).build_id
                        mismatch = bool(local and local != m.build_id)
                    except CrashlensError:
                        mismatch = None
                j["modules_list"].append({"path": m.path, "base": hex(m.base), "build_id": m.build_id,
                                          "found_at": here, "mismatch": mismatch})
            crashes.append(j)
            facts = {k: j.get(k) for k in ("signal", "si_code", "fault_address", "pc", "module", "offset", "function",
                                            "instruction", "mnemonic", "cpu_supports", "reason", "method",
                                            "culprit_function", "culprit_module")}
            facts["culprit_module_name"] = os.path.basename(j["culprit_module"]) if j.get("culprit_module") else None
            facts["required_isa"] = " ".join(j["required_isa"]) or None
            facts["module_name"] = os.path.basename(j["module"]) if j.get("module") else None
            where = f"{facts['function'] or j['pc']}" + (f" in {facts['module_name']}" if facts["module_name"] else "")
            text = f"core: {j['signal']} at {where}" + (f": {j['instruction']}" if j.get("instruction") else "")
            evidence.append(Evidence("crash", text, Loc(inp.name), facts=facts))
    return crashes, evidence, notes


_INTERPRETER = re.compile(r"(?:^|/)(?:python[\d.]*|libpython[\d.]*\.so[\d.]*)$")


def _interpreter_frame(f: Frame) -> bool:
    """A frame of the Python interpreter itself (eval loop, call machinery, faulthandler)."""
    return bool(_INTERPRETER.search(f.module or "")) or f.function.startswith(("_Py", "Py", "faulthandler"))


def code_path(exc: Evidence | None, cause: Cause | None) -> tuple[Frame, ...]:
    """Frames outermost -> innermost, ending with the failing operation."""
    if exc is None:
        return ()
    frames = list(exc.frames)
    if cause is not None:
        from .engine.rules import taxonomy

        layer = taxonomy().get(cause.category, {}).get("layer", "")
        msg = str(exc.facts.get("headline") or exc.text)
        if layer == "gpu-runtime" or "CUDA" in msg or "cuda" in msg:
            frames.append(Frame("gpu", "CUDA", code=msg[:200]))
        elif not frames or frames[-1].kind != "native":
            frames.append(Frame("native", exc.facts.get("type", ""), code=msg[:200]))
    return tuple(frames)


def _exception_for(primary: Evidence | None, items: Sequence[Evidence]) -> Evidence | None:
    excs = [e for e in items if e.kind == "exception"]
    if not excs:
        return None
    owner = None
    if primary is not None:
        for e in excs:
            if e.loc.source == primary.loc.source and e.loc.line <= primary.loc.line <= (e.loc.end_line or e.loc.line):
                owner = e
    if owner is None and primary is not None:
        # the nearest exception after the primary line in the same source (the error surfaced there)
        after = [e for e in excs if e.loc.source == primary.loc.source and e.loc.line >= primary.loc.line]
        owner = after[0] if after else None
    if owner is None:
        framed = [e for e in excs if e.frames and not e.facts.get("secondary")]
        owner = framed[-1] if framed else excs[-1]
    if owner.facts.get("secondary"):
        # the handler failed: walk back to the exception it was handling
        chain = [e for e in excs if e.facts.get("chain") == owner.facts.get("chain")]
        earlier = [e for e in chain if e.facts.get("chain_pos", 0) < owner.facts.get("chain_pos", 0)]
        if earlier:
            owner = earlier[-1]
    return owner


def analyze_inputs(inputs: Sequence[InputFile], notes: Sequence[str] = (), opts: Options = Options(),
                   extra: Sequence[Evidence] = ()) -> Analysis:
    rules = load_rules(opts.rules_dir)
    col = collect_evidence(inputs, rules, opts)
    col.items.extend(extra)
    env, env_evidence = parse_environment(col.lines)
    col.items.extend(parse_collectives(col.lines))
    crashes, crash_evidence, crash_notes = analyze_cores(inputs, env, opts)
    col.items.extend(crash_evidence)
    col.notes.extend(crash_notes)
    ev = EvidenceSet.build(col.lines, [*col.items, *env_evidence])
    libraries, lib_evidence, lib_notes = inspect_libraries(inputs, col.items, ev.lines, env, opts)
    ev.items.extend(lib_evidence)
    col.notes.extend(lib_notes)
    firings = evaluate(rules, ev)
    exceptions = [e for e in col.items if e.kind in ("exception", "stack")]
    causes, secondary, primary = rank(firings, exceptions, rules, env, col.items)
    exc = _exception_for(primary, col.items)
    path = code_path(exc, causes[0] if causes else None)
    if crashes and crashes[0].get("backtrace_list"):
        native = [Frame("native", f.get("function") or "", f.get("file") or "", f.get("line"), "", f.get("module") or "")
                  for f in reversed(crashes[0]["backtrace_list"][:16])]
        py = [Frame(f["kind"], f["function"], f["file"], f["line"]) for f in crashes[0].get("python_frames") or []]
        last = max((i for i, f in enumerate(native) if _interpreter_frame(f)), default=-1)
        if not path and py:
            path = tuple(py + native[last + 1:][-8:])
        elif not path:
            path = tuple(native)
        elif exc is not None and exc.facts.get("type") == "Fatal Python error":
            # faulthandler's Python frames (outermost first), then the native frames below the
            # interpreter: where the Python call ended up in native code
            last = max((i for i, f in enumerate(native) if _interpreter_frame(f)), default=-1)
            path = tuple([f for f in path if f.kind in ("user", "library")] + native[last + 1:][-8:])
    if not any(inp.kind == "text" for inp in inputs) and not any(i.kind in ("elf", "elf-core") for i in inputs):
        pass
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
        crash=crashes[0] if crashes else None,
        stats={"inputs": col.stats, "rules": len(rules.rules), "rules_fired": len(firings),
               "lines": len(col.lines)},
    )


def analyze_paths(paths: Sequence[str | os.PathLike[str]], opts: Options = Options()) -> Analysis:
    inputs, notes = collect_inputs(paths)
    return analyze_inputs(inputs, notes, opts)


def analyze_text(text: str, name: str = "<text>", opts: Options = Options(), extra: Sequence[Evidence] = ()) -> Analysis:
    """Analyse a string as if it were one log file (rule examples and tests use this)."""
    import io

    data = text.encode("utf-8")
    inp = InputFile(name, "text", len(data), lambda: io.BytesIO(data))
    return analyze_inputs([inp], (), opts, extra)
