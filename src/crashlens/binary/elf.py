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
EM_NAMES = {3: "x86", 40: "arm", 62: "x86-64", 183: "aarch64", 190: "cuda", 243: "riscv"}


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
        if shstrndx == 0xFFFF:
            shstrndx = self._raw_section(0)[7]
        if shnum > 1_000_000:
            raise ElfError(f"{self.path}: {shnum} sections is not plausible")
        self.read(self.e_shoff, shnum * entsize, "section headers")
        raws = [self._raw_section(i) for i in range(shnum)]
        names_at = raws[shstrndx] if 0 <= shstrndx < shnum else None
        out = []
        for i, r in enumerate(raws):
            name_off, typ, flags, addr, off, size, link, info, _align, entsz = r
            name = self._cstr(names_at[4] + name_off, names_at[4] + names_at[5]) if names_at else ""
            out.append(Section(i, name, typ, flags, addr, off, size, link, info, entsz))
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
        if self.e_phnum > 65535:
            raise ElfError(f"{self.path}: {self.e_phnum} program headers is not plausible")
        self.read(self.e_phoff, self.e_phnum * entsize, "program headers")
        out = []
        for i in range(self.e_phnum):
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

    def sections_named(self, name: str) -> Iterator[Section]:
        return (s for s in self.sections if s.name == name)

    def section_data(self, s: Section) -> memoryview:
        """The section's bytes as a view into the mapping (no copy)."""
        if not s.has_data:
            return memoryview(b"")
        self.read(s.offset, 0, f"section {s.name}")  # bounds of the start
        if s.offset + s.size > self.size:
            raise ElfError(f"{self.path}: section {s.name} ({s.offset:#x}+{s.size:#x}) runs past the end of the file")
        return memoryview(self.data)[s.offset:s.offset + s.size]
