"""The data that flows between pipeline stages: the one vocabulary of crashlens.

inputs  ->  InputFile            (what was given, detected by content)
text    ->  Line                 (a normalised log line with its origin)
structure -> LogStructure        (Records per line, Blocks with exact spans, Streams per process)
parsers ->  Evidence             (one model for every kind of fact a crash left; EvidenceKind)
binary  ->  CrashReport          (what a core gave: crash site, Backtrace of Frames, threads, modules)
inspect ->  LibraryFacts         (what a library is built for: CUDA archs, x86 ISA, ELF facts)
engine  ->  Cause, Analysis      (ranked root causes with their reasoning)
report  ->  renderers read Analysis only (report/json.py is the one place JSON is built)

Everything here is a plain frozen dataclass or an enum; nothing else crosses a stage boundary.
Closed sets (evidence kinds, frame kinds, frame trust) are string enums: they compare equal to,
and serialise as, the strings that rules, YAML and JSON use.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Any, Callable, BinaryIO, Mapping

try:
    from enum import StrEnum
except ImportError:  # Python 3.10
    class StrEnum(str, enum.Enum):  # type: ignore[no-redef]
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class EvidenceKind(StrEnum):
    """What a piece of Evidence is; rules name these strings in `kind:` (rules/*.yaml).

    Each member's doc names the facts (`Evidence.facts`) it carries; docs/rules.md lists them
    for rule authors."""

    LINE = "line"
    """A normalised log line; no facts (rules match its text). `stream` holds the rank tag."""
    EXCEPTION = "exception"
    """A Python or C++ exception (parsers/tracebacks) with its `frames`. Facts: type, message,
    headline, chain, chain_pos, secondary (raised while handling another), root, link, hint,
    wrapper."""
    STACK = "stack"
    """A native stack printed in a log (gdb/lldb, c10 `frame #N`). Facts: frames (count),
    innermost_function, innermost_module; `frames` holds the stack."""
    DMESG = "dmesg"
    """A kernel record (parsers/kernel). Facts: event (xid, segfault, invalid-opcode, oom-kill,
    aer, api-mismatch, nvrm-other, ...) and the event's own: xid, xid_meaning, pci, pid,
    process, ip, module, module_base, offset, phase, severity, ..."""
    ENV = "env"
    """One environment fact (parsers/environment). Facts: key, value."""
    OUTCOME = "outcome"
    """How a process ended (parsers/outcomes). Facts: signal, exit_code, core_dumped, failed,
    oom, source; where the line tells: pid, command, message, imposed, sent_by, reason, job_id,
    node, local_rank."""
    CHILD_FAILURE = "child-failure"
    """torchrun's "Root Cause (first observed failure)" block. Facts: rank, exit_code, signal
    (a negative exit code), host."""
    COLLECTIVE = "collective"
    """A rank's progress in a collective (parsers/distributed). Facts: rank, op, seq,
    last_enqueued, last_completed, timeout_ms."""
    COLLECTIVE_SUMMARY = "collective-summary"
    """All ranks' collective progress: which rank did not arrive. Facts: waiting_ranks, op,
    seq, behind_ranks, silent_ranks, suspect_ranks (comma-separated rank lists)."""
    CRASH = "crash"
    """A native crash site: from a core (binary/stage) or a dmesg SIGILL trap decoded from the
    library file. Facts: signal, si_code, fault_address, pc, module, module_name, offset,
    function, instruction, mnemonic, required_isa (space-separated), cpu_supports, reason,
    method, culprit_function, culprit_module, culprit_module_name, source ("core" | "dmesg"),
    build_id_match; a dmesg trap also file_check, and file_differs, trap_note, trap_offset,
    file_instruction when the file here is not the build that ran (docs/rules.md)."""
    LIBRARY = "library"
    """A library inspected during the analysis (inspect.py; LibraryFacts). Facts: path, library,
    build_id, soname, max_<glibc|glibcxx|...>, sass, ptx (space-separated archs), cuda_images,
    cuda_sass_only, cuda_runs_on, cuda_compatible, cuda_reason, device, (no device known)
    cuda_suspect, cuda_suspects, cuda_suspect_names, isa_level, isa_baseline_level, isa_baseline,
    isa_dispatched, isa_missing_baseline, isa_missing_dispatched, cpu_ok."""
    INPUT = "input"
    """A binary file that was given (ELF or core). Facts: kind and the detector's facts."""
    RESOURCE = "resource"
    """A resource's figures while a `crashlens run` job ran (parsers/run, from the bundle's
    samples). Facts: resource (memory, cgroup-memory, disk, shm, gpu-memory), name (a path, a
    cgroup, a GPU index), used, total, used_pct (the last sample), peak_pct, full (the peak was
    at capacity: 98 % or less than 1 MiB free), samples, last_at_s; shm also small (under 256 MiB); cgroup-memory also oom_kill
    and oom (how much the cgroup's counters rose during the run)."""
    GPU_FAULT = "gpu-fault"
    """A GPU kernel's fault with its kernel and thread: from a GPU core dump (binary/cudacore,
    source "gpu-core") or a compute-sanitizer report (parsers/sanitizer, source
    "compute-sanitizer"). Facts: source, exception (cuda-gdb's label, "Warp Illegal Address"),
    exception_name, category (the taxonomy id it maps to), kernel, function, offset, file,
    line, thread, block, and as known: device, sm, warp, lane, pc, error_pc, lane_mask,
    grid_dim, block_dim, module, instruction, words, tool, error, address, address_is,
    access, space, size, reports. `frames`: the faulting instruction, its device callers, then
    (sanitizer) the host stack at the launch."""


class FrameKind(StrEnum):
    """Whose code a stack frame runs (`Frame.kind`; the JSON's `kind` of a frame)."""

    USER = "user"
    """A Python frame of the user's code (pathkinds.frame_kind: not an installed package)."""
    LIBRARY = "library"
    """A Python frame of an installed package, the standard library or a frozen module."""
    NATIVE = "native"
    """A C/C++ frame: printed in a log (c10, gdb/lldb) or unwound from a core."""
    GPU = "gpu"
    """Where the GPU reported the error (the end of a code path, no source of its own)."""


class FrameTrust(StrEnum):
    """How a native frame was found, best first (the levels of minidump-stackwalk)."""

    CONTEXT = "context"
    """Registers saved by the machine: frame 0, or a signal's interrupted context."""
    CFI = "cfi"
    """DWARF call-frame information of the module holding the pc."""
    FP = "fp"
    """The frame-pointer chain."""
    SCAN = "scan"
    """A stack word that points just after a call: a guess."""


@dataclass(frozen=True, order=True)
class Loc:
    """Where a piece of evidence came from: a display name and a 1-based line (0: whole file)."""

    source: str
    line: int = 0
    end_line: int = 0  # last line when the evidence spans several lines (0: same as line)

    def __str__(self) -> str:
        if not self.line:
            return self.source
        if self.end_line and self.end_line != self.line:
            return f"{self.source}:{self.line}-{self.end_line}"
        return f"{self.source}:{self.line}"


@dataclass(frozen=True)
class InputFile:
    """One input after walking directories and opening archives and compressed files.

    kind is decided from content: text, elf, elf-core, binary, empty, unreadable.
    open() returns a fresh binary stream of the (decompressed) content.
    """

    name: str
    kind: str
    size: int | None
    open: Callable[[], BinaryIO] = field(repr=False, compare=False)
    note: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict, compare=False)
    role: str = ""          # a text input: log | notebook | elastic-error | source | config (inputs.roles)
    role_reason: str = ""   # what it was read as, for the notes


@dataclass(frozen=True)
class Line:
    """A normalised text line. text has ANSI codes, progress-bar overdraws, mojibake and
    line prefixes (timestamps, [rankN]:) removed; loc points back at the original line."""

    loc: Loc
    text: str
    stream: str = ""  # an interleaving key such as "rank3" ("" for plain output)
    prefix: str = ""  # what was stripped from the front (timestamp, rank tag, syslog header)


@dataclass(frozen=True)
class Frame:
    """One stack frame of any kind (Python, C++, native, GPU).

    Frames parsed from logs fill the first fields; native frames unwound from a core
    (binary.unwind) also say where they lie (pc, module offsets) and how they were found
    (`trust`)."""

    kind: FrameKind  # a plain string equal to a member ("native") is turned into it
    function: str = ""
    file: str = ""
    line: int | None = None
    code: str = ""
    module: str = ""
    loc: Loc | None = None
    # a native frame of a core
    index: int | None = None
    pc: int | None = None
    sp: int | None = None                # the stack pointer in this frame
    trust: FrameTrust | None = None      # how this frame was found
    module_base: int | None = None
    module_offset: int | None = None     # pc - module base (as dmesg and minidumps count)
    module_address: int | None = None    # pc in the ELF file's own numbering
    build_id: str | None = None
    function_offset: int | None = None   # pc - function start
    inlined: tuple[Any, ...] = ()        # binary.symbolize.InlinedCall, innermost first
    mangled: str | None = None
    return_address: bool = False         # pc follows a call: symbolised at pc - 1
    signal_frame: bool = False           # the kernel's signal trampoline (<signal handler called>)
    registers: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if type(self.kind) is not FrameKind:
            object.__setattr__(self, "kind", FrameKind(self.kind))

    def short(self) -> str:
        where = self.file.rsplit("/", 1)[-1] if self.file else self.module
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{self.function or '?'} ({where})" if where else (self.function or "?")

    @property
    def location(self) -> str:
        """gdb-style: fn+0x12 (libfoo.so+0x1234) at file:line."""
        where = os.path.basename(self.module) if self.module else "?"
        fn = self.function or ("<signal handler called>" if self.signal_frame else "??")
        off = f"+{self.function_offset:#x}" if self.function and self.function_offset is not None else ""
        src = f" at {self.file}:{self.line}" if self.file and self.line else ""
        return f"{fn}{off} ({where}+{self.module_offset:#x}){src}" if self.module_offset is not None else f"{fn}{src}"


class BlockKind(StrEnum):
    """What a block of log lines is (structure/): the spans every later stage reads."""

    TRACEBACK = "traceback"
    """One Python exception as the `traceback` module prints it (or IPython, rich, loguru): its
    header, frames, code and caret lines, the exception line and its message; a chain is several
    blocks, each with its `link`."""
    FAULTHANDLER = "faulthandler"
    """`Fatal Python error: …` with every thread's stack (the current one's frames kept)."""
    NATIVE_STACK = "native-stack"
    """A gdb or lldb backtrace printed in the log (`#0 0x… in f () from lib.so`)."""
    LAUNCHER_SUMMARY = "launcher-summary"
    """torchrun's failure table (`Root Cause (first observed failure):` with rank, exitcode…)."""
    PROGRESS = "progress"
    """Consecutive progress-bar frames (tqdm, Keras, rich)."""
    WARNING = "warning"
    """A `warnings` module report: `path:N: XWarning: message` and the source line under it."""


class Role(StrEnum):
    """What one line is within its block (`Record.role`)."""

    NONE = ""
    HEADER = "header"          # Traceback (most recent call last):, a thread header, a table title
    FRAME = "frame"            # a stack frame
    CODE = "code"              # a source line under a frame, a caret line, a loguru annotation
    ERROR = "error"            # the exception's own line (or faulthandler's fatal error)
    MESSAGE = "message"        # a further line of an exception's message
    LINK = "link"              # "The above exception was the direct cause …"
    FIELD = "field"            # a key: value row of a launcher summary
    BAR = "bar"                # a progress-bar frame
    WARNING = "warning"        # a warning's own line


@dataclass(frozen=True)
class Record:
    """What the structure stage says of one line (`LogStructure.records[i]` is `lines[i]`'s):
    the stream it belongs to, its time and level where the line or its prefix states them, the
    logger, whether it starts a record of its own (a message cannot continue onto it) and its
    role within a block."""

    stream: str = ""
    time: str = ""
    level: str = ""            # "debug" | "info" | "warning" | "error" | "fatal" | ""
    logger: str = ""
    starts: bool = False
    role: Role = Role.NONE
    block: int = -1            # index into LogStructure.blocks, -1 outside any block


@dataclass(frozen=True)
class Block:
    """A span of one stream's lines that reads as one thing (`BlockKind`), with what the grammar
    of that kind gives: frames (outermost first), a traceback's exception type, message lines,
    error line and link to the exception before it; a launcher summary's fields."""

    kind: BlockKind
    loc: Loc                   # first and last line
    stream: str = ""
    frames: tuple[Frame, ...] = ()
    native: tuple[Frame, ...] = ()       # c10 `frame #N` lines under an exception, innermost first
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stream:
    """One process's (or rank's, or worker's) lines in an interleaved log."""

    key: str                   # "" for untagged output, "rank3", "RayTrainWorker-1234", "SpawnProcess-2"
    kind: str                  # "main" | "rank" | "worker" | "process"
    first: int                 # first and last line numbers
    last: int
    lines: int


@dataclass(frozen=True)
class LogStructure:
    """The structure of one text input: its lines, a Record per line, the blocks and streams."""

    source: str
    lines: tuple[Line, ...]
    records: tuple[Record, ...]
    blocks: tuple[Block, ...]
    streams: tuple[Stream, ...]

    def of_kind(self, *kinds: BlockKind) -> list[Block]:
        return [b for b in self.blocks if b.kind in kinds]


@dataclass(frozen=True)
class Backtrace:
    """A thread's native frames, innermost first, as the unwinder found them."""

    frames: tuple[Frame, ...]
    thread: int | None                   # tid
    notes: tuple[str, ...] = ()
    truncated: bool = False              # the walk did not reach the outermost frame (the notes say why)
    end: str = ""                        # why the walk stopped

    def __len__(self) -> int:
        return len(self.frames)

    def functions(self) -> list[str]:
        return [f.function for f in self.frames]

    def format(self) -> str:
        return "\n".join(f"#{f.index or 0:<2} {f.pc or 0:#018x} {f.location} [{f.trust}]" for f in self.frames)


@dataclass(frozen=True)
class CoreThread:
    """One thread of a core."""

    index: int
    tid: int
    pc: int | None
    crashed: bool


@dataclass(frozen=True)
class CoreModule:
    """A file mapped in the crashed process, and where it was found on this machine."""

    path: str
    base: int
    build_id: str | None
    found_at: str | None
    mismatch: bool | None                # the local file has another build-id (None: not checked)


@dataclass(frozen=True)
class CrashReport:
    """What a core gave (binary.stage.read_crash): the crash site (binary.crashsite), the
    crashing thread's backtrace (binary.unwind), the threads and the modules. Addresses are
    ints; report/json.py writes them in hex."""

    source: str                          # the core's name among the inputs
    signal: str | None                   # SIGSEGV, ...
    signo: int | None
    si_code: str | int | None            # its name when known
    fault_address: int | None
    pc: int | None
    sp: int | None
    module: str | None                   # the mapped file holding the pc
    module_base: int | None
    offset: int | None                   # pc - module base
    module_address: int | None           # pc in the ELF file's numbering
    function: str | None                 # from the crash site, else from the backtrace's first frame
    function_offset: int | None
    instruction: str | None              # the faulting instruction (AT&T)
    mnemonic: str | None
    required_isa: tuple[str, ...]        # the extensions it needs beyond x86-64
    cpu_supports: bool | None            # the SIGILL verdict
    reason: str
    thread: int | None                   # tid of the crashing thread
    thread_reason: str
    method: str                          # signal-frame, prstatus, none
    method_reason: str
    raised_signal: str | None            # what the core reports (differs after a re-raise)
    raised_pc: int | None
    sender_pid: int | None
    build_id: str | None
    build_id_match: bool | None
    xcr0: int | None
    xcr0_components: tuple[str, ...] | None
    registers: Mapping[str, int]
    signal_frame: Mapping[str, Any] | None  # the kernel signal frame a handler re-raised from, as plain facts
    notes: tuple[str, ...] = ()
    culprit: Frame | None = None         # SIGABRT/SIGILL: the first frame outside the abort machinery
    command: str | None = None           # the process's command and arguments (NT_PRPSINFO)
    args: str | None = None
    python_frames: tuple[Frame, ...] | None = None  # outermost first, when pystack read them
    backtrace: Backtrace | None = None
    threads: tuple[CoreThread, ...] = ()
    modules: tuple[CoreModule, ...] = ()


@dataclass(frozen=True)
class LibraryFacts:
    """What `inspect` found in one library, as the analysis reports it (inspect.library_summary).
    None: that part was not read (no CUDA images, no census, no device, no CPU flags)."""

    path: str
    build_id: str | None = None
    soname: str | None = None
    max_versions: Mapping[str, str] = field(default_factory=dict)  # GLIBC -> 2.34, ...
    sass: tuple[str, ...] | None = None  # archs with SASS (sm_80 ...), when the file has CUDA images
    ptx: tuple[str, ...] | None = None   # archs with PTX (compute_80 ...)
    cuda_images: int | None = None
    cuda_compatible: bool | None = None  # against the device (None: unknown, e.g. PTX JIT)
    cuda_reason: str | None = None       # None: no verdict (no device was known)
    device: str | None = None
    isa_level: str | None = None         # x86-64-v3 ...; None: no census
    isa_baseline_level: str | None = None
    isa_baseline: tuple[str, ...] | None = None
    isa_dispatched: tuple[str, ...] | None = None
    isa_missing_baseline: tuple[str, ...] | None = None  # against the CPU flags; None: no flags known
    isa_missing_dispatched: tuple[str, ...] | None = None
    cpu_ok: bool | None = None
    errors: tuple[str, ...] = ()

    @property
    def library(self) -> str:
        return os.path.basename(self.path)

    @property
    def has_cuda(self) -> bool:
        """CUDA images were found, or judged against a device."""
        return self.sass is not None or self.cuda_reason is not None


@dataclass(frozen=True)
class Evidence:
    """One fact a crash left.

    kind: an EvidenceKind (each member says which facts it carries); a plain string equal to
    one works the same. text: the line or summary a human reads; facts: structured values for
    rules; frames: the stack of an exception or a native stack.
    """

    kind: EvidenceKind | str
    text: str
    loc: Loc
    facts: Mapping[str, Any] = field(default_factory=dict, compare=False)
    frames: tuple[Frame, ...] = ()

    @property
    def error_loc(self) -> Loc:
        """Where the error itself is stated: an exception's own line (`exc_line`) rather than the
        span of its traceback; any other evidence's loc."""
        n = self.facts.get("exc_line")
        return Loc(self.loc.source, int(n)) if n and self.loc.line else self.loc

    @property
    def rank(self) -> int | None:
        """The rank (or local rank) whose output this is, where the log tells: a launcher's rank
        tag on the line (`[rank3]:`), a rank the parser read (torchrun's summary), a local_rank
        (torchrun's `failed (exitcode: -9) local_rank: 4`)."""
        for key in ("rank", "local_rank"):
            v = self.facts.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        stream = str(self.facts.get("stream") or "")
        return int(stream[4:]) if stream.startswith("rank") and stream[4:].isdigit() else None


@dataclass(frozen=True)
class Match:
    """One rule condition that held, with the evidence that satisfied it."""

    rule: str
    evidence: Evidence
    captures: Mapping[str, str] = field(default_factory=dict)
    role: str = "trigger"  # trigger | support | requires
    condition: int = 0  # index of the condition in the rule (earlier = more telling)


@dataclass(frozen=True)
class Cause:
    """A ranked root-cause candidate."""

    category: str
    rule: str
    title: str
    confidence: float
    explanation: str
    remedies: tuple[str, ...]
    references: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    reasoning: tuple[str, ...]  # why it is ranked where it is
    other_rules: tuple[str, ...] = ()  # other rules of the same category that fired
    secondary: bool = False  # judged a consequence of a higher-ranked cause
    consequence_reason: str = ""


@dataclass(frozen=True)
class SecondaryError:
    evidence: Evidence
    reason: str


@dataclass(frozen=True)
class Analysis:
    """The whole result of one `analyze` run; renderers read only this."""

    inputs: tuple[InputFile, ...]
    causes: tuple[Cause, ...]
    primary_error: Evidence | None
    secondary_errors: tuple[SecondaryError, ...]
    code_path: tuple[Frame, ...]
    environment: Mapping[str, Any]
    notes: tuple[str, ...]  # what could not be read, what was skipped, what was assumed
    exceptions: tuple[Evidence, ...] = ()
    libraries: tuple[LibraryFacts, ...] = ()  # every library inspected
    crash: CrashReport | None = None  # the first core's crash (binary.stage)
    stats: Mapping[str, Any] = field(default_factory=dict)
    gpu_crash: Mapping[str, Any] | None = None  # the GPU fault (a GPU core or compute-sanitizer); JSON `gpu_crash`
