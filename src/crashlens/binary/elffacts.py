"""Facts about an ELF library or executable that explain loader errors, read fast and robustly.

`read_elf_facts(path)` returns an `ElfFacts`: class, machine, type, build-id, SONAME, NEEDED,
RPATH/RUNPATH, interpreter, the symbol versions required from each needed library
(.gnu.version_r) and the highest GLIBC_/GLIBCXX_/CXXABI_/GCC_ among them, the versions the file
defines (.gnu.version_d), .comment producers, the GNU notes (build-id, ABI tag, systemd package
note, x86 ISA level and CET properties), the PT_GNU_STACK flags and the number of dynamic
symbols. It reads headers and small tables only, straight from the mapping: a 500 MB library
costs about a millisecond. Dynamic symbols themselves (`DynamicSymbols`, or
`facts.symbols()`, `facts.defines()`, `facts.needs_symbol()`) and embedded component versions
(`components=True`: NCCL, cuDNN, CUDA libraries) are read only when asked.

Robustness: every part is read on its own. A part that cannot be read (a corrupt .dynamic, a
string offset out of bounds, a version chain that runs off its section) adds one line to
`errors` and the rest is still returned. Only a file that is not ELF at all (or whose ELF
header is cut short) raises ElfError. Chains are cut at what their section can hold.

Where tables come from: section headers first (what readelf shows), the dynamic tags mapped
through PT_LOAD segments when a section is missing or unusable (a file whose section headers
were stripped still yields its NEEDED, versions and symbols, as ld.so sees them).

Sources: System V gABI (dynamic tags, notes, symbols, PT_GNU_STACK), LSB symbol versioning,
glibc elf.h (DF_*, DF_1_*, NT_GNU_*, GNU_PROPERTY_*; see /work/shared/FACTS.md section 6),
systemd's package-note spec (owner "FDO", type 0xcafe1a7e, JSON).
"""

from __future__ import annotations

import array
import json
import mmap
import os
import re
import struct
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterator, NamedTuple, TypeVar

from .elf import (
    DT_FLAGS, DT_FLAGS_1, DT_GNU_HASH, DT_HASH, DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME, DT_STRSZ,
    DT_STRTAB, DT_SYMENT, DT_SYMTAB, DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM, DT_VERSYM,
    PF_R, PF_W, PF_X, PT_DYNAMIC, PT_GNU_STACK, PT_INTERP, PT_NOTE, PT_TLS, SHT_DYNAMIC, SHT_DYNSYM,
    SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM, SHT_HASH, SHT_NOTE, SHT_STRTAB,
    ElfError, ElfFile, GnuHashTable, Section, StringTable, SysvHashTable, dynamic_entries, iter_notes,
    iter_symbols, iter_verdef, iter_verneed, symbol_entry_size, vaddr_to_offset,
)
from .readers import NT_GNU_ABI_TAG, NT_GNU_BUILD_ID, NT_GNU_GOLD_VERSION, NT_GNU_PROPERTY_TYPE_0

__all__ = [
    "AbiTag", "Component", "DynSymbol", "DynamicSymbols", "ElfFacts", "GnuProperties", "Producer",
    "VersionDef", "VersionNeed", "VersionRef", "read_elf_facts", "scan_components",
]

# -- constants (glibc elf.h) ----------------------------------------------------------------------
NT_FDO_PACKAGING_METADATA = 0xCAFE1A7E
GNU_PROPERTY_X86_FEATURE_1_AND = 0xC0000002
GNU_PROPERTY_X86_ISA_1_NEEDED = 0xC0008002
GNU_PROPERTY_X86_ISA_1_USED = 0xC0010002
GNU_PROPERTY_X86_FEATURE_2_NEEDED = 0xC0008001
GNU_PROPERTY_X86_FEATURE_2_USED = 0xC0010001
GNU_PROPERTY_AARCH64_FEATURE_1_AND = 0xC0000000
EM_386, EM_X86_64, EM_AARCH64 = 3, 62, 183

X86_ISA_BITS = ("x86-64-baseline", "x86-64-v2", "x86-64-v3", "x86-64-v4")
X86_FEATURE_1_BITS = ("IBT", "SHSTK", "LAM_U48", "LAM_U57")
X86_FEATURE_2_BITS = ("x86", "x87", "MMX", "XMM", "YMM", "ZMM", "FXSR", "XSAVE", "XSAVEOPT", "XSAVEC",
                      "TMM", "MASK")
AARCH64_FEATURE_1_BITS = ("BTI", "PAC", "GCS")
DF_BITS = ("ORIGIN", "SYMBOLIC", "TEXTREL", "BIND_NOW", "STATIC_TLS")
DF_1_BITS = ("NOW", "GLOBAL", "GROUP", "NODELETE", "LOADFLTR", "INITFIRST", "NOOPEN", "ORIGIN", "DIRECT",
             "TRANS", "INTERPOSE", "NODEFLIB", "NODUMP", "CONFALT", "ENDFILTEE", "DISPRELDNE",
             "DISPRELPND", "NODIRECT", "IGNMULDEF", "NOKSYMS", "NOHDR", "EDITED", "NORELOC",
             "SYMINTPOSE", "GLOBAUDIT", "SINGLETON", "STUB", "PIE", "KMOD", "WEAKFILTER", "NOCOMMON")
ABI_OS = {0: "Linux", 1: "Hurd", 2: "Solaris", 3: "FreeBSD", 4: "NetBSD", 5: "Syllable", 6: "NaCl"}
VER_FLG_BASE, VER_FLG_WEAK = 0x1, 0x2
VERSYM_HIDDEN = 0x8000
SYM_TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS",
             10: "IFUNC"}
SYM_BINDS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}
SYM_VISIBILITY = ("DEFAULT", "INTERNAL", "HIDDEN", "PROTECTED")

# Version prefixes whose highest required version is summarised in ElfFacts.max_versions.
MAX_VERSION_PREFIXES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")
_NUMERIC_VERSION = re.compile(r"([A-Z]+)_(\d+(?:\.\d+)*)\Z")

# Sections never worth walking for the facts (annobin's per-function build notes can be large).
_SKIP_NOTE_SECTIONS = (".gnu.build.attributes",)
_MAX_COMMENT = 1 << 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _bits(value: int, names: tuple[str, ...]) -> tuple[str, ...]:
    out = [name for i, name in enumerate(names) if value >> i & 1]
    rest = value & ~((1 << len(names)) - 1)
    i = len(names)
    while rest >> i:
        if rest >> i & 1:
            out.append(f"bit{i}")
        i += 1
    return tuple(out)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


class _ToDict:
    def to_dict(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)  # type: ignore[arg-type]
                if not f.name.startswith("_")}


# -- the facts -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VersionRef(_ToDict):
    """One version required from a needed library (an Elf_Vernaux)."""
    name: str          # "GLIBC_2.34"
    index: int         # the .gnu.version index of symbols bound to it
    flags: int
    weak: bool         # VER_FLG_WEAK: a missing version is only a warning


@dataclass(frozen=True)
class VersionNeed(_ToDict):
    file: str                          # "libc.so.6"
    versions: tuple[VersionRef, ...]


@dataclass(frozen=True)
class VersionDef(_ToDict):
    """One version the file defines (an Elf_Verdef); the BASE entry names the file itself."""
    index: int
    name: str
    flags: int
    base: bool
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class AbiTag(_ToDict):
    """NT_GNU_ABI_TAG: the oldest kernel the file supports."""
    os: str
    version: str       # "3.2.0"


@dataclass(frozen=True)
class GnuProperties(_ToDict):
    """NT_GNU_PROPERTY_TYPE_0, decoded. Bit fields are None when the property is absent."""
    isa_needed: tuple[str, ...] = ()        # x86: "x86-64-baseline", "x86-64-v2", ... (ld.so checks these)
    isa_needed_bits: int | None = None
    isa_used: tuple[str, ...] = ()
    isa_used_bits: int | None = None
    x86_features: tuple[str, ...] = ()     # GNU_PROPERTY_X86_FEATURE_1_AND: IBT, SHSTK
    x86_features_bits: int | None = None
    features_used: tuple[str, ...] = ()    # GNU_PROPERTY_X86_FEATURE_2_USED: x86, XMM, YMM, ...
    features_needed: tuple[str, ...] = ()  # GNU_PROPERTY_X86_FEATURE_2_NEEDED
    aarch64_features: tuple[str, ...] = ()  # GNU_PROPERTY_AARCH64_FEATURE_1_AND: BTI, PAC
    other: tuple[tuple[int, str], ...] = ()  # (pr_type, data as hex) of anything else

    @property
    def isa_level_needed(self) -> str | None:
        """The highest x86-64 level the loader requires ("x86-64-v3"), if any."""
        return self.isa_needed[-1] if self.isa_needed and self.isa_needed[-1].startswith("x86") else None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["isa_level_needed"] = self.isa_level_needed
        return out


@dataclass(frozen=True)
class Producer(_ToDict):
    """A tool named in .comment."""
    tool: str          # "GCC", "clang", "LLD", "Intel oneAPI DPC++/C++", "rustc"
    version: str
    text: str


@dataclass(frozen=True)
class Component(_ToDict):
    """A library version the file carries or names: NCCL, cuDNN, a CUDA library's major."""
    name: str          # "nccl", "cudnn", "cudart", ...
    version: str
    text: str          # the string it was read from
    where: str         # ".rodata", ".comment", "DT_SONAME", "DT_NEEDED"
    offset: int | None = None


_F = TypeVar("_F")


@dataclass(frozen=True)
class ElfFacts(_ToDict):
    path: str
    elf_class: str                 # "ELF64"
    bits: int
    endian: str                    # "little" / "big"
    machine: str                   # "x86-64"
    e_machine: int
    type: str                      # "shared-object"
    e_type: int
    interpreter: str | None = None
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: str | None = None
    runpath: str | None = None
    dt_flags: tuple[str, ...] = ()        # DT_FLAGS: BIND_NOW, STATIC_TLS, ...
    dt_flags_1: tuple[str, ...] = ()      # DT_FLAGS_1: NOW, NODELETE, PIE, ...
    version_needs: tuple[VersionNeed, ...] = ()
    version_defs: tuple[VersionDef, ...] = ()
    build_id: str | None = None
    abi_tag: AbiTag | None = None
    package: dict[str, Any] | None = field(default=None, hash=False)
    package_text: str | None = None
    gnu_properties: GnuProperties | None = None
    gold_version: str | None = None
    exec_stack: bool | None = None        # None: no program headers (a relocatable object)
    stack_flags: str | None = None        # PT_GNU_STACK flags ("RW", "RWE"); None: no PT_GNU_STACK
    tls_size: int | None = None           # PT_TLS memory size
    comment: tuple[str, ...] = ()
    producers: tuple[Producer, ...] = ()
    dynsym_count: int | None = None
    components: tuple[Component, ...] | None = None   # None: not scanned (components=False)
    errors: tuple[str, ...] = ()
    _source: Any = field(default=None, repr=False, compare=False, hash=False)

    # -- derived ----------------------------------------------------------------------------------
    @property
    def required_versions(self) -> dict[str, list[str]]:
        """{"libc.so.6": ["GLIBC_2.2.5", "GLIBC_2.34"], ...} in file order."""
        out: dict[str, list[str]] = {}
        for need in self.version_needs:
            out.setdefault(need.file, []).extend(v.name for v in need.versions)
        return out

    @property
    def max_versions(self) -> dict[str, str]:
        """Highest non-weak required version per prefix: {"GLIBC": "2.34", "GLIBCXX": "3.4.29", ...}."""
        best: dict[str, tuple[tuple[int, ...], str]] = {}
        for need in self.version_needs:
            for v in need.versions:
                m = _NUMERIC_VERSION.match(v.name)
                if v.weak or not m or m.group(1) not in MAX_VERSION_PREFIXES:
                    continue
                key = tuple(int(x) for x in m.group(2).split("."))
                if m.group(1) not in best or key > best[m.group(1)][0]:
                    best[m.group(1)] = (key, m.group(2))
        return {p: best[p][1] for p in MAX_VERSION_PREFIXES if p in best}

    @property
    def isa_level_needed(self) -> str | None:
        return self.gnu_properties.isa_level_needed if self.gnu_properties else None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["required_versions"] = self.required_versions
        out["max_versions"] = self.max_versions
        out["isa_level_needed"] = self.isa_level_needed
        return out

    # -- dynamic symbols, on demand ---------------------------------------------------------------------
    @contextmanager
    def open_symbols(self) -> Iterator["DynamicSymbols"]:
        """The file's dynamic symbols, for several queries in a row. Uses the ElfFile the facts
        were read from when it is still open, else maps the file again (and checks that it is
        the same file)."""
        src = self._source
        if isinstance(src, ElfFile) and not _is_closed(src):
            yield DynamicSymbols(src)
            return
        with ElfFile(self.path) as elf:
            if isinstance(src, tuple) and _identity(elf) != src:
                raise ElfError(f"{self.path}: the file changed since its facts were read")
            yield DynamicSymbols(elf)

    def symbols(self) -> Iterator["DynSymbol"]:
        """Every dynamic symbol, lazily (index 0, the null symbol, left out)."""
        with self.open_symbols() as syms:
            yield from syms

    def defines(self, name: str, version: str | None = None) -> bool:
        """Whether this file exports `name` (with `version`, when given) to other objects."""
        with self.open_symbols() as syms:
            return syms.defines(name, version)

    def needs_symbol(self, name: str, version: str | None = None) -> "DynSymbol | None":
        """The undefined dynamic symbol `name` (@`version`) this file imports, or None."""
        with self.open_symbols() as syms:
            return syms.needs_symbol(name, version)

    def lookup_symbol(self, name: str) -> list["DynSymbol"]:
        """Every dynamic symbol called `name`, defined or not, with its version."""
        with self.open_symbols() as syms:
            return syms.lookup(name)


def _is_closed(elf: ElfFile) -> bool:
    return isinstance(elf.data, mmap.mmap) and elf.data.closed


def _identity(elf: ElfFile) -> tuple[int, ...] | None:
    if getattr(elf, "_fd", -1) < 0:
        return None
    st = os.fstat(elf._fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


# -- where the tables are ----------------------------------------------------------------------------
class _Layout:
    """Locates the dynamic-linking tables of one file, recording every problem in `errors`."""

    def __init__(self, elf: ElfFile, errors: list[str]) -> None:
        self.elf = elf
        self.errors = errors
        self.sections: tuple[Section, ...] = self.part("section headers", lambda: elf.sections, ())
        self.segments = self.part("program headers", lambda: elf.segments, ())
        self._dyn: list[tuple[int, int]] | None = None
        self._dyn_section: Section | None = None
        self._strtab: StringTable | None | bool = False
        self._dynsym: tuple[int, int] | None | bool = False

    def part(self, what: str, fn: Callable[[], _F], default: _F) -> _F:
        try:
            return fn()
        except ElfError as exc:
            self.error(what, exc)
        except (struct.error, ValueError, IndexError, OverflowError, UnicodeError, KeyError) as exc:
            self.add(f"{what}: internal error: {type(exc).__name__}: {exc}")
        return default

    def error(self, what: str, exc: Exception) -> None:
        msg = str(exc)
        prefix = f"{self.elf.path}: "
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
        self.add(f"{what}: {msg}")

    def add(self, line: str) -> None:
        """One error line: control characters (from a corrupt name) shown escaped, no repeats."""
        line = _CONTROL.sub(lambda m: repr(m.group())[1:-1], line)
        if line not in self.errors:
            self.errors.append(line)

    def by_type(self, sh_type: int) -> Section | None:
        for s in self.sections:
            if s.type == sh_type and s.has_data:
                return s
        return None

    def in_file(self, s: Section) -> bool:
        return 0 <= s.offset and s.offset + s.size <= self.elf.size

    def linked_strtab(self, s: Section | None) -> StringTable | None:
        if s is not None and 0 < s.link < len(self.sections):
            t = self.sections[s.link]
            if t.type == SHT_STRTAB and t.has_data:
                return StringTable(self.elf, t.offset, t.size, t.name or "string table")
        return None

    # -- dynamic array ----------------------------------------------------------------------------
    @property
    def dynamic(self) -> list[tuple[int, int]]:
        if self._dyn is None:
            self._dyn = self._read_dynamic()
        return self._dyn

    def _read_dynamic(self) -> list[tuple[int, int]]:
        regions: list[tuple[str, int, int, Section | None]] = []
        sec = self.by_type(SHT_DYNAMIC)
        if sec is not None:
            regions.append((sec.name or "dynamic section", sec.offset, sec.size, sec))
        for seg in self.segments:
            if seg.type == PT_DYNAMIC:
                regions.append(("PT_DYNAMIC", seg.offset, seg.filesz, None))
                break
        for what, off, size, s in regions:
            out: list[tuple[int, int]] = []
            try:
                for entry in dynamic_entries(self.elf, off, size):
                    out.append(entry)
            except ElfError as exc:
                self.error(what, exc)
                if not out:
                    continue
            self._dyn_section = s
            return out
        return []

    def tag(self, tag: int) -> int | None:
        for t, v in self.dynamic:
            if t == tag:
                return v
        return None

    def at_vaddr(self, vaddr: int, what: str) -> tuple[int, int]:
        return vaddr_to_offset(self.elf, vaddr, what)

    # -- .dynstr ------------------------------------------------------------------------------------
    @property
    def strtab(self) -> StringTable | None:
        if self._strtab is False:
            self._strtab = self._find_strtab()
        return self._strtab  # type: ignore[return-value]

    def _find_strtab(self) -> StringTable | None:
        _ = self.dynamic
        try:
            t = self.linked_strtab(self._dyn_section)
            if t is not None:
                return t
        except ElfError as exc:
            self.error("dynamic string table", exc)
        addr, size = self.tag(DT_STRTAB), self.tag(DT_STRSZ)
        if addr is not None:
            try:
                off, avail = self.at_vaddr(addr, "DT_STRTAB")
                if size is None or size > avail:
                    raise ElfError(f"{self.elf.path}: DT_STRSZ {size} runs past the end of its segment ({avail:#x} bytes)"
                                   if size is not None else f"{self.elf.path}: DT_STRTAB without DT_STRSZ")
                return StringTable(self.elf, off, size, "DT_STRTAB")
            except ElfError as exc:
                self.error("dynamic string table", exc)
        for s in self.sections:
            if s.name == ".dynstr" and s.type == SHT_STRTAB:
                try:
                    return StringTable(self.elf, s.offset, s.size, ".dynstr")
                except ElfError as exc:
                    self.error("dynamic string table", exc)
        return None

    # -- tables: section first, then the dynamic tag --------------------------------------------------
    def table(self, sh_type: int, dt: int, what: str) -> tuple[int, int, Section | None] | None:
        """(offset, size, section) of a table: its section when there is one and it lies in the
        file, else the dynamic tag's address with the rest of its segment as the size."""
        s = self.by_type(sh_type)
        if s is not None:
            if self.in_file(s):
                return s.offset, s.size, s
            self.error(what, ElfError(f"section {s.name} ({s.offset:#x}+{s.size:#x}) runs past the end of the file"))
        addr = self.tag(dt)
        if addr is None:
            return None
        off, avail = self.at_vaddr(addr, what)
        return off, avail, None

    @property
    def dynsym(self) -> tuple[int, int] | None:
        """(offset, count) of the dynamic symbol table."""
        if self._dynsym is False:
            self._dynsym = self.part("dynamic symbols", self._find_dynsym, None)
        return self._dynsym  # type: ignore[return-value]

    def _find_dynsym(self) -> tuple[int, int] | None:
        entsize = symbol_entry_size(self.elf)
        s = self.by_type(SHT_DYNSYM)
        if s is not None:
            if s.entsize not in (0, entsize):
                raise ElfError(f"{s.name}: entry size {s.entsize}, expected {entsize}")
            if not self.in_file(s):
                raise ElfError(f"section {s.name} ({s.offset:#x}+{s.size:#x}) runs past the end of the file")
            return s.offset, s.size // entsize
        addr = self.tag(DT_SYMTAB)
        if addr is None:
            return None
        syment = self.tag(DT_SYMENT)
        if syment not in (None, entsize):
            raise ElfError(f"DT_SYMENT {syment}, expected {entsize}")
        off, avail = self.at_vaddr(addr, "DT_SYMTAB")
        count = None
        h = self.table(SHT_GNU_HASH, DT_GNU_HASH, "GNU hash table")
        if h is not None:
            count = GnuHashTable(self.elf, h[0], h[1]).symbol_count()
        else:
            h = self.table(SHT_HASH, DT_HASH, "hash table")
            if h is not None:
                count = SysvHashTable(self.elf, h[0], h[1]).nchain
        if count is None:
            raise ElfError("DT_SYMTAB without a hash table: the number of symbols is unknown")
        if count * entsize > avail:
            raise ElfError(f"{count} dynamic symbols run past the end of their segment")
        return off, count

    def versym(self) -> tuple[int, int] | None:
        t = self.table(SHT_GNU_VERSYM, DT_VERSYM, "symbol versions")
        return None if t is None else (t[0], t[1])


# -- reading the facts -----------------------------------------------------------------------------------
def read_elf_facts(source: str | os.PathLike[str] | ElfFile | bytes, *, components: bool = False) -> ElfFacts:
    """Facts about one ELF file. `source` is a path, an open ElfFile (kept open: the facts'
    symbol helpers use it) or the file's bytes. `components=True` also scans .rodata and
    .comment for embedded library versions (NCCL, cuDNN, ...), which reads those sections.

    Raises ElfError only when the file cannot be opened or is not ELF; every other problem is
    a line in `errors`."""
    if isinstance(source, ElfFile):
        return _read(source, components, source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        elf = ElfFile.from_bytes(bytes(source))
        return _read(elf, components, elf)
    with ElfFile(source) as elf:
        return _read(elf, components, _identity(elf))


def _read(elf: ElfFile, want_components: bool, keep: Any) -> ElfFacts:
    errors: list[str] = []
    lay = _Layout(elf, errors)
    part = lay.part
    out: dict[str, Any] = {}

    # dynamic section: NEEDED, SONAME, RPATH, RUNPATH, flags
    dyn = part("dynamic section", lambda: lay.dynamic, [])
    if dyn:
        strtab = lay.strtab
        needed, rpath, runpath = [], [], []
        for tag, val in dyn:
            if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
                name = {DT_NEEDED: "DT_NEEDED", DT_SONAME: "DT_SONAME", DT_RPATH: "DT_RPATH", DT_RUNPATH: "DT_RUNPATH"}[tag]
                if strtab is None:
                    lay.error(name, ElfError("no dynamic string table to read it from"))
                    continue
                text = part(name, lambda: strtab.get(val), None)
                if text is None:
                    continue
                if tag == DT_NEEDED:
                    needed.append(text)
                elif tag == DT_SONAME:
                    out.setdefault("soname", text)
                elif tag == DT_RPATH:
                    rpath.append(text)
                else:
                    runpath.append(text)
            elif tag == DT_FLAGS:
                out["dt_flags"] = _bits(val, DF_BITS)
            elif tag == DT_FLAGS_1:
                out["dt_flags_1"] = _bits(val, DF_1_BITS)
        out["needed"] = tuple(needed)
        if rpath:
            out["rpath"] = ":".join(rpath)
        if runpath:
            out["runpath"] = ":".join(runpath)

    # program headers: interpreter, stack, TLS
    if lay.segments:
        stack = next((s for s in lay.segments if s.type == PT_GNU_STACK), None)
        if stack is not None:
            out["stack_flags"] = "".join(c for bit, c in ((PF_R, "R"), (PF_W, "W"), (PF_X, "E")) if stack.flags & bit)
            out["exec_stack"] = bool(stack.flags & PF_X)
        else:
            out["exec_stack"] = True   # ld.so's default without PT_GNU_STACK (x86, arm, aarch64, ...)
        tls = next((s for s in lay.segments if s.type == PT_TLS), None)
        if tls is not None:
            out["tls_size"] = tls.memsz
        interp = next((s for s in lay.segments if s.type == PT_INTERP), None)
        if interp is not None:
            out["interpreter"] = part("PT_INTERP", lambda: _interp(elf, interp.offset, interp.filesz), None)
    if "interpreter" not in out:
        s = next((s for s in lay.sections if s.name == ".interp" and s.has_data), None)
        if s is not None:
            out["interpreter"] = part(".interp", lambda: _interp(elf, s.offset, s.size), None)

    # symbol versions
    out["version_needs"] = tuple(part("version needs", lambda: _version_needs(lay), []))
    out["version_defs"] = tuple(part("version definitions", lambda: _version_defs(lay), []))
    dynsym = lay.dynsym
    if dynsym is not None:
        out["dynsym_count"] = dynsym[1]

    # notes and .comment
    part("notes", lambda: _notes(lay, out), None)
    comment = part(".comment", lambda: _comment(lay), ())
    out["comment"] = comment
    out["producers"] = tuple(p for p in (_producer(c) for c in comment) if p is not None)

    if want_components:
        out["components"] = tuple(part("components", lambda: _components(lay, out), []))

    return ElfFacts(
        path=elf.path,
        elf_class=f"ELF{elf.bits}",
        bits=elf.bits,
        endian="little" if elf.endian == "<" else "big",
        machine=elf.machine_name,
        e_machine=elf.e_machine,
        type=elf.type_name,
        e_type=elf.e_type,
        errors=tuple(errors),
        _source=keep,
        **out,
    )


def _interp(elf: ElfFile, offset: int, size: int) -> str:
    raw = elf.read(offset, min(size, 4096), "interpreter path")
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _version_strings(lay: _Layout, s: Section | None) -> StringTable:
    t = lay.linked_strtab(s) if s is not None else None
    t = t or lay.strtab
    if t is None:
        raise ElfError(f"{lay.elf.path}: no string table for the version names")
    return t


def _version_needs(lay: _Layout) -> list[VersionNeed]:
    t = lay.table(SHT_GNU_VERNEED, DT_VERNEED, "version needs")
    if t is None:
        return []
    off, size, sec = t
    strings = _version_strings(lay, sec)
    declared = sec.info if sec is not None and sec.info else lay.tag(DT_VERNEEDNUM)
    out: list[VersionNeed] = []
    try:
        for vn in iter_verneed(lay.elf, off, size, strings, None if sec is not None else declared):
            out.append(VersionNeed(vn.file, tuple(VersionRef(a.name, a.other, a.flags, bool(a.flags & VER_FLG_WEAK))
                                                  for a in vn.aux)))
    except ElfError as exc:
        lay.error("version needs", exc)
    if sec is not None and declared and declared != len(out) and not any(e.startswith("version needs") for e in lay.errors):
        lay.add(f"version needs: the section declares {declared} files, its chain has {len(out)}")
    return out


def _version_defs(lay: _Layout) -> list[VersionDef]:
    t = lay.table(SHT_GNU_VERDEF, DT_VERDEF, "version definitions")
    if t is None:
        return []
    off, size, sec = t
    strings = _version_strings(lay, sec)
    declared = sec.info if sec is not None and sec.info else lay.tag(DT_VERDEFNUM)
    out: list[VersionDef] = []
    try:
        for vd in iter_verdef(lay.elf, off, size, strings, None if sec is not None else declared):
            out.append(VersionDef(vd.index, vd.names[0] if vd.names else "", vd.flags, bool(vd.flags & VER_FLG_BASE),
                                  vd.names[1:]))
    except ElfError as exc:
        lay.error("version definitions", exc)
    if sec is not None and declared and declared != len(out) and not any(e.startswith("version definitions") for e in lay.errors):
        lay.add(f"version definitions: the section declares {declared} entries, its chain has {len(out)}")
    return out


def _note_regions(lay: _Layout) -> list[tuple[str, int, int, int]]:
    if lay.sections:
        return [(s.name or "note section", s.offset, s.size, s.addralign) for s in lay.sections
                if s.type == SHT_NOTE and s.has_data and s.name not in _SKIP_NOTE_SECTIONS]
    return [("PT_NOTE", s.offset, s.filesz, s.align) for s in lay.segments if s.type == PT_NOTE]


def _notes(lay: _Layout, out: dict[str, Any]) -> None:
    elf = lay.elf
    props: dict[int, int] = {}
    other: list[tuple[int, str]] = []
    seen_props = False
    for what, off, size, align in _note_regions(lay):
        try:
            for note in iter_notes(elf, off, size, align, what):
                if note.name == "GNU":
                    if note.type == NT_GNU_BUILD_ID and "build_id" not in out:
                        out["build_id"] = note.desc.hex()
                    elif note.type == NT_GNU_ABI_TAG and "abi_tag" not in out and len(note.desc) >= 16:
                        os_, a, b, c = struct.unpack_from(elf.endian + "IIII", note.desc)
                        out["abi_tag"] = AbiTag(ABI_OS.get(os_, f"os {os_}"), f"{a}.{b}.{c}")
                    elif note.type == NT_GNU_GOLD_VERSION and "gold_version" not in out:
                        out["gold_version"] = note.desc.split(b"\0", 1)[0].decode("utf-8", "replace")
                    elif note.type == NT_GNU_PROPERTY_TYPE_0:
                        seen_props = True
                        try:
                            _properties(elf, note.desc, props, other)
                        except ElfError as exc:
                            lay.error(what, exc)
                elif note.name == "FDO" and note.type == NT_FDO_PACKAGING_METADATA and "package_text" not in out:
                    text = note.desc.split(b"\0", 1)[0].decode("utf-8", "replace")
                    out["package_text"] = text
                    try:
                        pkg = json.loads(text)
                        out["package"] = pkg if isinstance(pkg, dict) else {"value": pkg}
                    except ValueError as exc:
                        lay.add(f"{what}: package note is not JSON: {exc}")
        except ElfError as exc:
            lay.error(what, exc)
    if seen_props:
        out["gnu_properties"] = _decode_properties(elf.e_machine, props, other)


def _properties(elf: ElfFile, desc: bytes, props: dict[int, int], other: list[tuple[int, str]]) -> None:
    step = 8 if elf.bits == 64 else 4
    pos = 0
    while len(desc) - pos >= 8:
        pr_type, size = struct.unpack_from(elf.endian + "II", desc, pos)
        at = pos + 8
        if at + size > len(desc):
            raise ElfError(f"{elf.path}: GNU property {pr_type:#x} ({size} bytes) runs past the end of its note")
        if size == 4 and pr_type >= 0xC0000000 or pr_type == 0xB0008000:
            value = struct.unpack_from(elf.endian + "I", desc, at)[0] if size == 4 else 0
            props[pr_type] = props.get(pr_type, 0) | value
        else:
            other.append((pr_type, desc[at:at + size].hex()))
        pos = at + ((size + step - 1) & -step)


def _decode_properties(machine: int, props: dict[int, int], other: list[tuple[int, str]]) -> GnuProperties:
    kw: dict[str, Any] = {}
    rest = dict(props)
    if machine in (EM_386, EM_X86_64):
        for key, prop, names in (("isa_needed", GNU_PROPERTY_X86_ISA_1_NEEDED, X86_ISA_BITS),
                                 ("isa_used", GNU_PROPERTY_X86_ISA_1_USED, X86_ISA_BITS),
                                 ("x86_features", GNU_PROPERTY_X86_FEATURE_1_AND, X86_FEATURE_1_BITS),
                                 ("features_used", GNU_PROPERTY_X86_FEATURE_2_USED, X86_FEATURE_2_BITS),
                                 ("features_needed", GNU_PROPERTY_X86_FEATURE_2_NEEDED, X86_FEATURE_2_BITS)):
            if prop in rest:
                value = rest.pop(prop)
                kw[key] = _bits(value, names)
                if key in ("isa_needed", "isa_used", "x86_features"):
                    kw[key + "_bits"] = value
    elif machine == EM_AARCH64 and GNU_PROPERTY_AARCH64_FEATURE_1_AND in rest:
        kw["aarch64_features"] = _bits(rest.pop(GNU_PROPERTY_AARCH64_FEATURE_1_AND), AARCH64_FEATURE_1_BITS)
    extra = [(t, v.to_bytes(4, "little").hex()) for t, v in sorted(rest.items())]
    return GnuProperties(**kw, other=tuple(other + extra))


def _comment(lay: _Layout) -> tuple[str, ...]:
    out: list[str] = []
    for s in lay.sections:
        if s.name != ".comment" or not s.has_data:
            continue
        raw = lay.elf.read(s.offset, min(s.size, _MAX_COMMENT), ".comment")
        for piece in raw.split(b"\0"):
            text = piece.decode("utf-8", "replace").strip()
            if text and text not in out:
                out.append(text)
    return tuple(out)


_PRODUCERS = (
    (re.compile(r"GCC: \(.*\) (\d+\.\d+(?:\.\d+)?)"), "GCC"),
    (re.compile(r"GCC: (\d+\.\d+(?:\.\d+)?)"), "GCC"),
    (re.compile(r"\bclang version (\d+\.\d+(?:\.\d+)?)"), "clang"),
    (re.compile(r"Linker: LLD (\d+\.\d+(?:\.\d+)?)"), "LLD"),
    (re.compile(r"Intel\(R\) oneAPI DPC\+\+/C\+\+ Compiler (\d+\.\d+(?:\.\d+)?)"), "Intel oneAPI DPC++/C++"),
    (re.compile(r"rustc version (\d+\.\d+(?:\.\d+)?)"), "rustc"),
    (re.compile(r"\bNVIDIA.*?\b(?:nvcc|NVVM|CUDA)\b.*?(\d+\.\d+(?:\.\d+)?)"), "NVIDIA"),
)


def _producer(text: str) -> Producer | None:
    for rx, tool in _PRODUCERS:
        m = rx.search(text)
        if m:
            return Producer(tool, m.group(1), text)
    return None


# -- embedded component versions (only when asked) ---------------------------------------------------
# (needle found with a fast substring search, pattern matched at the hit, component, formatter)
_COMPONENT_PATTERNS: tuple[tuple[bytes, re.Pattern[bytes], Callable[[re.Match[bytes]], list[tuple[str, str]]]], ...] = (
    # NCCL's init banner, e.g. "NCCL version 2.30.7+cuda13.3" (also "... compiled with CUDA 13.3")
    (b"NCCL version ", re.compile(rb"NCCL version (\d+\.\d+\.\d+)(?:(?:\+cuda| compiled with CUDA )(\d+\.\d+))?"),
     lambda m: [("nccl", m.group(1).decode())] + ([("cuda (nccl build)", m.group(2).decode())] if m.group(2) else [])),
    # cuDNN 9 graph library: "cudnn_version_9_24_0_43_" and the NVRTC it was built with
    (b"cudnn_version_", re.compile(rb"(?<!nvrtc_)cudnn_version_(\d+)_(\d+)_(\d+)(?:_(\d+))?"),
     lambda m: [("cudnn", ".".join(g.decode() for g in m.groups() if g is not None))]),
    (b"cudnn_nvrtc_version_", re.compile(rb"cudnn_nvrtc_version_(\d+)_(\d+)_(\d+)"),
     lambda m: [("nvrtc (cudnn build)", ".".join(g.decode() for g in m.groups()))]),
)
_MAX_HITS_PER_PATTERN = 16
_SCAN_SECTIONS = re.compile(r"\.(l?rodata(\..*)?|comment)\Z")
# CUDA libraries whose major version their SONAME/NEEDED names carry.
_CUDA_SONAME = re.compile(r"lib(cudart|cublas|cublasLt|cudnn|nccl|nvrtc|cufft|curand|cusparse|cusolver|"
                          r"nvJitLink|cupti|nvToolsExt|cuda)\.so\.(\d+(?:\.\d+)*)\Z")


def scan_components(source: str | os.PathLike[str] | ElfFile) -> list[Component]:
    """Embedded component versions of one file (see read_elf_facts(components=True))."""
    return list(read_elf_facts(source, components=True).components or ())


def _components(lay: _Layout, facts: dict[str, Any], max_bytes: int = 1 << 30) -> list[Component]:
    out: list[Component] = []
    seen: set[tuple[str, str]] = set()

    def add(c: Component) -> None:
        if (c.name, c.version) not in seen:
            seen.add((c.name, c.version))
            out.append(c)

    for where, names in (("DT_SONAME", [facts["soname"]] if facts.get("soname") else []),
                         ("DT_NEEDED", list(facts.get("needed", ())))):
        for n in names:
            m = _CUDA_SONAME.match(n)
            if m:
                add(Component(m.group(1).lower(), m.group(2), n, where))
    data = lay.elf.data
    budget = max_bytes
    for s in lay.sections:
        if not s.has_data or not _SCAN_SECTIONS.match(s.name) or budget <= 0:
            continue
        if not lay.in_file(s):
            lay.add(f"components: section {s.name} runs past the end of the file")
            continue
        start, end = s.offset, s.offset + min(s.size, budget)
        budget -= end - start
        for needle, rx, fmt in _COMPONENT_PATTERNS:
            pos, hits = start, 0
            while hits < _MAX_HITS_PER_PATTERN:
                pos = data.find(needle, pos, end)
                if pos < 0:
                    break
                hits += 1
                if pos > start and data[pos - 1] != 0:  # only strings that start with the needle
                    pos += len(needle)                 # ("... requires NCCL version 2.27.0" is no banner)
                    continue
                window = bytes(data[max(start, pos - 8):min(end, pos + 160)])
                m = rx.match(window, min(8, pos - start))
                if m:
                    text = window[m.start():m.end()].decode("ascii", "replace")
                    for name, version in fmt(m):
                        add(Component(name, version, text, s.name, pos))
                pos += len(needle)
    return out


# -- dynamic symbols -----------------------------------------------------------------------------------
class DynSymbol(NamedTuple):
    """One dynamic symbol (a named tuple: cheap to make by the hundred thousand)."""
    index: int
    name: str
    version: str | None          # "GLIBC_2.34"; None: unversioned (or versions unreadable)
    version_file: str | None     # for a required version: the library it must come from
    default_version: bool        # False for a hidden version (name@VER), True for name@@VER / unversioned
    defined: bool
    type: str                    # FUNC, OBJECT, NOTYPE, TLS, IFUNC, ...
    binding: str                 # GLOBAL, WEAK, LOCAL, UNIQUE
    visibility: str
    value: int
    size: int
    shndx: int

    def __str__(self) -> str:
        if not self.version:
            return self.name
        return f"{self.name}{'@@' if self.defined and self.default_version else '@'}{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class DynamicSymbols:
    """The dynamic symbols of an open ElfFile, read lazily.

    len() is free; iteration decodes one symbol at a time; `defines()` uses the GNU or SysV hash
    table when there is one (a few reads), `needs_symbol()`/`lookup()` scan only the name column.
    Problems go to `errors` (iteration raises ElfError when the table itself is unreadable)."""

    def __init__(self, elf: ElfFile, errors: list[str] | None = None) -> None:
        self.elf = elf
        self.errors: list[str] = [] if errors is None else errors
        self._lay = _Layout(elf, self.errors)
        tab = self._lay.dynsym
        self.offset, self.count = tab if tab is not None else (0, 0)
        self._versions: dict[int, tuple[str, str | None]] | None = None
        self._versym: array.array | None | bool = False
        self._names: array.array | None = None

    def __len__(self) -> int:
        return max(0, self.count - 1) if self.count else 0

    # -- versions ---------------------------------------------------------------------------------------
    def _version_map(self) -> dict[int, tuple[str, str | None]]:
        if self._versions is None:
            vm: dict[int, tuple[str, str | None]] = {}
            for need in self._lay.part("version needs", lambda: _version_needs(self._lay), []):
                for v in need.versions:
                    vm[v.index & 0x7FFF] = (v.name, need.file)
            for d in self._lay.part("version definitions", lambda: _version_defs(self._lay), []):
                if not d.base:
                    vm[d.index & 0x7FFF] = (d.name, None)
            self._versions = vm
        return self._versions

    def _versym_array(self) -> array.array | None:
        if self._versym is False:
            def load() -> array.array | None:
                t = self._lay.versym()
                if t is None:
                    return None
                off, size = t
                n = min(self.count, size // 2)
                arr = array.array("H", self.elf.read(off, n * 2, ".gnu.version"))
                if (self.elf.endian == "<") != (sys.byteorder == "little"):
                    arr.byteswap()
                return arr
            self._versym = self._lay.part("symbol versions", load, None)
        return self._versym  # type: ignore[return-value]

    def _strtab(self) -> StringTable:
        t = self._lay.strtab
        if t is None:
            raise ElfError(f"{self.elf.path}: no dynamic string table for the symbol names")
        return t

    # -- decoding -------------------------------------------------------------------------------------
    def _decode(self, start: int, stop: int) -> Iterator[DynSymbol]:
        """Symbols start..stop-1, decoded in one loop (names, versions, info)."""
        strtab = self._strtab()
        data, base, tsize = self.elf.data, strtab.offset, strtab.size
        end = base + tsize
        vs = self._versym_array()
        vmap = self._version_map() if vs is not None else {}
        nvs = len(vs) if vs is not None else 0
        versions: dict[int, tuple[str | None, str | None, bool]] = {}
        types: dict[int, tuple[str, str]] = {}
        for i, (st_name, info, other, shndx, value, size) in enumerate(
                iter_symbols(self.elf, self.offset, stop, start), start):
            name = ""
            if st_name:
                at = base + st_name
                nul = data.find(b"\0", at, end) if st_name < tsize else -1
                if nul >= 0:
                    name = data[at:nul].decode("utf-8", "replace")
                else:
                    self._lay.add(f"symbol {i}: name offset {st_name:#x} is outside {strtab.what} or not terminated")
                    name = f"<corrupt name {st_name:#x}>"
            ver = versions.get(vs[i]) if i < nvs else (None, None, True)  # type: ignore[index]
            if ver is None:
                ndx = vs[i]  # type: ignore[index]
                entry = vmap.get(ndx & 0x7FFF) if ndx & 0x7FFF > 1 else None
                ver = versions[ndx] = (entry[0], entry[1], not ndx & VERSYM_HIDDEN) if entry else \
                    (None, None, not ndx & VERSYM_HIDDEN)
            ti = types.get(info)
            if ti is None:
                ti = types[info] = (SYM_TYPES.get(info & 0xF, f"type{info & 0xF}"), SYM_BINDS.get(info >> 4, f"bind{info >> 4}"))
            yield DynSymbol(i, name, ver[0], ver[1], ver[2], shndx != 0, ti[0], ti[1], SYM_VISIBILITY[other & 3],
                            value, size, shndx)

    def symbol(self, i: int) -> DynSymbol:
        if not 0 <= i < self.count:
            raise ElfError(f"{self.elf.path}: dynamic symbol {i} does not exist ({self.count} symbols)")
        return next(self._decode(i, i + 1))

    def __iter__(self) -> Iterator[DynSymbol]:
        if self.count > 1:
            yield from self._decode(1, self.count)

    def undefined(self) -> Iterator[DynSymbol]:
        return (s for s in self if not s.defined)

    # -- queries ------------------------------------------------------------------------------------------
    def _name_column(self) -> array.array:
        if self._names is None:
            entsize = symbol_entry_size(self.elf)
            raw = self.elf.read(self.offset, self.count * entsize, ".dynsym")
            col = array.array("I", raw)
            if (self.elf.endian == "<") != (sys.byteorder == "little"):
                col.byteswap()
            self._names = col[::entsize // 4]
        return self._names

    def _indexes_named(self, name: bytes) -> list[int]:
        if self.count == 0:
            return []
        offs = self._strtab().indexes_of(name)
        if not offs:
            return []
        col = self._name_column()
        if len(offs) > 8:
            wanted = set(offs)
            return [i for i, o in enumerate(col) if o in wanted and i]
        out: list[int] = []
        for off in offs:
            i = 0
            while True:
                try:
                    i = col.index(off, i + 1)
                except ValueError:
                    break
                out.append(i)
        return sorted(out)

    def lookup(self, name: str) -> list[DynSymbol]:
        """Every dynamic symbol called `name` (defined or not), in table order."""
        return [self.symbol(i) for i in self._indexes_named(name.encode())]

    def _hash_candidates(self, name: bytes) -> list[int] | None:
        lay = self._lay
        try:
            t = lay.table(SHT_GNU_HASH, DT_GNU_HASH, "GNU hash table")
            if t is not None:
                return list(GnuHashTable(self.elf, t[0], t[1]).candidates(name, self.count))
            t = lay.table(SHT_HASH, DT_HASH, "hash table")
            if t is not None:
                h = SysvHashTable(self.elf, t[0], t[1])
                return [i for i in h.candidates(name) if i < self.count]
        except ElfError as exc:
            lay.error("symbol hash table", exc)
        return None

    def defined_named(self, name: str, version: str | None = None) -> list[DynSymbol]:
        """The exported definitions of `name` (all versions, or only `version`)."""
        raw = name.encode()
        idx = self._hash_candidates(raw)
        if idx is None:
            idx = self._indexes_named(raw)
        out = []
        for i in idx:
            s = self.symbol(i)
            if s.name == name and s.defined and s.binding != "LOCAL" and (version is None or s.version == version):
                out.append(s)
        return out

    def defines(self, name: str, version: str | None = None) -> bool:
        return bool(self.defined_named(name, version))

    def needs_symbol(self, name: str, version: str | None = None) -> DynSymbol | None:
        for i in self._indexes_named(name.encode()):
            s = self.symbol(i)
            if not s.defined and (version is None or s.version == version):
                return s
        return None
