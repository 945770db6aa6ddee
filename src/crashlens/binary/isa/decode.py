"""One function, one instruction: `function_census`, `decode_at`, `instruction_at` decode only
the function holding an address (no sweep, no cache)."""

from __future__ import annotations

import os
from collections import Counter
from functools import lru_cache
from typing import Any

import iced_x86

from ..elf import ElfError, ElfFile
from ..symbols import Function, locate_function, strict
from .elfcode import IsaError, check_x86_64, exec_sections, open_elf
from .results import DecodedInstruction, FunctionIsa, InstructionIsa
from .tables import tables

__all__ = ["function_census", "decode_at", "instruction_at"]


def _function_bytes(elf: ElfFile, fn: Function) -> bytes:
    for s in exec_sections(elf):
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
        for s in exec_sections(elf):
            if s.addr <= address < s.addr + s.size:
                return Function(address, min(address + 15, s.addr + s.size), None, "address")
        raise IsaError(f"{elf.path}: no code at {address:#x} (not in an executable section)")
    return fn


@strict
def function_census(elf: ElfFile | str | os.PathLike[str], address: int) -> FunctionIsa:
    """The census of the function holding `address` (one function decoded, no cache needed)."""
    f, owned = open_elf(elf)
    try:
        check_x86_64(f)
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
    f, owned = open_elf(elf)
    try:
        check_x86_64(f)
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
