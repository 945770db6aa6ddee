"""A small, strict ELF reader over mmap: headers, sections, segments.

Reads only what is asked for, straight from the mapped file (a 500 MB library costs no more
than its headers). Every offset and size is checked against the file before use; anything
out of bounds raises ElfError with a one-line reason, never an IndexError or a struct error.
Layouts: the System V gABI (ELF header, section and program headers), 32/64-bit, both
byte orders.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

from ..errors import CrashlensError

ET_NAMES = {0: "none", 1: "relocatable", 2: "executable", 3: "shared-object", 4: "core"}
EM_NAMES = {3: "x86", 40: "arm", 62: "x86-64", 183: "aarch64", 190: "cuda", 243: "riscv",
            8: "mips", 20: "ppc", 21: "ppc64", 22: "s390", 2: "sparc", 43: "sparcv9", 258: "loongarch"}


class ElfError(CrashlensError):
    help = "The file is not a complete ELF file (truncated, corrupt, or not ELF at all)."


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int
    addralign: int = 0

    SHT_NOBITS = 8

    @property
    def has_data(self) -> bool:
        return self.type != self.SHT_NOBITS


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int


class ElfFile:
    """An ELF file mapped read-only. Use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise ElfError(f"{self.path}: cannot open: {exc.strerror}") from None
        try:
            self.size = os.fstat(self._fd).st_size
            if self.size < 16:
                raise ElfError(f"{self.path}: {self.size} bytes is too short for an ELF header")
            self.data: mmap.mmap | bytes = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            os.close(self._fd)
            raise ElfError(f"{self.path}: cannot map: {exc}") from None
        except ElfError:
            os.close(self._fd)
            raise
        self._parse_header()

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> "ElfFile":
        self = cls.__new__(cls)
        self.path = name
        self._fd = -1
        self.size = len(data)
        self.data = data
        if self.size < 16:
            raise ElfError(f"{name}: {self.size} bytes is too short for an ELF header")
        self._parse_header()
        return self

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            try:
                self.data.close()
            except BufferError:  # a memoryview is still alive; the mapping goes with it
                pass
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "ElfFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw access --------------------------------------------------------------------
    def read(self, offset: int, size: int, what: str = "data") -> bytes:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ElfError(f"{self.path}: {what} at {offset:#x}+{size:#x} lies outside the file ({self.size:#x} bytes)")
        return self.data[offset:offset + size]

    def pread(self, offset: int, size: int, what: str = "data") -> bytes:
        """Like read(), but through the file descriptor rather than the mapping.

        For many small reads scattered over a large file: a page fault on the mapping maps a
        whole fault-around window (64 KiB) of page cache into this process, so a few thousand
        header reads would show up as 100+ MB of RSS; pread copies only the bytes asked for.
        """
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ElfError(f"{self.path}: {what} at {offset:#x}+{size:#x} lies outside the file ({self.size:#x} bytes)")
        if self._fd < 0:
            return bytes(self.data[offset:offset + size])
        try:
            out = os.pread(self._fd, size, offset)
        except OSError as exc:
            raise ElfError(f"{self.path}: cannot read {what} at {offset:#x}: {exc.strerror}") from None
        if len(out) != size:
            raise ElfError(f"{self.path}: short read of {what} at {offset:#x} ({len(out)} of {size} bytes)")
        return out

    def unpack(self, fmt: str, offset: int, what: str = "header"):
        fmt = self.endian + fmt
        return struct.unpack_from(fmt, self.read(offset, struct.calcsize(fmt), what))

    # -- headers -------------------------------------------------------------------------
    def _parse_header(self) -> None:
        ident = bytes(self.data[:16])
        if ident[:4] != b"\x7fELF":
            raise ElfError(f"{self.path}: not an ELF file")
        if ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise ElfError(f"{self.path}: bad ELF class or data encoding ({ident[4]}, {ident[5]})")
        self.bits = 64 if ident[4] == 2 else 32
        self.endian = "<" if ident[5] == 1 else ">"
        if self.bits == 64:
            (self.e_type, self.e_machine, _v, self.e_entry, self.e_phoff, self.e_shoff, self.e_flags, _eh,
             self.e_phentsize, self.e_phnum, self.e_shentsize, self.e_shnum, self.e_shstrndx) = \
                self.unpack("HHIQQQIHHHHHH", 16, "ELF header")
        else:
            (self.e_type, self.e_machine, _v, self.e_entry, self.e_phoff, self.e_shoff, self.e_flags, _eh,
             self.e_phentsize, self.e_phnum, self.e_shentsize, self.e_shnum, self.e_shstrndx) = \
                self.unpack("HHIIIIIHHHHHH", 16, "ELF header")

    @property
    def type_name(self) -> str:
        return ET_NAMES.get(self.e_type, f"type {self.e_type}")

    @property
    def machine_name(self) -> str:
        return EM_NAMES.get(self.e_machine, f"machine {self.e_machine}")

    @cached_property
    def sections(self) -> tuple[Section, ...]:
        if not self.e_shoff:
            return ()
        shnum, shstrndx = self.e_shnum, self.e_shstrndx
        entsize = 64 if self.bits == 64 else 40
        if self.e_shentsize != entsize:
            raise ElfError(f"{self.path}: section header size {self.e_shentsize}, expected {entsize}")
        if shnum == 0:  # extended numbering: the count lives in section 0's sh_size
            shnum = self._raw_section(0)[5]
        if shstrndx == 0xFFFF:  # SHN_XINDEX: the index lives in section 0's sh_link
            shstrndx = self._raw_section(0)[6]
        if shnum > 1_000_000:
            raise ElfError(f"{self.path}: {shnum} sections is not plausible")
        self.read(self.e_shoff, shnum * entsize, "section headers")
        raws = [self._raw_section(i) for i in range(shnum)]
        names_at = raws[shstrndx] if 0 <= shstrndx < shnum else None
        out = []
        for i, r in enumerate(raws):
            name_off, typ, flags, addr, off, size, link, info, align, entsz = r
            name = self._cstr(names_at[4] + name_off, names_at[4] + names_at[5]) if names_at else ""
            out.append(Section(i, name, typ, flags, addr, off, size, link, info, entsz, align))
        return tuple(out)

    def _raw_section(self, i: int):
        entsize = 64 if self.bits == 64 else 40
        off = self.e_shoff + i * entsize
        if self.bits == 64:
            return self.unpack("IIQQQQIIQQ", off, "section header")
        n, t, f, a, o, s, l, inf, al, es = self.unpack("IIIIIIIIII", off, "section header")
        return n, t, f, a, o, s, l, inf, al, es

    @cached_property
    def segments(self) -> tuple[Segment, ...]:
        if not self.e_phoff or not self.e_phnum:
            return ()
        entsize = 56 if self.bits == 64 else 32
        if self.e_phentsize != entsize:
            raise ElfError(f"{self.path}: program header size {self.e_phentsize}, expected {entsize}")
        phnum = self.e_phnum
        if phnum == 0xFFFF and self.e_shoff:  # PN_XNUM: the count lives in section 0's sh_info
            phnum = self._raw_section(0)[7]
        if phnum > 1_000_000:
            raise ElfError(f"{self.path}: {phnum} program headers is not plausible")
        self.read(self.e_phoff, phnum * entsize, "program headers")
        out = []
        for i in range(phnum):
            off = self.e_phoff + i * entsize
            if self.bits == 64:
                typ, flags, o, va, _pa, fs, ms, al = self.unpack("IIQQQQQQ", off, "program header")
            else:
                typ, o, va, _pa, fs, ms, flags, al = self.unpack("IIIIIIII", off, "program header")
            out.append(Segment(typ, flags, o, va, fs, ms, al))
        return tuple(out)

    def _cstr(self, start: int, limit: int) -> str:
        limit = min(limit, self.size)
        if not 0 <= start < limit:
            return ""
        end = self.data.find(b"\0", start, limit)
        if end < 0:
            end = limit
        return bytes(self.data[start:end]).decode("utf-8", "replace")

    # -- sections ----------------------------------------------------------------------------
    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def section_data(self, s: Section) -> memoryview:
        """The section's bytes as a view into the mapping (no copy)."""
        if not s.has_data:
            return memoryview(b"")
        self.read(s.offset, 0, f"section {s.name}")  # bounds of the start
        if s.offset + s.size > self.size:
            raise ElfError(f"{self.path}: section {s.name} ({s.offset:#x}+{s.size:#x}) runs past the end of the file")
        return memoryview(self.data)[s.offset:s.offset + s.size]


# -- generic low-level helpers: string tables, dynamic entries, notes, symbols, versions ---------
# Layouts: gABI (string tables, symbols, dynamic section, notes, SysV hash), the LSB (GNU symbol
# versioning: Elf_Verneed/Vernaux/Verdef/Verdaux), glibc dl-lookup.c (GNU hash). Every helper
# checks bounds before reading and raises ElfError with a one-line reason; chains are cut
# after as many entries as their region can hold, so a corrupt file can never loop.

SHT_STRTAB, SHT_HASH, SHT_DYNAMIC, SHT_NOTE, SHT_DYNSYM = 3, 5, 6, 7, 11
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_TLS = 1, 2, 3, 4, 7
PT_GNU_STACK, PT_GNU_PROPERTY = 0x6474E551, 0x6474E553
PF_X, PF_W, PF_R = 1, 2, 4
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 1, 4, 5, 6, 10, 11
DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS = 14, 15, 29, 30
DT_GNU_HASH, DT_VERSYM, DT_FLAGS_1 = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFB
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF


def check_range(elf: ElfFile, offset: int, size: int, what: str) -> None:
    """Raise ElfError unless offset..offset+size lies inside the file."""
    if offset < 0 or size < 0 or offset + size > elf.size:
        raise ElfError(f"{elf.path}: {what} at {offset:#x}+{size:#x} lies outside the file ({elf.size:#x} bytes)")


def vaddr_to_offset(elf: ElfFile, vaddr: int, what: str = "address") -> tuple[int, int]:
    """File offset of a virtual address, and how many file bytes follow it in its PT_LOAD segment."""
    for seg in elf.segments:
        if seg.type == PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            off = seg.offset + (vaddr - seg.vaddr)
            avail = min(seg.offset + seg.filesz, elf.size) - off
            if avail <= 0:
                break
            return off, avail
    raise ElfError(f"{elf.path}: {what} at address {vaddr:#x} is not in the file part of any loadable segment")


class StringTable:
    """A string table (.dynstr, .strtab, ...) read in place: index -> NUL-terminated string."""

    __slots__ = ("elf", "offset", "size", "what")

    def __init__(self, elf: ElfFile, offset: int, size: int, what: str = "string table") -> None:
        check_range(elf, offset, size, what)
        self.elf, self.offset, self.size, self.what = elf, offset, size, what

    def get_bytes(self, index: int) -> bytes:
        if not 0 <= index < self.size:
            raise ElfError(f"{self.elf.path}: {self.what} index {index:#x} lies outside the table ({self.size:#x} bytes)")
        start = self.offset + index
        end = self.elf.data.find(b"\0", start, self.offset + self.size)
        if end < 0:
            raise ElfError(f"{self.elf.path}: string at {self.what}+{index:#x} is not NUL-terminated inside the table")
        return bytes(self.elf.data[start:end])

    def get(self, index: int) -> str:
        return self.get_bytes(index).decode("utf-8", "replace")

    def indexes_of(self, name: bytes, limit: int = 1 << 16) -> list[int]:
        """Every index whose string is exactly `name` (tails of longer strings included)."""
        needle, out = name + b"\0", []
        data, end, pos = self.elf.data, self.offset + self.size, self.offset
        while len(out) < limit:
            pos = data.find(needle, pos, end)
            if pos < 0:
                break
            out.append(pos - self.offset)
            pos += 1
        return out


def dynamic_entries(elf: ElfFile, offset: int, size: int) -> Iterator[tuple[int, int]]:
    """(d_tag, d_val) pairs of a dynamic array, up to DT_NULL or the end of the region."""
    entsize = 16 if elf.bits == 64 else 8
    check_range(elf, offset, size, "dynamic section")
    fmt = elf.endian + ("qQ" if elf.bits == 64 else "iI")
    n = size // entsize
    if n == 0:
        return
    for tag, val in struct.iter_unpack(fmt, memoryview(elf.data)[offset:offset + n * entsize]):
        if tag == DT_NULL:
            return
        yield tag, val


@dataclass(frozen=True)
class Note:
    name: str      # owner, e.g. "GNU", "FDO"
    type: int
    desc: bytes
    offset: int    # file offset of the note header


def iter_notes(elf: ElfFile, offset: int, size: int, align: int = 4, what: str = "notes",
               max_notes: int = 65536) -> Iterator[Note]:
    """Notes of a SHT_NOTE section or PT_NOTE segment. `align` is its alignment: 8 means
    8-byte padding of name and descriptor (.note.gnu.property on ELF64), anything else 4."""
    check_range(elf, offset, size, what)
    step = 8 if align == 8 else 4
    pos, end = offset, offset + size
    for _ in range(max_notes):
        if end - pos < 12:
            return
        namesz, descsz, ntype = elf.unpack("III", pos, f"{what} header")
        name_at = pos + 12
        desc_at = pos + ((12 + namesz + step - 1) & -step)  # binutils ELF_NOTE_DESC_OFFSET
        nxt = pos + ((desc_at - pos + descsz + step - 1) & -step)
        if desc_at + descsz > end:
            raise ElfError(f"{elf.path}: note at {pos:#x} ({namesz:#x}+{descsz:#x} bytes) runs past the end of {what}")
        name = bytes(elf.data[name_at:name_at + namesz]).split(b"\0", 1)[0].decode("utf-8", "replace")
        yield Note(name, ntype, bytes(elf.data[desc_at:desc_at + descsz]), pos)
        pos = nxt
    raise ElfError(f"{elf.path}: more than {max_notes} notes in {what}")


def symbol_entry_size(elf: ElfFile) -> int:
    return 24 if elf.bits == 64 else 16


def iter_symbols(elf: ElfFile, offset: int, count: int, start: int = 0) -> Iterator[tuple[int, int, int, int, int, int]]:
    """Raw symbol entries start..count-1 of a symbol table as (st_name, st_info, st_other,
    st_shndx, st_value, st_size), read lazily from the mapping."""
    entsize = symbol_entry_size(elf)
    check_range(elf, offset, count * entsize, "symbol table")
    if not 0 <= start < count:
        return
    view = memoryview(elf.data)[offset + start * entsize:offset + count * entsize]
    if elf.bits == 64:
        yield from struct.iter_unpack(elf.endian + "IBBHQQ", view)
    else:
        for name, value, size, info, other, shndx in struct.iter_unpack(elf.endian + "IIIBBH", view):
            yield name, info, other, shndx, value, size


@dataclass(frozen=True)
class VernAux:
    name: str
    hash: int
    flags: int
    other: int     # the version index that .gnu.version uses for this version


@dataclass(frozen=True)
class VerNeed:
    file: str
    version: int
    aux: tuple[VernAux, ...]


@dataclass(frozen=True)
class VerDef:
    index: int
    flags: int
    hash: int
    names: tuple[str, ...]   # the version's name, then its parents


def _limit(size: int, entry: int) -> int:
    return max(1, size // entry)


def iter_verneed(elf: ElfFile, offset: int, size: int, strings: StringTable, count: int | None = None) -> Iterator[VerNeed]:
    """Entries of .gnu.version_r, following vn_next / vna_next as ld.so does, never more than
    the region can hold (16 bytes an entry) and never more than `count` (DT_VERNEEDNUM) files."""
    check_range(elf, offset, size, "version needs")
    end, budget = offset + size, _limit(size, 16)
    pos, files = offset, 0
    while True:
        if pos + 16 > end:
            raise ElfError(f"{elf.path}: version-need entry at {pos:#x} runs past the end of its section")
        version, cnt, file_, aux, nxt = elf.unpack("HHIII", pos, "version-need entry")
        if version != 1:
            raise ElfError(f"{elf.path}: version-need entry at {pos:#x} has revision {version}, expected 1")
        auxes = []
        a = pos + aux
        for _ in range(cnt):
            budget -= 1
            if budget < 0:
                raise ElfError(f"{elf.path}: version-need chain is longer than its section can hold (a loop?)")
            if a + 16 > end:
                raise ElfError(f"{elf.path}: version-need aux entry at {a:#x} runs past the end of its section")
            h, flags, other, name, anext = elf.unpack("IHHII", a, "version-need aux entry")
            auxes.append(VernAux(strings.get(name), h, flags, other))
            if anext == 0:
                break
            a += anext
        yield VerNeed(strings.get(file_), version, tuple(auxes))
        files += 1
        budget -= 1
        if nxt == 0 or (count is not None and files >= count):
            return
        if budget < 0:
            raise ElfError(f"{elf.path}: version-need chain is longer than its section can hold (a loop?)")
        pos += nxt


def iter_verdef(elf: ElfFile, offset: int, size: int, strings: StringTable, count: int | None = None) -> Iterator[VerDef]:
    """Entries of .gnu.version_d (Elf_Verdef 20 bytes, Elf_Verdaux 8 bytes), bounded like iter_verneed."""
    check_range(elf, offset, size, "version definitions")
    end, budget = offset + size, _limit(size, 8)
    pos, defs = offset, 0
    while True:
        if pos + 20 > end:
            raise ElfError(f"{elf.path}: version-definition entry at {pos:#x} runs past the end of its section")
        version, flags, ndx, cnt, h, aux, nxt = elf.unpack("HHHHIII", pos, "version-definition entry")
        if version != 1:
            raise ElfError(f"{elf.path}: version-definition entry at {pos:#x} has revision {version}, expected 1")
        names = []
        a = pos + aux
        for _ in range(cnt):
            budget -= 1
            if budget < 0:
                raise ElfError(f"{elf.path}: version-definition chain is longer than its section can hold (a loop?)")
            if a + 8 > end:
                raise ElfError(f"{elf.path}: version-definition aux entry at {a:#x} runs past the end of its section")
            name, anext = elf.unpack("II", a, "version-definition aux entry")
            names.append(strings.get(name))
            if anext == 0:
                break
            a += anext
        yield VerDef(ndx, flags, h, tuple(names))
        defs += 1
        budget -= 1
        if nxt == 0 or (count is not None and defs >= count):
            return
        if budget < 0:
            raise ElfError(f"{elf.path}: version-definition chain is longer than its section can hold (a loop?)")
        pos += nxt


def gnu_hash(name: bytes) -> int:
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def sysv_hash(name: bytes) -> int:
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


class GnuHashTable:
    """DT_GNU_HASH / .gnu.hash: which dynamic symbols may carry a name, and how many there are."""

    def __init__(self, elf: ElfFile, offset: int, size: int) -> None:
        if size < 16:
            raise ElfError(f"{elf.path}: GNU hash table of {size} bytes is too short")
        check_range(elf, offset, size, "GNU hash table")
        self.elf = elf
        self.nbuckets, self.symoffset, bloom_size, _shift = elf.unpack("IIII", offset, "GNU hash header")
        word = 8 if elf.bits == 64 else 4
        self.buckets_at = offset + 16 + bloom_size * word
        self.chain_at = self.buckets_at + self.nbuckets * 4
        self.end = offset + size
        if self.chain_at > self.end:
            raise ElfError(f"{elf.path}: GNU hash table ({self.nbuckets} buckets, {bloom_size} bloom words) "
                           f"is larger than its {size:#x} bytes")

    def _chain(self, sym: int) -> int:
        at = self.chain_at + (sym - self.symoffset) * 4
        if sym < self.symoffset or at + 4 > self.end:
            raise ElfError(f"{self.elf.path}: GNU hash chain of symbol {sym} lies outside the table")
        return self.elf.unpack("I", at, "GNU hash chain")[0]

    def candidates(self, name: bytes, nsyms: int | None = None) -> Iterator[int]:
        """Symbol indexes whose hash matches `name` (compare the names to be sure)."""
        if self.nbuckets == 0:
            return
        h = gnu_hash(name)
        sym = self.elf.unpack("I", self.buckets_at + (h % self.nbuckets) * 4, "GNU hash bucket")[0]
        if sym == 0:
            return
        limit = self.symoffset + (self.end - self.chain_at) // 4 if nsyms is None else nsyms
        while sym < limit:
            ch = self._chain(sym)
            if (ch | 1) == (h | 1):
                yield sym
            if ch & 1:
                return
            sym += 1
        raise ElfError(f"{self.elf.path}: GNU hash chain runs past the last symbol ({limit})")

    def symbol_count(self) -> int:
        """Number of dynamic symbols: one past the last symbol of the longest chain."""
        if self.nbuckets == 0:
            return self.symoffset
        check_range(self.elf, self.buckets_at, self.nbuckets * 4, "GNU hash buckets")
        top = max(struct.unpack_from(f"{self.elf.endian}{self.nbuckets}I",
                                     self.elf.read(self.buckets_at, self.nbuckets * 4, "GNU hash buckets")))
        if top < self.symoffset:
            return self.symoffset
        limit = self.symoffset + (self.end - self.chain_at) // 4
        while top < limit:
            if self._chain(top) & 1:
                return top + 1
            top += 1
        raise ElfError(f"{self.elf.path}: GNU hash chain runs past the end of the table")


class SysvHashTable:
    """DT_HASH / .hash: nchain is the number of dynamic symbols; chains are cut at nchain steps."""

    def __init__(self, elf: ElfFile, offset: int, size: int) -> None:
        self.elf = elf
        self.word = 8 if elf.bits == 64 and elf.e_machine in (22, 0x9026) else 4  # s390x, alpha
        fmt = "Q" if self.word == 8 else "I"
        check_range(elf, offset, 2 * self.word, "hash table")
        self.nbucket, self.nchain = elf.unpack(fmt * 2, offset, "hash table header")
        self.fmt = fmt
        self.buckets_at = offset + 2 * self.word
        self.chains_at = self.buckets_at + self.nbucket * self.word
        need = (2 + self.nbucket + self.nchain) * self.word
        if need > size:
            raise ElfError(f"{elf.path}: hash table ({self.nbucket} buckets, {self.nchain} chains) is larger than its {size:#x} bytes")
        check_range(elf, offset, need, "hash table")

    def candidates(self, name: bytes) -> Iterator[int]:
        if self.nbucket == 0:
            return
        y = self.elf.unpack(self.fmt, self.buckets_at + (sysv_hash(name) % self.nbucket) * self.word, "hash bucket")[0]
        for _ in range(self.nchain + 1):
            if y == 0:
                return
            if y >= self.nchain:
                raise ElfError(f"{self.elf.path}: hash chain points at symbol {y}, past the {self.nchain} symbols")
            yield y
            y = self.elf.unpack(self.fmt, self.chains_at + y * self.word, "hash chain")[0]
        raise ElfError(f"{self.elf.path}: hash chain loops")
