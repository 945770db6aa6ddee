"""What the ISA census returns: plain frozen dataclasses (JSON through `to_json`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .tables import LEVEL_NAMES

__all__ = ["FunctionUse", "ExtensionUse", "IsaCensus", "FunctionIsa", "InstructionIsa", "DecodedInstruction"]


class FunctionUse(NamedTuple):
    """One function (or unnamed piece of code) using an extension."""
    start: int
    end: int
    name: str | None
    count: int                 # instructions of the extension in this function
    hint: str | None = None    # ISA hint in its name or source file ("avx2", "file X.cpp.AVX512.cpp")

    @property
    def label(self) -> str:
        return self.name or f"sub_{self.start:x}"


@dataclass(frozen=True)
class ExtensionUse:
    name: str
    level: int | None
    cpuinfo: tuple[str, ...]
    instructions: int              # instructions that need the extension
    faulting: int                  # of which raise #UD without it (TZCNT/LZCNT/ENDBR do not)
    function_count: int
    first_addresses: tuple[int, ...]
    functions: tuple[FunctionUse, ...]   # by address; all of them (to_json trims)
    verdict: str                   # "baseline" or "dispatched"
    rule: str                      # which rule decided: needed, hinted, guarded, share, level, confined, marker
    reason: str
    note: str = ""

    def top_functions(self, n: int = 10) -> list[FunctionUse]:
        return sorted(self.functions, key=lambda f: (-f.count, f.start))[:n]


@dataclass(frozen=True)
class IsaCensus:
    path: str
    build_id: str | None
    text_bytes: int
    instructions: int
    functions: int                 # functions decoded (gaps not counted)
    simd_functions: int            # of which use any SIMD register
    extensions: dict[str, ExtensionUse]
    level: int                     # x86-64 level implied by every faulting extension used anywhere
    baseline_level: int            # ... by the baseline extensions only
    baseline: tuple[str, ...]      # extensions the code was built for (those that can fault)
    dispatched: tuple[str, ...]    # extensions confined to run-time-selected code (idem)
    undecodable: int               # bytes iced could not decode (data in .text, or garbage)
    undecodable_addresses: tuple[int, ...]
    gnu_property: dict[str, Any]
    function_sources: tuple[str, ...]
    seconds: float
    jobs: int
    cached: bool = False
    notes: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)   # seconds per phase (first run)

    @property
    def level_name(self) -> str:
        return LEVEL_NAMES.get(self.level, f"level {self.level}")

    @property
    def baseline_level_name(self) -> str:
        return LEVEL_NAMES.get(self.baseline_level, f"level {self.baseline_level}")

    def to_json(self, functions: int | None = 10) -> dict[str, Any]:
        """A JSON-ready dict; `functions` caps the functions listed per extension (None: all)."""
        out: dict[str, Any] = {
            "path": self.path, "build_id": self.build_id, "text_bytes": self.text_bytes,
            "instructions": self.instructions, "functions": self.functions,
            "simd_functions": self.simd_functions,
            "level": self.level, "level_name": self.level_name,
            "baseline_level": self.baseline_level, "baseline_level_name": self.baseline_level_name,
            "baseline": list(self.baseline), "dispatched": list(self.dispatched),
            "undecodable": self.undecodable,
            "undecodable_addresses": [hex(a) for a in self.undecodable_addresses],
            "gnu_property": self.gnu_property, "function_sources": list(self.function_sources),
            "seconds": round(self.seconds, 3), "jobs": self.jobs, "cached": self.cached,
            "notes": list(self.notes), "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "extensions": {},
        }
        for name, e in self.extensions.items():
            funcs = e.functions if functions is None else e.top_functions(functions)
            out["extensions"][name] = {
                "level": e.level, "cpuinfo": list(e.cpuinfo), "instructions": e.instructions,
                "faulting": e.faulting, "functions": e.function_count,
                "first_addresses": [hex(a) for a in e.first_addresses],
                "top_functions": [{"name": f.label, "start": hex(f.start), "end": hex(f.end),
                                   "count": f.count, "hint": f.hint} for f in funcs],
                "verdict": e.verdict, "rule": e.rule, "reason": e.reason, "note": e.note,
            }
        return out


@dataclass(frozen=True)
class FunctionIsa:
    start: int
    end: int
    name: str | None
    file: str | None
    instructions: int
    extensions: dict[str, int]                # extension -> instruction count
    addresses: dict[str, tuple[int, ...]]     # extension -> addresses (at most 1,000 each)
    level: int
    hint: str | None
    undecodable: int
    source: str                               # how the bounds were found: symtab, dynsym, eh_frame

    @property
    def label(self) -> str:
        return self.name or f"sub_{self.start:x}"


class InstructionIsa(NamedTuple):
    mnemonic: str
    extensions: tuple[str, ...]


@dataclass(frozen=True)
class DecodedInstruction:
    address: int
    length: int
    mnemonic: str
    text: str
    extensions: tuple[str, ...]
    faults: bool            # False when the CPU would run it without the extension (TZCNT, ENDBR64)
    why_not: str            # why it does not fault, when it does not
    function: str | None
    function_start: int | None
    aligned: bool           # decoding from the function start reaches this address
