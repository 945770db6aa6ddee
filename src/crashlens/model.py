"""The data that flows between pipeline stages.

inputs  ->  InputFile            (what was given, detected by content)
text    ->  Line                 (a normalised log line with its origin)
parsers ->  Evidence             (one model for every kind of fact a crash left)
engine  ->  Cause, Analysis      (ranked root causes with their reasoning)
report  ->  renderers read Analysis only

Everything here is a plain frozen dataclass; nothing else crosses a stage boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, BinaryIO, Mapping


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
    """One stack frame of any kind (Python, C++, native, GPU)."""

    kind: str  # user | library | native | gpu
    function: str = ""
    file: str = ""
    line: int | None = None
    code: str = ""
    module: str = ""
    loc: Loc | None = None

    def short(self) -> str:
        where = self.file.rsplit("/", 1)[-1] if self.file else self.module
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{self.function or '?'} ({where})" if where else (self.function or "?")


@dataclass(frozen=True)
class Evidence:
    """One fact a crash left.

    kind: line (a log line), exception (a parsed Python/C++ exception with its frames),
    dmesg (a kernel record), env (an environment fact), outcome (exit status, signal,
    kill), child-failure (a torchrun failure summary), input (a file that was given).
    text: the line or summary a human reads; facts: structured values for rules.
    """

    kind: str
    text: str
    loc: Loc
    facts: Mapping[str, Any] = field(default_factory=dict, compare=False)
    frames: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class Match:
    """One rule condition that held, with the evidence that satisfied it."""

    rule: str
    evidence: Evidence
    captures: Mapping[str, str] = field(default_factory=dict)
    role: str = "trigger"  # trigger | support
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
    libraries: tuple[Any, ...] = ()  # inspect.LibraryReport of every library inspected
    crash: Mapping[str, Any] | None = None  # the crash site read from a core (binary.crashsite)
    stats: Mapping[str, Any] = field(default_factory=dict)
