"""Native backtraces from a core, without gdb: CFI first, then frame pointers, then a stack scan.

    backtrace(core, thread=None, *, start=None, file_resolver=None, debug_dirs=("/usr/lib/debug",),
              sysroot=None, max_frames=256) -> Backtrace
    Unwinder(core, ...).backtrace(thread, start=...)   the same, files and CFI cached across threads
    culprit(backtrace) -> Frame | None                  the first frame outside the abort machinery

x86-64 only for now (an aarch64 core gives its first frame and a note).

How each caller frame is found, best first; every frame says which (`trust`, the levels of
minidump-stackwalk):
  context  registers saved by the machine: frame 0 (the core's NT_PRSTATUS, or `start`, e.g.
           the context crash_site recovered from a kernel signal frame), and the frame a signal
           interrupted when its sigcontext is read directly (no CFI for __restore_rt)
  cfi      DWARF call-frame information of the module holding the pc (binary.dwarfcfi):
           `.eh_frame` through `.eh_frame_hdr`'s binary-search table (else a scan of the section,
           indexed once), then `.debug_frame` of the file and of its separate debug file; when
           the file is missing or is another build (build-id mismatch), `.eh_frame` from the
           module's image in the core (PT_GNU_EH_FRAME), when those pages were dumped (the
           vDSO always is; a library only with coredump_filter bit 2)
  fp       the frame-pointer chain: caller rbp = [rbp], return address = [rbp+8], accepted only
           when rbp lies in the stack mapping above sp and the return address is code that
           follows a call
  scan     the first stack word, at most SCAN_WORDS above sp, that points into executable
           memory just after a call instruction (the bytes before it decode as a call, from
           the core or the mapped file; when neither holds the code, any word into a mapped
           file's executable pages, noted)
Signal frames: a pc at glibc's __restore_rt (`mov $15,%rax; syscall`, or an FDE with the 'S'
augmentation) is the kernel's signal trampoline: its caller is the interrupted context, from
libc's CFI expressions or from the sigcontext on the stack (rt_sigframe: ucontext at sp,
uc_mcontext at sp+40), and that frame's pc is exact, not a return address.

Checks that end a walk with a note (never an exception): pc 0 or CFI marking the return
address undefined (the outermost frame: _start, clone3), a stack pointer that does not grow
(except across a signal frame, which may switch stacks), a CFA outside the core's memory, a
repeated (pc, sp), stack memory not in the core (truncated cores), max_frames.

Offsets: `Frame.module_offset` = pc - module base (the load address of the module's first
mapping, as dmesg and minidumps count: `libfoo.so+0x1234`, and the JSON's `offset`);
`Frame.function_offset` = pc - function start (gdb's `fn+0x12`). A return address is
symbolised at pc - 1 (binary.symbolize).
"""

from __future__ import annotations

import fnmatch
import os
import re
import struct
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, Iterable, Mapping

from .core import EM_AARCH64, EM_X86_64, Core, CoreError, Module, Thread
from .dwarfcfi import CFIError, CFITable, FDE, Row, evaluate
from .elf import ElfError, ElfFile, PT_LOAD
from .sigframe import RESTORE_RT, SIGCONTEXT_REGS, UC_MCONTEXT
from .symbolize import DEBUG_DIRS, ModuleFile, ModuleFiles, Symbolizer, demangle
from ..model import Backtrace, Frame, FrameTrust

__all__ = ["Backtrace", "Frame", "TRUST_LEVELS", "Unwinder", "abort_machinery", "backtrace", "culprit",
           "in_abort_machinery", "plain_name"]

TRUST_LEVELS = tuple(FrameTrust)  # best first
SCAN_WORDS = 1024                 # words scanned above sp for a return address (8 KiB)
SCAN_WORDS_FIRST = 2048           # for the first frame (a bad pc: nothing else to go on)
SCAN_CANDIDATES = 20_000          # code pointers checked for a preceding call, per backtrace
MAX_FRAME_BYTES = 512 << 20       # a caller's sp further than this above its callee's is absurd
PT_GNU_EH_FRAME = 0x6474E550
MAX_CORE_CFI = 64 << 20           # .eh_frame bytes read from a core's memory

# DWARF register numbers, x86-64 psABI 3.6.2
RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP = 0, 1, 2, 3, 4, 5, 6, 7
RIP = 16
X86_DWARF = {"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
             "r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15, "rip": 16}
X86_NAMES = {v: k for k, v in X86_DWARF.items()}
CALLEE_SAVED = (RBX, RBP, 12, 13, 14, 15)

Resolver = Callable[[str], "str | os.PathLike[str] | None"]


# -- results: model.Frame (with its FrameTrust) and model.Backtrace ------------------------------------


# -- the abort machinery -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Machinery:
    functions: tuple[str, ...]
    runtime_modules: tuple[str, ...]


@lru_cache(maxsize=1)
def abort_machinery() -> _Machinery:
    import yaml
    text = (resources.files("crashlens") / "data" / "abort_frames.yaml").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    return _Machinery(tuple(str(x) for x in data.get("functions", ())),
                      tuple(str(x) for x in data.get("runtime_modules", ())))


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _base_name(fn: str) -> str:
    """A C++ name without its parameter list, for matching: `std::terminate()` -> `std::terminate`."""
    depth = 0
    for i, ch in enumerate(fn):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0 and not fn.startswith("(anonymous"):
            return fn[:i]
    return fn


_CLONE = re.compile(r"(?:\.(?:cold|part|isra|constprop|lto_priv|localalias|specialized)(?:\.\d+)?)+$")


def plain_name(fn: str) -> str:
    """A function name without GCC's clone suffixes and C++ parameter list, for matching:
    `__assert_fail_base.cold` -> `__assert_fail_base`, `f(int) [clone .cold]` -> `f`."""
    fn = re.sub(r"\s*\[clone [^\]]*\]", "", fn)
    return _CLONE.sub("", _base_name(fn))


def in_abort_machinery(frame: Frame) -> bool:
    m = abort_machinery()
    if frame.signal_frame:
        return True
    if frame.function:
        return _matches(plain_name(frame.function), m.functions) or _matches(frame.function, m.functions)
    # an unnamed frame of libc/libstdc++/libgcc (their static helpers: the verbose terminate
    # handler, __terminate) counts as machinery only while the walk is still inside them
    return bool(frame.module) and _matches(os.path.basename(frame.module), m.runtime_modules)


FAULT_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE")


def culprit(bt: Backtrace, interrupted_signal: str | None = None) -> Frame | None:
    """For an abort: the first frame outside libc/libstdc++/libgcc's abort machinery (abort,
    raise, __assert_fail, pthread_kill, __libc_message, std::terminate, __cxa_throw, ... listed
    in data/abort_frames.yaml), skipping too the runtime-library frames that called into it
    (free() -> malloc_printerr -> abort: the culprit is free's caller). None when every frame is
    machinery. A backtrace that does not start in the machinery gives its first frame; after a
    signal handler's re-raise (faulthandler) the interrupted context is judged the same way,
    except that when the interrupted signal was a fault (interrupted_signal: SIGSEGV, SIGBUS,
    SIGILL, SIGFPE) its first frame is where the fault happened even in an unnamed runtime frame
    (a stripped libc's strlen), never abort machinery."""
    frames = list(bt.frames)
    if not frames:
        return None
    m = abort_machinery()
    i = context = 0
    while i < len(frames) and in_abort_machinery(frames[i]):
        if frames[i].signal_frame:
            context = i + 1         # a handler re-raised: what follows is the interrupted context
            if interrupted_signal in FAULT_SIGNALS and context < len(frames) and not frames[context].function:
                return frames[context]
        i += 1
    if i >= len(frames):
        return None
    if i == context:
        return frames[i]            # no abort machinery in this context: the faulting frame itself
    j = i
    while j < len(frames) and frames[j].module and _matches(os.path.basename(frames[j].module), m.runtime_modules):
        j += 1
    return frames[j] if j < len(frames) else frames[i]


# -- the unwinder --------------------------------------------------------------------------------------

@dataclass
class _Step:
    regs: dict[int, int]
    trust: str
    signal: bool = False             # the frame just unwound was a signal trampoline
    end: str = ""                    # a clean end of the stack


class Unwinder:
    """Backtraces of one core's threads; files, CFI and symbols are cached across calls."""

    def __init__(self, core: Core, *, file_resolver: Resolver | None = None,
                 debug_dirs: Iterable[str] = DEBUG_DIRS, sysroot: str | os.PathLike[str] | None = None,
                 symbols: bool = True, lines: bool = True, inline: bool = True,
                 scan_words: int = SCAN_WORDS) -> None:
        self.core = core
        self.files = ModuleFiles(core, file_resolver, debug_dirs, sysroot)
        self.symbolizer = Symbolizer(core, files=self.files, lines=lines, inline=inline) if symbols else None
        self.scan_words = scan_words
        self._scan_left = SCAN_CANDIDATES
        self._code: dict[int, bytes] = {}
        self._notes: list[str] = []

    def close(self) -> None:
        self.files.close()

    def __enter__(self) -> "Unwinder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public
    def backtrace(self, thread: Thread | int | None = None, *, start: Mapping[str, int] | None = None,
                  max_frames: int = 256) -> Backtrace:
        core = self.core
        notes: list[str] = []
        self._notes = notes
        self._scan_left = SCAN_CANDIDATES
        if isinstance(thread, int):
            th = next((t for t in core.threads if t.tid == thread), None)
            if th is None:
                return Backtrace((), thread, (f"no thread {thread} in the core",), False, "no such thread")
            thread = th
        if thread is None:
            thread, _why = core.signalled_thread()
        if thread is None and start is None:
            return Backtrace((), None, ("the core has no thread registers",), False, "no registers")
        tid = thread.tid if thread is not None else None
        regs_by_name = dict(start if start is not None else thread.registers)
        if core.e_machine != EM_X86_64:
            return self._first_only(regs_by_name, tid, core)
        regs = {X86_DWARF[k]: v for k, v in regs_by_name.items() if k in X86_DWARF}
        if RIP not in regs or RSP not in regs:
            return Backtrace((), tid, ("the starting registers lack rip or rsp",), False, "no registers")
        try:
            frames, truncated, end = self._walk(regs, max_frames, notes)
        except (ElfError, struct.error, ValueError, OverflowError, IndexError) as exc:  # a bug's safety net
            notes.append(f"unwinding stopped: {type(exc).__name__}: {exc}")
            frames, truncated, end = [], True, "error"
        try:
            frames = self._symbolize(frames, notes)
        except (ElfError, struct.error, ValueError, OverflowError, IndexError) as exc:  # a bug's safety net
            notes.append(f"symbols unavailable: {type(exc).__name__}: {exc}")
        for mf in self.files.all():
            for n in mf.notes:
                if n not in notes:
                    notes.append(n)
        return Backtrace(tuple(frames), tid, tuple(dict.fromkeys(notes)), truncated, end)

    def backtraces(self, max_frames: int = 256) -> list[Backtrace]:
        """Every thread, the crashing one first."""
        first, _ = self.core.signalled_thread()
        order = ([first] if first is not None else []) + [t for t in self.core.threads if t is not first]
        return [self.backtrace(t, max_frames=max_frames) for t in order]

    def modules(self) -> list[dict[str, Any]]:
        """What was found for each module the walks touched: path, build-id, found-at, mismatch."""
        return [mf.to_json() for mf in self.files.all()]

    # -- the walk
    def _first_only(self, regs: Mapping[str, int], tid: int | None, core: Core) -> Backtrace:
        pc_name = "pc" if core.e_machine == EM_AARCH64 else "rip"
        sp_name = "sp" if core.e_machine == EM_AARCH64 else "rsp"
        frames = []
        if pc_name in regs:
            frames.append(self._frame(0, regs[pc_name], regs.get(sp_name), "context", regs))
        frames = self._symbolize(frames, [])
        return Backtrace(tuple(frames), tid, (f"native unwinding is implemented for x86-64; this is a "
                                              f"{core.machine} core: only the first frame is given",), True,
                         "architecture")

    def _frame(self, index: int, pc: int, sp: int | None, trust: str, regs: Mapping[Any, int],
               return_address: bool = False, signal: bool = False) -> Frame:
        mod = self._module_of(pc)
        names = {(X86_NAMES.get(k, str(k)) if isinstance(k, int) else k): v for k, v in regs.items()}
        if mod is None:
            return Frame("native", index=index, pc=pc, sp=sp, trust=FrameTrust(trust), return_address=return_address,
                         signal_frame=signal, registers=names)
        return Frame("native", module=mod.path, index=index, pc=pc, sp=sp, trust=FrameTrust(trust),
                     module_base=mod.base, module_offset=pc - mod.base, build_id=mod.build_id,
                     return_address=return_address, signal_frame=signal, registers=names)

    def _walk(self, regs: dict[int, int], max_frames: int, notes: list[str]) -> tuple[list[Frame], bool, str]:
        frames: list[Frame] = []
        seen: set[tuple[int, int]] = set()
        trust = "context"
        exact = True                  # pc is exact (frame 0, or interrupted by a signal)
        for index in range(max_frames):
            pc, sp = regs[RIP], regs[RSP]
            sigtramp = self._is_sigtramp(pc)
            frames.append(self._frame(index, pc, sp, trust, regs, return_address=not exact, signal=sigtramp))
            if (pc, sp) in seen:
                notes.append(f"frame {index} repeats pc {pc:#x} and sp {sp:#x}: the walk loops; stopped")
                return frames, True, "loop"
            seen.add((pc, sp))
            step = self._step(index, regs, exact, sigtramp, notes)
            if step.end:
                return frames, False, step.end
            if not step.regs:
                return frames, True, "lost"
            regs, trust = step.regs, step.trust
            exact = step.signal
        notes.append(f"stopped after {max_frames} frames (max_frames)")
        return frames, True, "max_frames"

    def _step(self, index: int, regs: dict[int, int], exact: bool, sigtramp: bool, notes: list[str]) -> _Step:
        core = self.core
        pc, sp = regs[RIP], regs[RSP]
        lookup = pc if exact or sigtramp else pc - 1
        mod = self._module_of(pc)
        executable = core.is_executable(pc)
        why: list[str] = []
        # 1. CFI
        if executable or mod is not None:
            got = self._by_cfi(regs, lookup, mod, why)
            if got is not None:
                if got.end:
                    return got
                bad = self._invalid(regs, got.regs, got.signal or sigtramp)
                if bad is None:
                    return got
                why.append(f"CFI gave {bad}")
        # 2. the sigcontext of a signal frame, without CFI
        if sigtramp:
            got = self._by_sigcontext(regs, why)
            if got is not None:
                bad = self._invalid(regs, got.regs, True)
                if bad is None:
                    return got
                why.append(f"the sigcontext gave {bad}")
        # 3. frame pointers
        if executable:
            got = self._by_fp(regs, why)
            if got is not None:
                bad = self._invalid(regs, got.regs, False)
                if bad is None:
                    if why:
                        notes.append(f"frame {index} ({self._where(pc)}): {'; '.join(why)}; its caller was found "
                                     f"through the frame pointer")
                    return got
                why.append(f"the frame pointer gave {bad}")
        # 4. stack scan
        got = self._by_scan(regs, index, why)
        if got is not None:
            notes.append(f"frame {index} ({self._where(pc)}): {'; '.join(why) or 'no unwind information'}; its "
                         f"caller was found by scanning the stack")
            return got
        if core.read(sp, 8) is None:
            why.append(f"the stack at sp {sp:#x} is not in the core"
                       + (" (the core is truncated)" if core.truncated else ""))
        notes.append(f"frame {index} ({self._where(pc)}): {'; '.join(why) or 'nothing to unwind with'}: "
                     f"the walk stops here")
        return _Step({}, "")

    def _module_of(self, pc: int) -> Module | None:
        """The mapped file holding pc, or the vDSO (not in NT_FILE; its image is in the core)."""
        mod = self.core.module_of(pc)
        if mod is not None:
            return mod
        vdso = self._vdso()
        if vdso is not None and vdso.base <= pc < vdso.end:
            return vdso
        return None

    def _vdso(self) -> Module | None:
        if "vdso" not in self.__dict__:
            out = None
            auxv = self.core.auxv
            base = auxv.sysinfo_ehdr if auxv is not None else None
            seg = self.core.segment_at(base) if base else None
            if seg is not None:
                out = Module("[vdso]", base, seg.end, (), None, self.core.read(base, 4) == b"\x7fELF")
            self.__dict__["vdso"] = out
        return self.__dict__["vdso"]

    def _where(self, pc: int) -> str:
        mod = self._module_of(pc)
        return f"{os.path.basename(mod.path)}+{pc - mod.base:#x}" if mod else f"{pc:#x}"

    def _invalid(self, regs: dict[int, int], caller: dict[int, int], across_signal: bool) -> str | None:
        """Why a computed caller is implausible, or None."""
        core = self.core
        pc, sp = caller.get(RIP), caller.get(RSP)
        if pc is None or sp is None:
            return "no return address" if pc is None else "no stack pointer"
        if not core.is_executable(pc):
            return f"a return address {pc:#x} outside executable memory"
        if core.segment_at(sp) is None:
            return f"a stack pointer {sp:#x} outside the core's memory"
        if not across_signal:
            if sp <= regs[RSP]:
                return f"a stack pointer {sp:#x} that does not grow (callee's {regs[RSP]:#x})"
            if sp - regs[RSP] > MAX_FRAME_BYTES:
                return f"a frame of {(sp - regs[RSP]) >> 20} MiB"
        return None

    # -- methods
    def _read_word(self, addr: int, size: int = 8) -> int | None:
        if addr < 0 or addr > (1 << 64) - size:
            return None
        raw = self.core.read(addr, size)
        return None if raw is None else int.from_bytes(raw, "little")

    def _by_cfi(self, regs: dict[int, int], lookup: int, mod: Module | None, why: list[str]) -> _Step | None:
        if mod is None:
            why.append("no module: no CFI")
            return None
        tables = self._cfi(mod)
        if not tables:
            why.append(f"no CFI for {os.path.basename(mod.path)}")
            return None
        found = None
        for table, bias, label in tables:
            try:
                fde = table.find(lookup - bias)
            except CFIError as exc:
                why.append(f"{label}: {exc}")
                continue
            if fde is not None:
                found = (table, bias, label, fde)
                break
        if found is None:
            why.append(f"no FDE covers {self._where(lookup)}")
            return None
        table, bias, label, fde = found
        try:
            row = table.row(fde, lookup - bias)
            return self._apply(row, fde, regs, label)
        except CFIError as exc:
            why.append(f"{label}: {exc}")
            return None

    def _apply(self, row: Row, fde: FDE, regs: dict[int, int], label: str) -> _Step | None:
        read = self._read_word
        get = regs.get
        if row.cfa_expr is not None:
            cfa = evaluate(row.cfa_expr, get, read)
        elif row.cfa_reg is not None:
            base = regs.get(row.cfa_reg)
            if base is None:
                raise CFIError(f"the CFA is based on register {row.cfa_reg}, whose value is unknown here")
            cfa = (base + row.cfa_offset) & ((1 << 64) - 1)
        else:
            raise CFIError("the FDE defines no CFA")
        if self.core.segment_at(cfa) is None and self.core.segment_at(cfa - 8) is None:
            raise CFIError(f"the CFA {cfa:#x} lies outside the core's memory")
        ra_col = fde.cie.ra_column
        caller: dict[int, int] = {r: regs[r] for r in CALLEE_SAVED if r in regs}
        ra_rule = row.rules.get(ra_col)
        for r, rule in row.rules.items():
            kind = rule[0]
            value: int | None
            if kind == "undefined":
                caller.pop(r, None)
                continue
            if kind == "same":
                value = regs.get(r)
            elif kind == "offset":
                value = read(cfa + rule[1])
            elif kind == "val_offset":
                value = cfa + rule[1]
            elif kind == "register":
                value = regs.get(rule[1])
            elif kind == "expression":
                value = read(evaluate(rule[1], get, read, push=(cfa,)))
            elif kind == "val_expression":
                value = evaluate(rule[1], get, read, push=(cfa,))
            else:
                value = None
            if value is None:
                if r == ra_col:
                    raise CFIError(f"the return address (at CFA{'%+d' % rule[1] if kind == 'offset' else ''}) is "
                                   f"not in the core")
                caller.pop(r, None)
            else:
                caller[r] = value & ((1 << 64) - 1)
        if ra_rule is None and ra_col in regs and ra_col != RIP:
            caller[ra_col] = regs[ra_col]
        if ra_rule is not None and ra_rule[0] == "undefined" or ra_col not in caller:
            return _Step({}, "", end="outermost frame: its CFI marks the return address undefined"
                         if ra_rule is not None else "no return address rule")
        ra = caller[ra_col]
        if ra == 0:
            return _Step({}, "", end="outermost frame: return address 0")
        caller[RIP] = ra
        if RSP not in caller or row.rules.get(RSP) is None:
            caller[RSP] = cfa
        return _Step(caller, "cfi", signal=fde.signal_frame)

    def _cfi(self, mod: Module) -> list[tuple[CFITable, int, str]]:
        mf = self.files.get(mod)
        hit = mf.cache.get("cfi")
        if hit is not None:
            return hit
        tables: list[tuple[CFITable, int, str]] = []
        name = os.path.basename(mod.path)
        if mf.elf is not None and mf.bias is not None:
            t = _eh_frame_of_file(mf.elf, mf.notes)
            if t is not None:
                tables.append((t, mf.bias, f"{name} .eh_frame"))
            for elf, what in ((mf.elf, "file"), (mf.debug, "debug file")):
                if elf is None:
                    continue
                t = _debug_frame_of_file(elf, mf.notes)
                if t is not None:
                    tables.append((t, mf.bias, f"{name} .debug_frame ({what})"))
        if not tables:
            t = self._eh_frame_in_core(mod, mf)
            if t is not None:
                tables.append((t, 0, f"{name} .eh_frame (from the core)"))
        mf.cache["cfi"] = tables
        return tables

    def _eh_frame_in_core(self, mod: Module, mf: ModuleFile) -> CFITable | None:
        core = self.core
        try:
            image = core.elf_image_at(mod.base)
        except CoreError:
            image = None
        if image is None:
            if mf.elf is None:
                mf.notes.append(f"{mod.path}: its ELF header is not in the core: no CFI from memory")
            return None
        bias, phdrs = image
        hdr_ph = next((p for p in phdrs if p[0] == PT_GNU_EH_FRAME), None)
        if hdr_ph is None:
            return None
        hdr_addr, hdr_size = bias + hdr_ph[3], hdr_ph[6]
        if not 4 <= hdr_size <= MAX_CORE_CFI:
            return None
        hdr = core.read(hdr_addr, hdr_size)
        if hdr is None:
            mf.notes.append(f"{mod.path}: .eh_frame_hdr is not in the core (its read-only pages were not "
                            f"dumped): no CFI from memory")
            return None
        try:
            probe = CFITable(b"", 0, "eh")
            eh_addr, _pos = probe._encoded(4, len(hdr), hdr[1], data_base=hdr_addr, data=hdr, base_address=hdr_addr)
        except CFIError:
            return None
        seg_end = None
        for p in phdrs:
            if p[0] == PT_LOAD and bias + p[3] <= eh_addr < bias + p[3] + p[6]:
                seg_end = bias + p[3] + p[6]
        if seg_end is None:
            return None
        data = core.read_available(eh_addr, min(seg_end - eh_addr, MAX_CORE_CFI))
        if len(data) < 16:
            mf.notes.append(f"{mod.path}: .eh_frame is not in the core: no CFI from memory")
            return None
        t = CFITable(data, eh_addr, "eh", hdr=hdr, hdr_address=hdr_addr, name=f"{mod.path} .eh_frame (core)")
        mf.notes.extend(t.notes)
        return t

    def _by_sigcontext(self, regs: dict[int, int], why: list[str]) -> _Step | None:
        base = regs[RSP] + UC_MCONTEXT
        raw = self.core.read(base, 8 * len(SIGCONTEXT_REGS))
        if raw is None:
            why.append(f"the signal frame's sigcontext at {base:#x} is not in the core")
            return None
        vals = struct.unpack("<" + "Q" * len(SIGCONTEXT_REGS), raw)
        caller = {X86_DWARF[n]: v for n, v in zip(SIGCONTEXT_REGS, vals)}
        return _Step(caller, "context", signal=True)

    def _by_fp(self, regs: dict[int, int], why: list[str]) -> _Step | None:
        rbp, sp = regs.get(RBP), regs[RSP]
        if rbp is None:
            return None
        seg = self.core.segment_at(sp)
        if seg is None or rbp & 7 or not sp <= rbp < seg.end - 16:
            return None
        saved, ra = self._read_word(rbp), self._read_word(rbp + 8)
        if ra is None or saved is None:
            return None
        if not self.core.is_executable(ra) or self._after_call(ra) is False:
            return None
        caller = {r: regs[r] for r in CALLEE_SAVED if r in regs}
        caller.update({RBP: saved, RSP: rbp + 16, RIP: ra})
        return _Step(caller, "fp")

    def _by_scan(self, regs: dict[int, int], index: int, why: list[str]) -> _Step | None:
        sp = regs[RSP]
        words = SCAN_WORDS_FIRST if index == 0 else self.scan_words
        raw = self.core.read_available(sp, 8 * words)
        n = len(raw) // 8
        if n == 0:
            return None
        core = self.core
        for i, value in enumerate(struct.unpack(f"<{n}Q", raw[:8 * n])):
            if value < 0x1000 or not core.is_executable(value):
                continue
            self._scan_left -= 1
            if self._scan_left < 0:
                why.append(f"the stack scans of this thread looked at {SCAN_CANDIDATES} candidate return "
                           f"addresses: no more scanning")
                return None
            ok = self._after_call(value)
            if ok is False or ok is None and core.mapping_at(value) is None:
                continue
            if ok is None:
                why.append(f"the code before {self._where(value)} is neither in the core nor in a file here, "
                           f"so the call that return address implies is not verified")
            caller = {r: regs[r] for r in CALLEE_SAVED if r in regs}
            caller.update({RSP: sp + 8 * i + 8, RIP: value})
            return _Step(caller, "scan")
        return None

    # -- code
    def _code_bytes(self, addr: int, n: int) -> bytes | None:
        """n bytes of code at addr, from the core or the mapped file (None if unreadable)."""
        out = b""
        while len(out) < n:
            a = addr + len(out)
            page = a & ~0xFFF
            chunk = self._code.get(page)
            if chunk is None:
                chunk = self._code_page(page)
                if len(self._code) < 4096:
                    self._code[page] = chunk
            inner = a - page
            if inner >= len(chunk):
                return None
            out += chunk[inner:inner + n - len(out)]
        return out

    def _code_page(self, page: int) -> bytes:
        core = self.core
        data = core.read_available(page, 4096)
        if len(data) == 4096:
            return data
        m = core.mapping_at(page)
        if m is None:
            return data
        mod = core.module_of(page)
        if mod is None:
            return data
        mf = self.files.get(mod)
        if mf.elf is None:
            return data
        off = m.offset + (page - m.start)
        n = max(0, min(4096, m.end - page, mf.elf.size - off))
        if n <= len(data):
            return data
        try:
            return mf.elf.pread(off, n, "code")
        except ElfError:
            return data

    def _is_sigtramp(self, pc: int) -> bool:
        code = self._code_bytes(pc, 9)
        if code is None:
            code = self._code_bytes(pc, 7)
        return code is not None and any(code.startswith(p) for p in RESTORE_RT)

    def _after_call(self, ra: int) -> bool | None:
        """Whether the instruction ending at ra is a call (None: the code is unreadable)."""
        code = self._code_bytes(ra - 7, 7) if ra >= 7 else None
        if code is None:
            code = self._code_bytes(ra - 5, 5) if ra >= 5 else None
            if code is None:
                code = self._code_bytes(ra - 2, 2) if ra >= 2 else None
                if code is None:
                    return None
        return _ends_with_call(code, ra)

    # -- symbols
    def _symbolize(self, frames: list[Frame], notes: list[str]) -> list[Frame]:
        if self.symbolizer is None or not frames:
            return frames
        out = []
        for f in frames:
            if not f.module:
                out.append(f)
                continue
            mod = self._module_of(f.pc)
            if mod is None:
                out.append(f)
                continue
            s = self.symbolizer.symbolize(f.pc, mod, return_address=f.return_address and not f.signal_frame,
                                          demangle_names=False)
            fn = s.function
            if fn is None and f.signal_frame:
                fn = "__restore_rt"
            out.append(replace(f, function=fn or "", function_offset=s.offset, file=s.file or "", line=s.line,
                               inlined=s.inlined, module_address=s.module_address))
        names = [f.function for f in out if f.function and f.function.startswith("_Z")]
        names += [i.function for f in out for i in f.inlined if i.function.startswith("_Z")]
        if names:
            d = demangle(names)
            if all(d[n] == n for n in names) and not _have_cxxfilt():
                notes.append("c++filt is not on PATH: C++ names are left mangled")
            out = [replace(f, function=d.get(f.function, f.function),
                           mangled=f.function if d.get(f.function, f.function) != f.function else None,
                           inlined=tuple(replace(i, function=d.get(i.function, i.function)) for i in f.inlined))
                   if f.function else f for f in out]
        return out


def _have_cxxfilt() -> bool:
    from .symbolize import demangler_available
    return demangler_available()


@lru_cache(maxsize=1)
def _iced():
    import iced_x86
    return iced_x86, (iced_x86.FlowControl.CALL, iced_x86.FlowControl.INDIRECT_CALL)


def _ends_with_call(code: bytes, ra: int) -> bool:
    """Whether some suffix of `code` (the bytes just before ra) decodes as exactly one call."""
    n = len(code)
    if n >= 5 and code[n - 5] == 0xE8:
        return True
    iced, calls = _iced()
    for k in range(2, n + 1):
        if k == 5 and code[n - 5] == 0xE8:
            continue
        piece = code[n - k:]
        if 0xFF not in piece:
            continue
        ins = iced.Decoder(64, piece, ip=ra - k).decode()
        if ins.len == k and ins.flow_control in calls:
            return True
    return False


# -- CFI sections of files ---------------------------------------------------------------------------

def _eh_frame_of_file(elf: ElfFile, notes: list[str]) -> CFITable | None:
    try:
        sec = elf.section(".eh_frame")
        if sec is not None and sec.has_data and sec.size:
            data = elf.section_data(sec)
            hdr_sec = elf.section(".eh_frame_hdr")
            hdr = elf.section_data(hdr_sec) if hdr_sec is not None and hdr_sec.has_data and hdr_sec.size else None
            t = CFITable(data, sec.addr, "eh", hdr=hdr, hdr_address=hdr_sec.addr if hdr is not None else None,
                         name=f"{elf.path} .eh_frame")
            notes.extend(f"{elf.path}: {n}" for n in t.notes)
            return t
        if sec is None and not elf.sections:
            return _eh_frame_from_segments(elf, notes)
    except ElfError as exc:
        notes.append(f"{elf.path}: .eh_frame unreadable: {exc}")
    return None


def _eh_frame_from_segments(elf: ElfFile, notes: list[str]) -> CFITable | None:
    """.eh_frame of a file without section headers, through PT_GNU_EH_FRAME."""
    from .elf import vaddr_to_offset
    ph = next((s for s in elf.segments if s.type == PT_GNU_EH_FRAME), None)
    if ph is None:
        return None
    hdr = elf.read(ph.offset, ph.filesz, ".eh_frame_hdr")
    probe = CFITable(b"", 0, "eh")
    try:
        eh_addr, _ = probe._encoded(4, len(hdr), hdr[1], data_base=ph.vaddr, data=hdr, base_address=ph.vaddr)
    except CFIError as exc:
        notes.append(f"{elf.path}: .eh_frame_hdr: {exc}")
        return None
    off, avail = vaddr_to_offset(elf, eh_addr, ".eh_frame")
    data = memoryview(elf.data)[off:off + min(avail, MAX_CORE_CFI)]
    t = CFITable(data, eh_addr, "eh", hdr=hdr, hdr_address=ph.vaddr, name=f"{elf.path} .eh_frame")
    notes.extend(f"{elf.path}: {n}" for n in t.notes)
    return t


def _debug_frame_of_file(elf: ElfFile, notes: list[str]) -> CFITable | None:
    try:
        sec = elf.section(".debug_frame")
        if sec is None or not sec.has_data or not sec.size:
            return None
        if sec.flags & 0x800:   # SHF_COMPRESSED
            import zlib
            raw = bytes(elf.section_data(sec))
            if len(raw) < 24:
                return None
            ch_type, _res, size, _align = struct.unpack_from(elf.endian + "IIQQ", raw, 0)
            if ch_type != 1 or size > MAX_CORE_CFI:
                notes.append(f"{elf.path}: .debug_frame compressed with type {ch_type}: not read")
                return None
            data = zlib.decompress(raw[24:])
        else:
            data = elf.section_data(sec)
        return CFITable(data, 0, "debug", name=f"{elf.path} .debug_frame")
    except (ElfError, Exception) as exc:  # noqa: BLE001 - zlib errors too
        notes.append(f"{elf.path}: .debug_frame unreadable: {exc}")
        return None


# -- one call ------------------------------------------------------------------------------------------

def backtrace(core: Core, thread: Thread | int | None = None, *, start: Mapping[str, int] | None = None,
              file_resolver: Resolver | None = None, debug_dirs: Iterable[str] = DEBUG_DIRS,
              sysroot: str | os.PathLike[str] | None = None, max_frames: int = 256,
              symbols: bool = True, lines: bool = True, inline: bool = True) -> Backtrace:
    """The backtrace of `thread` (a Thread, a tid, or None for the crashing thread), from
    `start` registers (by name: rip, rsp, rbp...; e.g. CrashSite.registers after a signal-frame
    recovery) or the thread's own. See the module docstring for how frames are found."""
    with Unwinder(core, file_resolver=file_resolver, debug_dirs=debug_dirs, sysroot=sysroot, symbols=symbols,
                  lines=lines, inline=inline) as u:
        return u.backtrace(thread, start=start, max_frames=max_frames)
