"""The x86-64 code of an ELF file, as the census reads it: opening, the machine check, the
executable sections, and the GNU property note in the census's shape."""

from __future__ import annotations

import os
from typing import Any

from ...errors import CrashlensError
from ..elf import ElfFile
from ..symbols import strict
from .tables import LEVEL_NAMES

__all__ = ["IsaError", "open_elf", "check_x86_64", "gnu_property", "exec_sections", "file_offset"]

EM_X86_64 = 62
SHF_EXECINSTR = 0x4


class IsaError(CrashlensError):
    help = "The ISA census reads x86-64 ELF files (executables, shared libraries, objects)."


def open_elf(elf: ElfFile | str | os.PathLike[str]) -> tuple[ElfFile, bool]:
    if isinstance(elf, ElfFile):
        return elf, False
    return ElfFile(elf), True


def check_x86_64(elf: ElfFile) -> None:
    if elf.e_machine != EM_X86_64 or elf.bits != 64:
        raise IsaError(f"{elf.path}: {elf.machine_name} ({elf.bits}-bit) code; the ISA census reads x86-64 only")
    if elf.endian != "<":
        raise IsaError(f"{elf.path}: big-endian x86-64 ELF is not valid")


@strict
def gnu_property(elf: ElfFile) -> dict[str, Any]:
    """x86 ISA levels and CET bits from .note.gnu.property (FACTS.md section 6), as decoded by
    binary.elffacts, in the census's shape."""
    from ..elffacts import read_elf_facts

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


def exec_sections(elf: ElfFile) -> list:
    return [s for s in elf.sections if s.flags & SHF_EXECINSTR and s.has_data and s.size]


def file_offset(elf: ElfFile, addr: int, size: int) -> int | None:
    for s in exec_sections(elf):
        if s.addr <= addr and addr + size <= s.addr + s.size:
            return s.offset + (addr - s.addr)
    return None
