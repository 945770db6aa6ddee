"""Byte-level readers shared by the ELF, DWARF and core modules of `binary/`: each exists once.

    uleb128(data, pos, end) -> (value, next pos)     DWARF unsigned LEB128 (DWARF 5 section 7.6)
    sleb128(data, pos, end) -> (value, next pos)     DWARF signed LEB128
    iter_raw_notes(raw, endian, step)                (owner, type, descriptor) of an ELF note area
                                                     held in bytes (a core's copy of a PT_NOTE)
    gnu_build_id(notes) -> str | None                the NT_GNU_BUILD_ID descriptor, as hex
    build_id(elf) -> str | None                      the GNU build-id of an open ElfFile
    NT_GNU_* note types                              (binutils include/elf/common.h)

The LEB128 readers take the end of the record they read in (`end`); a number that runs past it
or is longer than 10 bytes (more than 64 bits) raises `error` (LEB128Error unless the caller
names its own, as the CFI reader does with CFIError). LEB128Error is an ElfError and a
ValueError, so code that treats malformed input as ValueError keeps doing so.

Note layout (System V gABI, "Note Section"): namesz, descsz, type (3 x 4 bytes), the name padded
to the note's alignment, the descriptor padded likewise; `step` is that alignment (8 for
.note.gnu.property on ELF64, 4 everywhere else), as binutils' ELF_NOTE_DESC_OFFSET computes it.
"""

from __future__ import annotations

import struct
from typing import Iterable, Iterator

from .elf import PT_NOTE, SHT_NOTE, ElfError, ElfFile, iter_notes

__all__ = ["LEB128Error", "uleb128", "sleb128", "iter_raw_notes", "gnu_build_id", "build_id",
           "NT_GNU_ABI_TAG", "NT_GNU_BUILD_ID", "NT_GNU_GOLD_VERSION", "NT_GNU_PROPERTY_TYPE_0"]

NT_GNU_ABI_TAG, NT_GNU_BUILD_ID, NT_GNU_GOLD_VERSION, NT_GNU_PROPERTY_TYPE_0 = 1, 3, 4, 5
MAX_RAW_NOTES = 4096


class LEB128Error(ElfError, ValueError):
    help = "A variable-length (LEB128) number in the file's DWARF or unwind data is malformed."


# -- LEB128 -----------------------------------------------------------------------------------------

def uleb128(data, pos: int, end: int, error: type[Exception] = LEB128Error) -> tuple[int, int]:
    """(value, position after it) of the unsigned LEB128 number at data[pos:end]."""
    result = shift = 0
    while True:
        if pos >= end:
            raise error("LEB128 number runs past its record")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise error("LEB128 number longer than 10 bytes")


def sleb128(data, pos: int, end: int, error: type[Exception] = LEB128Error) -> tuple[int, int]:
    """(value, position after it) of the signed LEB128 number at data[pos:end]."""
    result = shift = 0
    while True:
        if pos >= end:
            raise error("LEB128 number runs past its record")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if b & 0x40:
                result -= 1 << shift
            return result, pos
        if shift > 70:
            raise error("LEB128 number longer than 10 bytes")


# -- notes and the build-id -------------------------------------------------------------------------

def iter_raw_notes(raw: bytes, endian: str, step: int = 4) -> Iterator[tuple[str, int, bytes]]:
    """(owner, type, descriptor) of each note in `raw`; stops quietly at a truncated note (a
    core holds what the process had mapped, which may end anywhere)."""
    pos, end = 0, len(raw)
    for _ in range(MAX_RAW_NOTES):
        if end - pos < 12:
            return
        namesz, descsz, ntype = struct.unpack_from(endian + "III", raw, pos)
        desc_at = pos + ((12 + namesz + step - 1) & -step)
        if desc_at + descsz > end:
            return
        owner = bytes(raw[pos + 12:pos + 12 + namesz]).split(b"\0", 1)[0].decode("utf-8", "replace")
        yield owner, ntype, raw[desc_at:desc_at + descsz]
        pos = desc_at + ((descsz + step - 1) & -step)


def gnu_build_id(notes: Iterable[tuple[str, int, bytes]]) -> str | None:
    """The first non-empty NT_GNU_BUILD_ID descriptor of (owner, type, descriptor) notes, in hex."""
    for owner, ntype, desc in notes:
        if owner == "GNU" and ntype == NT_GNU_BUILD_ID and desc:
            return desc.hex()
    return None


def _file_notes(elf: ElfFile) -> Iterator[tuple[str, int, bytes]]:
    """Notes of the SHT_NOTE sections, or of the PT_NOTE segments when there are no sections."""
    spans = [(s.offset, s.size, 8 if s.name == ".note.gnu.property" and elf.bits == 64 else 4)
             for s in elf.sections if s.type == SHT_NOTE and s.size]
    if not spans:
        spans = [(p.offset, p.filesz, p.align) for p in elf.segments if p.type == PT_NOTE and p.filesz]
    for off, size, align in spans:
        for n in iter_notes(elf, off, size, align):
            yield n.name, n.type, n.desc


def build_id(elf: ElfFile) -> str | None:
    """The GNU build-id of an ELF file (None when it has none); ElfError when its notes are
    malformed."""
    try:
        return gnu_build_id(_file_notes(elf))
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        if isinstance(exc, ElfError):
            raise
        raise ElfError(f"{elf.path}: malformed ELF data ({type(exc).__name__}: {exc})") from None
