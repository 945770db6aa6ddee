"""ELF core files of Linux processes: threads, signal, process, auxv, mapped files, XSAVE state
and memory read on demand.

`read_core(path_or_elf)` reads the program headers and the PT_NOTE segment only: a 4 GB core
costs what a 4 KB one does (the file is mapped, never read through). Memory (PT_LOAD) is read
later, a few bytes at a time, by `Core.read(address, size)`.

Layouts (shared/FACTS.md section 5, checked against glibc <sys/procfs.h> and real kernel cores):
  NT_PRSTATUS  elf_prstatus: pr_info{si_signo, si_code, si_errno} @0, pr_cursig (s16) @12,
               pr_sigpend @16, pr_sighold @24, pr_pid @32, ppid @36, pgrp @40, sid @44,
               utime/stime/cutime/cstime (timeval) @48..111, pr_reg @112, pr_fpvalid after it.
               x86-64 pr_reg: user_regs_struct, 27 words (r15 ... gs);
               aarch64 pr_reg: user_pt_regs, x0..x30, sp, pc, pstate (34 words).
  NT_PRPSINFO  elf_prpsinfo (136 bytes on 64-bit): state @0, sname @1, zomb @2, nice @3,
               flag @8, uid @16, gid @20, pid @24, ppid @28, pgrp @32, sid @36,
               fname[16] @40, psargs[80] @56.
  NT_SIGINFO   siginfo_t (128 bytes): signo @0, errno @4, code @8, union @16 (si_addr for
               faults, si_pid/si_uid for kill/tkill/sigqueue).
  NT_AUXV      (a_type, a_val) words up to AT_NULL.
  NT_FILE      count, page_size, count x {start, end, file_ofs (pages)}, then count paths
               (Linux fs/binfmt_elf.c fill_files_note).
  NT_X86_XSTATE  the XSAVE image: XCR0 (the OS-enabled mask) @464, XSTATE_BV @512,
               XCOMP_BV @520. NT_X86_XSAVE_LAYOUT: {type, size, offset, flags} u32 entries.

Where the kernel puts what (fs/binfmt_elf.c, fill_note_info/write_note_info): the dumping
thread -- the one that took the fatal signal -- is written first, and the process-wide notes
(PRPSINFO, SIGINFO, AUXV, FILE) follow its thread notes; every other thread's notes come
after. A kernel core gives every thread the same pr_cursig, so NT_SIGINFO's position, not
pr_cursig, is what names the crashing thread. gdb's gcore writes one NT_SIGINFO per thread.

XCR0 in the core is the kernel's maximum user feature set (fpu_user_cfg.max_features, see
arch/x86/kernel/fpu/regset.c / update_regset_xstate_info), the same for every process of that
boot: it says what the CPU *and* the kernel enabled, not what this process was granted. The
per-process AMX permission (arch_prctl(ARCH_REQ_XCOMP_PERM)) is not recorded; XSTATE_BV (the
components a thread had in a non-initial state) shows tile data only if the thread had it.

Compressed cores (systemd-coredump stores .zst, .lz4 or .xz): `open_core` decompresses once
into an unlinked temporary file, under a size limit, and reads that.

Every offset and size is checked; a malformed note becomes a line in `Core.notes` and the rest
is still read. Only an unreadable ELF header or program header table raises CoreError.
"""

from __future__ import annotations

import bisect
import io
import os
import re
import struct
import tempfile
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, BinaryIO, Iterator, Mapping

from ..signals import SIGNAL_NUMBERS, SIGNALS
from .elf import ElfError, ElfFile, Note, PF_R, PF_W, PF_X, PT_LOAD, PT_NOTE
from .readers import iter_raw_notes as _iter_raw_notes

__all__ = [
    "AuxEntry", "Auxv", "CoreError", "Core", "MappedFile", "MemorySegment",
    "Module", "ProcessInfo", "SigInfo", "Thread", "XState", "open_core",
    "read_core", "signal_name", "si_code_name", "xfeature_names",
]


class CoreError(ElfError):
    help = ("The file is not a readable ELF core of a 64-bit Linux process (truncated in its "
            "headers, corrupt, or another kind of file).")


# -- constants --------------------------------------------------------------------------------

ET_CORE = 4
EM_X86_64, EM_AARCH64 = 62, 183

NT_PRSTATUS, NT_PRFPREG, NT_PRPSINFO, NT_TASKSTRUCT, NT_AUXV = 1, 2, 3, 4, 6
NT_SIGINFO, NT_FILE = 0x53494749, 0x46494C45
NT_X86_XSTATE, NT_X86_SHSTK, NT_X86_XSAVE_LAYOUT = 0x202, 0x204, 0x205
NOTE_NAMES = {
    1: "NT_PRSTATUS", 2: "NT_PRFPREG", 3: "NT_PRPSINFO", 4: "NT_TASKSTRUCT", 6: "NT_AUXV",
    0x53494749: "NT_SIGINFO", 0x46494C45: "NT_FILE",
    0x200: "NT_386_TLS", 0x201: "NT_386_IOPERM", 0x202: "NT_X86_XSTATE", 0x203: "NT_X86_CET(old)",
    0x204: "NT_X86_SHSTK", 0x205: "NT_X86_XSAVE_LAYOUT",
    0x400: "NT_ARM_VFP", 0x401: "NT_ARM_TLS", 0x402: "NT_ARM_HW_BREAK", 0x403: "NT_ARM_HW_WATCH",
    0x404: "NT_ARM_SYSTEM_CALL", 0x405: "NT_ARM_SVE", 0x406: "NT_ARM_PAC_MASK",
    0x407: "NT_ARM_PACA_KEYS", 0x408: "NT_ARM_PACG_KEYS", 0x409: "NT_ARM_TAGGED_ADDR_CTRL",
    0x40A: "NT_ARM_PAC_ENABLED_KEYS", 0x40B: "NT_ARM_SSVE", 0x40C: "NT_ARM_ZA", 0x40D: "NT_ARM_ZT",
    0x40E: "NT_ARM_FPMR", 0x40F: "NT_ARM_POE", 0x410: "NT_ARM_GCS",
}

X86_64_REGS = ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx",
               "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base",
               "gs_base", "ds", "es", "fs", "gs")
AARCH64_REGS = tuple(f"x{i}" for i in range(31)) + ("sp", "pc", "pstate")
PC_SP = {EM_X86_64: ("rip", "rsp"), EM_AARCH64: ("pc", "sp")}

SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGCHLD, SIGSYS = 4, 5, 6, 7, 8, 11, 17, 31
FAULT_SIGNALS = frozenset({SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV})

# si_code values (include/uapi/asm-generic/siginfo.h)
SI_USER, SI_KERNEL, SI_QUEUE, SI_TIMER, SI_MESGQ, SI_ASYNCIO, SI_SIGIO, SI_TKILL = 0, 0x80, -1, -2, -3, -4, -5, -6
GENERIC_CODES = {0: "SI_USER", 0x80: "SI_KERNEL", -1: "SI_QUEUE", -2: "SI_TIMER", -3: "SI_MESGQ",
                 -4: "SI_ASYNCIO", -5: "SI_SIGIO", -6: "SI_TKILL", -7: "SI_DETHREAD", -60: "SI_ASYNCNL"}
SIGNAL_CODES = {
    SIGILL: ("ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG",
             "ILL_COPROC", "ILL_BADSTK", "ILL_BADIADDR"),
    SIGFPE: ("FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES",
             "FPE_FLTINV", "FPE_FLTSUB", "FPE_FLTUNK", "FPE_CONDTRAP"),
    SIGSEGV: ("SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI",
              "SEGV_ADIDERR", "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR", "SEGV_CPERR"),
    SIGBUS: ("BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"),
    SIGTRAP: ("TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"),
    SIGCHLD: ("CLD_EXITED", "CLD_KILLED", "CLD_DUMPED", "CLD_TRAPPED", "CLD_STOPPED", "CLD_CONTINUED"),
    SIGSYS: ("SYS_SECCOMP", "SYS_USER_DISPATCH"),
}
SENDER_CODES = frozenset({SI_USER, SI_QUEUE, SI_MESGQ, SI_TKILL})

# auxv (include/uapi/linux/auxvec.h, asm/auxvec.h)
AT_NAMES = {0: "AT_NULL", 1: "AT_IGNORE", 2: "AT_EXECFD", 3: "AT_PHDR", 4: "AT_PHENT", 5: "AT_PHNUM",
            6: "AT_PAGESZ", 7: "AT_BASE", 8: "AT_FLAGS", 9: "AT_ENTRY", 10: "AT_NOTELF", 11: "AT_UID",
            12: "AT_EUID", 13: "AT_GID", 14: "AT_EGID", 15: "AT_PLATFORM", 16: "AT_HWCAP",
            17: "AT_CLKTCK", 23: "AT_SECURE", 24: "AT_BASE_PLATFORM", 25: "AT_RANDOM", 26: "AT_HWCAP2",
            27: "AT_RSEQ_FEATURE_SIZE", 28: "AT_RSEQ_ALIGN", 29: "AT_HWCAP3", 30: "AT_HWCAP4",
            31: "AT_EXECFN", 32: "AT_SYSINFO", 33: "AT_SYSINFO_EHDR", 51: "AT_MINSIGSTKSZ"}
AT_PHDR, AT_PHENT, AT_PHNUM, AT_PAGESZ, AT_BASE, AT_FLAGS, AT_ENTRY = 3, 4, 5, 6, 7, 8, 9
AT_UID, AT_EUID, AT_GID, AT_EGID, AT_PLATFORM, AT_HWCAP, AT_CLKTCK = 11, 12, 13, 14, 15, 16, 17
AT_SECURE, AT_BASE_PLATFORM, AT_RANDOM, AT_HWCAP2, AT_EXECFN, AT_SYSINFO_EHDR = 23, 24, 25, 26, 31, 33
AT_MINSIGSTKSZ = 51

# x86 AT_HWCAP is CPUID.1:EDX (arch/x86/include/asm/elf.h); names as in /proc/cpuinfo.
X86_HWCAP = ("fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", None, "sep",
             "mtrr", "pge", "mca", "cmov", "pat", "pse36", "pn", "clflush", None, "dts", "acpi",
             "mmx", "fxsr", "sse", "sse2", "ss", "ht", "tm", "ia64", "pbe")
X86_HWCAP2 = ("ring3mwait", "fsgsbase")
# arch/arm64/include/uapi/asm/hwcap.h (shared/FACTS.md section 5)
AARCH64_HWCAP = ("fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics",
                 "fphp", "asimdhp", "cpuid", "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop", "sha3",
                 "sm3", "sm4", "asimddp", "sha512", "sve", "asimdfhm", "dit", "uscat", "ilrcpc",
                 "flagm", "ssbs", "sb", "paca", "pacg")
AARCH64_HWCAP2 = {0: "dcpodp", 1: "sve2", 2: "sveaes", 3: "svepmull", 4: "svebitperm", 5: "svesha3",
                  6: "svesm4", 7: "flagm2", 8: "frint", 9: "svei8mm", 10: "svef32mm", 11: "svef64mm",
                  12: "svebf16", 13: "i8mm", 14: "bf16", 15: "dgh", 16: "rng", 17: "bti", 18: "mte",
                  21: "rpres", 22: "mte3", 23: "sme", 37: "sme2"}

# XCR0 / XSTATE_BV bits (Linux enum xfeature)
XFEATURES = {0: "x87", 1: "SSE", 2: "AVX", 3: "MPX-BNDREGS", 4: "MPX-BNDCSR", 5: "AVX-512-opmask",
             6: "AVX-512-ZMM_Hi256", 7: "AVX-512-Hi16_ZMM", 8: "PT", 9: "PKRU", 10: "PASID",
             11: "CET_U", 12: "CET_S", 13: "HDC", 14: "UINTR", 15: "LBR", 16: "HWP",
             17: "AMX-TILECFG", 18: "AMX-TILEDATA", 19: "APX"}
XSTATE_XCR0_OFFSET, XSTATE_BV_OFFSET, XCOMP_BV_OFFSET = 464, 512, 520

PRSTATUS_REG_OFFSET = 112
PRPSINFO_SIZE = 136
SIGINFO_SIZE = 128

DEFAULT_MAX_CORE_BYTES = 32 << 30   # systemd-coredump's own ExternalSizeMax default
MAX_READ = 1 << 30
MAX_FILE_ENTRIES = 1 << 20
MAX_THREADS = 1 << 16


def signal_name(signo: int | None) -> str:
    if signo is None:
        return ""
    return SIGNALS.get(signo, f"SIG{signo}" if signo < 32 else f"SIGRT{signo - 32}" if signo <= 64 else f"signal {signo}")


def si_code_name(signo: int | None, code: int | None) -> str:
    if code is None:
        return ""
    if code <= 0 or code == SI_KERNEL:
        return GENERIC_CODES.get(code, str(code))
    names = SIGNAL_CODES.get(signo or 0, ())
    return names[code - 1] if 0 < code <= len(names) else str(code)


def xfeature_names(mask: int) -> tuple[str, ...]:
    return tuple(XFEATURES.get(b, f"bit{b}") for b in range(64) if mask >> b & 1)


def _bits(value: int, names: Any) -> tuple[str, ...]:
    get = names.get if isinstance(names, dict) else (lambda b: names[b] if b < len(names) else None)
    return tuple(n for b in range(64) if value >> b & 1 and (n := get(b)))


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


# -- data -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SigInfo:
    """One siginfo_t (NT_SIGINFO, or the one in a kernel signal frame)."""

    signo: int
    errno: int
    code: int
    addr: int | None = None        # fault address (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP)
    sender_pid: int | None = None  # kill/tkill/sigqueue: who sent it
    sender_uid: int | None = None
    pkey: int | None = None        # SEGV_PKUERR
    syscall: int | None = None     # SIGSYS/SYS_SECCOMP
    lower: int | None = None       # SEGV_BNDERR bounds
    upper: int | None = None

    @property
    def name(self) -> str:
        return signal_name(self.signo)

    @property
    def code_name(self) -> str:
        return si_code_name(self.signo, self.code)

    @property
    def from_kernel(self) -> bool:
        """Raised by the CPU/kernel for this thread (a fault), not sent by a process."""
        if self.code == SI_KERNEL:
            return self.signo in FAULT_SIGNALS
        return self.code > 0

    @property
    def self_sent(self) -> bool:
        return self.code in SENDER_CODES

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"signo": self.signo, "signal": self.name, "code": self.code,
                               "code_name": self.code_name, "errno": self.errno}
        for k in ("addr", "sender_pid", "sender_uid", "pkey", "syscall", "lower", "upper"):
            v = getattr(self, k)
            if v is not None:
                out[k] = hex(v) if k in ("addr", "lower", "upper") else v
        return out


def parse_siginfo(raw: bytes, endian: str = "<") -> SigInfo:
    """A 64-bit siginfo_t (at least 16 bytes; the union is read only as far as it is present)."""
    if len(raw) < 12:
        raise CoreError(f"siginfo of {len(raw)} bytes is too short (12 needed)")
    signo, errno, code = struct.unpack_from(endian + "iii", raw, 0)
    word = endian + "Q"
    kw: dict[str, Any] = {}
    have = len(raw)
    if code in SENDER_CODES or (signo == SIGCHLD and code > 0):
        if have >= 24:
            kw["sender_pid"], kw["sender_uid"] = struct.unpack_from(endian + "iI", raw, 16)
    elif signo in FAULT_SIGNALS and (code > 0 or code == SI_KERNEL):
        if have >= 24:
            kw["addr"] = struct.unpack_from(word, raw, 16)[0]
        if signo == SIGSEGV and code == 3 and have >= 48:  # SEGV_BNDERR
            kw["lower"], kw["upper"] = struct.unpack_from(endian + "QQ", raw, 32)
        if signo == SIGSEGV and code == 4 and have >= 36:  # SEGV_PKUERR
            kw["pkey"] = struct.unpack_from(endian + "I", raw, 32)[0]
    elif signo == SIGSYS and code == 1 and have >= 28:
        kw["addr"] = struct.unpack_from(word, raw, 16)[0]
        kw["syscall"] = struct.unpack_from(endian + "i", raw, 24)[0]
    return SigInfo(signo, errno, code, **kw)


@dataclass(frozen=True)
class XState:
    """NT_X86_XSTATE of one thread."""

    xcr0: int          # what the OS enabled (the kernel's user feature mask, same for all processes)
    xstate_bv: int     # components this thread had in a non-initial state
    xcomp_bv: int
    size: int
    layout: tuple[tuple[int, int, int], ...] = ()   # (component, offset, size) from NT_X86_XSAVE_LAYOUT

    @property
    def enabled(self) -> tuple[str, ...]:
        return xfeature_names(self.xcr0)

    @property
    def in_use(self) -> tuple[str, ...]:
        return xfeature_names(self.xstate_bv)

    def enables(self, mask: int) -> bool:
        return self.xcr0 & mask == mask

    def to_json(self) -> dict[str, Any]:
        return {"xcr0": hex(self.xcr0), "enabled": list(self.enabled), "xstate_bv": hex(self.xstate_bv),
                "in_use": list(self.in_use), "size": self.size,
                "layout": [{"component": XFEATURES.get(c, c), "offset": o, "size": s} for c, o, s in self.layout]}


@dataclass(frozen=True)
class Thread:
    """One NT_PRSTATUS, with the per-thread notes that followed it."""

    index: int                        # position among the core's threads (0 = written first)
    tid: int                          # pr_pid: the thread's id
    ppid: int
    pgrp: int
    sid: int
    cursig: int                       # pr_cursig
    info_signo: int                   # pr_info
    info_code: int
    info_errno: int
    sigpend: int
    sighold: int
    utime: float
    stime: float
    registers: Mapping[str, int]      # by name, in the kernel's order
    fpvalid: bool
    pc_name: str = "rip"
    sp_name: str = "rsp"
    siginfo: SigInfo | None = None    # an NT_SIGINFO written after this thread's NT_PRSTATUS
    xstate: XState | None = None
    notes: tuple[str, ...] = ()       # names of this thread's other notes (NT_PRFPREG, NT_ARM_SVE...)

    @property
    def pc(self) -> int:
        return self.registers.get(self.pc_name, 0)

    @property
    def sp(self) -> int:
        return self.registers.get(self.sp_name, 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "tid": self.tid, "signal": signal_name(self.cursig) or None,
                               "pc": hex(self.pc), "sp": hex(self.sp),
                               "registers": {k: hex(v) for k, v in self.registers.items()}}
        if self.siginfo:
            out["siginfo"] = self.siginfo.to_json()
        if self.xstate:
            out["xstate_bv"] = hex(self.xstate.xstate_bv)
        return out


@dataclass(frozen=True)
class ProcessInfo:
    """NT_PRPSINFO."""

    pid: int
    ppid: int
    pgrp: int
    sid: int
    uid: int
    gid: int
    state: int
    sname: str        # R, S, D, T, Z...
    zombie: bool
    nice: int
    flag: int
    command: str      # pr_fname (the kernel's comm, 15 characters at most)
    args: str         # pr_psargs (the command line, cut at 80 bytes)

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "ppid": self.ppid, "uid": self.uid, "gid": self.gid, "state": self.sname,
                "command": self.command, "args": self.args}


@dataclass(frozen=True)
class AuxEntry:
    type: int
    value: int

    @property
    def name(self) -> str:
        return AT_NAMES.get(self.type, f"AT_{self.type}")


@dataclass(frozen=True)
class Auxv:
    """NT_AUXV, with the strings it points at read from the core's memory."""

    entries: tuple[AuxEntry, ...]
    hwcap: int | None
    hwcap2: int | None
    hwcap_names: tuple[str, ...]      # decoded for x86-64 (CPUID.1:EDX only!) and aarch64
    platform: str | None              # AT_PLATFORM string ("x86_64", "aarch64")
    base_platform: str | None
    execfn: str | None                # AT_EXECFN string: the path given to execve
    phdr: int | None
    phent: int | None
    phnum: int | None
    pagesz: int | None
    base: int | None                  # the interpreter's load address
    entry: int | None                 # the program's entry point
    uid: int | None
    euid: int | None
    gid: int | None
    egid: int | None
    secure: int | None
    sysinfo_ehdr: int | None          # the vDSO
    minsigstksz: int | None

    def get(self, type_: int) -> int | None:
        for e in self.entries:
            if e.type == type_:
                return e.value
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in ("hwcap", "hwcap2", "phdr", "base", "entry", "sysinfo_ehdr"):
            v = getattr(self, k)
            if v is not None:
                out[k] = hex(v)
        for k in ("platform", "execfn", "pagesz", "uid", "euid", "gid", "egid", "secure", "minsigstksz"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        out["hwcap_names"] = list(self.hwcap_names)
        return out


@dataclass(frozen=True)
class MappedFile:
    """One NT_FILE entry: [start, end) maps `path` from byte `offset` on."""

    start: int
    end: int
    offset: int      # bytes (the note stores pages)
    path: str

    def __contains__(self, address: int) -> bool:
        return self.start <= address < self.end

    @property
    def deleted(self) -> bool:
        return self.path.endswith(" (deleted)")

    @property
    def file_path(self) -> str:
        return self.path[:-10] if self.deleted else self.path


@dataclass(frozen=True)
class MemorySegment:
    """One PT_LOAD of the core: a mapping of the process and the bytes of it the core holds."""

    start: int
    end: int
    flags: int
    offset: int
    filesz: int
    available: int    # bytes of [start, start+filesz) actually in the file (less when truncated)

    @property
    def readable(self) -> bool:
        return bool(self.flags & PF_R)

    @property
    def writable(self) -> bool:
        return bool(self.flags & PF_W)

    @property
    def executable(self) -> bool:
        return bool(self.flags & PF_X)

    @property
    def cut(self) -> bool:
        return self.available < self.filesz

    @property
    def perms(self) -> str:
        return ("r" if self.readable else "-") + ("w" if self.writable else "-") + ("x" if self.executable else "-")


@dataclass(frozen=True)
class Module:
    """A mapped file with its load base, and the build-id read from its ELF header in memory."""

    path: str
    base: int               # start of its first mapping (file offset 0): the load base of an ELF
    end: int
    mappings: tuple[MappedFile, ...]
    build_id: str | None    # None when the core lacks its ELF header page or it has no build-id
    elf: bool               # the first page in the core starts with the ELF magic

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "base": hex(self.base), "end": hex(self.end), "build_id": self.build_id}


# -- the core -------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Core:
    """An ELF core, notes parsed, memory read on demand. Close it (or use `with`)."""

    path: str
    machine: str                       # "x86-64", "aarch64", ...
    e_machine: int
    size: int                          # bytes in the file
    expected_size: int                 # bytes the program headers describe
    threads: tuple[Thread, ...]
    process: ProcessInfo | None
    siginfo: SigInfo | None            # the process-wide NT_SIGINFO (the dumping thread's)
    auxv: Auxv | None
    files: tuple[MappedFile, ...]
    segments: tuple[MemorySegment, ...]
    page_size: int
    truncated: bool
    notes: tuple[str, ...]             # what is missing, cut or malformed, one line each
    note_types: tuple[tuple[str, int, int], ...] = ()   # (owner, type, size) of every note in order
    elf: ElfFile | None = field(default=None, repr=False)
    _starts: tuple[int, ...] = field(default=(), repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    # -- lifecycle
    def close(self) -> None:
        if self.elf is not None:
            self.elf.close()

    def __enter__(self) -> "Core":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- process-wide facts
    @property
    def pid(self) -> int | None:
        if self.process is not None:
            return self.process.pid
        return self.threads[0].tid if self.threads else None

    @property
    def xstate(self) -> XState | None:
        for t in self.threads:
            if t.xstate is not None:
                return t.xstate
        return None

    @property
    def xcr0(self) -> int | None:
        xs = self.xstate
        return xs.xcr0 if xs else None

    @property
    def signal(self) -> int | None:
        if self.siginfo is not None:
            return self.siginfo.signo
        return next((t.cursig for t in self.threads if t.cursig), None)

    def signalled_thread(self) -> tuple[Thread | None, str]:
        """The thread the fatal signal hit, and how that was decided."""
        if not self.threads:
            return None, "the core has no NT_PRSTATUS"
        with_info = [t for t in self.threads if t.siginfo is not None and t.siginfo.signo]
        if len(with_info) == 1:
            t = with_info[0]
            return t, (f"thread {t.tid} carries the core's NT_SIGINFO ({t.siginfo.name}): the kernel writes "
                       f"the dumping thread, the one the signal hit, first with the process-wide notes")
        if len(with_info) > 1:  # gdb's gcore: one NT_SIGINFO per thread
            faulted = [t for t in with_info if t.siginfo.from_kernel]
            pick = faulted[0] if len(faulted) == 1 else with_info[0]
            why = "the only one whose siginfo is a fault" if len(faulted) == 1 else "the first of several"
            return pick, f"thread {pick.tid}: {why} ({len(with_info)} threads carry an NT_SIGINFO)"
        cursigs = {t.cursig for t in self.threads}
        if len(cursigs) > 1:
            t = next(t for t in self.threads if t.cursig)
            return t, f"thread {t.tid}: the first with a current signal (pr_cursig {signal_name(t.cursig)})"
        t = self.threads[0]
        return t, f"thread {t.tid}: written first (no NT_SIGINFO; the kernel writes the dumping thread first)"

    # -- memory
    def segment_at(self, address: int) -> MemorySegment | None:
        k = bisect.bisect_right(self._starts, address) - 1
        if k >= 0:
            seg = self.segments[k]
            if address < seg.end:
                return seg
        return None

    def read(self, address: int, size: int) -> bytes | None:
        """`size` bytes of the process's memory at `address`, or None when any of them is not
        in the core (unmapped, not dumped, or cut off by truncation)."""
        data = self.read_available(address, size)
        return data if len(data) == size else None

    def read_available(self, address: int, size: int) -> bytes:
        """As many bytes from `address` on (up to `size`) as the core holds without a gap."""
        if size <= 0 or address < 0:
            return b""
        if size > MAX_READ:
            raise CoreError(f"{self.path}: a read of {size} bytes is larger than the {MAX_READ >> 20} MiB allowed")
        if self.elf is None:
            raise CoreError(f"{self.path}: the core is closed")
        out: list[bytes] = []
        addr, left = address, size
        while left > 0:
            seg = self.segment_at(addr)
            if seg is None:
                break
            inner = addr - seg.start
            if inner >= seg.available:
                break
            n = min(left, seg.available - inner)
            out.append(self.elf.pread(seg.offset + inner, n, "memory"))
            addr += n
            left -= n
        return b"".join(out)

    def read_word(self, address: int) -> int | None:
        raw = self.read(address, 8)
        return None if raw is None else struct.unpack(self.elf.endian + "Q", raw)[0]  # type: ignore[union-attr]

    def read_cstring(self, address: int, limit: int = 4096) -> str | None:
        """A NUL-terminated string from memory (None when its start is not in the core)."""
        raw = self.read_available(address, limit)
        if not raw:
            return None
        return _cstr(raw)

    def in_core(self, address: int) -> bool:
        seg = self.segment_at(address)
        return seg is not None and address - seg.start < seg.available

    def is_executable(self, address: int) -> bool:
        seg = self.segment_at(address)
        return seg is not None and seg.executable

    def is_mapped(self, address: int) -> bool:
        return self.segment_at(address) is not None

    # -- files and modules
    def mapping_at(self, address: int) -> MappedFile | None:
        for m in self.files:
            if m.start <= address < m.end:
                return m
        return None

    @property
    def modules(self) -> tuple[Module, ...]:
        """Every mapped file, with its base and its build-id read from the core (touches one
        page of memory per file: not part of the notes-only triage)."""
        if "modules" not in self._cache:
            self._cache["modules"] = self._modules()
        return self._cache["modules"]

    def module_of(self, address: int) -> Module | None:
        m = self.mapping_at(address)
        if m is None:
            return None
        return next((mod for mod in self.modules if mod.path == m.path), None)

    def _modules(self) -> tuple[Module, ...]:
        by_path: dict[str, list[MappedFile]] = {}
        for m in self.files:
            by_path.setdefault(m.path, []).append(m)
        out = []
        for path, maps in by_path.items():
            maps.sort(key=lambda m: m.start)
            first = next((m for m in maps if m.offset == 0), maps[0])
            base = first.start - first.offset if first.start >= first.offset else first.start
            head = self.read(first.start, 64) if first.offset == 0 else None
            is_elf = bool(head and head[:4] == b"\x7fELF")
            bid = self._build_id_at(first.start) if is_elf else None
            out.append(Module(path, base, max(m.end for m in maps), tuple(maps), bid, is_elf))
        return tuple(out)

    def elf_image_at(self, base: int) -> tuple[int, tuple[tuple[int, ...], ...]] | None:
        """(load bias, program headers) of the 64-bit ELF image whose header is at `base` in
        memory, from the core's copy of that page; None when the core lacks it. Each program
        header is (type, flags, offset, vaddr, paddr, filesz, memsz, align)."""
        key = ("image", base)
        if key in self._cache:
            return self._cache[key]
        out = None
        head = self.read(base, 64)
        if head is not None and head[:4] == b"\x7fELF" and head[4] == 2 and head[5] in (1, 2):
            e = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack_from(e + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
            table = self.read(base + phoff, phnum * 56) if phentsize == 56 and 0 < phnum <= 512 and phoff < 1 << 20 else None
            if table is not None:
                phdrs = tuple(struct.unpack_from(e + "IIQQQQQQ", table, i * 56) for i in range(phnum))
                loads = [p for p in phdrs if p[0] == PT_LOAD]
                first = min(loads, key=lambda p: p[3], default=None)
                bias = base - (first[3] - first[2]) if first is not None else base
                out = (bias, phdrs)
        self._cache[key] = out
        return out

    def _build_id_at(self, base: int) -> str | None:
        """NT_GNU_BUILD_ID of the ELF image whose header is at `base` in memory."""
        image = self.elf_image_at(base)
        if image is None:
            return None
        bias, phdrs = image
        e = self.elf.endian if self.elf is not None else "<"
        for typ, _f, _o, vaddr, _pa, filesz, _m, align in phdrs:
            if typ != PT_NOTE or not 0 < filesz <= 1 << 16:
                continue
            raw = self.read(bias + vaddr, filesz)
            if raw is None:
                continue
            for owner, ntype, desc in _iter_raw_notes(raw, e, 8 if align == 8 else 4):
                if owner == "GNU" and ntype == 3 and desc:
                    return desc.hex()
        return None

    # -- summary
    def to_json(self) -> dict[str, Any]:
        t, why = self.signalled_thread()
        return {
            "path": self.path, "machine": self.machine, "size": self.size, "expected_size": self.expected_size,
            "truncated": self.truncated, "pid": self.pid,
            "signal": signal_name(self.signal) or None,
            "siginfo": self.siginfo.to_json() if self.siginfo else None,
            "signalled_thread": t.tid if t else None, "signalled_thread_reason": why,
            "process": self.process.to_json() if self.process else None,
            "threads": [th.to_json() for th in self.threads],
            "auxv": self.auxv.to_json() if self.auxv else None,
            "xstate": self.xstate.to_json() if self.xstate else None,
            "files": len(self.files), "segments": len(self.segments),
            "notes": list(self.notes),
        }


# -- reading --------------------------------------------------------------------------------------

def read_core(source: str | os.PathLike[str] | ElfFile, *, name: str | None = None,
              max_bytes: int = DEFAULT_MAX_CORE_BYTES, tmpdir: str | None = None) -> Core:
    """Parse an ELF core: a path (plain or compressed: zstd, lz4, xz, gzip, bz2) or an open ElfFile.

    Reads the ELF header, the program headers and the notes; memory stays on disk until
    `Core.read`. Raises CoreError when the file is no ELF core or its headers are unreadable."""
    if isinstance(source, ElfFile):
        return _parse(source, name or source.path, [])
    path = os.fspath(source)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(8)
    except OSError as exc:
        raise CoreError(f"{path}: cannot open: {exc.strerror}") from None
    if magic[:4] != b"\x7fELF":
        from ..inputs.detect import detect_codec
        if detect_codec(magic + b"\0" * 8) is not None:
            return open_core(path, name=name, max_bytes=max_bytes, tmpdir=tmpdir)
        raise CoreError(f"{path}: not an ELF file (and not a compressed one)")
    try:
        elf = ElfFile(path)
    except ElfError as exc:
        raise CoreError(str(exc)) from None
    try:
        return _parse(elf, name or path, [])
    except BaseException:
        elf.close()
        raise


def _parse(elf: ElfFile, name: str, notes: list[str], extra_truncated: bool = False) -> Core:
    if elf.e_type != ET_CORE:
        raise CoreError(f"{name}: an ELF {elf.type_name}, not a core")
    if elf.bits != 64:
        raise CoreError(f"{name}: a 32-bit core ({elf.machine_name}); only 64-bit cores are read")
    try:
        phdrs = elf.segments
    except ElfError as exc:
        raise CoreError(f"{name}: program headers unreadable: {_msg(exc, elf.path)}") from None
    loads = sorted((s for s in phdrs if s.type == PT_LOAD), key=lambda s: s.vaddr)
    segments = []
    expected = elf.e_phoff + len(phdrs) * elf.e_phentsize
    cut = 0
    for s in loads:
        avail = max(0, min(s.offset + s.filesz, elf.size) - s.offset) if s.filesz else 0
        end = s.vaddr + s.memsz
        if end > 1 << 64 or s.filesz > s.memsz and s.memsz:
            notes.append(f"memory segment at {s.vaddr:#x} has implausible sizes (file {s.filesz:#x}, memory {s.memsz:#x})")
            avail = min(avail, s.memsz)
        if s.filesz:
            expected = max(expected, s.offset + s.filesz)
        if avail < s.filesz:
            cut += 1
        segments.append(MemorySegment(s.vaddr, end, s.flags, s.offset, s.filesz, avail))
    # overlapping segments (corrupt headers) would break bisection: keep the first of each overlap
    clean: list[MemorySegment] = []
    for seg in segments:
        if clean and seg.start < clean[-1].end:
            notes.append(f"memory segment at {seg.start:#x} overlaps the one at {clean[-1].start:#x}: ignored")
            continue
        clean.append(seg)
    note_segs = [s for s in phdrs if s.type == PT_NOTE]
    for s in note_segs:
        expected = max(expected, s.offset + s.filesz)
    truncated = elf.size < expected or extra_truncated
    if elf.size < expected:
        notes.append(f"core truncated: {elf.size} of {expected} bytes present ({100 * elf.size // max(expected, 1)}%); "
                     f"{cut} of {len(loads)} memory segments are cut or missing (the kernel stops at the core "
                     f"size limit, ulimit -c / RLIMIT_CORE, or the copy is incomplete)")
    if not note_segs:
        notes.append("no PT_NOTE segment: no threads, signal or mapped files")
    p = _NoteParser(elf, name, notes)
    for s in note_segs:
        p.segment(s.offset, s.filesz)
    p.finish()
    core = Core(name, elf.machine_name, elf.e_machine, elf.size, expected, tuple(p.threads), p.process,
                p.siginfo, None, tuple(p.files), tuple(clean), p.page_size, truncated, (), tuple(p.note_types),
                elf, tuple(s.start for s in clean), {})
    auxv = _auxv(core, p.auxv_entries, notes) if p.auxv_entries is not None else None
    if auxv is None:
        notes.append("no NT_AUXV: no hwcaps, platform or executable name")
    if elf.e_machine == EM_X86_64 and not any(t.xstate for t in p.threads):
        notes.append("no NT_X86_XSTATE: XCR0 (the OS-enabled AVX/AVX-512/AMX state) is unknown")
    if not p.files:
        notes.append("no NT_FILE: mapped files unknown (the kernel omits it above kernel.core_file_note_size_max; "
                     "qemu-user never writes one)")
    object.__setattr__(core, "auxv", auxv)
    object.__setattr__(core, "notes", tuple(dict.fromkeys(notes)))
    return core


def _msg(exc: Exception, path: str) -> str:
    text = str(exc)
    return text[len(path) + 2:] if text.startswith(path + ": ") else text


class _NoteParser:
    def __init__(self, elf: ElfFile, name: str, notes: list[str]) -> None:
        self.elf, self.name, self.out = elf, name, notes
        self.e = elf.endian
        self.threads: list[Thread] = []
        self._pending: dict[str, Any] | None = None
        self.process: ProcessInfo | None = None
        self.siginfo: SigInfo | None = None
        self.auxv_entries: list[AuxEntry] | None = None
        self.files: list[MappedFile] = []
        self.page_size = 4096
        self.layout: tuple[tuple[int, int, int], ...] = ()
        self.note_types: list[tuple[str, int, int]] = []
        self.regs = X86_64_REGS if elf.e_machine == EM_X86_64 else AARCH64_REGS if elf.e_machine == EM_AARCH64 else ()
        self.pc_sp = PC_SP.get(elf.e_machine, ("pc", "sp"))

    def segment(self, offset: int, size: int) -> None:
        avail = max(0, min(offset + size, self.elf.size) - offset)
        if avail < size:
            self.out.append(f"notes cut: {avail} of {size} bytes of PT_NOTE present; later notes are missing")
        if avail < 12:
            return
        try:
            for note in _iter_notes(self.elf, offset, avail):
                self.note_types.append((note.name, note.type, len(note.desc)))
                try:
                    self.note(note)
                except (CoreError, struct.error, IndexError, ValueError, OverflowError, UnicodeError) as exc:
                    self.out.append(f"{NOTE_NAMES.get(note.type, hex(note.type))} at {note.offset:#x}: {_msg(exc, self.elf.path)}")
        except ElfError as exc:
            self.out.append(f"notes: {_msg(exc, self.elf.path)}; the notes before it were read")

    def note(self, n: Note) -> None:
        t, d = n.type, n.desc
        if n.name == "CORE":
            if t == NT_PRSTATUS:
                self._flush()
                self._prstatus(d)
                return
            if t == NT_PRPSINFO:
                self.process = self.process or self._prpsinfo(d)
                return
            if t == NT_SIGINFO:
                si = parse_siginfo(d, self.e)
                if self.siginfo is None:
                    self.siginfo = si
                if self._pending is not None and self._pending.get("siginfo") is None:
                    self._pending["siginfo"] = si
                return
            if t == NT_AUXV:
                self.auxv_entries = self.auxv_entries if self.auxv_entries is not None else self._auxv(d)
                return
            if t == NT_FILE:
                if not self.files:
                    self.files = self._files(d)
                return
        if n.name == "LINUX" and t == NT_X86_XSTATE:
            if len(d) < XCOMP_BV_OFFSET + 8:
                raise CoreError(f"{len(d)} bytes is too short for an XSAVE image ({XCOMP_BV_OFFSET + 8} needed)")
            xcr0, = struct.unpack_from(self.e + "Q", d, XSTATE_XCR0_OFFSET)
            bv, comp = struct.unpack_from(self.e + "QQ", d, XSTATE_BV_OFFSET)
            if self._pending is not None:
                self._pending["xstate"] = XState(xcr0, bv, comp, len(d))
            return
        if n.name == "LINUX" and t == NT_X86_XSAVE_LAYOUT:
            n_ent = min(len(d) // 16, 64)
            self.layout = tuple((a, c, b) for a, b, c, _f in (struct.unpack_from(self.e + "IIII", d, i * 16)
                                                             for i in range(n_ent)))
            if self._pending is not None and self._pending.get("xstate") is not None:
                xs = self._pending["xstate"]
                self._pending["xstate"] = XState(xs.xcr0, xs.xstate_bv, xs.xcomp_bv, xs.size, self.layout)
            return
        if self._pending is not None:
            self._pending["notes"].append(NOTE_NAMES.get(t, f"{n.name}/{t:#x}"))

    def _prstatus(self, d: bytes) -> None:
        if len(self.threads) >= MAX_THREADS:
            raise CoreError(f"more than {MAX_THREADS} threads")
        if len(d) < PRSTATUS_REG_OFFSET + 8:
            raise CoreError(f"{len(d)} bytes is too short for a prstatus ({PRSTATUS_REG_OFFSET + 8} needed)")
        e = self.e
        signo, code, errno = struct.unpack_from(e + "iii", d, 0)
        cursig, = struct.unpack_from(e + "h", d, 12)
        sigpend, sighold = struct.unpack_from(e + "QQ", d, 16)
        pid, ppid, pgrp, sid = struct.unpack_from(e + "iiii", d, 32)
        us, uu, ss, su = struct.unpack_from(e + "qqqq", d, 48)
        nregs = (len(d) - PRSTATUS_REG_OFFSET - 8) // 8   # pr_fpvalid (+ padding) follows pr_reg
        names = self.regs if len(self.regs) == nregs else tuple(f"reg{i}" for i in range(nregs))
        if len(self.regs) and len(self.regs) != nregs:
            self.out.append(f"thread {pid}: prstatus holds {nregs} registers, {len(self.regs)} expected for "
                            f"{self.elf.machine_name}; registers named by position")
        values = struct.unpack_from(f"{e}{nregs}Q", d, PRSTATUS_REG_OFFSET)
        fpvalid, = struct.unpack_from(e + "i", d, PRSTATUS_REG_OFFSET + nregs * 8)
        pc_name, sp_name = self.pc_sp if names is self.regs else ("", "")
        self._pending = dict(index=len(self.threads), tid=pid, ppid=ppid, pgrp=pgrp, sid=sid, cursig=cursig,
                             info_signo=signo, info_code=code, info_errno=errno, sigpend=sigpend,
                             sighold=sighold, utime=us + uu / 1e6, stime=ss + su / 1e6,
                             registers=MappingProxyType(dict(zip(names, values))), fpvalid=bool(fpvalid),
                             pc_name=pc_name, sp_name=sp_name, siginfo=None, xstate=None, notes=[])

    def _flush(self) -> None:
        if self._pending is not None:
            p = self._pending
            p["notes"] = tuple(p["notes"])
            self.threads.append(Thread(**p))
            self._pending = None

    def finish(self) -> None:
        self._flush()
        if not self.threads:
            self.out.append("no NT_PRSTATUS: no thread registers")

    def _prpsinfo(self, d: bytes) -> ProcessInfo:
        if len(d) < PRPSINFO_SIZE:
            raise CoreError(f"{len(d)} bytes is too short for a prpsinfo ({PRPSINFO_SIZE} needed)")
        state, sname, zomb, nice = struct.unpack_from(self.e + "bcbb", d, 0)
        flag, = struct.unpack_from(self.e + "Q", d, 8)
        uid, gid, pid, ppid, pgrp, sid = struct.unpack_from(self.e + "IIiiii", d, 16)
        return ProcessInfo(pid, ppid, pgrp, sid, uid, gid, state, sname.decode("latin-1").strip("\0"), bool(zomb),
                           nice, flag, _cstr(d[40:56]), _cstr(d[56:136]).rstrip())

    def _auxv(self, d: bytes) -> list[AuxEntry]:
        out = []
        for i in range(len(d) // 16):
            a, v = struct.unpack_from(self.e + "QQ", d, i * 16)
            if a == 0:
                break
            out.append(AuxEntry(a, v))
        return out

    def _files(self, d: bytes) -> list[MappedFile]:
        e = self.e
        if len(d) < 16:
            raise CoreError(f"{len(d)} bytes is too short for its header")
        count, page = struct.unpack_from(e + "QQ", d, 0)
        if page == 0 or page & (page - 1) or page > 1 << 30:
            raise CoreError(f"page size {page} is not a power of two")
        self.page_size = page
        fits = (len(d) - 16) // 24
        if count > min(fits, MAX_FILE_ENTRIES):
            self.out.append(f"NT_FILE: {count} entries announced, room for {fits}: read {min(fits, MAX_FILE_ENTRIES)}")
            count = min(fits, MAX_FILE_ENTRIES)
        table = struct.unpack_from(f"{e}{3 * count}Q", d, 16)
        names = d[16 + 24 * count:].split(b"\0")
        if len(names) - 1 < count and not (len(names) == count and names[-1]):
            self.out.append(f"NT_FILE: {count} entries but {max(len(names) - 1, 0)} paths: the rest are unnamed")
        out = []
        for i in range(count):
            start, end, ofs = table[3 * i:3 * i + 3]
            if end < start or ofs > (1 << 64) // page:
                self.out.append(f"NT_FILE entry {i} is inconsistent ({start:#x}-{end:#x}, page {ofs}): skipped")
                continue
            path = names[i].decode("utf-8", "replace") if i < len(names) else ""
            out.append(MappedFile(start, end, ofs * page, path))
        return out


def _iter_notes(elf: ElfFile, offset: int, size: int) -> Iterator[Note]:
    """The notes of a core's PT_NOTE (4-byte aligned), through pread rather than the mapping."""
    raw = elf.pread(offset, size, "notes")
    e = elf.endian
    pos = 0
    for _ in range(1 << 20):
        if size - pos < 12:
            return
        namesz, descsz, ntype = struct.unpack_from(e + "III", raw, pos)
        desc_at = pos + ((12 + namesz + 3) & -4)
        if desc_at + descsz > size:
            raise ElfError(f"{elf.path}: note at {offset + pos:#x} ({namesz:#x}+{descsz:#x} bytes) runs past the end of the notes")
        yield Note(_cstr(raw[pos + 12:pos + 12 + namesz]), ntype, raw[desc_at:desc_at + descsz], offset + pos)
        pos = desc_at + ((descsz + 3) & -4)
    raise ElfError(f"{elf.path}: more than {1 << 20} notes")


def _auxv(core: Core, entries: list[AuxEntry], notes: list[str]) -> Auxv:
    vals: dict[int, int] = {}
    for e in entries:
        vals.setdefault(e.type, e.value)

    def string(t: int) -> str | None:
        addr = vals.get(t)
        if not addr:
            return None
        s = core.read_cstring(addr, 4096)
        if s is None:
            notes.append(f"{AT_NAMES[t]} string at {addr:#x} is not in the core")
        return s

    hw, hw2 = vals.get(AT_HWCAP), vals.get(AT_HWCAP2)
    if core.e_machine == EM_X86_64:
        names = _bits(hw or 0, X86_HWCAP) + _bits(hw2 or 0, X86_HWCAP2)
    elif core.e_machine == EM_AARCH64:
        names = _bits(hw or 0, AARCH64_HWCAP) + _bits(hw2 or 0, AARCH64_HWCAP2)
    else:
        names = ()
    return Auxv(tuple(entries), hw, hw2, names, string(AT_PLATFORM), string(AT_BASE_PLATFORM), string(AT_EXECFN),
                vals.get(AT_PHDR), vals.get(AT_PHENT), vals.get(AT_PHNUM), vals.get(AT_PAGESZ), vals.get(AT_BASE),
                vals.get(AT_ENTRY), vals.get(AT_UID), vals.get(AT_EUID), vals.get(AT_GID), vals.get(AT_EGID),
                vals.get(AT_SECURE), vals.get(AT_SYSINFO_EHDR), vals.get(AT_MINSIGSTKSZ))


# -- compressed cores -------------------------------------------------------------------------------

_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


def open_core(source: str | os.PathLike[str] | BinaryIO, *, name: str | None = None,
              max_bytes: int = DEFAULT_MAX_CORE_BYTES, tmpdir: str | None = None) -> Core:
    """A core from a path or a binary stream, compressed (zstd, lz4, xz, gzip, bz2: detected
    from the content) or not. A compressed core, or any stream (InputFile.open() returns the
    decompressed content), is written once into a temporary file under `tmpdir`, holes kept
    sparse, at most `max_bytes` of it; the file is unlinked as soon as it is mapped, so nothing
    is left behind. (A plain core on disk is best given by path: it is then mapped, not copied.) A stream that ends early, or a core over the limit, gives a core marked
    truncated with a note saying why."""
    from ..inputs.codecs import DecodingReader
    from ..inputs.detect import detect_codec
    from ..inputs.streams import PrefixedReader

    owned: BinaryIO | None = None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        display = name or path
        try:
            owned = stream = open(path, "rb")
        except OSError as exc:
            raise CoreError(f"{path}: cannot open: {exc.strerror}") from None
    else:
        stream = source
        display = name or getattr(source, "name", None) or "<stream>"
        if not isinstance(display, str):
            display = "<stream>"
    try:
        prefix = _read_exactly(stream, 16)
        codec = detect_codec(prefix)
        if codec is None and prefix[:4] == b"\x7fELF" and owned is not None:
            owned.close()
            owned = None
            return read_core(path, name=display)
        if codec is None and prefix[:4] != b"\x7fELF":
            raise CoreError(f"{display}: neither an ELF core nor a compressed one")
        body: BinaryIO = PrefixedReader(prefix, stream)  # type: ignore[assignment]
        reader: Any = DecodingReader(body, codec) if codec else body
        notes: list[str] = []
        tmp_path, written, over, tmp_fd = _spill(reader, display, max_bytes, tmpdir)
        error = getattr(reader, "error", None) or getattr(source, "error", None)
        if error:
            notes.append(f"{display}: {error}: the core is incomplete")
        if over:
            notes.append(f"{display}: larger than the {max_bytes >> 20} MiB limit: only the first "
                         f"{max_bytes >> 20} MiB were decompressed")
        try:
            elf = ElfFile(tmp_path)
        except ElfError as exc:
            raise CoreError(f"{display}: {_msg(exc, tmp_path)}") from None
        finally:
            if tmp_fd is not None:  # already unlinked: closing it frees the space once unmapped
                os.close(tmp_fd)
            else:
                try:
                    os.unlink(tmp_path)
                except OSError:
                    pass
        elf.path = display
        try:
            if codec:
                notes.insert(0, f"decompressed from {codec}: {written} bytes")
            return _parse(elf, display, notes, extra_truncated=bool(error or over))
        except BaseException:
            elf.close()
            raise
    finally:
        if owned is not None:
            owned.close()


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    out = b""
    while len(out) < n:
        piece = stream.read(n - len(out))
        if not piece:
            break
        out += piece
    return out


def _spill(reader: Any, display: str, max_bytes: int, tmpdir: str | None) -> tuple[str, int, bool, int | None]:
    """Decompress into a temporary file: (path to map, bytes, over the limit?, fd to close after
    mapping). Where /proc/self/fd exists the file is unlinked as soon as it is created, so
    no exit, not even SIGKILL, leaves it behind; the path returned is then its /proc/self/fd link."""
    fd, tmp_path = tempfile.mkstemp(prefix="crashlens-core-", dir=tmpdir)
    keep: int | None = None
    if os.path.isdir("/proc/self/fd"):
        try:
            keep = os.dup(fd)
            os.unlink(tmp_path)
            tmp_path = f"/proc/self/fd/{keep}"
        except OSError:
            if keep is not None:
                os.close(keep)
                keep = None
    written = 0
    over = False
    try:
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = reader.read(min(_CHUNK, max_bytes - written + 1))
                if not chunk:
                    break
                if written + len(chunk) > max_bytes:
                    chunk = chunk[:max_bytes - written]
                    over = True
                if chunk == _ZEROS[:len(chunk)]:
                    out.seek(len(chunk), io.SEEK_CUR)   # keep the holes of a core sparse
                else:
                    out.write(chunk)
                written += len(chunk)
                if over:
                    break
            out.truncate(written)
    except OSError as exc:
        _drop_spill(tmp_path, keep)
        raise CoreError(f"{display}: cannot decompress into {tmpdir or tempfile.gettempdir()}: "
                        f"{exc.strerror or exc}") from None
    except BaseException:
        _drop_spill(tmp_path, keep)
        raise
    return tmp_path, written, over, keep


def _drop_spill(path: str, fd: int | None) -> None:
    try:
        if fd is not None:
            os.close(fd)
        else:
            os.unlink(path)
    except OSError:
        pass
