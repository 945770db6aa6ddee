"""Which x86 instruction-set extensions an ELF file's code uses, where, and how.

For an "Illegal instruction" crash the question is not only *whether* a library contains
AVX-512 (libtorch_cpu.so does, in kernels it runs only after checking CPUID) but whether the
code was *built* for it, so that it will crash on any older CPU (TensorFlow >= 1.6 and AVX).

Entry points:
    isa_census(elf, *, cache=True, jobs=None, first=16) -> IsaCensus
        every executable section decoded with iced-x86, per extension: instruction count,
        first addresses, the functions holding them, the x86-64 level, and the split into
        *baseline* (the code was compiled for it) and *dispatched* (selected at run time).
    function_census(elf, address) -> FunctionIsa   the one function holding an address
    instruction_at(elf, address) -> (mnemonic, extensions)
    decode_at(elf, address) -> DecodedInstruction  the same with text, length, function
    missing_for_cpu(census, cpu_flags) -> dict     what a CPU (its /proc/cpuinfo flags) lacks

How the census is fast: instructions are classified by iced's `Code` (one integer per opcode
form) through tables built once from `Instruction.cpuid_features()` and data/isa.yaml. Each
function is decoded in C (`list(map(attrgetter("code"), Decoder(...)))`, no Python bytecode
per instruction); only functions whose set of codes meets an interesting code are counted in
detail, and Python runs per instruction only to collect the first addresses, in the few earliest
functions that hold each extension.
Work is split by function boundaries (so every piece starts on an instruction boundary) and
spread over forked processes. Results are cached in SQLite keyed by the GNU build-id.

Baseline or dispatched: see `_verdicts` for the rules and the reasons they give.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple

import iced_x86
import yaml

from .. import __version__
from ..errors import CrashlensError
from .elf import ElfError, ElfFile, iter_notes
from .symbols import Function, FunctionTable, function_table, locate_function, relocation_slots, strict

CENSUS_FORMAT = 1
EM_X86_64 = 62
SHF_EXECINSTR = 0x4
LEVEL_NAMES = {1: "x86-64", 2: "x86-64-v2", 3: "x86-64-v3", 4: "x86-64-v4"}

# Heuristic thresholds (see _verdicts).
SHARE_VECTOR = 0.25     # of the functions that use any SIMD register
SHARE_SCALAR = 0.05     # of all functions
SPREAD_UNITS = 0.05     # of the plain translation units (STT_FILE) that use SIMD / have code
SPREAD_MIN_UNITS = 3
NEIGHBOUR_REACH = 16
SMALL_GAP = 64          # a gap this small after a function is alignment padding: decoded with it
GUARD_MAX_FUNCTIONS = 256
GUARD_WINDOW = 64 * 1024
GUARD_MAX_BYTES = 4 * 1024 * 1024


class IsaError(CrashlensError):
    help = "The ISA census reads x86-64 ELF files (executables, shared libraries, objects)."


# -- tables ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Extension:
    name: str
    level: int | None          # x86-64 micro-architecture level, None when in no level
    cpuinfo: tuple[str, ...]   # /proc/cpuinfo flags (any of); () = not shown by Linux
    rank: int
    kind: str                  # vector, scalar, system
    note: str = ""
    totals_only: bool = False


class _Tables:
    """Everything derived from iced-x86 and data/isa.yaml, built once per process."""

    def __init__(self) -> None:
        text = (resources.files("crashlens") / "data" / "isa.yaml").read_text("utf-8")
        self.digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        feat_names = _enum_names(iced_x86.CpuidFeature)
        code_names = _enum_names(iced_x86.Code)
        self.mnemonics = {v: k.lower() for k, v in _enum_names(iced_x86.Mnemonic, by_name=True).items()}
        totals_only = set(doc.get("totals_only") or [])
        self.exts: list[Extension] = []
        by_iced: dict[str, int] = {}
        for row in doc["extensions"]:
            ext = Extension(str(row["name"]), row.get("level"), tuple(row.get("cpuinfo") or ()),
                            int(row.get("rank", 0)), str(row.get("kind", "vector")), str(row.get("note", "")),
                            row["name"] in totals_only)
            for n in row.get("iced") or ():
                by_iced[n] = len(self.exts)
            self.exts.append(ext)
        baseline = set(doc.get("baseline_features") or [])
        ncodes = max(code_names) + 1
        features: list[list[str]] = [[]] * ncodes
        for code in range(1, ncodes):
            names = [feat_names.get(f, str(f)) for f in iced_x86.Instruction.create(code).cpuid_features()]
            features[code] = [n for n in names if n not in baseline]
            for n in features[code]:
                if n not in by_iced:  # an iced feature isa.yaml does not list: report it as is
                    by_iced[n] = len(self.exts)
                    self.exts.append(Extension(n, None, (), 45, "system"))
        # internal pseudo-extensions, never reported as extensions
        self.INVALID = len(self.exts)
        self.exts.append(Extension("(undecodable)", None, (), 0, "internal"))
        self.CPUID = len(self.exts)
        self.exts.append(Extension("(cpuid)", None, (), 0, "internal"))
        self.index = {_norm(e.name): i for i, e in enumerate(self.exts)}
        for i, e in enumerate(self.exts):
            for flag in e.cpuinfo:
                self.index.setdefault(_norm(flag), i)
        for n, i in by_iced.items():
            self.index.setdefault(_norm(n), i)
        self.code_exts: list[tuple[int, ...]] = [()] * ncodes
        self.faulting: list[bool] = [True] * ncodes
        simd: set[int] = set()
        simd_kinds = ("XMM", "YMM", "ZMM", "MM_", "K_", "KP1", "TMM")
        code_by_name = {v: k for k, v in code_names.items()}
        for code in range(1, ncodes):
            ids = tuple(dict.fromkeys(by_iced[n] for n in features[code]))
            try:
                kinds = [_OPK_NAMES.get(k, "") for k in iced_x86.OpCodeInfo(code).op_kinds()]
            except Exception:  # noqa: BLE001 - iced refuses an OpCodeInfo for a few pseudo codes
                kinds = []
            if any(k.startswith(simd_kinds) for k in kinds) or any(self.exts[i].kind == "vector" for i in ids):
                simd.add(code)
            self.code_exts[code] = ids
        lahf = self.index[_norm("LAHF-SAHF")]
        for n in ("LAHF", "SAHF"):
            self.code_exts[code_by_name[n]] = (lahf,)
        self.code_exts[code_by_name["INVALID"]] = (self.INVALID,)
        self.code_exts[code_by_name["CPUID"]] = (self.CPUID,)
        self.cpuid_codes = {code_by_name["CPUID"], code_by_name["XGETBV"]}
        for row in doc.get("non_faulting") or ():
            for n in row["codes"]:
                if n in code_by_name:
                    self.faulting[code_by_name[n]] = False
        self.non_faulting_why = {code_by_name[n]: row["why"] for row in doc.get("non_faulting") or ()
                                 for n in row["codes"] if n in code_by_name}
        self.totals_ids = {i for i, e in enumerate(self.exts) if e.totals_only}
        self.totals_codes = tuple(c for c in range(ncodes) if self.code_exts[c]
                                  and set(self.code_exts[c]) <= self.totals_ids)
        self.hit_codes = frozenset(c for c in range(ncodes) if self.code_exts[c]
                                   and not set(self.code_exts[c]) <= self.totals_ids)
        self.simd_codes = frozenset(simd)
        # matched against lower-cased names without re.IGNORECASE: literal prefixes stay fast
        # substring tests on the lower-cased name, highest rank first (a regex alternation with
        # look-arounds cost ~50 us per long mangled name; `in` costs ~50 ns per token)
        rows = sorted(doc.get("name_hints") or (), key=lambda h: -int(h["rank"]))
        self.hints = [(int(h["rank"]), tuple(str(x).lower() for x in h.get("any") or ()),
                       tuple(str(x).lower() for x in h.get("words") or ())) for h in rows]
        self.regex_hints = [(str(h["needle"]).lower(), re.compile(h["pattern"]),
                             {str(k): int(v) for k, v in (h.get("ranks") or {}).items()})
                            for h in doc.get("regex_hints") or ()]
        self.feature_symbols = tuple(doc.get("cpu_feature_symbols") or ())

    def ext_id(self, name: str) -> int | None:
        return self.index.get(_norm(name))

    def hint(self, text: str | None) -> tuple[int, str] | None:
        """(rank, matched text) of the strongest ISA hint in a symbol or file name."""
        if not text:
            return None
        low = text.lower()
        best = None
        for needle, rx, ranks in self.regex_hints:
            if needle in low:
                m = rx.search(text)
                if m and m.group(1) in ranks and (best is None or ranks[m.group(1)] > best[0]):
                    best = (ranks[m.group(1)], m.group(0).strip("_"))
        for rank, tokens, words in self.hints:
            if best is not None and best[0] >= rank:
                return best
            for tok in tokens:
                if tok in low:
                    return rank, tok
            for w in words:
                pos = low.find(w)
                while pos >= 0:
                    end = pos + len(w)
                    if (pos == 0 or not low[pos - 1].isalpha()) and (end == len(low) or not low[end].isalpha()):
                        return rank, w
                    pos = low.find(w, pos + 1)
        return best


def _norm(name: str) -> str:
    return re.sub(r"[-_. ]", "", name).upper()


def _enum_names(mod: Any, by_name: bool = False) -> dict:
    pairs = {k: v for k, v in vars(mod).items() if not k.startswith("_") and isinstance(v, int)}
    return pairs if by_name else {v: k for k, v in pairs.items()}


_OPK_NAMES = _enum_names(iced_x86.OpCodeOperandKind)


@lru_cache(maxsize=1)
def tables() -> _Tables:
    return _Tables()


def extension(name: str) -> Extension | None:
    """The extension called `name` (crashlens, iced or cpuinfo spelling), or None."""
    t = tables()
    i = t.ext_id(name)
    return None if i is None or t.exts[i].kind == "internal" else t.exts[i]


def extensions() -> tuple[Extension, ...]:
    return tuple(e for e in tables().exts if e.kind != "internal")


# -- results ----------------------------------------------------------------------------------------

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


# -- ELF facts ------------------------------------------------------------------------------------

def _open(elf: ElfFile | str | os.PathLike[str]) -> tuple[ElfFile, bool]:
    if isinstance(elf, ElfFile):
        return elf, False
    return ElfFile(elf), True


def _check_x86_64(elf: ElfFile) -> None:
    if elf.e_machine != EM_X86_64 or elf.bits != 64:
        raise IsaError(f"{elf.path}: {elf.machine_name} ({elf.bits}-bit) code; the ISA census reads x86-64 only")
    if elf.endian != "<":
        raise IsaError(f"{elf.path}: big-endian x86-64 ELF is not valid")


def _notes(elf: ElfFile) -> list[tuple[str, int, bytes]]:
    """(owner, type, descriptor) of every note in SHT_NOTE sections (or PT_NOTE segments)."""
    spans = [(s.offset, s.size, 8 if s.name == ".note.gnu.property" and elf.bits == 64 else 4)
             for s in elf.sections if s.type == 7 and s.size]
    if not spans:
        spans = [(p.offset, p.filesz, p.align) for p in elf.segments if p.type == 4 and p.filesz]
    return [(n.name, n.type, n.desc) for off, size, align in spans for n in iter_notes(elf, off, size, align)]


@strict
def build_id(elf: ElfFile) -> str | None:
    for name, typ, desc in _notes(elf):
        if name == "GNU" and typ == 3 and desc:
            return desc.hex()
    return None


@strict
def gnu_property(elf: ElfFile) -> dict[str, Any]:
    """x86 ISA levels and CET bits from .note.gnu.property (FACTS.md section 6), as decoded by
    binary.elffacts, in the census's shape."""
    from .elffacts import read_elf_facts

    props = read_elf_facts(elf).gnu_properties
    out: dict[str, Any] = {}
    if props is None:
        return out
    for key, bits in (("isa_needed", props.isa_needed_bits), ("isa_used", props.isa_used_bits)):
        if bits is None:
            continue
        levels = [lvl for lvl in range(1, 5) if bits & (1 << (lvl - 1))]
        out[key] = [LEVEL_NAMES[lvl] for lvl in levels]
        if key == "isa_needed":
            out["needed_level"] = max(levels) if levels else 1
    if props.x86_features_bits is not None:
        out["ibt"] = bool(props.x86_features_bits & 1)
        out["shstk"] = bool(props.x86_features_bits & 2)
    return out


def _exec_sections(elf: ElfFile) -> list:
    return [s for s in elf.sections if s.flags & SHF_EXECINSTR and s.has_data and s.size]


# -- the sweep (runs in worker processes) -------------------------------------------------------

_WORK: dict[str, Any] = {}


def _pieces(ft: FunctionTable, lo: int, hi: int, delta: int) -> list[tuple[int, int, int, int]]:
    """(start, end, function index or -1, file offset) covering [lo, hi): the functions and the
    gaps between them; a gap of alignment padding is decoded with the function before it."""
    pieces: list[tuple[int, int, int, int]] = []
    for a, b, k in ft.partition(lo, hi):
        if k < 0 and b - a <= SMALL_GAP and pieces and pieces[-1][1] == a and pieces[-1][2] >= 0:
            pa, _pb, pk, poff = pieces[-1]
            pieces[-1] = (pa, b, pk, poff)
        else:
            pieces.append((a, b, k, a + delta))
    return pieces


def _scan(chunk: tuple[int, int, int]) -> dict[str, Any]:
    """Decode one chunk (start, end, file offset - address); aggregate what matters."""
    pieces = _pieces(_WORK["ft"], *chunk)
    t = tables()
    data = _WORK["data"]
    code_exts = t.code_exts
    hit_codes = t.hit_codes
    simd_codes = t.simd_codes
    totals_codes = t.totals_codes
    Decoder = iced_x86.Decoder
    get_code = attrgetter("code")
    ft = _WORK.get("ft")
    faulting = t.faulting
    cpuid_codes = t.cpuid_codes
    cpuid_ext = t.CPUID
    hits: list[tuple] = []
    has_units = ft is not None and ft.symtab is not None
    simd_units: set[int] = set()
    code_units: set[int] = set()
    totals: Counter = Counter()
    totals_fn: Counter = Counter()
    ninstr = nfunc = nsimd = 0
    for lo, hi, fidx, off in pieces:
        buf = data[off:off + (hi - lo)]
        codes = list(map(get_code, Decoder(64, buf, ip=lo)))
        ninstr += len(codes)
        cs = set(codes)
        unit = -1
        if fidx >= 0 and codes:
            nfunc += 1
            unit = ft.unit(fidx) if has_units else -1
            if unit >= 0:
                code_units.add(unit)
            if not cs.isdisjoint(simd_codes):
                nsimd += 1
                if unit >= 0:
                    simd_units.add(unit)
        for c in totals_codes:
            if c in cs:
                totals[c] += codes.count(c)
                totals_fn[c] += 1
        if cs.isdisjoint(hit_codes):
            continue
        per: dict[int, list[int]] = {}  # extension -> [instructions, faulting]
        guard = False
        for c, n in Counter(codes).items():
            es = code_exts[c]
            if not es or c not in hit_codes:
                continue
            if c in cpuid_codes:
                guard = True
            f = n if faulting[c] else 0
            for e in es:
                slot = per.get(e)
                if slot is None:
                    per[e] = [n, f]
                else:
                    slot[0] += n
                    slot[1] += f
        per.pop(cpuid_ext, None)
        name = hint = None
        if fidx >= 0 and ft is not None:  # names and hints here: in parallel, not in the parent
            name = ft.name(fidx)
            hint = t.hint(name)
            if hint is None:
                src = ft.file(fidx)
                fh = t.hint(src)
                hint = (fh[0], f"file {src}") if fh else None
        hits.append((lo, hi, fidx, per, guard, name, hint, unit))
    return {"hits": hits, "simd_units": simd_units, "code_units": code_units, "totals": dict(totals), "totals_fn": dict(totals_fn),
            "instructions": ninstr, "functions": nfunc, "simd": nsimd}


def _scan_chunk(i: int) -> tuple[int, dict[str, Any]]:
    return i, _scan(_WORK["chunks"][i])


def _run(data: Any, ft: FunctionTable, chunks: list[tuple[int, int, int]],
         jobs: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(chunk index, result) as chunks finish: forked workers when jobs > 1, else in order here."""
    _WORK.update(data=data, ft=ft, chunks=chunks)
    try:
        if jobs > 1 and len(chunks) > 1 and hasattr(os, "fork"):
            import multiprocessing
            tables()  # build before forking, once
            ctx = multiprocessing.get_context("fork")
            try:
                pool = ctx.Pool(jobs)
            except (OSError, ImportError, AssertionError, ValueError):
                pool = None  # no fork here (sandbox, limits, a daemon process): do it here
            if pool is not None:
                with pool:
                    yield from pool.imap_unordered(_scan_chunk, range(len(chunks)))
                return
        for i in range(len(chunks)):
            yield _scan_chunk(i)
    finally:
        _WORK.clear()


def _child_cpu() -> float:
    try:
        import resource
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    except (ImportError, OSError):
        return 0.0


def _default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# -- the census --------------------------------------------------------------------------------------

@strict
def isa_census(elf: ElfFile | str | os.PathLike[str], *, cache: bool = True, jobs: int | None = None,
               first: int = 16) -> IsaCensus:
    """The ISA census of an x86-64 ELF file (see the module docstring).

    cache: read/write the on-disk cache (keyed by build-id); jobs: worker processes (default:
    the CPUs this process may use); first: how many first addresses to keep per extension."""
    t0 = time.perf_counter()
    f, owned = _open(elf)
    try:
        _check_x86_64(f)
        bid = build_id(f)
        key = _cache_key(f, bid, first)
        if cache:
            hit = _cache_get(key)
            if hit is not None:
                return _from_cache(hit, f.path, time.perf_counter() - t0)
        census = _census(f, bid, jobs or _default_jobs(), first, t0)
        if cache:
            _cache_put(key, census)
        return census
    finally:
        if owned:
            f.close()


def _census(elf: ElfFile, bid: str | None, jobs: int, first_n: int, t0: float) -> IsaCensus:
    t = tables()
    notes: list[str] = []
    timings: dict[str, float] = {}
    mark = time.perf_counter()
    ft = function_table(elf)
    notes.extend(ft.notes)
    # chunks: address ranges of about equal size, cut at function starts (an instruction
    # boundary); the workers split them into functions and gaps themselves
    secs = _exec_sections(elf)
    for sec in secs:
        elf.section_data(sec)  # bounds: raises ElfError for a section past the end of the file
    text_bytes = sum(sec.size for sec in secs)
    if not secs:
        notes.append("no executable sections")
    jobs = max(1, min(jobs, 64))
    target = max(1 << 20, text_bytes // (jobs * 16) + 1) if jobs > 1 else max(1, text_bytes)
    chunks: list[tuple[int, int, int]] = []  # (start, end, file offset - address)
    for sec in secs:
        lo, end = sec.addr, sec.addr + sec.size
        while lo < end:
            cut = min(lo + target, end)
            if cut < end:
                k = bisect_right(ft.starts, cut) - 1
                if k >= 0 and ft.starts[k] > lo:
                    cut = ft.starts[k]
                else:  # no function starts in (lo, cut]: go on to the next one that does
                    j = bisect_right(ft.starts, lo)
                    cut = ft.starts[j] if j < len(ft.starts) and ft.starts[j] < end else end
            chunks.append((lo, cut, sec.offset - sec.addr))
            lo = cut
    if text_bytes < (4 << 20):
        jobs = 1
    now = time.perf_counter()
    timings["functions"], mark = now - mark, now
    cpu0 = _child_cpu()
    # merge as the chunks come in (the parent is idle otherwise); chunks cover increasing
    # addresses, so their hits are put back in chunk order at the end
    ninstr = nfunc = nsimd = 0
    totals: Counter = Counter()
    totals_fn: Counter = Counter()
    by_chunk: dict[int, list] = {}
    cpuid_funcs: set[int] = set()
    ctx = _Context(elf, ft, t, cpuid_funcs)
    names, hints = ctx._names, ctx._hints
    units: dict[int, int] = {}
    simd_units: set[int] = set()
    code_units: set[int] = set()
    for i, r in _run(elf.data, ft, chunks, jobs):
        ninstr += r["instructions"]
        nfunc += r["functions"]
        nsimd += r["simd"]
        totals.update(r["totals"])
        totals_fn.update(r["totals_fn"])
        by_chunk[i] = r["hits"]
        simd_units |= r["simd_units"]
        code_units |= r["code_units"]
        for lo, _hi, fidx, _per, guard, name, hint, unit in r["hits"]:
            if fidx >= 0:
                names[fidx] = name
                hints[fidx] = hint
                units[fidx] = unit
            if guard:
                cpuid_funcs.add(fidx if fidx >= 0 else -lo - 1)
    now = time.perf_counter()
    timings["sweep"], mark = now - mark, now
    if jobs > 1:
        timings["sweep_worker_cpu"] = _child_cpu() - cpu0

    per_ext: dict[int, list] = {}  # ext -> [instructions, faulting, [(lo, hi, fidx, n)]]
    undecodable = 0
    for i in sorted(by_chunk):
        for lo, hi, fidx, per, _guard, _name, _hint, _unit in by_chunk[i]:
            for e, (n, nf) in per.items():
                slot = per_ext.get(e)
                if slot is None:
                    slot = per_ext[e] = [0, 0, []]
                slot[0] += n
                slot[1] += nf
                slot[2].append((lo, hi, fidx, n))
    if t.INVALID in per_ext:
        undecodable = per_ext[t.INVALID][0]
    for c, n in totals.items():
        for e in t.code_exts[c]:
            slot = per_ext.setdefault(e, [0, 0, []])
            slot[0] += n
            slot[1] += n if t.faulting[c] else 0
    first = _first_addresses(elf, t, per_ext, first_n)
    undecodable_at = tuple(first.pop(t.INVALID, ()))
    per_ext.pop(t.INVALID, None)
    uses: dict[int, ExtensionUse] = {}
    prop = gnu_property(elf)
    now = time.perf_counter()
    timings["merge"], mark = now - mark, now
    ctx.units = units
    ctx.unit_population = (_plain_units(ft, t, simd_units), _plain_units(ft, t, code_units))
    verdicts = _verdicts(ctx, per_ext, totals_fn, nfunc, nsimd, prop)
    now = time.perf_counter()
    timings["verdicts"], mark = now - mark, now
    for e, (n, nfault, funcs) in per_ext.items():
        ext = t.exts[e]
        ends = ft.ends
        fu = tuple(FunctionUse(lo, ends[fidx] if fidx >= 0 else hi, ctx.name(fidx), k, ctx.hint_text(fidx))
                   for lo, hi, fidx, k in funcs)
        nf = len(funcs) if not ext.totals_only else sum(totals_fn[c] for c in t.totals_codes if e in t.code_exts[c])
        verdict, rule, reason = verdicts[e]
        uses[e] = ExtensionUse(ext.name, ext.level, ext.cpuinfo, n, nfault, nf,
                               tuple(first.get(e, ())), fu, verdict, rule, reason, ext.note)
    order = sorted(uses, key=lambda e: (t.exts[e].level or 9, t.exts[e].rank, t.exts[e].name))
    extensions = {t.exts[e].name: uses[e] for e in order}
    level = max([u.level or 1 for u in extensions.values() if u.faulting] + [1])
    # the lists hold what can raise SIGILL: ENDBR64 everywhere, or only TZCNT/LZCNT, never can
    base = tuple(n for n, u in extensions.items() if u.verdict == "baseline" and u.faulting)
    disp = tuple(n for n, u in extensions.items() if u.verdict == "dispatched" and u.faulting)
    base_level = max([u.level or 1 for u in extensions.values() if u.verdict == "baseline" and u.faulting] + [1])
    return IsaCensus(elf.path, bid, text_bytes, ninstr, nfunc, nsimd, extensions, level, base_level, base, disp,
                     undecodable, undecodable_at, prop, ft.sources,
                     time.perf_counter() - t0, jobs, False, tuple(notes + ctx.notes),
                     {**timings, "results": time.perf_counter() - mark})


def _plain_units(ft: FunctionTable, t: _Tables, units: set[int]) -> set[int]:
    """The translation units (STT_FILE entries) that were compiled once and carry no ISA hint
    in their name: ordinary code, as opposed to a source compiled per ISA target."""
    if ft.symtab is None or not units:
        return set()
    counts = ft.symtab.file_counts
    out = set()
    for u in units:
        name = ft.symtab.name(u)
        # an empty name is ld's catch-all for hidden globals turned local: not one source file
        if name and counts.get(name, 0) == 1 and t.hint(name) is None:
            out.add(u)
    return out


def _first_addresses(elf: ElfFile, t: _Tables, per_ext: dict[int, list], first_n: int) -> dict[int, list[int]]:
    """The first `first_n` addresses of each extension: the per-function counts say which
    functions (the earliest ones) hold them, and only those are decoded again, in Python."""
    need: dict[tuple[int, int], set[int]] = {}
    for e, (_n, _nf, funcs) in per_ext.items():
        total = 0
        for lo, hi, _fidx, n in funcs:
            need.setdefault((lo, hi), set()).add(e)
            total += n
            if total >= first_n:
                break
    out: dict[int, list[int]] = {}
    code_exts = t.code_exts
    for (lo, hi), want in sorted(need.items()):
        off = _file_offset(elf, lo, hi - lo)
        if off is None:
            continue
        for ins in iced_x86.Decoder(64, elf.data[off:off + (hi - lo)], ip=lo):
            es = code_exts[ins.code]
            if es:
                for e in es:
                    if e in want:
                        lst = out.setdefault(e, [])
                        lst.append(ins.ip)
                        if len(lst) >= first_n:
                            want.discard(e)
                if not want:
                    break
    return out


def _file_offset(elf: ElfFile, addr: int, size: int) -> int | None:
    for s in _exec_sections(elf):
        if s.addr <= addr and addr + size <= s.addr + s.size:
            return s.offset + (addr - s.addr)
    return None


class _Context:
    """Names, hints and references of the functions the verdicts look at."""

    def __init__(self, elf: ElfFile, ft: FunctionTable, t: _Tables, cpuid_funcs: set[int]) -> None:
        self.elf, self.ft, self.t = elf, ft, t
        self.cpuid_funcs = cpuid_funcs
        self._names: dict[int, str | None] = {}
        self._hints: dict[int, tuple[int, str] | None] = {}
        self._refs: dict[int, set[int]] = {}
        self._decoded_bytes = 0
        self._feature: tuple[list[tuple[int, int]], dict[int, str]] | None = None
        self._plt_slots: dict[int, int | None] = {}
        self._resolver_refs: dict[int, set[int]] | None = None
        self._sides: dict[int, list] = {}
        self.units: dict[int, int] = {}                      # function -> translation unit
        self.unit_population: tuple[set[int], set[int]] = (set(), set())  # plain units: SIMD, any
        self.notes: list[str] = []

    def name(self, fidx: int) -> str | None:
        if fidx < 0:
            return None
        if fidx not in self._names:
            self._names[fidx] = self.ft.name(fidx)
        return self._names[fidx]

    def hint(self, fidx: int) -> tuple[int, str] | None:
        if fidx < 0:
            return None
        if fidx not in self._hints:
            h = self.t.hint(self.name(fidx))
            if h is None:
                fh = self.t.hint(self.ft.file(fidx))
                h = (fh[0], f"file {self.ft.file(fidx)}") if fh else None
            self._hints[fidx] = h
        return self._hints[fidx]

    def neighbour_hint(self, fidx: int, rank: int) -> str | None:
        """An ISA hint borrowed from the neighbours: an unhinted function whose nearest hinted
        neighbours on both sides (within NEIGHBOUR_REACH functions) carry a hint of at least
        `rank`, or whose immediate neighbour does, sits inside an ISA-specific object file (the
        linker keeps an object's functions together): MKL's static helpers such as
        xbsr_gnxn_row_mv_def_ker between mkl_sparse_*_avx512 functions."""
        if fidx < 0:
            return None
        sides = self._sides.get(fidx)
        if sides is None:
            sides = self._sides[fidx] = self._hinted_sides(fidx)
        good = [(d, h, k) for d, h, k in sides if h[0] >= rank]
        if len(good) == 2 or any(d == 1 for d, _h, _k in good):
            d, h, k = min(good)
            return f"near {self.name(k) or hex(self.ft.starts[k])} ({h[1]})"
        return None

    def _hinted_sides(self, fidx: int) -> list:
        sides = []
        for step in (-1, 1):
            k = fidx
            for d in range(1, NEIGHBOUR_REACH + 1):
                k += step
                if not 0 <= k < len(self.ft.starts):
                    break
                h = self.hint(k)
                if h is not None:
                    sides.append((d, h, k))
                    break
        return sides

    def hint_text(self, fidx: int) -> str | None:
        h = self.hint(fidx)
        return h[1] if h else None

    # -- references, for the guard rule -----------------------------------------------------------
    def refs(self, fidx: int) -> set[int]:
        """Addresses a function calls, jumps to, or takes RIP-relative (LEA/MOV) addresses of."""
        got = self._refs.get(fidx)
        if got is not None:
            return got
        lo, hi = self.ft.starts[fidx], self.ft.ends[fidx]
        sec = self.ft.section_at(lo)
        out: set[int] = set()
        if sec is not None:
            off = sec.offset + (lo - sec.addr)
            buf = self.elf.data[off:off + min(hi, sec.addr + sec.size) - lo]
            self._decoded_bytes += len(buf)
            for ins in iced_x86.Decoder(64, buf, ip=lo):
                target = ins.near_branch_target
                if target:
                    out.add(target)
                if ins.is_ip_rel_memory_operand:
                    out.add(ins.ip_rel_memory_address)
        self._refs[fidx] = out
        return out

    def feature_targets(self) -> tuple[list[tuple[int, int]], dict[int, str]]:
        """Address ranges of CPU-feature symbols defined here, and GOT slots of imported ones."""
        if self._feature is None:
            ranges = []
            for n in self.t.feature_symbols:
                for s in self.ft.symbols_named(n):
                    if s.defined and s.value:
                        ranges.append((s.value, s.value + max(s.size, 1)))
            try:
                slots = relocation_slots(self.elf, set(self.t.feature_symbols))
            except ElfError as exc:
                self.notes.append(f"relocations ignored: {exc}")
                slots = {}
            self._feature = (ranges, slots)
        return self._feature

    def _plt_slot(self, target: int) -> int | None:
        """The GOT slot a PLT stub jumps through (None when target is no stub)."""
        if target in self._plt_slots:
            return self._plt_slots[target]
        slot = None
        sec = self.ft.section_at(target)
        if sec is not None and sec.name.startswith(".plt"):
            off = sec.offset + (target - sec.addr)
            buf = self.elf.data[off:off + min(16, sec.addr + sec.size - target)]
            for ins in iced_x86.Decoder(64, buf, ip=target):
                if ins.is_ip_rel_memory_operand:
                    slot = ins.ip_rel_memory_address
                    break
        self._plt_slots[target] = slot
        return slot

    def is_guard(self, fidx: int) -> bool:
        """Does this function check CPU features (CPUID/XGETBV, __cpu_model, cpuinfo_isa...)?"""
        if fidx in self.cpuid_funcs:
            return True
        name = self.name(fidx) or ""
        if name.endswith(".resolver") or self.ft.starts[fidx] in self.ft.ifunc_resolvers:
            return True
        ranges, slots = self.feature_targets()
        for a in self.refs(fidx):
            if a in slots:
                return True
            for lo, hi in ranges:
                if lo <= a < hi:
                    return True
            s = self._plt_slot(a) if slots else None
            if s is not None and s in slots:
                return True
        return False

    def resolver_refs(self) -> dict[int, set[int]]:
        """Address -> the ifunc resolvers that reference it (GCC target_clones, glibc multiarch)."""
        if self._resolver_refs is None:
            self._resolver_refs = {}
            for addr in sorted(self.ft.ifunc_resolvers):
                k = self.ft.index_at(addr)
                if k is None:
                    continue
                for a in self.refs(k):
                    self._resolver_refs.setdefault(a, set()).add(k)
        return self._resolver_refs

    def referrers(self, fidx: int) -> set[int] | None:
        """Functions that reference this one's entry: any ifunc resolver, and any function within
        GUARD_WINDOW (None: decoding budget spent)."""
        lo, hi = self.ft.starts[fidx], self.ft.ends[fidx]
        sec = self.ft.section_at(lo)
        if sec is None:
            return set()
        from_resolvers = self.resolver_refs().get(lo, set())
        a = bisect_right(self.ft.starts, max(sec.addr, lo - GUARD_WINDOW))
        b = bisect_right(self.ft.starts, min(sec.addr + sec.size, hi + GUARD_WINDOW))
        out = set()
        for k in range(max(a - 1, 0), b):
            if k == fidx:
                continue
            if self._decoded_bytes > GUARD_MAX_BYTES:
                return None
            if lo in self.refs(k):
                out.add(k)
        return out | from_resolvers


def _verdicts(ctx: _Context, per_ext: dict[int, list], totals_fn: Counter, nfunc: int, nsimd: int,
              prop: dict[str, Any]) -> dict[int, tuple[str, str, str]]:
    """Baseline or dispatched, per extension: (verdict, rule, reason).

    "Baseline" means the code was compiled for the extension: it can run anywhere in the
    library, so a CPU without it crashes at load or first use. "Dispatched" means it sits in
    code chosen at run time after a CPU check. Rules, first match wins; each writes the reason
    shown to the user:

      needed    .note.gnu.property says ld.so needs x86-64-vN >= the extension's level: the
                file does not even load without it -> baseline. (Loader-enforced: certain.)
      marker    an extension counted in totals only (ENDBR64 in every function) -> baseline,
                and harmless: it never faults.
      hinted    every function using it carries an ISA hint of at least the extension's rank in
                its name or STT_FILE source file (at::native::AVX2::, *_avx512_*, foo.avx2.0,
                x.cpp.AVX512.cpp, MKL's *_Z0HAynn), or sits between such functions (see
                _Context.neighbour_hint) -> dispatched. Nobody names a kernel "_avx2" unless
                a faster or safer one exists for other CPUs; the runtime picks among them.
      guarded   the unhinted functions using it (at most 256) are referenced (called, jumped to,
                or address-taken) only by functions that check CPU features (execute CPUID or
                XGETBV, read __cpu_model, cpuinfo_isa, _rtld_global_ro... directly, through the
                GOT or a PLT stub, or are ifunc resolvers), by functions that use the extension
                themselves or are hinted for it, or by wrappers that are themselves reached only
                so (two levels) -> dispatched. References are looked for in every ifunc resolver
                and in the functions within 64 KiB (a dispatcher sits in the same translation
                unit as its kernels). A function with no reference at all (exported, or only
                reached through a pointer table) does not count as guarded.
      share     (vector and scalar extensions only: system ones such as XGETBV, RDTSCP or
                XSAVEC are written on purpose, in CPU checks and context switches, and no -m flag
                spreads them) unhinted functions using it make up >= 25% of the functions that use any SIMD
                register (vector extensions) or >= 5% of all functions (scalar ones) -> baseline.
                A compiler allowed to use an extension uses it throughout: -mavx VEX-encodes
                every SSE operation of every function; kernels selected at run time are a few
                files among hundreds.
      spread    (needs .symtab with STT_FILE entries) unhinted functions using it come from at
                least 3 and >= 5% of the "plain" translation units that use SIMD registers (any
                code, for scalar extensions): source files compiled once whose names carry no
                ISA hint -> baseline. Kernels selected at run time come from sources compiled
                once per target (numpy's *.dispatch.c, MKL: the same file name several times in
                .symtab) or named for their ISA; a compiler flag for the whole build shows up in
                ordinary files. This catches what the function share misses: SSE4.1 is used
                opportunistically (pmulld, ptest, roundsd), in 19% of numpy 2.4's SIMD functions
                only, but in 28 of its plain source files, against 0 or 1 for its AVX kernels.
      level     another extension of the same or a higher x86-64 level is baseline by the rules
                needed, share or spread (not itself by level, and not a system one) -> baseline:
                the -march that allowed one allowed the other (and a CPU without it would lack
                the other one too). Only for extensions that belong to a level.
      confined  otherwise: a few unhinted functions, no guard seen -> dispatched, the weakest
                verdict; the reason says how many functions and that no guard was found.

    The order puts the certain rule first, then the ones that identify dispatch positively
    (names, CPU checks), before the statistical one; "confined" is what remains. Misjudged
    cases are possible both ways: a library built with only -mpopcnt (a few POPCNT in unhinted
    functions, no guard) is called dispatched; a kernel file compiled for AVX2 and called
    through function pointers without ISA names, in a small library where it is a quarter of
    the SIMD functions, is called baseline. The reason string always says which rule decided.
    """
    t = ctx.t
    out: dict[int, tuple[str, str, str]] = {}
    needed = prop.get("needed_level", 0)
    share_of: dict[int, tuple[int, int, float]] = {}
    for e, (_n, _nf, funcs) in per_ext.items():
        ext = t.exts[e]
        if ext.level and needed >= ext.level:
            out[e] = ("baseline", "needed",
                      f"the GNU property note says ld.so needs {LEVEL_NAMES[needed]}: "
                      f"the file does not load on a CPU without {ext.name}")
            continue
        if ext.totals_only:
            nf = sum(totals_fn[c] for c in t.totals_codes if e in t.code_exts[c])
            out[e] = ("baseline", "marker", f"compiler-inserted in {nf} functions; never faults")
            continue
        unhinted = []
        near = 0
        for lo, hi, fidx, _k in funcs:
            h = ctx.hint(fidx)
            if h is None or h[0] < ext.rank:
                if ctx.neighbour_hint(fidx, ext.rank) is not None:
                    near += 1
                else:
                    unhinted.append((lo, hi, fidx))
        if not unhinted:
            sample = ", ".join(sorted({ctx.hint(f[2])[1] for f in funcs if ctx.hint(f[2])})[:4])
            extra = f"; {near} more sit among such functions" if near else ""
            out[e] = ("dispatched", "hinted",
                      f"all {len(funcs)} functions using it are ISA-specific builds by name "
                      f"({sample}){extra}")
            continue
        guarded = _guard_rule(ctx, e, unhinted, funcs)
        if guarded is not None:
            out[e] = ("dispatched", "guarded", guarded)
            continue
        pop = nsimd if ext.kind == "vector" else nfunc
        frac = len(unhinted) / pop if pop else 1.0
        share_of[e] = (len(unhinted), pop, frac)
        if ext.kind == "system":
            continue  # XGETBV, RDTSCP, XSAVEC...: written on purpose, never spread by a -m flag
        limit = SHARE_VECTOR if ext.kind == "vector" else SHARE_SCALAR
        if frac >= limit:
            what = "functions that use SIMD registers" if ext.kind == "vector" else "functions"
            out[e] = ("baseline", "share",
                      f"used in {len(unhinted)} of {pop} {what} ({frac:.0%}) without any ISA hint: "
                      f"compiled for it throughout")
            continue
        plain = ctx.unit_population[0 if ext.kind == "vector" else 1]
        used_in = {ctx.units.get(f[2], -1) for f in unhinted} & plain
        if plain and len(used_in) >= SPREAD_MIN_UNITS and len(used_in) / len(plain) >= SPREAD_UNITS:
            what = "that use SIMD registers" if ext.kind == "vector" else "with code"
            sample = ", ".join(sorted(ctx.ft.symtab.name(u) for u in used_in)[:3])
            out[e] = ("baseline", "spread",
                      f"used in {len(used_in)} of the {len(plain)} source files {what} that were compiled "
                      f"once and carry no ISA name ({len(used_in) / len(plain):.0%}; {sample}...): "
                      f"ordinary code, compiled for it")
    # level propagation (from what the compiler emits on its own), then the rest
    base_levels = [t.exts[e].level for e, v in out.items()
                   if v[0] == "baseline" and t.exts[e].level and v[1] in ("needed", "share", "spread")
                   and t.exts[e].kind != "system"]
    top = max(base_levels, default=0)
    for e in per_ext:
        if e in out:
            continue
        ext = t.exts[e]
        n_unhinted, pop, frac = share_of.get(e, (0, 0, 0.0))
        if ext.level and top >= ext.level:
            out[e] = ("baseline", "level",
                      f"{LEVEL_NAMES[top]} extensions are baseline here, and {ext.name} is used in "
                      f"{n_unhinted} functions without any ISA hint")
        else:
            out[e] = ("dispatched", "confined",
                      f"confined to {n_unhinted} functions without an ISA hint ({frac:.1%} of {pop}); "
                      f"no CPU-feature guard was found for them, so this verdict is the weakest")
    return out


def _guard_rule(ctx: _Context, e: int, unhinted: list[tuple[int, int, int]], funcs: list) -> str | None:
    """The 'guarded' rule: a reason string when it applies, else None."""
    if len(unhinted) > GUARD_MAX_FUNCTIONS or any(f[2] < 0 for f in unhinted):
        return None
    ext = ctx.t.exts[e]
    users = {f[2] for f in funcs if f[2] >= 0}
    guards: set[int] = set()
    memo: dict[int, bool] = {}

    def acceptable(c: int, depth: int) -> bool:
        """c may call into the extension's code: it checks CPU features, uses the extension
        itself, is an ISA-specific build by name, or is itself only reached from such callers
        (a wrapper such as __memcpy_chk_avx512 that an ifunc resolver selects)."""
        if c in users:
            return True
        h = ctx.hint(c)
        if h is not None and h[0] >= ext.rank:
            return True
        if ctx.is_guard(c):
            guards.add(c)
            return True
        if depth <= 0:
            return False
        if c in memo:
            return memo[c]
        memo[c] = False  # cycles do not vouch for themselves
        callers = ctx.referrers(c)
        ok = bool(callers) and all(acceptable(x, depth - 1) for x in callers)
        memo[c] = ok
        return ok

    for _lo, _hi, fidx in unhinted:
        callers = ctx.referrers(fidx)
        if not callers:
            return None  # unknown, or only reached from outside this file / through pointers
        for c in callers:
            if c != fidx and not acceptable(c, 2):
                return None
    if not guards:
        return None
    names = ", ".join(sorted(ctx.name(g) or f"sub_{ctx.ft.starts[g]:x}" for g in guards)[:3])
    return (f"the {len(unhinted)} functions using it without an ISA hint are only reached from "
            f"CPU-feature checks ({names})")


# -- cache ----------------------------------------------------------------------------------------

def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crashlens"


def _cache_key(elf: ElfFile, bid: str | None, first_n: int) -> str:
    version = f"{__version__}/{CENSUS_FORMAT}/{getattr(iced_x86, '__version__', '')}/{tables().digest}/{first_n}"
    if bid:
        ident = f"build-id:{bid}:{elf.size}"
    else:
        try:
            st = os.stat(elf.path)
            ident = f"file:{os.path.realpath(elf.path)}:{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            return ""
    return f"{ident}|{version}"


def _connect() -> sqlite3.Connection:
    path = cache_dir() / "isa.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(str(path), timeout=0.5)
    con.execute("CREATE TABLE IF NOT EXISTS isa_census (key TEXT NOT NULL, part TEXT NOT NULL, "
                "json TEXT NOT NULL, PRIMARY KEY (key, part))")
    return con


def _cache_get(key: str) -> dict[str, Any] | None:
    if not key:
        return None
    try:
        con = _connect()
        try:
            rows = con.execute("SELECT part, json FROM isa_census WHERE key = ?", (key,)).fetchall()
        finally:
            con.close()
        if not rows:
            return None
        parts = {p: json.loads(j) for p, j in rows}
        head = parts.pop("")
        head["extensions"] = [parts[n] for n in head["order"]]
        return head
    except Exception:  # noqa: BLE001 - corrupt, locked, unreadable, half-written: recompute
        return None


def _cache_put(key: str, census: IsaCensus) -> None:
    if not key:
        return
    try:
        head = {f.name: getattr(census, f.name) for f in fields(census) if f.name != "extensions"}
        head["order"] = list(census.extensions)
        rows = [(key, "", json.dumps(head))]
        for name, e in census.extensions.items():
            row = {f.name: getattr(e, f.name) for f in fields(e)}  # FunctionUse rows: JSON arrays
            rows.append((key, name, json.dumps(row)))
        con = _connect()
        try:
            with con:
                con.execute("DELETE FROM isa_census WHERE key = ?", (key,))
                con.executemany("INSERT INTO isa_census (key, part, json) VALUES (?, ?, ?)", rows)
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - read-only home, locked or corrupt database: no cache
        pass


def _from_cache(d: dict[str, Any], path: str, seconds: float) -> IsaCensus:
    exts = {}
    for e in d["extensions"]:
        e["cpuinfo"] = tuple(e["cpuinfo"])
        e["first_addresses"] = tuple(e["first_addresses"])
        e["functions"] = tuple(map(FunctionUse._make, e["functions"]))
        exts[e["name"]] = ExtensionUse(**e)
    keep = {k: v for k, v in d.items() if k not in ("extensions", "order")}
    for k in ("baseline", "dispatched", "undecodable_addresses", "function_sources", "notes"):
        keep[k] = tuple(keep[k])
    keep.update(path=path, seconds=seconds, cached=True, extensions=exts)
    keep["timings"] = dict(keep.get("timings") or {})
    return IsaCensus(**keep)


# -- one function, one instruction ------------------------------------------------------------------

def _function_bytes(elf: ElfFile, fn: Function) -> bytes:
    for s in _exec_sections(elf):
        if s.addr <= fn.start < s.addr + s.size:
            end = min(fn.end, s.addr + s.size)
            off = s.offset + (fn.start - s.addr)
            if off + (end - fn.start) > elf.size:
                raise ElfError(f"{elf.path}: section {s.name} runs past the end of the file")
            return bytes(elf.data[off:off + (end - fn.start)])
    raise IsaError(f"{elf.path}: {fn.start:#x} is not in an executable section")


def _locate(elf: ElfFile, address: int) -> Function:
    fn = locate_function(elf, address)
    if fn is None:
        for s in _exec_sections(elf):
            if s.addr <= address < s.addr + s.size:
                return Function(address, min(address + 15, s.addr + s.size), None, "address")
        raise IsaError(f"{elf.path}: no code at {address:#x} (not in an executable section)")
    return fn


@strict
def function_census(elf: ElfFile | str | os.PathLike[str], address: int) -> FunctionIsa:
    """The census of the function holding `address` (one function decoded, no cache needed)."""
    f, owned = _open(elf)
    try:
        _check_x86_64(f)
        t = tables()
        fn = _locate(f, address)
        buf = _function_bytes(f, fn)
        counts: Counter = Counter()
        addrs: dict[int, list[int]] = {}
        n = 0
        code_exts = t.code_exts
        for ins in iced_x86.Decoder(64, buf, ip=fn.start):
            n += 1
            es = code_exts[ins.code]
            if es:
                for e in es:
                    counts[e] += 1
                    lst = addrs.setdefault(e, [])
                    if len(lst) < 1000:
                        lst.append(ins.ip)
        undecodable = counts.pop(t.INVALID, 0)
        counts.pop(t.CPUID, None)
        names = {e: t.exts[e].name for e in counts}
        order = sorted(counts, key=lambda e: (t.exts[e].level or 9, t.exts[e].rank, t.exts[e].name))
        level = max([t.exts[e].level or 1 for e in counts] + [1])
        h = t.hint(fn.name) or t.hint(fn.file)
        return FunctionIsa(fn.start, fn.end, fn.name, fn.file, n, {names[e]: counts[e] for e in order},
                           {names[e]: tuple(addrs[e]) for e in order}, level, h[1] if h else None,
                           undecodable, fn.source)
    finally:
        if owned:
            f.close()


@strict
def decode_at(elf: ElfFile | str | os.PathLike[str], address: int) -> DecodedInstruction:
    """The instruction at `address`, decoded from its function's start when possible."""
    f, owned = _open(elf)
    try:
        _check_x86_64(f)
        t = tables()
        fn = _locate(f, address)
        buf = _function_bytes(f, fn)
        found = None
        aligned = False
        for ins in iced_x86.Decoder(64, buf, ip=fn.start):
            if ins.ip == address:
                found, aligned = ins, True
                break
            if ins.ip > address:
                break
        if found is None:  # inside another instruction per the function's decoding: decode as asked
            off = address - fn.start
            sec_fn = Function(address, address + 15, fn.name, fn.source)
            try:
                raw = _function_bytes(f, sec_fn)
            except IsaError:
                raw = buf[off:off + 15]
            found = iced_x86.Decoder(64, raw, ip=address).decode()
        code = found.code
        exts = tuple(t.exts[e].name for e in t.code_exts[code] if e not in (t.INVALID, t.CPUID))
        if code == iced_x86.Code.INVALID:
            mnemonic, text = "(bad)", "(bad)"
        else:
            mnemonic = t.mnemonics.get(found.mnemonic, str(found.mnemonic))
            text = _formatter().format(found)
        return DecodedInstruction(address, found.len, mnemonic, text, exts, t.faulting[code],
                                  t.non_faulting_why.get(code, ""), fn.name,
                                  fn.start if fn.source != "address" else None, aligned)
    finally:
        if owned:
            f.close()


@lru_cache(maxsize=1)
def _formatter() -> Any:
    fmt = iced_x86.Formatter(iced_x86.FormatterSyntax.GAS)
    fmt.uppercase_hex = False  # objdump's spelling
    return fmt


def instruction_at(elf: ElfFile | str | os.PathLike[str], address: int) -> InstructionIsa:
    """(mnemonic, required extensions) of the instruction at `address`."""
    d = decode_at(elf, address)
    return InstructionIsa(d.mnemonic, d.extensions)


# -- CPU comparison -------------------------------------------------------------------------------------

def _cpu_level(flags: set[str]) -> int:
    t = tables()
    level = 1
    for lvl in (2, 3, 4):
        need = [e for e in t.exts if e.level == lvl]
        if all(set(e.cpuinfo) & flags for e in need if e.cpuinfo):
            level = lvl
        else:
            break
    return level


def missing_for_cpu(census: IsaCensus, cpu_flags: Iterable[str]) -> dict[str, Any]:
    """What the file uses that a CPU lacks, judged by its /proc/cpuinfo flags.

    Returns {"cpu_level": 2, "cpu_level_name": "x86-64-v2",
             "baseline":     {ext: "will crash at load/first use"},        # the code was built for it
             "dispatched":   {ext: "fine if the dispatcher checks CPUID"}, # selected at run time
             "non_faulting": {ext: why no SIGILL (TZCNT runs as BSF...)},
             "unknown":      {ext: why the flags cannot tell},
             "details":      {ext: {flags, instructions, functions, verdict, rule, reason,
                                    first_address, consequence}},
             "ok": no baseline extension is missing and ld.so would load it,
             "notes": [...]}"""
    flags = {f.strip().lower() for f in cpu_flags if f and f.strip()}
    level = _cpu_level(flags)
    out: dict[str, Any] = {"cpu_level": level, "cpu_level_name": LEVEL_NAMES.get(level, ""), "baseline": {},
                           "dispatched": {}, "non_faulting": {}, "unknown": {}, "details": {}, "ok": True,
                           "notes": []}
    t = tables()
    for name, use in census.extensions.items():
        if not use.cpuinfo:
            if use.faulting:
                out["unknown"][name] = "Linux does not show this feature in /proc/cpuinfo"
            continue
        if set(use.cpuinfo) & flags:
            continue
        if not use.faulting:
            why = sorted({t.non_faulting_why[c] for c in t.non_faulting_why
                          if name in {t.exts[e].name for e in t.code_exts[c]}})
            consequence = "no SIGILL: " + ("; ".join(why) or "these instructions do not fault")
            out["non_faulting"][name] = consequence
        elif use.verdict == "baseline":
            consequence = "will crash at load/first use"
            out["baseline"][name] = consequence
        else:
            consequence = "fine if the dispatcher checks CPUID"
            out["dispatched"][name] = consequence
        out["details"][name] = {
            "flags": list(use.cpuinfo), "instructions": use.instructions, "faulting": use.faulting,
            "functions": use.function_count, "verdict": use.verdict, "rule": use.rule, "reason": use.reason,
            "first_address": hex(use.first_addresses[0]) if use.first_addresses else None,
            "consequence": consequence}
    out["ok"] = not out["baseline"]
    needed = census.gnu_property.get("needed_level", 0)
    if needed > level:
        out["ok"] = False
        out["notes"].append(f"ld.so refuses to load it: \"CPU ISA level is lower than required\" "
                            f"(needs {LEVEL_NAMES[needed]}, the CPU is {LEVEL_NAMES.get(level, level)})")
    if any(n.startswith("AMX") for n in census.extensions) and "amx_tile" in flags:
        out["notes"].append("AMX also needs per-process permission (arch_prctl ARCH_REQ_XCOMP_PERM, "
                            "XFEATURE_XTILEDATA); without it AMX instructions raise SIGILL")
    return out
