"""The binary stage of `analyze`: cores -> CrashReport (and `crash` evidence for the rules).

    read_crashes(inputs, cpu_flags=..., lib_paths=..., sysroot=...) -> (reports, evidence, notes)
    read_crash(core, name, ...) -> CrashReport          one opened core
    crash_evidence(report) -> Evidence                  EvidenceKind.CRASH facts of a report
    trap_site(trap, path, cpu_flags, build_id) -> Evidence | None   a dmesg SIGILL trap decoded from the library
    resolver(lib_paths, sysroot, build_ids, given, main, near) -> Resolver
                                                        a crashed process's path -> a file here

A core is read from its notes (binary.core), its crash site found and the faulting instruction
judged (binary.crashsite), the crashing thread unwound (binary.unwind), the Python frames read
when it is a Python process's and pystack is installed (binary.pyframes), and each mapped file
looked up on this machine as gdb does (`gdb -ex 'set sysroot' -ex 'set solib-search-path' PROG
core`): a file given as an input first (the executable of `analyze ./prog core`), by path under
--sysroot or as is, by name or build-id under --lib-path and beside the inputs; build-ids decide.
Nothing here raises for a bad core: what could not be read becomes a note.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from ..errors import CrashlensError
from ..model import CoreModule, CoreThread, CrashReport, Evidence, EvidenceKind, Frame, FrameKind, InputFile, Loc

Resolver = Callable[[str], "str | None"]

PT_LOAD = 1
PF_X = 1
PAGE_MASK = ~0xFFF
MAX_INSTRUCTION = 15  # bytes of the longest x86 instruction
PT_INTERP = 3
MAX_WALK = 20000  # directory entries visited per --lib-path folder


def _walk(roots: Sequence[Path]) -> list[str]:
    """Regular files under the --lib-path folders, sorted per folder, bounded (MAX_WALK entries
    a folder); symlinked folders are not followed."""
    out: list[str] = []
    for root in roots:
        visited = 0
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            for fn in sorted(filenames):
                visited += 1
                out.append(os.path.join(dirpath, fn))
            if visited > MAX_WALK:
                break
    return out


def _build_id_of(path: str) -> str | None:
    from .elffacts import read_elf_facts

    try:
        return read_elf_facts(path).build_id
    except (CrashlensError, OSError):
        return None


def _may_be_elf(path: str) -> bool:
    """Worth reading for a build-id: a shared object by name, or an executable regular file."""
    name = os.path.basename(path)
    if ".so" in name:
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_mode & 0o111) != 0 and st.st_size >= 64 and os.path.isfile(path)


def main_executable(core: Any) -> str | None:
    """The crashed process's path of its main executable: the module holding the program
    headers (AT_PHDR) or the entry point (AT_ENTRY) of the auxiliary vector."""
    auxv = getattr(core, "auxv", None)
    for addr in ((auxv.phdr, auxv.entry) if auxv else ()):
        if addr:
            mod = core.module_of(addr)
            if mod is not None:
                return mod.path
    return None


def resolver(lib_paths: Sequence[Path] = (), sysroot: Path | None = None,
             build_ids: dict[str, str] | None = None, given: Sequence[str] = (),
             main: str | None = None, near: Sequence[str] = ()) -> Resolver:
    """path in the crashed process -> a file here, the way `gdb -ex 'set sysroot S' -ex 'set
    solib-search-path L' PROG core` finds it, the core's build-ids (build_ids: path -> build-id)
    deciding between candidates.

    Candidates, in order: an ELF file given as an input with the same basename (`analyze ./prog
    core`: what the user named wins, as gdb's exec file does), the path under sysroot, the path
    as is, the same basename under lib_paths. When the core recorded a build-id, the first
    candidate that has it is taken; else the file with that build-id among the given files and
    under lib_paths (a renamed file; executables as well as shared objects), then beside the
    given files and the core (near: folders); else the first candidate (a different build: its
    mismatch is reported). For the main executable (main) with no candidate by name, the one
    executable given is taken, as gdb takes its exec file whatever its name."""
    build_ids = build_ids or {}
    given = [g for g in given if os.path.isfile(g)]
    state: dict[str, Any] = {}

    def files() -> list[str]:
        if "files" not in state:
            state["files"] = _walk(lib_paths)
        return state["files"]

    def by_name() -> dict[str, str]:
        if "by_name" not in state:
            idx: dict[str, str] = {}
            for f in files():
                idx.setdefault(os.path.basename(f), f)
            state["by_name"] = idx
        return state["by_name"]

    def by_id() -> dict[str, str]:
        if "by_id" not in state:
            idx: dict[str, str] = {}
            siblings: list[str] = []
            for d in dict.fromkeys([*near, *(os.path.dirname(os.path.abspath(g)) for g in given)]):
                try:
                    with os.scandir(d) as it:
                        names = sorted(e.name for _, e in zip(range(MAX_WALK), it))
                except OSError:
                    continue
                siblings += [os.path.join(d, n) for n in names]
            seen: set[str] = set()
            for f in [*given, *files(), *siblings]:
                if f in seen or not _may_be_elf(f):
                    continue
                seen.add(f)
                bid = _build_id_of(f)
                if bid:
                    idx.setdefault(bid, f)
            state["by_id"] = idx
        return state["by_id"]

    memo: dict[str, str | None] = {}

    def resolve(path: str) -> str | None:
        if path not in memo:
            memo[path] = find(path)
        return memo[path]

    def find(path: str) -> str | None:
        base = os.path.basename(path)
        cands = [g for g in given if os.path.basename(g) == base]
        if sysroot is not None and path.startswith("/"):
            cands.append(str(sysroot / path.lstrip("/")))
        if path.startswith(("/", ".")):
            cands.append(path)
        if lib_paths and base in by_name():
            cands.append(by_name()[base])
        cands = list(dict.fromkeys(c for c in cands if os.path.isfile(c)))
        want = build_ids.get(path) or build_ids.get(path + " (deleted)")
        if want:
            hit = next((c for c in cands if _build_id_of(c) == want), None)
            if hit is None and (lib_paths or given or near):
                hit = by_id().get(want)
            if hit is not None:
                return hit
        if cands:
            return cands[0]
        if main is not None and path.removesuffix(" (deleted)") == main.removesuffix(" (deleted)"):
            exes = [g for g in given if _is_executable(g)]
            if len(exes) == 1:
                return exes[0]
        return None

    return resolve


def _is_executable(path: str) -> bool:
    """An ELF program (ET_EXEC, or ET_DYN with an interpreter: a PIE), not a shared library."""
    from .elf import ElfFile

    try:
        with ElfFile(path) as elf:
            return elf.e_type == 2 or any(s.type == PT_INTERP for s in elf.segments)
    except (CrashlensError, OSError):
        return False


def _is_python(core: Any) -> bool:
    exe = (core.auxv.execfn if core.auxv else None) or (core.process.command if core.process else "") or ""
    return os.path.basename(exe).startswith("python")


def _python_frames(core: Any, name: str, site: Any, resolve: Resolver) -> tuple[list[Frame] | None, str]:
    """Python frames of the crashing thread when the core is a Python process's and pystack can read it."""
    if not _is_python(core) or "!" in name or not os.path.isfile(name):
        return None, ""
    from .pyframes import python_frames

    exe = resolve(core.auxv.execfn) if core.auxv and core.auxv.execfn else None
    if exe is None:
        mods = [m.path for m in core.modules if os.path.basename(m.path).startswith("python")]
        exe = resolve(mods[0]) if mods else None
    if exe is None:
        return None, "Python frames: the interpreter binary was not found (pass --sysroot/--lib-path)"
    tid = core.threads[site.thread_index].tid if site.thread_index is not None else None
    return python_frames(name, exe, tid)


def _modules(core: Any, resolve: Resolver) -> tuple[CoreModule, ...]:
    out = []
    for m in core.modules:
        here = resolve(m.path)
        mismatch = None
        if here and m.build_id:
            try:
                from .elffacts import read_elf_facts

                local = read_elf_facts(here).build_id
                mismatch = bool(local and local != m.build_id)
            except CrashlensError:
                mismatch = None
        out.append(CoreModule(m.path, m.base, m.build_id, here, mismatch))
    return tuple(out)


def read_crash(core: Any, name: str, *, cpu_flags: Collection[str] | None = None, lib_paths: Sequence[Path] = (),
               sysroot: Path | None = None, notes: list[str] | None = None, given: Sequence[str] = ()
               ) -> CrashReport:
    """The CrashReport of one opened core (binary.core.Core); raises CrashlensError when no
    crash site is found. What else could not be read is appended to notes. given: ELF files
    given as inputs beside the core (the executable of `analyze ./prog core`), found first."""
    from .crashsite import crash_site, signal_name, xfeature_names

    notes = notes if notes is not None else []
    build_ids = {m.path: m.build_id for m in core.modules if m.build_id}
    near = [os.path.dirname(os.path.abspath(name))] if "!" not in name and os.path.isfile(name) else []
    main = main_executable(core)
    resolve = resolver(lib_paths, sysroot, build_ids, given=given, main=main, near=near)
    site = crash_site(core, file_resolver=resolve, cpu_flags=set(cpu_flags) if cpu_flags is not None else None)
    notes += [f"{name}: {n}" for n in core.notes[:5]]
    bt = culprit = None
    function = site.function
    try:
        from .unwind import backtrace, culprit as find_culprit

        bt = backtrace(core, start=dict(site.registers) if site.method == "signal-frame" else None,
                       file_resolver=resolve, sysroot=sysroot)
        notes += [f"{name}: backtrace: {n}" for n in bt.notes[:3]]
        if site.signal_name in ("SIGABRT", "SIGILL"):
            culprit = find_culprit(bt)
        if not function and bt.frames and bt.frames[0].function:
            function = bt.frames[0].function  # named from a debug file the crash site did not use
    except CrashlensError as exc:
        notes.append(f"{name}: backtrace not available: {exc}")
    py, py_note = _python_frames(core, name, site, resolve)
    if py_note and (py is not None or _is_python(core)):
        notes.append(f"{name}: {py_note}")
    modules = _modules(core, resolve)
    for m in [m for m in modules if m.mismatch][:3]:
        notes.append(f"{name}: {m.path}: build-id mismatch: {m.found_at} is another build than the one that ran "
                     f"(the core's build-id is {m.build_id}); not used for names or CFI")
    if main and not any(m.found_at for m in modules if m.path == main):
        notes.append(f"{name}: the executable {main} was not found here: give it as an input "
                     f"(`crashlens analyze PROG core`) or under --lib-path")
    ins = site.instruction
    return CrashReport(
        source=name, signal=site.signal_name or None, signo=site.signal, si_code=site.si_code_name or site.si_code,
        fault_address=site.fault_address, pc=site.pc, sp=site.sp, module=site.module, module_base=site.module_base,
        offset=site.offset, module_address=site.module_address, function=function,
        function_offset=site.function_offset, instruction=ins.text if ins else None,
        mnemonic=ins.mnemonic if ins else None, required_isa=tuple(site.required_isa),
        cpu_supports=site.cpu_supports, reason=site.reason, thread=site.thread, thread_reason=site.thread_reason,
        method=site.method, method_reason=site.method_reason,
        raised_signal=signal_name(site.raised_signal) or None, raised_pc=site.raised_pc,
        sender_pid=site.sender_pid, build_id=site.build_id, build_id_match=site.build_id_match, xcr0=site.xcr0,
        xcr0_components=tuple(xfeature_names(site.xcr0)) if site.xcr0 is not None else None,
        registers=dict(site.registers),
        signal_frame=site.signal_frame.to_json() if site.signal_frame else None,
        notes=tuple(site.notes), culprit=culprit,
        command=core.process.command if core.process else None,
        args=core.process.args if core.process else None,
        python_frames=tuple(py) if py is not None else None,
        backtrace=bt,
        threads=tuple(CoreThread(t.index, t.tid, t.pc, t.index == site.thread_index) for t in core.threads),
        modules=modules,
    )


def crash_evidence(c: CrashReport) -> Evidence:
    """The `crash` evidence of a report (EvidenceKind.CRASH: see its facts)."""
    h = lambda v: hex(v) if v is not None else None  # noqa: E731
    culprit_module = (c.culprit.module or None) if c.culprit is not None else None
    facts = {"signal": c.signal, "si_code": c.si_code, "fault_address": h(c.fault_address), "pc": h(c.pc),
             "module": c.module, "offset": h(c.offset), "function": c.function, "instruction": c.instruction,
             "mnemonic": c.mnemonic, "cpu_supports": c.cpu_supports, "reason": c.reason, "method": c.method,
             "culprit_function": (c.culprit.function or None) if c.culprit is not None else None,
             "culprit_module": culprit_module,
             "culprit_module_name": os.path.basename(culprit_module) if culprit_module else None,
             "required_isa": " ".join(c.required_isa) or None,
             "module_name": os.path.basename(c.module) if c.module else None, "source": "core",
             "build_id_match": c.build_id_match}
    where = f"{c.function or h(c.pc)}" + (f" in {facts['module_name']}" if facts["module_name"] else "")
    text = f"core: {c.signal} at {where}" + (f": {c.instruction}" if c.instruction else "")
    return Evidence(EvidenceKind.CRASH, text, Loc(c.source), facts=facts)


def read_crashes(inputs: Sequence[InputFile], *, cpu_flags: Collection[str] | None = None,
                 lib_paths: Sequence[Path] = (), sysroot: Path | None = None
                 ) -> tuple[list[CrashReport], list[Evidence], list[str]]:
    """The crash of every core among the inputs: reports, `crash` evidence, notes."""
    reports: list[CrashReport] = []
    evidence: list[Evidence] = []
    notes: list[str] = []
    if not any(inp.kind == "elf-core" for inp in inputs):
        return reports, evidence, notes
    from .core import open_core, read_core

    given = [inp.name for inp in inputs if inp.kind == "elf" and "!" not in inp.name
             and not inp.facts.get("codecs") and os.path.isfile(inp.name)]
    for inp in inputs:
        if inp.kind != "elf-core":
            continue
        if inp.facts.get("e_machine") == 190:  # a CUDA GPU core dump (binary/cudacore)
            evidence.extend(gpu_core_evidence(inp, notes))
            continue
        try:
            plain = "!" not in inp.name and not inp.facts.get("codecs") and os.path.isfile(inp.name)
            core = read_core(inp.name) if plain else open_core(inp.open(), name=inp.name)
        except (CrashlensError, OSError) as exc:
            notes.append(f"{inp.name}: core not readable: {exc}")
            continue
        with core:
            try:
                report = read_crash(core, inp.name, cpu_flags=cpu_flags, lib_paths=lib_paths, sysroot=sysroot,
                                    notes=notes, given=given)
            except CrashlensError as exc:
                notes.append(f"{inp.name}: crash site not found: {exc}")
                continue
        reports.append(report)
        evidence.append(crash_evidence(report))
    return reports, evidence, notes


def gpu_core_evidence(inp: InputFile, notes: list[str]) -> list[Evidence]:
    """`gpu-fault` evidence for every faulting lane of a GPU core dump (tables only; a plain
    file is mapped, a compressed or archived one read whole)."""
    import mmap

    from .cudacore import read_gpu_core

    try:
        if "!" not in inp.name and not inp.facts.get("codecs") and os.path.isfile(inp.name):
            with open(inp.name, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        else:
            with inp.open() as fh:
                data = fh.read()
    except (OSError, ValueError) as exc:
        notes.append(f"{inp.name}: GPU core not readable: {exc}")
        return []
    core = read_gpu_core(data)
    notes.extend(f"{inp.name}: {n}" for n in core.notes)
    out: list[Evidence] = []
    devices = {d.dev_id: d for d in core.devices}
    seen: set[tuple] = set()
    names = _demangled_functions(core)
    origins = _module_origins(core, data)
    for f in core.faults:
        key = (f.exception_code, f.kernel, f.pc)
        if key in seen:  # one evidence per distinct fault; the first lane stands for its warp-mates
            continue
        seen.add(key)
        loc, at_pc, trap = f.location, f.pc_location, f.trap
        dev = devices.get(f.device)
        kernel = f.kernel_demangled or f.kernel
        facts = {"source": "gpu-core", "exception": f.exception, "exception_name": f.exception_name,
                 "exception_code": f.exception_code, "signal": f.signal, "category": f.category, "kernel": kernel,
                 "kernel_mangled": f.kernel,
                 "function": names.get(loc.function, loc.function) if loc else None,
                 "function_mangled": loc.function if loc else None,
                 "offset": loc.function_offset if loc else None,
                 "kernel_offset": loc.section_offset if loc else None,
                 "file": loc.file if loc else None, "line": loc.line if loc else None,
                 "instruction": loc.instruction if loc else None,
                 "words": " ".join(f"0x{w:016x}" for w in loc.words) if loc and loc.words else None,
                 "pc_file": at_pc.file if at_pc else None, "pc_line": at_pc.line if at_pc else None,
                 "pc_instruction": at_pc.instruction if at_pc else None,
                 "trap_line": trap.line if trap else None, "trap_instruction": trap.instruction if trap else None,
                 "device": f.device, "device_name": dev.name if dev else None, "device_pci": dev.pci if dev else None,
                 "device_sms": dev.num_sms if dev else None,
                 "sm_version": dev.sm_version if dev else None, "sm": f.sm, "warp": f.warp, "lane": f.lane,
                 "block": "({},{},{})".format(*f.block), "thread": "({},{},{})".format(*f.thread),
                 "grid_dim": "({},{},{})".format(*f.grid_dim) if f.grid_dim else None,
                 "block_dim": "({},{},{})".format(*f.block_dim) if f.block_dim else None,
                 "pc": f.pc, "error_pc": f.error_pc, "lane_mask": f"0x{f.lane_mask:08x}",
                 "active_mask": f"0x{f.active_mask:08x}",
                 "lanes": sum(1 for g in core.faults if (g.exception_code, g.kernel, g.pc) == key),
                 "module": f"0x{f.module_handle:x}" if f.module_handle is not None else None,
                 "module_arch": next((f"sm_{m.arch}" for m in core.modules if m.handle == f.module_handle and m.arch), None),
                 "driver": core.driver, **origins.get(f.module_handle, {})}
        facts = {k: v for k, v in facts.items() if v is not None}
        frames = [Frame(FrameKind.GPU, function=facts.get("function") or kernel or "", file=facts.get("file", ""),
                        line=facts.get("line"), pc=f.error_pc if f.error_pc is not None else f.pc,
                        module_offset=facts.get("kernel_offset"))]
        frames += [Frame(FrameKind.GPU, function=names.get(b.function, b.function) if b.function else "",
                         file=b.file or "", line=b.line, pc=b.pc) for b in f.backtrace]
        where = f" at {os.path.basename(facts['file'])}:{facts['line']}" if facts.get("line") else ""
        trapped = (f" (the trap instruction is at line {facts['trap_line']})"
                   if facts.get("trap_line") and facts.get("trap_line") != facts.get("line") else "")
        text = (f"GPU core: {f.exception} in kernel {kernel or '?'}{where}{trapped}, block {facts['block']} "
                f"thread {facts['thread']} (SM {f.sm} warp {f.warp} lane {f.lane}), device {f.device}"
                + (f" ({dev.name}, {dev.sm_type or 'sm_' + (dev.sm_version or '').replace('.', '')})" if dev and dev.name else ""))
        out.append(Evidence(EvidenceKind.GPU_FAULT, text, Loc(inp.name), facts=facts, frames=tuple(frames)))
    return out


class ModuleSignature:
    """A module's signature (binary/cudaorigin.module_signature) riding in a `gpu-fault`
    evidence's facts until the pipeline matches it against the host files (not a plain value:
    never rendered, never a capture), with the device's SM."""

    __slots__ = ("sig", "device_sm")

    def __init__(self, sig: dict[str, Any], device_sm: int | None) -> None:
        self.sig, self.device_sm = sig, device_sm


def _module_origins(core, data) -> dict[int, dict[str, Any]]:
    """Per faulting module: its signature and its origin as the image alone says it (the
    pipeline refines both with the host files it finds: `module_facts`)."""
    from .cudaorigin import module_signature

    devices = {d.dev_id: d for d in core.devices}
    out: dict[int, dict[str, Any]] = {}
    for f in core.faults:
        if f.module_handle is None or f.module_handle in out:
            continue
        img = core.images.get(f.module_handle)  # absent: the dump left it out (or was cut)
        sig = module_signature(bytes(data[img[0]:img[0] + img[1]])) if img else None
        dev = devices.get(f.device)
        digits = (dev.sm_version or "").replace(".", "") if dev else ""
        out[f.module_handle] = module_facts(sig, int(digits) if digits.isdigit() else None, None)
    return out


def module_facts(sig, device_sm: int | None, match) -> dict[str, Any]:
    """`module_source`, `module_origin`, `module_origin_reason`, `module_clause` (a sentence for
    the cause's explanation) of a module signature and its host-file match (or None)."""
    from .cudaorigin import module_origin

    origin, reason = module_origin(sig, device_sm, match)
    source = None
    if match is not None:
        source = {"path": match.path, "image": match.image, "listed": match.listed, "kind": match.kind,
                  "arch": match.arch, "match": match.how, "section": match.section, "container": match.container,
                  "index": match.index}
    host = f" of {os.path.basename(match.path)} ({match.listed})" if match is not None else ""
    arch = (sig or {}).get("arch")
    if origin == "sass":
        clause = (f"The kernel's code is the {match.arch} SASS{host}, built ahead of time" if match is not None
                  else f"The kernel's code is {arch} SASS built ahead of time by nvcc (no host file given holds it)")
    elif origin == "jit-from-ptx":
        clause = (f"The kernel's code was JIT-compiled by the driver from the {match.arch} PTX{host}" if match is not None
                  else f"The kernel's code was JIT-compiled by the driver from PTX, for {arch} (no host file given "
                       f"holds the PTX)")
    else:
        clause = None
    return {"module_signature": ModuleSignature(sig, device_sm) if sig else None, "module_source": source,
            "module_origin": origin, "module_origin_reason": reason, "module_clause": clause}


def _demangled_functions(core) -> dict[str, str]:
    """Demangled names of the functions the faults of a GPU core name (one c++filt run)."""
    from .symbolize import demangle

    fns = {x.function for f in core.faults for x in (f.location, f.pc_location, f.trap, *f.backtrace)
           if x is not None and x.function}
    return demangle(sorted(fns))


def trap_site(trap: Evidence, path: str, cpu_flags: Collection[str] | None,
              build_id: str | None = None) -> Evidence | None:
    """A dmesg `trap invalid opcode … in libX.so[base+size]` without a core: decode the
    instruction from the library file and judge it against the CPU flags. The offset within
    the executable mapping is placed at the file's first executable segment (PT_LOAD with PF_X,
    page-aligned as the loader maps it).

    The file here need not be the build that ran. build_id (the crashed build's, when a log
    gives it: coredumpctl's "Module … with build-id …") is checked: another build gives no
    instruction. Without it, an instruction that cannot raise #UD (a `jmp`, a `mov`) at the
    offset says the file differs. Either way the evidence has `file_differs` and a `trap_note`
    sentence instead of an instruction, module_name and offset. Any other instruction is
    reported as read from this file, unverified unless the build-ids match (`build_id_match`,
    and `file_check` says so)."""
    from .crashsite import _UD, SIGILL, decode_instruction, isa_verdict
    from .elf import ElfFile

    offset = trap.facts.get("offset")
    try:
        offset = int(offset, 0) if isinstance(offset, str) else offset
    except ValueError:
        return None
    if not isinstance(offset, int):
        return None
    base = os.path.basename(path)
    local_id = _build_id_of(path)
    same = (local_id == build_id) if build_id and local_id else None
    common = {"signal": "SIGILL", "module": path, "method": "dmesg trap + library file", "source": "dmesg",
              "build_id": local_id, "build_id_match": same}
    if same is False:
        note = (f"The kernel's trap is in {base} at offset {offset:#x}, but {base} here is another build "
                f"(build-id {local_id}) than the one that ran ({build_id}): its bytes there say nothing about "
                f"the instruction that trapped.")
        facts = {**common, "cpu_supports": None, "file_differs": True, "trap_note": note, "trap_offset": hex(offset)}
        return Evidence(EvidenceKind.CRASH, f"dmesg trap in {base}+{offset:#x}: the file here is another build",
                        Loc(path), facts=facts)
    try:
        with ElfFile(path) as elf:
            text = next((s for s in elf.segments if s.type == PT_LOAD and s.flags & PF_X), None)
            if text is None:
                return None
            vaddr = (text.vaddr & PAGE_MASK) + offset
            file_off = (text.offset & PAGE_MASK) + offset
            code = elf.read(file_off, min(MAX_INSTRUCTION, elf.size - file_off), "code at the trap")
            ins = decode_instruction(code, vaddr, source=f"{base}+{offset:#x}")
            function = None
            try:
                from .isa import decode_at

                function = getattr(decode_at(elf, vaddr), "function", None)
                function = getattr(function, "name", function)
            except CrashlensError:
                pass
    except (CrashlensError, OSError):
        return None
    supports, reason = isa_verdict(ins, signo=SIGILL, cpu_flags=set(cpu_flags) if cpu_flags is not None else None)
    cannot_trap = (ins.valid and ins.mnemonic not in _UD and supports is True and not ins.xcr0_needed
                   and not (ins.extensions and ins.faults))
    if same:
        check = f"Its build-id ({local_id}) matches the one logged for the crashed process."
    else:
        check = (f"No core or logged build-id shows that {base} here is the build that ran; if it is another "
                 f"build, this is not the instruction that trapped.")
    if cannot_trap:
        if same:
            note = (f"The kernel's trap is in {base} at offset {offset:#x}, where {base} here (the same build) has "
                    f"`{ins.text}`, an instruction that cannot raise #UD: the offset or the mapping in the dmesg "
                    f"line does not fit this file.")
        else:
            note = (f"The kernel's trap is in {base} at offset {offset:#x}, where {base} here has `{ins.text}`, an "
                    f"instruction that cannot raise #UD: this file is probably another build than the one that "
                    f"ran (no core or logged build-id to check it against), so it says nothing about the "
                    f"instruction that trapped.")
        facts = {**common, "cpu_supports": None, "file_differs": True, "trap_note": note, "trap_offset": hex(offset),
                 "file_instruction": ins.text}
        return Evidence(EvidenceKind.CRASH, f"dmesg trap in {base}+{offset:#x}: the file here has {ins.text}, "
                        f"which cannot trap", Loc(path), facts=facts)
    if not same and supports is not True:
        reason += f" (read from {base} here, not from a core: unverified build)"
    facts = {**common, "module_name": base, "offset": hex(offset), "instruction": ins.text,
             "mnemonic": ins.mnemonic, "cpu_supports": supports,
             "reason": reason, "required_isa": " ".join(ins.extensions) or None, "function": function,
             "file_check": check}
    text = f"dmesg trap in {base}+{offset:#x}: {ins.text}"
    return Evidence(EvidenceKind.CRASH, text, Loc(path), facts=facts)


def match_gpu_modules(lists: Sequence[list[Evidence]], paths: Sequence[str]) -> None:
    """Say, on each GPU core's `gpu-fault` evidence (in place), which of the host files at
    `paths` (ELF files given or named by the evidence) holds the faulting module's fatbin image,
    and whether the module is that SASS or the driver's JIT of its PTX (binary/cudaorigin)."""
    from dataclasses import replace

    from .cudaorigin import match_module

    done: dict[int, dict[str, Any]] = {}
    for items, i, e in [(items, i, e) for items in lists for i, e in enumerate(items)]:
        ms = e.facts.get("module_signature") if e.kind == EvidenceKind.GPU_FAULT else None
        if not isinstance(ms, ModuleSignature):
            continue
        if id(ms) not in done:
            match = next((m for m in (match_module(ms.sig, p, ms.device_sm) for p in dict.fromkeys(paths)) if m), None)
            done[id(ms)] = module_facts(ms.sig, ms.device_sm, match)
        facts = {**{k: v for k, v in e.facts.items() if not k.startswith("module_") or k == "module_arch"},
                 **{k: v for k, v in done[id(ms)].items() if v is not None and k != "module_signature"}}
        items[i] = replace(e, facts=facts)
