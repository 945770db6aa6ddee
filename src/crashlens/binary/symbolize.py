"""Names for addresses of a crashed process: function, offset, source file and line, inlined calls.

    symbolize(pc, module, *, core=None, file_resolver=None, debug_dirs=("/usr/lib/debug",),
              sysroot=None, return_address=False) -> Symbol
    Symbolizer(core, ...)            the same with every file opened once and cached (the unwinder's)
    ModuleFiles(core, ...)           a core's mapped files found on this machine, verified by build-id
    find_debug_file(elf, path, debug_dirs) -> (path, ElfFile) | None
    demangle(names) -> {mangled: demangled}

Where a module's names come from, best first:
  1. a separate debug file (objcopy --only-keep-debug), found like gdb finds one:
     by build-id, `<dir>/.build-id/xx/yyyy.debug` for each debug dir (and the same dirs under
     `sysroot`); then by `.gnu_debuglink`: next to the file, in its `.debug/` subdirectory, and
     `<debug dir>/<the file's directory>/`. The debug file must carry the module's build-id (or,
     without one, the debuglink CRC32) to be used;
  2. the module's own `.symtab`, else its `.dynsym` (+ `.eh_frame` FDE ranges for functions
     without a symbol: binary.symbols.locate_function).
A mapped file is found with `file_resolver(path)` (default: the same path on this machine) and
used only when its GNU build-id equals the one the core holds for the module (read from the
core's copy of the module's ELF header); a mismatch is reported in `notes` and the file is not
used, as if it were missing.

C++ names are demangled with binutils' `c++filt`, one process per batch of names, when it is on
PATH; otherwise the mangled name stays. (The `cxxfilt` PyPI package, a ctypes binding to
libstdc++'s __cxa_demangle, was considered: its last release is from 2021 and it is not
maintained, so it is not a dependency.)

File and line come from the DWARF line table (`.debug_line`, DWARF 2 to 5) of the debug file or
the module: the compilation unit is found through `.debug_aranges` (else the units' own address
ranges), its line program is executed once by a small interpreter here (pyelftools parses the
headers) and kept as a sorted table. Inlined calls come from the unit's DIE tree, descending
only into the subprogram, lexical blocks and inlined subroutines that contain the address
(DW_AT_sibling skips the rest). Both are bounded in time per module (`LINE_BUDGET_S`): past the
budget, the symbol has no line and a note says so.

A return address (every frame but the first, and those after a signal frame) is looked up at
pc - 1: the call instruction, not the one after it, which may belong to the next line or
even the next function.

Offsets: `Symbol.offset` is pc - function start (gdb's `<fn+off>`); `Symbol.module_address` is
the address as the ELF file numbers it (objdump, addr2line); pc - module base (dmesg's and
minidumps' `lib.so+off`) is the unwinder's `Frame.module_offset`.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
import zlib
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable

from .core import Core, Module
from .elf import ElfError, ElfFile, PT_LOAD
from .readers import LEB128Error, build_id, sleb128, uleb128
from .symbols import Function, locate_function

__all__ = ["DEBUG_DIRS", "InlinedCall", "ModuleFile", "ModuleFiles", "Symbol", "Symbolizer", "demangle",
           "find_debug_file", "symbolize"]

DEBUG_DIRS = ("/usr/lib/debug",)
LINE_BUDGET_S = 2.0              # DWARF work per module, seconds
MAX_LINE_ROWS = 5_000_000
MAX_DEBUG_SECTION = 2 << 30      # a .debug_info/.debug_line larger than this is not read

Resolver = Callable[[str], "str | os.PathLike[str] | None"]


# -- results --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InlinedCall:
    """A function inlined at the address, innermost first, and where it is in its source."""

    function: str
    file: str | None
    line: int | None

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class Symbol:
    function: str | None             # demangled
    offset: int | None               # pc - function start
    file: str | None
    line: int | None
    inlined: tuple[InlinedCall, ...] = ()
    mangled: str | None = None       # the symbol's own name when it was demangled
    source: str | None = None        # where the name came from: "debug-file .symtab", ".symtab", ".dynsym", "eh_frame"
    module_address: int | None = None  # the address in the ELF file's numbering
    function_start: int | None = None  # in the ELF file's numbering

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"function": self.function, "offset": hex(self.offset) if self.offset is not None else None,
                               "file": self.file, "line": self.line}
        if self.inlined:
            out["inlined"] = [i.to_json() for i in self.inlined]
        return out


# -- demangling -----------------------------------------------------------------------------------

_DEMANGLED: dict[str, str] = {}


def demangle(names: Iterable[str]) -> dict[str, str]:
    """{name: demangled} for the C++ (Itanium ABI) names among `names`, through one c++filt
    process; names c++filt cannot demangle, or all of them when it is missing, map to themselves."""
    todo = sorted({n for n in names if n and n.startswith("_Z") and n not in _DEMANGLED and "\n" not in n})
    if todo:
        tool = shutil.which("c++filt")
        out: list[str] | None = None
        if tool is not None:
            try:
                proc = subprocess.run([tool], input="\n".join(todo) + "\n", capture_output=True, text=True,
                                      timeout=20)
                lines = proc.stdout.split("\n")
                if proc.returncode == 0 and len(lines) >= len(todo):
                    out = lines[:len(todo)]
            except (OSError, subprocess.SubprocessError):
                out = None
        for i, n in enumerate(todo):
            _DEMANGLED[n] = out[i].strip() if out and out[i].strip() else n
    return {n: _DEMANGLED.get(n, n) for n in names if n}


def demangler_available() -> bool:
    return shutil.which("c++filt") is not None


# -- finding files ----------------------------------------------------------------------------------

def _build_id(elf: ElfFile) -> str | None:
    try:
        return build_id(elf)
    except ElfError:
        return None


def _debuglink(elf: ElfFile) -> tuple[str, int] | None:
    try:
        sec = elf.section(".gnu_debuglink")
        if sec is None or not sec.has_data or sec.size < 8:
            return None
        raw = bytes(elf.section_data(sec))
    except ElfError:
        return None
    end = raw.find(b"\0")
    if end <= 0:
        return None
    name = raw[:end].decode("utf-8", "replace")
    crc_at = (end + 4) & ~3
    if crc_at + 4 > len(raw):
        return None
    crc = struct.unpack_from(elf.endian + "I", raw, crc_at)[0]
    if "/" in name or name in (".", ".."):
        return None
    return name, crc


def _crc32_file(path: str, limit: int = 4 << 30) -> int | None:
    try:
        if os.path.getsize(path) > limit:
            return None
        crc = 0
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    return crc & 0xFFFFFFFF
                crc = zlib.crc32(chunk, crc)
    except OSError:
        return None


def _useful_debug(elf: ElfFile) -> bool:
    try:
        return any(s.name in (".symtab", ".debug_info", ".debug_line", ".debug_frame", ".zdebug_info")
                   and s.has_data and s.size for s in elf.sections)
    except ElfError:
        return False


def debug_file_candidates(elf: ElfFile, local_path: str | None, debug_dirs: Iterable[str],
                          build_id: str | None = None) -> list[tuple[str, str]]:
    """(path, how) of the places a separate debug file is looked for, in gdb's order."""
    dirs = [d for d in debug_dirs if d]
    out: list[tuple[str, str]] = []
    bid = build_id or _build_id(elf)
    if bid and len(bid) > 2:
        for d in dirs:
            out.append((os.path.join(d, ".build-id", bid[:2], bid[2:] + ".debug"), "build-id"))
    link = _debuglink(elf)
    if link is not None and local_path:
        name = link[0]
        here = os.path.dirname(os.path.abspath(local_path))
        out.append((os.path.join(here, name), "debuglink"))
        out.append((os.path.join(here, ".debug", name), "debuglink"))
        for d in dirs:
            out.append((os.path.join(d, here.lstrip("/"), name), "debuglink"))
    return out


def find_debug_file(elf: ElfFile, local_path: str | None, debug_dirs: Iterable[str] = DEBUG_DIRS,
                    notes: list[str] | None = None) -> tuple[str, ElfFile, str] | None:
    """(path, open ElfFile, how found) of `elf`'s separate debug file, or None. A candidate is
    taken only when it carries the same build-id (or, for a file without one, the debuglink's
    CRC32) and has symbols, DWARF or CFI."""
    bid = _build_id(elf)
    link = _debuglink(elf)
    seen: set[str] = set()
    own = os.path.realpath(local_path) if local_path else None
    for cand, how in debug_file_candidates(elf, local_path, debug_dirs, bid):
        real = os.path.realpath(cand)
        if real in seen or real == own or not os.path.isfile(cand):
            continue
        seen.add(real)
        try:
            dbg = ElfFile(cand)
        except ElfError as exc:
            if notes is not None:
                notes.append(f"debug file {cand}: {exc}")
            continue
        other = _build_id(dbg)
        ok = (other == bid) if bid else (link is not None and _crc32_file(cand) == link[1])
        if ok and _useful_debug(dbg):
            return cand, dbg, how
        if not ok and notes is not None:
            notes.append(f"debug file {cand} belongs to another build (build-id {other or 'none'}, "
                         f"wanted {bid or 'crc ' + hex(link[1]) if link else bid}): not used")
        dbg.close()
    return None


def _same_path(path: str) -> str | None:
    if path.startswith(("/proc/", "/sys/", "/dev/")):
        return None
    return path if os.path.isfile(path) else None


def _debug_roots(debug_dirs: Iterable[str], sysroot: str | os.PathLike[str] | None) -> tuple[str, ...]:
    dirs = [os.fspath(d) for d in debug_dirs]
    if sysroot:
        root = os.fspath(sysroot)
        dirs = [os.path.join(root, d.lstrip("/")) for d in dirs] + dirs
    return tuple(dict.fromkeys(dirs))


@dataclass
class ModuleFile:
    """One mapped file of a core and what was found for it on this machine."""

    path: str                              # as the core names it (NT_FILE)
    base: int | None                       # load base in the process
    build_id: str | None                   # from the core's copy of its ELF header
    local: str | None = None               # the file here
    elf: ElfFile | None = None             # open when found and not mismatched
    build_id_match: bool | None = None
    local_build_id: str | None = None
    bias: int | None = None                # process address - file virtual address
    debug_path: str | None = None
    debug: ElfFile | None = None
    debug_how: str | None = None
    notes: list[str] = field(default_factory=list)
    cache: dict = field(default_factory=dict)

    @property
    def mismatch(self) -> bool:
        return self.build_id_match is False

    def vaddr(self, pc: int) -> int | None:
        return None if self.bias is None else pc - self.bias

    def symbol_files(self) -> list[tuple[ElfFile, str]]:
        out = []
        if self.debug is not None:
            out.append((self.debug, "debug file"))
        if self.elf is not None:
            out.append((self.elf, "file"))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "build_id": self.build_id, "found_at": self.local,
                "mismatch": self.build_id_match is False, "local_build_id": self.local_build_id,
                "debug_file": self.debug_path, "base": hex(self.base) if self.base is not None else None,
                "notes": list(self.notes)}

    def close(self) -> None:
        lines = self.cache.pop("lines", None)
        if lines is not None:
            lines.close()
        for e in (self.debug, self.elf):
            if e is not None:
                e.close()
        self.debug = self.elf = None


_SKIP = ("[", "/memfd:", "/dev/", "anon_inode:", "/SYSV", "/proc/")


class ModuleFiles:
    """The files of a core's modules, found, verified and opened once each."""

    def __init__(self, core: Core | None, file_resolver: Resolver | None = None,
                 debug_dirs: Iterable[str] = DEBUG_DIRS, sysroot: str | os.PathLike[str] | None = None) -> None:
        self.core = core
        self.resolver = file_resolver or _same_path
        self.debug_dirs = _debug_roots(debug_dirs, sysroot)
        self._by_path: dict[str, ModuleFile] = {}

    def close(self) -> None:
        for mf in self._by_path.values():
            mf.close()
        self._by_path.clear()

    def __enter__(self) -> "ModuleFiles":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def all(self) -> list[ModuleFile]:
        return list(self._by_path.values())

    def module_at(self, pc: int) -> Module | None:
        if self.core is None:
            return None
        return self.core.module_of(pc)

    def get(self, module: Module | str) -> ModuleFile:
        path = module if isinstance(module, str) else module.path
        hit = self._by_path.get(path)
        if hit is not None:
            return hit
        if isinstance(module, str):
            mf = ModuleFile(path, 0, None)
            self._open_standalone(mf)
        else:
            mf = ModuleFile(module.path, module.base, module.build_id)
            self._open(mf, module)
        self._by_path[path] = mf
        return mf

    def _open_standalone(self, mf: ModuleFile) -> None:
        try:
            mf.elf = ElfFile(mf.path)
        except ElfError as exc:
            mf.notes.append(str(exc))
            return
        mf.local = mf.path
        mf.local_build_id = mf.build_id = _build_id(mf.elf)
        mf.bias = 0
        self._find_debug(mf)

    def _open(self, mf: ModuleFile, module: Module) -> None:
        path = module.path
        want = path[:-10] if path.endswith(" (deleted)") else path
        if not want or want.startswith(_SKIP):
            if not want.startswith("["):
                mf.notes.append(f"{path}: not a file")
            return
        try:
            local = self.resolver(want)
        except Exception as exc:  # noqa: BLE001 - a caller's resolver must not end the analysis
            mf.notes.append(f"{want}: the file resolver failed: {type(exc).__name__}: {exc}")
            local = None
        if local is None:
            mf.notes.append(f"{want}: not found on this machine")
            return
        local = os.fspath(local)
        try:
            elf = ElfFile(local)
        except ElfError as exc:
            mf.notes.append(f"{want}: {exc}")
            return
        mf.local = local
        mf.local_build_id = _build_id(elf)
        if mf.build_id and mf.local_build_id:
            mf.build_id_match = mf.build_id == mf.local_build_id
        if mf.build_id_match is False:
            mf.notes.append(f"{want}: build-id mismatch: the core's is {mf.build_id}, {local} has "
                            f"{mf.local_build_id}; that file is another build and is not used")
            elf.close()
            return
        if mf.build_id is None:
            mf.notes.append(f"{want}: the core holds no build-id for it; {local} is used unverified")
        mf.elf = elf
        mf.bias = _bias(elf, module)
        if mf.bias is None:
            mf.notes.append(f"{want}: its mappings do not match {local}'s loadable segments")
        self._find_debug(mf)

    def _find_debug(self, mf: ModuleFile) -> None:
        if mf.elf is None:
            return
        found = find_debug_file(mf.elf, mf.local, self.debug_dirs, mf.notes)
        if found is not None:
            mf.debug_path, mf.debug, mf.debug_how = found


def _bias(elf: ElfFile, module: Module) -> int | None:
    try:
        loads = [s for s in elf.segments if s.type == PT_LOAD]
    except ElfError:
        return None
    for m in sorted(module.mappings, key=lambda m: m.offset):
        for s in loads:
            if s.offset <= m.offset < s.offset + max(s.filesz, 1):
                return m.start - (s.vaddr + (m.offset - s.offset))
    return None


# -- DWARF line tables and inlined calls -------------------------------------------------------------

class _Lines:
    """The DWARF of one file (pyelftools), with line tables decoded here and cached per unit."""

    def __init__(self, path: str, notes: list[str], budget: float = LINE_BUDGET_S) -> None:
        self.path = path
        self.notes = notes
        self.spent = 0.0
        self.budget = budget
        self.ok = False
        self._fh = None
        self._units: dict[int, Any] = {}          # cu offset -> (addrs, files, lines, cu)
        self._cu_ranges: tuple[list[int], list[int], list[int]] | None = None
        self._aranges = None
        self._info: bytes | None = None
        self._over = False
        try:
            t0 = time.perf_counter()
            self._fh = open(path, "rb")
            ef = _lean_elffile()(self._fh)
            if not ef.has_dwarf_info():
                return
            for name in (".debug_info", ".debug_line"):
                sec = ef.get_section_by_name(name)
                if sec is not None and sec["sh_size"] > MAX_DEBUG_SECTION:
                    notes.append(f"{path}: {name} is larger than {MAX_DEBUG_SECTION >> 30} GiB: no line numbers")
                    return
            if ef.get_section_by_name(".debug_line") is None:
                return
            self.dwarf = ef.get_dwarf_info(relocate_dwarf_sections=False)
            sec = self.dwarf.debug_aranges_sec
            if sec is not None:
                self._aranges = _parse_aranges(sec.stream.getvalue(), notes, path)
            self.spent += time.perf_counter() - t0
            self.ok = True
        except Exception as exc:  # noqa: BLE001
            notes.append(f"{path}: DWARF unreadable ({type(exc).__name__}: {exc}): no line numbers")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _check(self) -> bool:
        if self.spent > self.budget:
            if not self._over:
                self._over = True
                self.notes.append(f"{self.path}: DWARF lookups took more than {self.budget:g} s: later frames "
                                  f"of this module have no line numbers")
            return False
        return True

    def _cu_offset(self, vaddr: int) -> int | None:
        if self._aranges is not None:
            starts, ends, offs = self._aranges
            k = bisect_right(starts, vaddr) - 1
            if k >= 0 and vaddr < ends[k]:
                return offs[k]
        if self._cu_ranges is None:
            self._cu_ranges = self._scan_cu_ranges()
        starts, ends, offs = self._cu_ranges
        k = bisect_right(starts, vaddr) - 1
        for j in range(k, max(k - 64, -1), -1):
            if starts[j] <= vaddr < ends[j]:
                return offs[j]
        return None

    def _scan_cu_ranges(self) -> tuple[list[int], list[int], list[int]]:
        rows = []
        t0 = time.perf_counter()
        try:
            for cu in self.dwarf.iter_CUs():
                if time.perf_counter() - t0 + self.spent > self.budget:
                    break
                top = cu.get_top_DIE()
                for lo, hi in _die_ranges(self.dwarf, cu, top):
                    rows.append((lo, hi, cu.cu_offset))
        except Exception as exc:  # noqa: BLE001
            self.notes.append(f"{self.path}: compilation units unreadable ({type(exc).__name__})")
        rows.sort()
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]

    def lookup(self, vaddr: int, inline: bool = True) -> tuple[str | None, int | None, tuple[InlinedCall, ...]]:
        if not self.ok or not self._check():
            return None, None, ()
        t0 = time.perf_counter()
        try:
            return self._lookup(vaddr, inline)
        except Exception as exc:  # noqa: BLE001
            self.notes.append(f"{self.path}: DWARF unreadable at {vaddr:#x} ({type(exc).__name__}: {exc})")
            return None, None, ()
        finally:
            self.spent += time.perf_counter() - t0

    def _lookup(self, vaddr: int, inline: bool) -> tuple[str | None, int | None, tuple[InlinedCall, ...]]:
        off = self._cu_offset(vaddr)
        if off is None:
            return None, None, ()
        unit = self._units.get(off)
        if unit is None:
            cu = self.dwarf.get_CU_at(off)
            unit = self._units[off] = _decode_unit(self.dwarf, cu)
        addrs, files, lines, names, cu = unit
        k = bisect_right(addrs, vaddr) - 1
        file = line = None
        if k >= 0 and files[k] >= 0:
            file, line = names(files[k]), lines[k]
        chain: tuple[InlinedCall, ...] = ()
        if inline and self._check():
            raw = self._inlined(cu, vaddr, names)
            if raw:
                # raw[i] holds where inlined function i was called (in function i+1, or in the
                # frame's own function for the last); the innermost is at the line-table row
                chain = tuple(InlinedCall(raw[i].function, *((file, line) if i == 0 else
                                                               (raw[i - 1].file, raw[i - 1].line)))
                              for i in range(len(raw)))
                return raw[-1].file, raw[-1].line, chain
        return file, line, chain

    def _inlined(self, cu, vaddr: int, names) -> tuple[InlinedCall, ...]:
        """Inlined subroutines containing vaddr, innermost first, each with its call site."""
        if self._info is None:
            sec = self.dwarf.debug_info_sec
            self._info = sec.stream.getvalue() if sec is not None else b""
        try:
            path = _DieWalker(self.dwarf, cu, self._info, self.budget - self.spent).inlined_chain(vaddr)
        except _Unsupported:
            path = None
        if path is not None:
            out = []
            for off, call_file, call_line in path:
                try:
                    die = self.dwarf.get_DIE_from_refaddr(off, cu)
                    name = _die_name(die) or "??"
                except Exception:  # noqa: BLE001
                    name = "??"
                out.append(InlinedCall(name, names(call_file) if call_file is not None else None, call_line))
            return tuple(out)
        return self._inlined_slow(cu, vaddr, names)

    def _inlined_slow(self, cu, vaddr: int, names) -> tuple[InlinedCall, ...]:
        """The same through pyelftools' DIE objects (for forms the fast walker does not know)."""
        top = cu.get_top_DIE()
        path: list[Any] = []
        parent = top
        t0 = time.perf_counter()
        for _depth in range(64):
            found = None
            for child in parent.iter_children():
                if time.perf_counter() - t0 + self.spent > self.budget:
                    return ()
                tag = child.tag
                if tag not in ("DW_TAG_subprogram", "DW_TAG_inlined_subroutine", "DW_TAG_lexical_block",
                               "DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type"):
                    continue
                if tag in ("DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type"):
                    if child.has_children and any(lo <= vaddr < hi for lo, hi in _die_ranges(self.dwarf, cu, child)):
                        found = child
                        break
                    if tag == "DW_TAG_namespace":
                        # namespaces carry no ranges: look inside (bounded by the time budget)
                        inner = self._inside(child, vaddr, cu, t0)
                        if inner is not None:
                            found = inner
                            break
                    continue
                if any(lo <= vaddr < hi for lo, hi in _die_ranges(self.dwarf, cu, child)):
                    found = child
                    break
            if found is None:
                break
            if found.tag == "DW_TAG_inlined_subroutine":
                path.append(found)
            if not found.has_children:
                break
            parent = found
        if not path:
            return ()
        out = []
        for die in reversed(path):   # innermost first
            name = _die_name(die) or "??"
            cf = die.attributes.get("DW_AT_call_file")
            cl = die.attributes.get("DW_AT_call_line")
            out.append(InlinedCall(name, names(cf.value) if cf is not None else None,
                                   cl.value if cl is not None else None))
        return tuple(out)

    def _inside(self, ns, vaddr: int, cu, t0: float):
        for child in ns.iter_children():
            if time.perf_counter() - t0 + self.spent > self.budget:
                return None
            if child.tag == "DW_TAG_subprogram" and any(lo <= vaddr < hi for lo, hi in _die_ranges(self.dwarf, cu, child)):
                return child
            if child.tag == "DW_TAG_namespace":
                hit = self._inside(child, vaddr, cu, t0)
                if hit is not None:
                    return hit
        return None


# The sections line numbers and inlined calls need; the others (location lists, frame tables,
# pubnames, types) are not read, which spares decompressing them.
_DWARF_SECTIONS = {".debug_info", ".debug_aranges", ".debug_abbrev", ".debug_str", ".debug_line",
                   ".debug_ranges", ".debug_addr", ".debug_str_offsets", ".debug_line_str",
                   ".debug_rnglists"}


@lru_cache(maxsize=1)
def _lean_elffile():
    from elftools.elf.elffile import ELFFile

    class LeanELFFile(ELFFile):
        def get_section_by_name(self, name):
            if name.startswith((".debug_", ".zdebug_")) or name in (".eh_frame", ".gnu_debugaltlink"):
                plain = ".debug_" + name[8:] if name.startswith(".zdebug_") else name
                if plain not in _DWARF_SECTIONS and name != ".gnu_debuglink":
                    return None
            return super().get_section_by_name(name)

    return LeanELFFile


class _Unsupported(Exception):
    pass


# DWARF forms (DWARF 5 table 7.6 + GNU): fixed sizes; None = variable (handled in _skip)
_FORM_FIXED = {0x0B: 1, 0x05: 2, 0x06: 4, 0x07: 8, 0x1E: 16, 0x0C: 1, 0x19: 0, 0x21: 0, 0x11: 1, 0x12: 2,
               0x13: 4, 0x14: 8, 0x20: 8, 0x1C: 4, 0x24: 8, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1,
               0x2A: 2, 0x2B: 3, 0x2C: 4}
_FORM_OFFSET = (0x0E, 0x1F, 0x17, 0x1D, 0x1F20, 0x1F21)   # strp, line_strp, sec_offset, strp_sup, GNU alt
_FORM_ULEB = (0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02)   # udata, ref_udata, strx, addrx, loclistx, rnglistx, GNU
_WANT = {0x11: "low", 0x12: "high", 0x55: "ranges", 0x01: "sibling", 0x58: "call_file", 0x59: "call_line"}
_TAG_SUB, _TAG_INL, _TAG_BLOCK, _TAG_NS = 0x2E, 0x1D, 0x0B, 0x39


class _DieWalker:
    """Just enough of a .debug_info reader to follow the DIEs that contain an address: each DIE's
    attributes are skipped by their form's size, keeping only ranges, sibling and call site."""

    def __init__(self, dwarf, cu, info: bytes, budget: float) -> None:
        self.dwarf, self.cu, self.d = dwarf, cu, info
        h = cu.header
        self.version = h["version"]
        self.offset_size = 8 if cu.structs.dwarf_format == 64 else 4
        self.addr_size = h["address_size"]
        self.cu_start = cu.cu_offset
        self.cu_end = cu.cu_offset + cu.size
        self.deadline = time.perf_counter() + max(budget, 0.0)
        table = cu.get_abbrev_table()
        self._abbrev: dict[int, tuple[int, bool, list[tuple[int, int, int | None]]]] = {}
        self._table = table
        self._base: int | None = None

    def _decl(self, code: int):
        hit = self._abbrev.get(code)
        if hit is None:
            from elftools.dwarf.enums import ENUM_DW_AT, ENUM_DW_FORM, ENUM_DW_TAG
            a = self._table.get_abbrev(code)
            tag = a["tag"]
            tag_n = ENUM_DW_TAG.get(tag, tag) if isinstance(tag, str) else tag
            specs = []
            for spec in a["attr_spec"]:
                name, form = spec.name, spec.form
                an = ENUM_DW_AT.get(name, name) if isinstance(name, str) else name
                fn = ENUM_DW_FORM.get(form, form) if isinstance(form, str) else form
                if not isinstance(an, int) or not isinstance(fn, int):
                    raise _Unsupported(f"{name}/{form}")
                specs.append((an, fn, getattr(spec, "value", None) if fn == 0x21 else None))
            hit = self._abbrev[code] = (tag_n, a.has_children(), specs)
        return hit

    def _value(self, form: int, pos: int) -> tuple[int | None, int]:
        d = self.d
        if form in _FORM_FIXED:
            n = _FORM_FIXED[form]
            return (int.from_bytes(d[pos:pos + n], "little") if n and n <= 8 else None), pos + n
        if form == 0x01:                                   # addr
            n = self.addr_size
            return int.from_bytes(d[pos:pos + n], "little"), pos + n
        if form in _FORM_OFFSET:
            n = self.offset_size
            return int.from_bytes(d[pos:pos + n], "little"), pos + n
        if form == 0x10:                                   # ref_addr
            n = self.offset_size if self.version >= 3 else self.addr_size
            return int.from_bytes(d[pos:pos + n], "little"), pos + n
        if form in _FORM_ULEB:
            return uleb128(d, pos, len(d))
        if form == 0x0D:                                   # sdata
            return sleb128(d, pos, len(d))
        if form == 0x08:                                   # string
            end = d.index(0, pos)
            return None, end + 1
        if form in (0x09, 0x18):                           # block, exprloc
            n, p = uleb128(d, pos, len(d))
            return None, p + n
        if form == 0x0A:                                   # block1
            return None, pos + 1 + d[pos]
        if form == 0x03:
            return None, pos + 2 + int.from_bytes(d[pos:pos + 2], "little")
        if form == 0x04:
            return None, pos + 4 + int.from_bytes(d[pos:pos + 4], "little")
        if form == 0x16:                                   # indirect
            f, p = uleb128(d, pos, len(d))
            return self._value(f, p)
        raise _Unsupported(f"form {form:#x}")

    def _die(self, pos: int):
        """(tag, has_children, attributes wanted, position after the DIE's attributes) or None at a null entry."""
        code, pos = uleb128(self.d, pos, len(self.d))
        if code == 0:
            return None, pos
        tag, kids, specs = self._decl(code)
        want: dict[str, int] = {}
        high_form = None
        for an, fn, const in specs:
            if fn == 0x21:                                 # implicit_const
                if an in _WANT:
                    want[_WANT[an]] = const
                continue
            v, pos = self._value(fn, pos)
            key = _WANT.get(an)
            if key is not None and v is not None:
                want[key] = v
                if key == "high":
                    high_form = fn
                elif key == "ranges" and fn not in (0x17, 0x06, 0x07):
                    want.pop("ranges")             # rnglistx: not followed
                elif key == "low" and fn != 0x01:
                    want.pop("low")                # addrx: not followed
        if "high" in want and high_form == 0x01:
            want["high_is_addr"] = 1
        return (tag, kids, want), pos

    def _contains(self, want: dict[str, int], vaddr: int) -> bool:
        lo = want.get("low")
        hi = want.get("high")
        if lo is not None and hi is not None:
            end = hi if want.get("high_is_addr") else lo + hi
            return lo <= vaddr < end
        rng = want.get("ranges")
        if rng is None:
            return False
        lists = self.dwarf.range_lists()
        if lists is None:
            return False
        base = self._base or 0
        for e in lists.get_range_list_at_offset(rng, cu=self.cu)[:10_000]:
            if hasattr(e, "base_address"):
                base = e.base_address
            elif getattr(e, "is_absolute", False):
                if e.begin_offset <= vaddr < e.end_offset:
                    return True
            elif base + e.begin_offset <= vaddr < base + e.end_offset:
                return True
        return False

    def _skip_children(self, pos: int) -> int:
        """Position after the children list that starts at pos (after its terminating null)."""
        depth = 1
        steps = 0
        while depth:
            steps += 1
            if steps & 1023 == 0 and time.perf_counter() > self.deadline:
                raise TimeoutError
            if pos >= self.cu_end:
                raise _Unsupported("children run past the unit")
            die, pos = self._die(pos)
            if die is None:
                depth -= 1
                continue
            _tag, kids, want = die
            if kids:
                sib = want.get("sibling")
                if sib is not None and self.cu_start < self.cu_start + sib < self.cu_end:
                    pos = self.cu_start + sib
                else:
                    depth += 1
        return pos

    def inlined_chain(self, vaddr: int) -> list[tuple[int, int | None, int | None]] | None:
        """(DIE offset, call file, call line) of the inlined subroutines holding vaddr, innermost
        first; [] when none; None when the time ran out."""
        try:
            top, pos = self._die(self.cu.cu_die_offset)
            if top is None:
                return []
            self._base = top[2].get("low")
            if not top[1]:
                return []
            chain: list[tuple[int, int | None, int | None]] = []
            steps = 0
            while pos < self.cu_end:               # the children of the current parent
                steps += 1
                if steps & 255 == 0 and time.perf_counter() > self.deadline:
                    return None
                at = pos
                die, pos = self._die(pos)
                if die is None:
                    break                          # end of this parent's children: not found deeper
                tag, kids, want = die
                hit = False
                if tag in (_TAG_SUB, _TAG_INL, _TAG_BLOCK):
                    hit = self._contains(want, vaddr)
                elif tag == _TAG_NS and kids:      # no ranges of its own: look inside
                    inner, end = self._search_scope(pos, vaddr)
                    if inner is None:
                        pos = end
                        continue
                    at, die, pos = inner
                    tag, kids, want = die
                    hit = True
                if hit:
                    if tag == _TAG_INL:
                        chain.append((at, want.get("call_file"), want.get("call_line")))
                    if not kids:
                        break
                    continue                       # descend: its children follow
                if kids:
                    sib = want.get("sibling")
                    if sib is not None and self.cu_start < self.cu_start + sib < self.cu_end:
                        pos = self.cu_start + sib
                    else:
                        pos = self._skip_children(pos)
            chain.reverse()
            return chain
        except TimeoutError:
            return None
        except (IndexError, ValueError, KeyError) as exc:
            raise _Unsupported(str(exc)) from None

    def _search_scope(self, pos: int, vaddr: int):
        """In a namespace's children from pos: ((offset, die, position after it) of the
        subprogram containing vaddr, or None; the position after the namespace's children)."""
        while pos < self.cu_end:
            at = pos
            die, pos = self._die(pos)
            if die is None:
                return None, pos
            tag, kids, want = die
            if tag == _TAG_SUB and self._contains(want, vaddr):
                return (at, die, pos), pos
            if tag == _TAG_NS and kids:
                inner, pos = self._search_scope(pos, vaddr)
                if inner is not None:
                    return inner, pos
                continue
            if kids:
                sib = want.get("sibling")
                pos = self.cu_start + sib if sib is not None and self.cu_start < self.cu_start + sib < self.cu_end \
                    else self._skip_children(pos)
        return None, pos


def _parse_aranges(data: bytes, notes: list[str], path: str) -> tuple[list[int], list[int], list[int]] | None:
    """.debug_aranges as sorted (starts, ends, unit offsets), or None when malformed."""
    rows: list[tuple[int, int, int]] = []
    pos, n = 0, len(data)
    try:
        while pos + 4 <= n and len(rows) < MAX_LINE_ROWS:
            length, = struct.unpack_from("<I", data, pos)
            head = 4
            if length == 0xFFFFFFFF:
                length, = struct.unpack_from("<Q", data, pos + 4)
                head = 12
            start = pos
            end = pos + head + length
            if length == 0 or end > n:
                break
            p = pos + head
            _version, = struct.unpack_from("<H", data, p)
            p += 2
            if head == 12:
                cu_off, = struct.unpack_from("<Q", data, p)
                p += 8
            else:
                cu_off, = struct.unpack_from("<I", data, p)
                p += 4
            asize, seg = data[p], data[p + 1]
            p += 2
            if asize not in (4, 8) or seg:
                pos = end
                continue
            tup = 2 * asize
            p = start + ((p - start + tup - 1) // tup) * tup
            count = (end - p) // tup
            fmt = "<" + ("QQ" if asize == 8 else "II") * count
            vals = struct.unpack_from(fmt, data, p)
            for i in range(0, len(vals), 2):
                a, ln = vals[i], vals[i + 1]
                if a == 0 and ln == 0:
                    break
                if ln:
                    rows.append((a, a + ln, cu_off))
            pos = end
    except (struct.error, IndexError):
        notes.append(f"{path}: .debug_aranges malformed: compilation units are found by their ranges")
    if not rows:
        return None
    rows.sort()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def _die_name(die) -> str | None:
    seen = 0
    d = die
    while d is not None and seen < 8:
        seen += 1
        attrs = d.attributes
        for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
            if key in attrs:
                raw = attrs[key].value
                name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                return demangle([name]).get(name, name)
        if "DW_AT_name" in attrs:
            raw = attrs["DW_AT_name"].value
            return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        nxt = None
        for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
            if key in attrs:
                try:
                    nxt = d.get_DIE_from_attribute(key)
                except Exception:  # noqa: BLE001
                    nxt = None
                break
        d = nxt
    return None


def _die_ranges(dwarf, cu, die) -> list[tuple[int, int]]:
    attrs = die.attributes
    lo = attrs.get("DW_AT_low_pc")
    hi = attrs.get("DW_AT_high_pc")
    if lo is not None and hi is not None and lo.form != "DW_FORM_addrx":
        low = lo.value
        high = hi.value if hi.form == "DW_FORM_addr" else low + hi.value
        return [(low, high)]
    rng = attrs.get("DW_AT_ranges")
    if rng is None or rng.form not in ("DW_FORM_sec_offset", "DW_FORM_data4", "DW_FORM_data8"):
        return []
    lists = dwarf.range_lists()
    if lists is None:
        return []
    top = cu.get_top_DIE()
    base_attr = top.attributes.get("DW_AT_low_pc")
    base = base_attr.value if base_attr is not None and base_attr.form == "DW_FORM_addr" else 0
    out = []
    for e in lists.get_range_list_at_offset(rng.value, cu=cu)[:10_000]:
        if hasattr(e, "base_address"):
            base = e.base_address
        elif getattr(e, "is_absolute", False):
            out.append((e.begin_offset, e.end_offset))
        else:
            out.append((base + e.begin_offset, base + e.end_offset))
    return out


def _decode_unit(dwarf, cu):
    """(addresses, file indexes, lines, file-name function, cu): the unit's line table as
    sorted rows; a file index of -1 marks the end of a sequence."""
    prog = dwarf.line_program_for_CU(cu)
    if prog is None:
        return [], [], [], (lambda i: None), cu
    h = prog.header
    version = h["version"]
    stream = prog.stream
    stream.seek(prog.program_start_offset)
    code = stream.read(prog.program_end_offset - prog.program_start_offset)
    min_len = h["minimum_instruction_length"]
    default_stmt = bool(h["default_is_stmt"])
    line_base, line_range, opcode_base = h["line_base"], h["line_range"], h["opcode_base"]
    std_lengths = list(h["standard_opcode_lengths"])
    if line_range == 0:
        return [], [], [], (lambda i: None), cu
    seqs: list[tuple[list[int], list[int], list[int]]] = []
    a_rows: list[int] = []
    f_rows: list[int] = []
    l_rows: list[int] = []
    address, file, line = 0, 1, 1
    n = len(code)
    pos = 0
    total = 0
    _ = default_stmt
    try:
        while pos < n:
            op = code[pos]
            pos += 1
            if op >= opcode_base:
                adj = op - opcode_base
                address += (adj // line_range) * min_len
                line += line_base + adj % line_range
                a_rows.append(address)
                f_rows.append(file)
                l_rows.append(line)
            elif op == 0:
                ln, pos = uleb128(code, pos, n)
                end = pos + ln
                if ln == 0 or end > n:
                    break
                sub = code[pos]
                if sub == 1:                                     # end_sequence
                    a_rows.append(address)
                    f_rows.append(-1)
                    l_rows.append(0)
                    seqs.append((a_rows, f_rows, l_rows))
                    total += len(a_rows)
                    if total > MAX_LINE_ROWS:
                        break
                    a_rows, f_rows, l_rows = [], [], []
                    address, file, line = 0, 1, 1
                elif sub == 2:                                   # set_address
                    size = ln - 1
                    address = int.from_bytes(code[pos + 1:pos + 1 + size], "little") if size in (4, 8) else address
                pos = end
            elif op == 1:                                        # copy
                a_rows.append(address)
                f_rows.append(file)
                l_rows.append(line)
            elif op == 2:                                        # advance_pc
                v, pos = uleb128(code, pos, n)
                address += v * min_len
            elif op == 3:                                        # advance_line
                v, pos = sleb128(code, pos, n)
                line += v
            elif op == 4:                                        # set_file
                file, pos = uleb128(code, pos, n)
            elif op == 8:                                        # const_add_pc
                address += ((255 - opcode_base) // line_range) * min_len
            elif op == 9:                                        # fixed_advance_pc
                address += code[pos] | code[pos + 1] << 8 if pos + 1 < n else 0
                pos += 2
            elif op in (6, 7, 10, 11):                           # flags: no operands
                pass
            else:                                                # set_column, set_isa, unknown: skip operands
                for _i in range(std_lengths[op - 1] if op - 1 < len(std_lengths) else 0):
                    _v, pos = uleb128(code, pos, n)
    except LEB128Error:
        pass  # a truncated last operand: the unfinished sequence it belongs to is dropped anyway
    seqs.sort(key=lambda s: s[0][0] if s[0] else 0)
    addrs: list[int] = []
    files: list[int] = []
    lines: list[int] = []
    for a, f, l in seqs:
        addrs += a
        files += f
        lines += l
    entries = h["file_entry"]
    dirs = h["include_directory"]
    comp_dir = None
    try:
        top = cu.get_top_DIE()
        cd = top.attributes.get("DW_AT_comp_dir")
        comp_dir = cd.value.decode("utf-8", "replace") if cd is not None and isinstance(cd.value, bytes) else None
    except Exception:  # noqa: BLE001
        pass
    cache: dict[int, str | None] = {}

    def name_of(i: int) -> str | None:
        if i in cache:
            return cache[i]
        k = i if version >= 5 else i - 1
        out = None
        if 0 <= k < len(entries):
            e = entries[k]
            nm = e.name.decode("utf-8", "replace") if isinstance(e.name, bytes) else str(e.name)
            di = e.dir_index
            dk = di if version >= 5 else di - 1
            d = None
            if di == 0 and version < 5:
                d = comp_dir
            elif 0 <= dk < len(dirs):
                d = dirs[dk]
                d = d.decode("utf-8", "replace") if isinstance(d, bytes) else str(d)
            # as gdb prints it: the compilation directory (index 0) only when it is relative
            # (Debian's "./nptl"), any other directory always
            if nm.startswith("/") or not d or (di == 0 and d.startswith("/")):
                out = nm
            else:
                out = os.path.join(d, nm)
        cache[i] = out
        return out

    return addrs, files, lines, name_of, cu


# -- the symbolizer ------------------------------------------------------------------------------------

class Symbolizer:
    """Symbols for addresses of one core (or of files on disk), every file opened once."""

    def __init__(self, core: Core | None = None, *, file_resolver: Resolver | None = None,
                 debug_dirs: Iterable[str] = DEBUG_DIRS, sysroot: str | os.PathLike[str] | None = None,
                 files: ModuleFiles | None = None, lines: bool = True, inline: bool = True,
                 line_budget: float = LINE_BUDGET_S) -> None:
        self.files = files or ModuleFiles(core, file_resolver, debug_dirs, sysroot)
        self._own = files is None
        self.lines = lines
        self.inline = inline
        self.line_budget = line_budget
        self.notes: list[str] = []

    def close(self) -> None:
        if self._own:
            self.files.close()

    def __enter__(self) -> "Symbolizer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def symbolize(self, pc: int, module: Module | str | None = None, *, return_address: bool = False,
                  demangle_names: bool = True) -> Symbol:
        if module is None:
            module = self.files.module_at(pc)
            if module is None:
                return Symbol(None, None, None, None)
        mf = self.files.get(module)
        vaddr = mf.vaddr(pc)
        if vaddr is None:
            return Symbol(None, None, None, None)
        look = vaddr - 1 if return_address else vaddr
        fn, source = self._function(mf, look)
        file = line = None
        inlined: tuple[InlinedCall, ...] = ()
        if self.lines:
            lines = self._lines(mf)
            if lines is not None:
                file, line, inlined = lines.lookup(look, self.inline)
        if fn is None:
            return Symbol(None, None, file, line, inlined, None, source, vaddr)
        name = _unversioned(fn.name)
        mangled = None
        if name and demangle_names and name.startswith("_Z"):
            d = demangle([name])[name]
            if d != name:
                mangled, name = name, d
        return Symbol(name, vaddr - fn.start, file, line, inlined, mangled, source, vaddr, fn.start)

    def _function(self, mf: ModuleFile, vaddr: int) -> tuple[Function | None, str | None]:
        cache = mf.cache.setdefault("functions", {})
        if vaddr in cache:
            return cache[vaddr]
        out: tuple[Function | None, str | None] = (None, None)
        for elf, what in mf.symbol_files():
            try:
                if what == "debug file" and elf.section(".symtab") is None:
                    continue
                fn = locate_function(elf, vaddr)
            except ElfError as exc:
                mf.notes.append(f"{mf.path}: symbols of the {what} unreadable: {exc}")
                continue
            if fn is not None and (fn.name or what == "file"):
                src = ("debug-file " if what == "debug file" else "") + ("." + fn.source if fn.source in ("symtab", "dynsym") else fn.source)
                out = (fn, src)
                if fn.name:
                    break
        if len(cache) < 100_000:
            cache[vaddr] = out
        return out

    def _lines(self, mf: ModuleFile) -> _Lines | None:
        if "lines" in mf.cache:
            return mf.cache["lines"]
        out = None
        for elf, _what in mf.symbol_files():
            try:
                has = any(s.name in (".debug_line", ".zdebug_line") and s.has_data and s.size for s in elf.sections)
            except ElfError:
                has = False
            if has:
                out = _Lines(elf.path, mf.notes, self.line_budget)
                if not out.ok:
                    out.close()
                    out = None
                break
        mf.cache["lines"] = out
        return out


def _unversioned(name: str | None) -> str | None:
    """`__libc_start_main@@GLIBC_2.34` -> `__libc_start_main` (.symtab keeps version suffixes)."""
    if name and "@" in name and not name.startswith("@"):
        return name.split("@", 1)[0]
    return name


def symbolize(pc: int, module: Module | str | os.PathLike[str], *, core: Core | None = None,
              file_resolver: Resolver | None = None, debug_dirs: Iterable[str] = DEBUG_DIRS,
              sysroot: str | os.PathLike[str] | None = None, return_address: bool = False,
              lines: bool = True, inline: bool = True) -> Symbol:
    """Function, offset, file:line and inlined calls at `pc`.

    `module` is a core's Module (pc is then a process address: give `core` too when the
    resolver or debug lookup should see the core) or the path of an ELF file (pc is then an
    address of that file). `return_address`: pc follows a call (every frame but the innermost),
    so the call instruction at pc - 1 is what is looked up. For many addresses, use a
    Symbolizer: it keeps every file and table open."""
    if not isinstance(module, Module):
        module = os.fspath(module)
    with Symbolizer(core, file_resolver=file_resolver, debug_dirs=debug_dirs, sysroot=sysroot, lines=lines,
                    inline=inline) as s:
        return s.symbolize(pc, module, return_address=return_address)
