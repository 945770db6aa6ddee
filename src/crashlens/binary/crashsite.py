"""The faulting site of a core: which thread, which signal, which instruction, which module and
function, and -- for SIGILL -- whether this CPU and this process could run that instruction.

    crash_site(core, *, file_resolver=None, cpu_flags=None) -> CrashSite

The ladder, each step saying what it found and how (`method`, `thread_reason`, `notes`):

1. The crashing thread: the one the signal hit (Core.signalled_thread: NT_SIGINFO's place
   in the notes), not thread 0 by habit.
2. Re-raised signals. A handler that catches a fault and re-raises it (Python's faulthandler:
   `faulthandler_fatal_error` restores SIG_DFL and calls raise()) leaves the core's registers in
   libc's raise/pthread_kill and the signal self-sent (si_code SI_TKILL/SI_USER, si_pid = the
   process). The interrupted context is still on the stack, in the kernel's signal frame
   (its layout: binary/sigframe.py), and the kernel puts it at an address = 8 (mod 16) (align_sigframe). The thread's stack
   (or its sigaltstack, where faulthandler runs) is scanned upward from its stack pointer, at
   most SCAN_BYTES, for a frame whose cs is the 64-bit user selector 0x33, whose saved rsp
   lies in mapped writable memory, whose rip lies in an executable mapping, whose siginfo is
   a real signal, and whose return address points at __restore_rt (`mov $15,%rax; syscall`,
   read from the core or from libc on disk). The frame's registers, siginfo (signal, code,
   fault address) and cr2 then describe the real fault: method "signal-frame".
   Otherwise the registers of NT_PRSTATUS stand: method "prstatus".
3. The instruction at the PC, from the core's memory, or from the mapped file (NT_FILE) when
   the text page is not in the core -- by default at the same path on this machine, or where
   `file_resolver(path)` says; a file whose GNU build-id differs from the one in the core's
   copy of its ELF header is not used. Mnemonic and required CPUID extensions come from
   binary.isa's tables (iced-x86).
4. Module (the NT_FILE mapping holding the PC), offset from its load base, the address as the
   ELF file numbers it (for objdump/addr2line), and the function from binary.symbols.
5. For SIGILL, `isa_verdict`: does the CPU (cpu_flags: /proc/cpuinfo or lscpu text, or a set
   of flags) and the process (XCR0 from NT_X86_XSTATE) support the instruction?
   `cpu_supports` True/False/None with a one-line `reason`. How the core separates the AMX
   cases, given that XCR0 in a core is the kernel's system-wide mask (see binary/core.py):
     - XCR0 lacks AMX TILECFG/TILEDATA (bits 17, 18): the kernel enabled no tile state --
       the CPU has no AMX (or the kernel predates 5.16): any AMX instruction is #UD -> False.
     - XCR0 has them: the kernel runs AMX with XFD, and a process that never called
       arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) gets SIGILL at its first
       instruction that touches tile data (TILEZERO, TILELOADD, TDP*...); LDTILECFG runs.
       The kernel's XFD handler sends it with ILL_ILLOPC from #NM (arch/x86/kernel/traps.c
       handle_xfd_event), but a real core from an AMX CPU under a hypervisor (Linux 6.18,
       fixtures/cores/amx) shows the same refusal as #UD: ILL_ILLOPN, trap 6. So the si_code
       does not separate the cases; the tile configuration does: with TILECFG loaded
       (XSTATE_BV bit 17 of the interrupted context, from NT_X86_XSTATE or the signal
       frame's XSAVE area) a tile-data instruction is valid, and its SIGILL is the permission
       refusal -> False. ILL_ILLOPC or a #NM trap say the same. Without a loaded
       configuration the instruction may simply be invalid as executed -> None, both named.
   An extension the CPU and the process both support is never blamed.

Not here: the native unwinder and the symbolised backtrace beyond the faulting frame.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

import iced_x86

from . import isa
from .core import (EM_AARCH64, EM_X86_64, SENDER_CODES, SI_KERNEL, SIGBUS, SIGILL, SIGSEGV, Core,
                   SigInfo, parse_siginfo, si_code_name, signal_name, xfeature_names)
from .elf import ElfError, ElfFile, PT_LOAD
from .sigframe import FRAME_MCONTEXT, FRAME_SIGINFO, FRAME_SIZE, RESTORE_RT, USER_CS, USER_DS
from .sigframe import SIGCONTEXT_GREGS as SIGCONTEXT_REGS
from .symbols import locate_function

__all__ = ["CrashSite", "Instruction", "SignalFrame", "crash_site", "decode_instruction",
           "find_signal_frame", "isa_verdict", "parse_cpu_flags"]

SCAN_BYTES = 256 * 1024          # how far above the stack pointer a signal frame is looked for
MAX_CANDIDATES = 16
TRAPS = {0: "divide error (#DE)", 1: "debug (#DB)", 3: "breakpoint (#BP)", 4: "overflow (#OF)",
         5: "bound (#BR)", 6: "invalid opcode (#UD)", 7: "device not available (#NM)",
         12: "stack fault (#SS)", 13: "general protection (#GP)", 14: "page fault (#PF)",
         16: "x87 FPU error (#MF)", 17: "alignment check (#AC)", 19: "SIMD FP exception (#XM)",
         21: "control protection (#CP)"}

# the signals each CPU exception turns into, first the usual one
TRAP_SIGNALS = {0: (8,), 1: (5,), 3: (5,), 4: (11,), 5: (11,), 6: (4,), 7: (4,), 12: (7, 11), 13: (11, 7),
                14: (11, 7), 16: (8,), 17: (7,), 19: (8,), 21: (11,)}

XCR0_SSE, XCR0_AVX = 0x2, 0x6
XCR0_AVX512 = 0xE6
XCR0_AMX = 0x60000
XCR0_TILECFG = 0x20000
# AMX instructions that touch only TILECFG; every other AMX instruction touches TILEDATA, the
# state a process must ask for (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) before
# its first use (Linux Documentation/arch/x86/xstate.rst)
AMX_TILECFG_ONLY = frozenset({"ldtilecfg", "sttilecfg"})
XSAVE_HEADER = 512               # XSTATE_BV's offset in an XSAVE area (Intel SDM vol. 1, 13.4.2)
XCR0_PKRU = 0x200
XCR0_MPX = 0x18
XCR0_APX = 0x80000
ILL_ILLOPC, ILL_ILLOPN = 1, 2

Resolver = Callable[[str], "str | os.PathLike[str] | None"]


# -- results ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Instruction:
    address: int
    length: int
    raw: bytes
    mnemonic: str
    text: str                          # AT&T, as objdump/gdb print it
    extensions: tuple[str, ...]        # CPUID extensions it needs beyond baseline x86-64 (binary.isa names)
    encoding: str                      # legacy, VEX, EVEX, XOP, 3DNow!, MVEX
    xcr0_needed: int                   # XSAVE state components the OS must have enabled for it
    faults: bool                       # False: runs without its extension (TZCNT as BSF, ENDBR64 as NOP)
    why_not: str                       # why it does not fault, when it does not
    source: str                        # "core" or the file it was read from
    valid: bool = True                 # False: the bytes decode as no instruction

    def to_json(self) -> dict[str, Any]:
        return {"address": hex(self.address), "bytes": self.raw.hex(" "), "mnemonic": self.mnemonic,
                "text": self.text, "extensions": list(self.extensions), "encoding": self.encoding,
                "xcr0_needed": xfeature_names(self.xcr0_needed), "source": self.source}


@dataclass(frozen=True)
class SignalFrame:
    """A kernel rt_sigframe found on a thread's stack: the context a signal interrupted."""

    address: int
    restorer: int                      # pretcode: where the handler returns (__restore_rt)
    restorer_checked: bool             # its bytes were read and are __restore_rt
    registers: Mapping[str, int]
    siginfo: SigInfo | None            # None when the handler had no SA_SIGINFO (no siginfo copied)
    trapno: int                        # the thread's last CPU exception (thread.trap_nr)
    err: int                           # its error code (page faults: P, W, U, RSVD, I, PK bits)
    cr2: int                           # the faulting address of the last page fault
    fpstate: int = 0                   # where the interrupted context's XSAVE area was saved (0: none)

    @property
    def pc(self) -> int:
        return self.registers["rip"]

    @property
    def sp(self) -> int:
        return self.registers["rsp"]

    @property
    def trap(self) -> str:
        return TRAPS.get(self.trapno, f"trap {self.trapno}")

    @property
    def access(self) -> str:
        """For a page fault: what the faulting access was, from the error code."""
        if self.trapno != 14:
            return ""
        kind = "instruction fetch" if self.err & 0x10 else "write" if self.err & 0x2 else "read"
        what = "protection-key violation" if self.err & 0x20 else (
            "protection violation" if self.err & 0x1 else "not-present page")
        return f"{kind}, {what}"

    def signal_for(self, raised: int | None) -> tuple[int | None, int | None, int | None, str]:
        """(signal, si_code, fault address, how) of the interrupted fault: from the frame's
        siginfo when the kernel wrote one, else from the trap number when it agrees with the
        re-raised signal (the kernel's own mapping: arch/x86/kernel/traps.c, mm/fault.c)."""
        si = self.siginfo
        if si is not None:
            addr = si.addr
            if addr is None and si.signo in (SIGSEGV, SIGBUS) and self.trapno == 14:
                addr = self.cr2
            return si.signo, si.code, addr, "the frame's siginfo"
        sig = TRAP_SIGNALS.get(self.trapno)
        if sig is None or (raised is not None and raised not in sig):
            if self.restorer_checked and raised is not None:
                # the kernel records trap_nr only on its do_trap paths: the XFD #NM handler sends
                # SIGILL without it (fixtures/cores/amx/xfd-nm: trap 0), so a stale trap number
                # says nothing against a frame whose return address is __restore_rt
                return raised, None, None, (f"a frame returning to __restore_rt; its trap number ({self.trap}) "
                                            f"does not explain {signal_name(raised)} and is taken as stale")
            return None, None, None, f"no siginfo in the frame and {self.trap} does not explain {signal_name(raised)}"
        signo = raised if raised in sig else sig[0]
        rip = self.registers["rip"]
        if self.trapno == 14:
            code = 4 if self.err & 0x20 else 2 if self.err & 0x1 else 1   # SEGV_PKUERR / ACCERR / MAPERR
            if signo == SIGBUS:
                code = 2   # BUS_ADRERR
            return signo, code, self.cr2, f"{self.trap} ({self.access}) and cr2"
        code, addr = {0: (1, rip), 6: (ILL_ILLOPN, rip), 7: (ILL_ILLOPC, rip), 13: (SI_KERNEL, None),
                      17: (1, None), 3: (1, rip), 1: (2, rip), 16: (None, rip), 19: (None, rip)}.get(
            self.trapno, (None, None))
        return signo, code, addr, f"{self.trap} (the handler had no SA_SIGINFO: the kernel copied no siginfo)"

    def to_json(self) -> dict[str, Any]:
        return {"address": hex(self.address), "restorer": hex(self.restorer), "restorer_checked": self.restorer_checked,
                "pc": hex(self.pc), "sp": hex(self.sp), "trapno": self.trapno, "trap": self.trap,
                "err": self.err, "access": self.access or None, "cr2": hex(self.cr2),
                "siginfo": self.siginfo.to_json() if self.siginfo else None}


@dataclass(frozen=True)
class CrashSite:
    thread: int | None                 # tid of the crashing thread
    thread_index: int | None
    thread_reason: str
    method: str                        # "signal-frame", "prstatus" or "none"
    method_reason: str
    signal: int | None
    signal_name: str
    si_code: int | None
    si_code_name: str
    fault_address: int | None
    sender_pid: int | None             # a signal sent with kill/tkill: by whom
    pc: int | None
    sp: int | None
    registers: Mapping[str, int]
    raised_signal: int | None          # what the core itself reports (differs after a re-raise)
    raised_pc: int | None
    module: str | None                 # the mapped file holding the PC (NT_FILE path)
    module_base: int | None
    offset: int | None                 # pc - module_base (as dmesg and minidumps count)
    module_address: int | None         # the PC as an address of the ELF file (objdump, addr2line)
    module_file: str | None            # where that file was read on this machine
    build_id: str | None               # from the core's copy of the module's ELF header
    build_id_match: bool | None        # the file on this machine has the same build-id
    function: str | None
    function_start: int | None         # in the ELF file's addresses
    function_offset: int | None
    function_source: str | None        # symtab, dynsym, eh_frame
    instruction: Instruction | None
    required_isa: tuple[str, ...]
    cpu_supports: bool | None
    reason: str
    xcr0: int | None
    signal_frame: SignalFrame | None
    notes: tuple[str, ...] = ()

    @property
    def location(self) -> str:
        where = os.path.basename(self.module) if self.module else "?"
        fn = f"{self.function}+{self.function_offset:#x}" if self.function and self.function_offset is not None else ""
        off = f"{where}+{self.offset:#x}" if self.offset is not None else where
        return f"{fn} ({off})" if fn else off

    def to_json(self) -> dict[str, Any]:
        """The `crash` object of the analysis JSON (design brief), plus how each part was found."""
        h = lambda v: hex(v) if v is not None else None  # noqa: E731
        return {
            "signal": self.signal_name or None, "signo": self.signal, "si_code": self.si_code_name or self.si_code,
            "fault_address": h(self.fault_address), "pc": h(self.pc), "sp": h(self.sp),
            "module": self.module, "module_base": h(self.module_base), "offset": h(self.offset),
            "module_address": h(self.module_address), "function": self.function,
            "function_offset": h(self.function_offset),
            "instruction": self.instruction.text if self.instruction else None,
            "mnemonic": self.instruction.mnemonic if self.instruction else None,
            "required_isa": list(self.required_isa), "cpu_supports": self.cpu_supports, "reason": self.reason,
            "thread": self.thread, "thread_reason": self.thread_reason,
            "method": self.method, "method_reason": self.method_reason,
            "raised_signal": signal_name(self.raised_signal) or None, "raised_pc": h(self.raised_pc),
            "sender_pid": self.sender_pid, "build_id": self.build_id, "build_id_match": self.build_id_match,
            "xcr0": h(self.xcr0), "xcr0_components": list(xfeature_names(self.xcr0)) if self.xcr0 is not None else None,
            "registers": {k: hex(v) for k, v in self.registers.items()},
            "signal_frame": self.signal_frame.to_json() if self.signal_frame else None,
            "notes": list(self.notes),
        }


# -- CPU flags -------------------------------------------------------------------------------------

_FLAGS_LINE = re.compile(r"^\s*(?:flags|Flags|Features)\s*:\s*(.*)$", re.M)


def parse_cpu_flags(source: str | Iterable[str] | None) -> frozenset[str] | None:
    """CPU flags from /proc/cpuinfo or lscpu text (the `flags`/`Flags:`/`Features` lines), or
    from whitespace-separated flags, or from an iterable of flags. None stays None (unknown)."""
    if source is None:
        return None
    if isinstance(source, str):
        lines = _FLAGS_LINE.findall(source)
        words = " ".join(lines).split() if lines else source.split()
        return frozenset(w.lower() for w in words)
    return frozenset(str(f).strip().lower() for f in source if str(f).strip())


# -- memory: the core first, then the mapped files -------------------------------------------------

def _same_path(path: str) -> str | None:
    """The default resolver: the mapped path itself, when it is a regular file here."""
    if path.startswith(("/proc/", "/sys/", "/dev/")):
        return None
    return path if os.path.isfile(path) else None


class _Memory:
    """Reads process memory from the core, falling back to the file an address is mapped
    from (text pages are not in a default core). Files are opened once and checked against
    the build-id the core holds for them."""

    def __init__(self, core: Core, resolver: Resolver | None, notes: list[str],
                 debug_dirs: Iterable[str] = ()) -> None:
        self.core = core
        self.resolver = resolver or _same_path
        self.notes = notes
        self.debug_dirs = tuple(debug_dirs)
        self._files: dict[str, tuple[ElfFile | None, str | None, bool | None]] = {}
        self._debug: dict[str, ElfFile | None] = {}

    def close(self) -> None:
        for elf, _p, _m in self._files.values():
            if elf is not None:
                elf.close()
        for elf in self._debug.values():
            if elf is not None:
                elf.close()

    def symbols_file(self, elf: ElfFile) -> ElfFile:
        """`elf`, or its separate debug file (<dir>/.build-id/xx/rest.debug, same build-id)
        when `elf` is stripped of .symtab and such a file exists."""
        try:
            if elf.section(".symtab") is not None or not self.debug_dirs:
                return elf
            bid = isa.build_id(elf)
        except ElfError:
            return elf
        if not bid or len(bid) < 4:
            return elf
        if bid not in self._debug:
            found = None
            for d in self.debug_dirs:
                cand = os.path.join(d, ".build-id", bid[:2], bid[2:] + ".debug")
                if os.path.isfile(cand):
                    try:
                        dbg = ElfFile(cand)
                    except ElfError:
                        continue
                    try:
                        ok = isa.build_id(dbg) == bid and dbg.section(".symtab") is not None
                    except ElfError:
                        ok = False
                    if ok:
                        found = dbg
                        break
                    dbg.close()
            self._debug[bid] = found
        return self._debug[bid] or elf

    def file(self, path: str) -> tuple[ElfFile | None, str | None, bool | None]:
        """(open ElfFile or None, local path, build-id match) for a mapped path."""
        if path in self._files:
            return self._files[path]
        res: tuple[ElfFile | None, str | None, bool | None] = (None, None, None)
        if path and not path.startswith(("[", "/memfd:", "/dev/", "anon_inode:", "/SYSV")):
            want = path[:-10] if path.endswith(" (deleted)") else path
            try:
                local = self.resolver(want)
            except Exception as exc:  # noqa: BLE001 - a caller's resolver must not end the analysis
                local = None
                self.notes.append(f"file resolver failed for {want}: {type(exc).__name__}: {exc}")
            if local is None:
                self.notes.append(f"{want}: not found on this machine (text bytes and symbols unavailable)")
            else:
                local = os.fspath(local)
                try:
                    elf = ElfFile(local)
                except ElfError as exc:
                    self.notes.append(f"{want}: {exc}")
                    elf = None
                if elf is not None:
                    mod = next((m for m in self.core.modules if m.path == path), None)
                    want_id = mod.build_id if mod else None
                    try:
                        have_id = isa.build_id(elf)
                    except ElfError:
                        have_id = None
                    match = None if not (want_id and have_id) else want_id == have_id
                    if match is False:
                        self.notes.append(f"{want}: build-id mismatch (core {want_id}, {local} {have_id}): "
                                          f"that file is another build and is not used")
                        elf.close()
                        elf = None
                    elif match is None and want_id is None:
                        self.notes.append(f"{want}: the core holds no build-id for it; {local} used unverified")
                    res = (elf, local, match)
        self._files[path] = res
        return res

    def read(self, address: int, size: int) -> tuple[bytes, str]:
        """Up to `size` bytes at `address` (fewer at the end of what is readable) and their source."""
        data = self.core.read_available(address, size)
        if len(data) == size:
            return data, "core"
        m = self.core.mapping_at(address)
        if m is None:
            return data, "core"
        elf, local, _ = self.file(m.path)
        if elf is None:
            return data, "core"
        n = min(size, m.end - address)
        off = m.offset + (address - m.start)
        n = max(0, min(n, elf.size - off))
        if n <= len(data):
            return data, "core"
        try:
            return elf.pread(off, n, "text"), local or m.path
        except ElfError:
            return data, "core"


# -- decoding and the ISA verdict -----------------------------------------------------------------

@lru_cache(maxsize=1)
def _formatter() -> Any:
    fmt = iced_x86.Formatter(iced_x86.FormatterSyntax.GAS)
    fmt.uppercase_hex = False
    fmt.small_hex_numbers_in_decimal = False   # $0x1, as objdump and gdb print it
    return fmt


@lru_cache(maxsize=1)
def _reg_classes() -> dict[int, str]:
    out = {}
    for name, value in vars(iced_x86.Register).items():
        if isinstance(value, int) and not name.startswith("_"):
            for prefix in ("XMM", "YMM", "ZMM", "TMM", "K"):
                if name.startswith(prefix) and name[len(prefix):].isdigit():
                    out[value] = prefix
    return out


_ENCODINGS = {iced_x86.EncodingKind.LEGACY: "legacy", iced_x86.EncodingKind.VEX: "VEX",
              iced_x86.EncodingKind.EVEX: "EVEX", iced_x86.EncodingKind.XOP: "XOP",
              iced_x86.EncodingKind.D3NOW: "3DNow!", iced_x86.EncodingKind.MVEX: "MVEX"}


def decode_instruction(code: bytes, address: int, source: str = "bytes") -> Instruction:
    """The x86-64 instruction at the start of `code` (placed at `address`)."""
    t = isa.tables()
    ins = iced_x86.Decoder(64, code, ip=address).decode()
    if ins.code == iced_x86.Code.INVALID:
        return Instruction(address, 0, bytes(code[:15]), "(bad)", "(bad)", (), "", 0, True, "", source, False)
    exts = tuple(t.exts[e].name for e in t.code_exts[ins.code] if e not in (t.INVALID, t.CPUID))
    encoding = _ENCODINGS.get(ins.encoding, str(ins.encoding))
    fmt = _formatter()
    mnemonic = fmt.format_mnemonic(ins, iced_x86.FormatMnemonicOptions.NO_PREFIXES) or \
        t.mnemonics.get(ins.mnemonic, str(ins.mnemonic))
    classes = {_reg_classes().get(ins.op_register(i)) for i in range(ins.op_count)
               if ins.op_kind(i) == iced_x86.OpKind.REGISTER}
    if ins.has_op_mask:
        classes.add("K")
    need = 0
    upper = tuple(e.upper() for e in exts)
    if any(e.startswith("AMX") for e in upper) or "TMM" in classes:
        need |= XCR0_AMX
    if encoding == "EVEX" or classes & {"ZMM", "K"} or any(e.startswith("AVX512") for e in upper):
        need |= XCR0_AVX512
    elif encoding in ("VEX", "XOP") and classes & {"XMM", "YMM"} or any(
            e in ("AVX", "AVX2", "FMA", "F16C", "FMA4", "XOP") or e.startswith("AVX-") for e in upper):
        need |= XCR0_AVX
    if mnemonic in ("rdpkru", "wrpkru"):
        need |= XCR0_PKRU
    if any(e.startswith("MPX") for e in upper):
        need |= XCR0_MPX
    if any(e.startswith("APX") for e in upper):
        need |= XCR0_APX
    return Instruction(address, ins.len, bytes(code[:ins.len]), mnemonic, fmt.format(ins), exts,
                       encoding, need, t.faulting[ins.code], t.non_faulting_why.get(ins.code, ""), source)


_UD = ("ud0", "ud1", "ud2")


def isa_verdict(ins: Instruction | None, *, signo: int | None, si_code: int | None = None,
                xcr0: int | None = None, cpu_flags: Iterable[str] | str | None = None,
                trapno: int | None = None, tile_config: bool | None = None) -> tuple[bool | None, str]:
    """(cpu_supports, one-line reason): can this CPU and this process run `ins`?

    Answers only for SIGILL (None otherwise). False needs evidence: a CPU flag that is
    missing, an XCR0 state component that is not enabled, or the AMX permission denial.
    trapno: the CPU exception behind the signal, where a signal frame kept it; tile_config:
    whether the interrupted context had a tile configuration loaded (XSTATE_BV bit 17)."""
    if signo != SIGILL:
        return None, (f"{signal_name(signo) or 'no signal'}: the instruction-set verdict applies to SIGILL only")
    if ins is None:
        return None, "the faulting instruction could not be read (not in the core, file not available)"
    if not ins.valid:
        return None, (f"the bytes at {ins.address:#x} ({ins.raw[:8].hex(' ')}) decode as no x86-64 instruction: "
                      f"a jump into data or a corrupt code pointer, not a missing extension")
    if ins.mnemonic in _UD:
        return True, (f"`{ins.text}` is the deliberately invalid opcode (__builtin_trap(), code the compiler "
                      f"marked unreachable): no CPU extension is missing")
    flags = parse_cpu_flags(cpu_flags)
    needed = ins.extensions if ins.faults else ()
    where = f"`{ins.text}` at {ins.address:#x}"
    if not needed and not ins.xcr0_needed:
        why = f" ({ins.why_not})" if ins.extensions and not ins.faults else ""
        return True, (f"{where} needs no CPU extension beyond baseline x86-64{why}: the SIGILL has another "
                      f"cause ({si_code_name(SIGILL, si_code) or 'unknown code'})")
    # what the CPU says, extension by extension
    missing_cpu, unknown_cpu, have_cpu = [], [], []
    for name in needed:
        ext = isa.extension(name)
        shown = ext.cpuinfo if ext else ()
        if flags is None or not shown:
            unknown_cpu.append(name)
        elif set(shown) & flags:
            have_cpu.append(name)
        else:
            missing_cpu.append((name, shown[0]))
    state_missing = ins.xcr0_needed & ~xcr0 if xcr0 is not None else 0
    amx = any(n.upper().startswith("AMX") for n in needed) or bool(ins.xcr0_needed & XCR0_AMX)
    code_name = si_code_name(SIGILL, si_code)
    if missing_cpu:
        names = ", ".join(f"{n} (no '{f}' flag)" for n, f in missing_cpu)
        extra = ""
        if state_missing:
            extra = f"; XCR0 {xcr0:#x} lacks {'/'.join(xfeature_names(state_missing))} too"
        return False, f"this CPU lacks {names}: {where} raises #UD{extra}"
    if state_missing:
        comps = "/".join(xfeature_names(state_missing))
        if amx and state_missing & XCR0_AMX:
            cpu = ("although the CPU lists " + ", ".join(have_cpu) + " (kernel older than 5.16, or AMX disabled)"
                   if have_cpu else "(no AMX in this CPU, or a kernel older than 5.16)")
            return False, (f"the kernel enabled no AMX tile state (XCR0 {xcr0:#x} lacks {comps}) {cpu}: "
                           f"{where} ({', '.join(needed)}) raises SIGILL in any process")
        cpu = (f"the CPU lists {', '.join(have_cpu)}, so the OS or hypervisor disabled it" if have_cpu else
               "the CPU lacks it, or the OS or hypervisor disabled it")
        return False, (f"XCR0 {xcr0:#x} lacks {comps} state: {where} needs it ({', '.join(needed) or ins.encoding}) "
                       f"and no process on this system can run it ({cpu})")
    if amx:
        exts = ", ".join(needed)
        data = ins.mnemonic not in AMX_TILECFG_ONLY
        refused = si_code == ILL_ILLOPC or trapno == 7
        if data and (refused or tile_config is True) and (xcr0 is not None or have_cpu):
            how = ("SIGILL" + (f"/{code_name}" if code_name else "")
                   + (f", trap {TRAPS[trapno]}" if trapno in (6, 7) else ""))
            if refused:
                why = "the XFD #NM path"
            else:
                why = ("the tile configuration was loaded (TILECFG in use), so the instruction was valid; "
                       "kernels and hypervisors report this refusal as #NM/ILL_ILLOPC or as #UD/ILL_ILLOPN")
            return False, (f"no AMX permission: the CPU{' lists ' + exts if have_cpu else ''} and the kernel "
                           f"enabled tile state{f' (XCR0 {xcr0:#x})' if xcr0 is not None else ''}, but the "
                           f"process never called arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): its first "
                           f"use of tile data, {where}, was refused with {how} ({why})")
        if data and have_cpu and xcr0 is not None:
            loaded = ("no tile configuration was loaded (TILECFG in its initial state)" if tile_config is False
                      else "whether a tile configuration was loaded is not in the core")
            return None, (f"this CPU and kernel support {exts} (XCR0 {xcr0:#x}) and {where} touches tile data; "
                          f"{loaded}: either the process lacked arch_prctl(ARCH_REQ_XCOMP_PERM, "
                          f"XFEATURE_XTILEDATA) permission or the instruction was invalid as executed "
                          f"(no LDTILECFG before it)")
        if have_cpu and xcr0 is not None:
            return True, (f"this CPU and kernel support {exts} (XCR0 {xcr0:#x}) and {where} needs no tile-data "
                          f"permission: it was invalid as executed ({code_name or 'si_code unknown'}: a bad "
                          f"tile configuration or operand)")
        if unknown_cpu and xcr0 is not None:
            return None, (f"the kernel enabled AMX tile state (XCR0 {xcr0:#x}); without CPU flags it is unknown "
                          f"whether the CPU has {exts} ({code_name or 'si_code unknown'}: a process without "
                          f"arch_prctl(ARCH_REQ_XCOMP_PERM) permission is refused at its first tile-data use)")
        if xcr0 is None:
            return None, (f"{where} needs {exts}; XCR0 is not in the core and "
                          f"{'no CPU flags were given' if flags is None else 'the CPU flags list it'}: "
                          f"cannot tell a CPU without AMX from a process without AMX permission")
    if unknown_cpu:
        state = f"XCR0 {xcr0:#x} enables the state it needs" if xcr0 is not None and ins.xcr0_needed else (
            "XCR0 unknown" if xcr0 is None and ins.xcr0_needed else "no OS state is involved")
        src = "no CPU flags were given" if flags is None else "Linux shows no cpuinfo flag for " + ", ".join(unknown_cpu)
        return None, (f"{where} needs {', '.join(needed)}; {src} ({state}): the CPU may lack "
                      f"{', '.join(unknown_cpu)}")
    what = ", ".join(needed) or "its state components"
    proc = f" and the process (XCR0 {xcr0:#x})" if xcr0 is not None and ins.xcr0_needed else ""
    return True, (f"this CPU{proc} support{'s' if not proc else ''} {what}: {where} did not fault for a missing "
                  f"extension ({code_name or 'si_code unknown'}; corrupt code, a bad jump target, or an "
                  f"invalid operand form)")


# -- the signal frame ----------------------------------------------------------------------------

def find_signal_frame(core: Core, thread: Any, mem: _Memory | None = None,
                      scan_bytes: int = SCAN_BYTES) -> tuple[SignalFrame | None, int]:
    """The most recent plausible x86-64 rt_sigframe above `thread`'s stack pointer, and how
    many candidates were looked at. Reads at most `scan_bytes` of stack."""
    if core.e_machine != EM_X86_64:
        return None, 0
    own = mem is None
    mem = mem or _Memory(core, None, [])
    try:
        sp = thread.sp
        start = sp & ~7
        buf = core.read_available(start, scan_bytes)
        e = "<"
        seen = 0
        best: SignalFrame | None = None
        cs_at = FRAME_MCONTEXT + 144
        pos = buf.find(b"\x33\x00", cs_at)
        while pos >= 0 and seen < 4096:
            frame_off = pos - cs_at
            if (start + frame_off) % 16 == 8 and frame_off + FRAME_SIZE <= len(buf) and start + frame_off >= sp:
                seen += 1
                cand = _frame_at(core, mem, buf, frame_off, start + frame_off, e)
                if cand is not None:
                    best = cand
                    break
            pos = buf.find(b"\x33\x00", pos + 2)
        return best, seen
    finally:
        if own:
            mem.close()


def _frame_at(core: Core, mem: _Memory, buf: bytes, off: int, address: int, e: str) -> SignalFrame | None:
    pretcode, uc_flags = struct.unpack_from(e + "QQ", buf, off)
    gregs = struct.unpack_from(e + "18Q", buf, off + FRAME_MCONTEXT)
    cs, gs, fs, ss = struct.unpack_from(e + "4H", buf, off + FRAME_MCONTEXT + 144)
    err, trapno, oldmask, cr2, fpstate = struct.unpack_from(e + "5Q", buf, off + FRAME_MCONTEXT + 152)
    if cs != USER_CS or ss not in (USER_DS, 0) or uc_flags > 0xFF or trapno > 31:
        return None
    regs = dict(zip(SIGCONTEXT_REGS, gregs))
    if not core.is_executable(regs["rip"]) or not core.is_executable(pretcode):
        return None
    seg = core.segment_at(regs["rsp"])
    if seg is None or not seg.writable:
        return None
    if fpstate and core.segment_at(fpstate) is None:
        return None
    si = _frame_siginfo(buf[off + FRAME_SIGINFO:off + FRAME_SIGINFO + 128], e, trapno, cr2)
    code, _src = mem.read(pretcode, 9)
    checked = any(code.startswith(p) for p in RESTORE_RT)
    if len(code) >= 7 and not checked:
        return None   # readable and not __restore_rt: not a kernel frame
    regs.update(cs=cs, gs=gs, fs=fs, ss=ss)
    return SignalFrame(address, pretcode, checked, regs, si, trapno, err, cr2, fpstate)


def _frame_siginfo(raw: bytes, e: str, trapno: int, cr2: int) -> SigInfo | None:
    """The frame's siginfo if the kernel wrote one (it does only for SA_SIGINFO handlers; the
    bytes are stale stack otherwise): a known signal and code that agree with the trap."""
    try:
        si = parse_siginfo(raw, e)
    except Exception:  # noqa: BLE001
        return None
    if not 1 <= si.signo <= 64 or not -64 < si.errno < 4096:
        return None
    if not (si.code in SENDER_CODES or si.code == SI_KERNEL or -7 <= si.code <= 10):
        return None
    if si.from_kernel and si.signo not in TRAP_SIGNALS.get(trapno, (si.signo,)):
        return None
    if trapno == 14 and si.signo in (SIGSEGV, SIGBUS) and si.code > 0 and si.addr != cr2:
        return None
    return si


# -- the crash site ---------------------------------------------------------------------------------

DEBUG_DIRS = ("/usr/lib/debug",)


def crash_site(core: Core, *, file_resolver: Resolver | None = None,
               cpu_flags: Iterable[str] | str | None = None,
               debug_dirs: Iterable[str] = DEBUG_DIRS) -> CrashSite:
    """Where and why the process died: see the module docstring for the ladder.

    file_resolver(path) -> a path on this machine (or None) for a file the core maps; by
    default the same path, when it exists. cpu_flags: /proc/cpuinfo or lscpu text, or flags.
    debug_dirs: where separate debug files are looked up by build-id, for the function name
    of a stripped module."""
    notes: list[str] = []
    mem = _Memory(core, file_resolver, notes, debug_dirs)
    try:
        return _crash_site(core, mem, cpu_flags, notes)
    finally:
        mem.close()


def _crash_site(core: Core, mem: _Memory, cpu_flags: Any, notes: list[str]) -> CrashSite:
    thread, thread_reason = core.signalled_thread()
    xcr0 = core.xcr0
    if thread is None:
        return CrashSite(None, None, thread_reason, "none", "no thread registers in the core", core.signal,
                         signal_name(core.signal), core.siginfo.code if core.siginfo else None,
                         core.siginfo.code_name if core.siginfo else "", core.siginfo.addr if core.siginfo else None,
                         None, None, None, {}, core.signal, None, None, None, None, None, None, None, None, None,
                         None, None, None, None, (), None, "no thread registers in the core", xcr0, None,
                         tuple(core.notes) + tuple(notes))
    si = thread.siginfo or core.siginfo
    signo = si.signo if si else (thread.cursig or None)
    code = si.code if si else None
    regs: Mapping[str, int] = thread.registers
    pc, sp = thread.pc, thread.sp
    fault = si.addr if si else None
    sender = si.sender_pid if si and si.code in SENDER_CODES else None
    method, method_reason = "prstatus", "registers of the thread's NT_PRSTATUS"
    frame = None
    if si is not None and si.self_sent:
        own = sender in (None, 0, core.pid, thread.tid)
        if not own:
            notes.append(f"{si.name} was sent by process {sender} (uid {si.sender_uid}) with "
                         f"{si.code_name}: no fault happened in this process")
        elif core.e_machine == EM_X86_64:
            frame, seen = find_signal_frame(core, thread, mem)
            fsig = frame.signal_for(signo) if frame is not None else (None, None, None, "")
            if frame is not None and fsig[0] is not None and (
                    fsig[0] == signo or frame.siginfo is not None and frame.siginfo.from_kernel):
                method = "signal-frame"
                method_reason = (f"{si.name} was re-raised by the process itself ({si.code_name}, pid {sender}) "
                                 f"from a signal handler; the context it interrupted comes from the kernel signal "
                                 f"frame at {frame.address:#x} (signal from {fsig[3]}"
                                 f"{'' if frame.restorer_checked else '; return address not verified'})")
                regs, pc, sp = frame.registers, frame.pc, frame.sp
                signo, code, fault = fsig[0], fsig[1], fsig[2]
                sender = frame.siginfo.sender_pid if frame.siginfo else None
            elif frame is not None:
                notes.append(f"a signal frame at {frame.address:#x} does not hold a fault ({fsig[3]}): "
                             f"the re-raise is taken as the crash")
                frame = None
            else:
                method_reason += (f"; {si.name} was sent by the process itself ({si.code_name}) and no kernel signal "
                                  f"frame lies within {SCAN_BYTES >> 10} KiB above its stack pointer "
                                  f"({seen} candidates): raised directly (abort(), raise()), not re-raised")
        else:
            notes.append("signal-frame recovery is implemented for x86-64 cores only")
    if signo == SIGSEGV and code == SI_KERNEL:
        notes.append("SIGSEGV with SI_KERNEL: a general-protection fault (non-canonical address, misaligned "
                     "aligned-vector access, privileged instruction); the kernel records no fault address")
        fault = None
    # module, offset, function
    mapping = core.mapping_at(pc) if pc is not None else None
    module = module_base = offset = module_address = None
    module_file = build_id = None
    build_match = None
    function = function_start = function_offset = function_source = None
    if mapping is not None:
        mod = core.module_of(pc)
        module = mapping.path
        module_base = mod.base if mod else mapping.start - mapping.offset
        offset = pc - module_base
        build_id = mod.build_id if mod else None
        elf, module_file, build_match = mem.file(mapping.path)
        file_off = mapping.offset + (pc - mapping.start)
        if elf is not None:
            module_address = _file_vaddr(elf, file_off)
            if module_address is not None:
                try:
                    fn = locate_function(mem.symbols_file(elf), module_address)
                except ElfError as exc:
                    fn = None
                    notes.append(f"{module}: symbols unreadable: {exc}")
                if fn is not None:
                    function, function_start = fn.name, fn.start
                    function_offset, function_source = module_address - fn.start, fn.source
        elif mod is not None:
            module_address = _memory_vaddr(core, mod.base, file_off)
    elif pc is not None and core.files:
        seg = core.segment_at(pc)
        notes.append(f"pc {pc:#x} is in no mapped file ("
                     + ("an anonymous executable mapping: JIT code?" if seg and seg.executable else
                        "not in any mapping: a jump to a bad address" if seg is None else
                        f"a non-executable {seg.perms} mapping") + ")")
    # the instruction
    instruction = None
    if pc is not None and core.e_machine == EM_X86_64:
        raw, source = mem.read(pc, 15)
        if raw:
            instruction = decode_instruction(raw, pc, source)
            if not instruction.valid and len(raw) < 15:
                notes.append(f"only {len(raw)} bytes readable at pc {pc:#x}")
        else:
            notes.append(f"the code at pc {pc:#x} is neither in the core nor in a readable mapped file")
    elif pc is not None and core.e_machine == EM_AARCH64:
        raw, _src = mem.read(pc, 4)
        if len(raw) == 4:
            notes.append(f"aarch64 instruction word at pc: {int.from_bytes(raw, 'little'):#010x} (not decoded)")
    required = tuple(instruction.extensions) if instruction and instruction.faults else ()
    if core.e_machine == EM_X86_64:
        xstate_bv = _interrupted_xstate_bv(core, thread, frame)
        supports, reason = isa_verdict(instruction, signo=signo, si_code=code, xcr0=xcr0, cpu_flags=cpu_flags,
                                       trapno=frame.trapno if frame is not None else None,
                                       tile_config=None if xstate_bv is None else bool(xstate_bv & XCR0_TILECFG))
    else:
        supports, reason = None, f"the instruction-set verdict is implemented for x86-64 ({core.machine} core)"
    return CrashSite(thread.tid, thread.index, thread_reason, method, method_reason, signo, signal_name(signo),
                     code, si_code_name(signo, code), fault, sender, pc, sp, dict(regs),
                     si.signo if si else thread.cursig or None, thread.pc, module, module_base, offset,
                     module_address, module_file, build_id, build_match, function, function_start,
                     function_offset, function_source, instruction, required, supports, reason, xcr0, frame,
                     tuple(dict.fromkeys(list(core.notes) + notes)))


def _interrupted_xstate_bv(core: Core, thread: Any, frame: SignalFrame | None) -> int | None:
    """XSTATE_BV of the context the fault interrupted: the signal frame's XSAVE area after a
    re-raise (the thread's own state is then the handler's), else the thread's NT_X86_XSTATE."""
    if frame is None:
        return thread.xstate.xstate_bv if thread.xstate is not None else None
    if not frame.fpstate:
        return None
    raw = core.read_available(frame.fpstate + XSAVE_HEADER, 8)
    return int.from_bytes(raw, "little") if len(raw) == 8 else None


def _file_vaddr(elf: ElfFile, file_off: int) -> int | None:
    try:
        for s in elf.segments:
            if s.type == PT_LOAD and s.offset <= file_off < s.offset + max(s.filesz, 1):
                return s.vaddr + (file_off - s.offset)
    except ElfError:
        return None
    return None


def _memory_vaddr(core: Core, base: int, file_off: int) -> int | None:
    image = core.elf_image_at(base)
    if image is None:
        return None
    for typ, _f, off, vaddr, _pa, filesz, _m, _al in image[1]:
        if typ == PT_LOAD and off <= file_off < off + max(filesz, 1):
            return vaddr + (file_off - off)
    return None
