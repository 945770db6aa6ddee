"""DWARF call-frame information: `.eh_frame` (found through `.eh_frame_hdr`'s binary-search table
when there is one) and `.debug_frame`, and the CFA rules that compute a caller's registers.

    CFITable(data, address, kind="eh"|"debug", hdr=None, hdr_address=None) -> table
    table.find(pc) -> FDE | None            the FDE covering pc (binary search, else an index built once)
    table.row(fde, pc) -> Row                CFA rule and register rules in force at pc
    evaluate(expr, read_reg, read_word, push=()) -> int    a DWARF expression (DW_OP_*)

`data` is the section's bytes (a memoryview of a mapped file, or bytes read from a core) and
`address` the address of its first byte in the address space the table speaks: the file's
virtual addresses for a section read from a file, the process's addresses for one read from a
core's memory (pc-relative pointers then come out as run-time addresses).

What is implemented is what GCC, clang and hand-written glibc/libffi assembly emit for x86-64
(and what aarch64 adds): DW_CFA_advance_loc/1/2/4, set_loc, def_cfa, def_cfa_sf,
def_cfa_register, def_cfa_offset(_sf), def_cfa_expression, offset(_extended)(_sf),
val_offset(_sf), register, expression, val_expression, restore(_extended), undefined,
same_value, remember_state/restore_state, GNU_args_size, GNU_negative_offset_extended,
GNU_window_save (AArch64 negate_ra_state: recorded, no effect on x86-64); CIE augmentations
z, R, P, L, S (signal frame), B, G; pointer encodings absptr, uleb128, udata2/4/8, sleb128,
sdata2/4/8 with pcrel, textrel, datarel, funcrel, aligned and indirect applications; the PLT's
CFA expression (DW_OP_breg7, breg16, lit*, and, ge, shl, plus) and glibc's __restore_rt
expressions (breg7 + deref) go through `evaluate`, which knows the stack, arithmetic,
comparison, branch, register and memory operators of DWARF 5 section 2.5 (not the typed,
TLS, entry-value or piece operators: those raise CFIError).

Every read is bounds-checked against the section; every loop is bounded (instructions per
row, remember-state depth, expression steps, entries per section). Malformed input raises
CFIError (an ElfError, so a CrashlensError) with a one-line reason.

References: DWARF 5 section 6.4 (call frame information), 2.5 (expressions); LSB 5.0 "Exception
Frames" (.eh_frame, augmentations, DW_EH_PE_* encodings) and ".eh_frame_hdr".
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .elf import ElfError
from .readers import sleb128, uleb128

__all__ = ["CFIError", "CIE", "FDE", "Row", "CFITable", "evaluate", "MAX_ROW_INSTRUCTIONS"]


class CFIError(ElfError):
    help = "The call-frame information (.eh_frame/.debug_frame) of this module is malformed."


MAX_ROW_INSTRUCTIONS = 100_000   # CFA instructions executed for one row
MAX_STATE_DEPTH = 64             # DW_CFA_remember_state nesting
MAX_EXPR_STEPS = 10_000          # DWARF expression operations evaluated
MAX_EXPR_STACK = 1_000
MAX_ENTRIES = 5_000_000          # CIEs + FDEs indexed in one section

MASK64 = (1 << 64) - 1

# DW_EH_PE_*
PE_absptr, PE_uleb128, PE_udata2, PE_udata4, PE_udata8 = 0x00, 0x01, 0x02, 0x03, 0x04
PE_sleb128, PE_sdata2, PE_sdata4, PE_sdata8 = 0x09, 0x0A, 0x0B, 0x0C
PE_pcrel, PE_textrel, PE_datarel, PE_funcrel, PE_aligned = 0x10, 0x20, 0x30, 0x40, 0x50
PE_indirect, PE_omit = 0x80, 0xFF
_FIXED = {PE_udata2: ("H", 2), PE_udata4: ("I", 4), PE_udata8: ("Q", 8),
          PE_sdata2: ("h", 2), PE_sdata4: ("i", 4), PE_sdata8: ("q", 8)}


# -- records ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CIE:
    offset: int                 # in the section
    version: int
    augmentation: str
    code_align: int
    data_align: int
    ra_column: int
    fde_encoding: int           # DW_EH_PE_* of the FDEs' addresses (absptr for .debug_frame)
    lsda_encoding: int
    signal_frame: bool          # 'S': frames of this CIE are signal trampolines (pc is exact)
    address_size: int
    instructions: tuple[int, int]   # [start, end) in the section
    has_z: bool


@dataclass(frozen=True)
class FDE:
    offset: int
    cie: CIE
    pc_begin: int
    pc_end: int
    instructions: tuple[int, int]

    @property
    def signal_frame(self) -> bool:
        return self.cie.signal_frame


# Register rules: (kind, value). kinds: "undefined", "same", "offset" (saved at CFA+n),
# "val_offset" (value is CFA+n), "register" (in register n), "expression" (saved at the
# address the expression computes, CFA pushed first), "val_expression" (value computed).
Rule = tuple


@dataclass
class Row:
    cfa_reg: int | None = None
    cfa_offset: int = 0
    cfa_expr: bytes | None = None
    rules: dict[int, Rule] = field(default_factory=dict)
    args_size: int = 0
    ra_signed: bool = False     # AArch64 negate_ra_state toggled

    def copy(self) -> "Row":
        return Row(self.cfa_reg, self.cfa_offset, self.cfa_expr, dict(self.rules), self.args_size, self.ra_signed)


# -- the table ----------------------------------------------------------------------------------------

class CFITable:
    """One `.eh_frame` or `.debug_frame`, with its FDEs found by binary search."""

    def __init__(self, data, address: int, kind: str = "eh", *, hdr=None, hdr_address: int | None = None,
                 ptr_size: int = 8, endian: str = "<", name: str = "") -> None:
        if kind not in ("eh", "debug"):
            raise ValueError(kind)
        self.data = data
        self.address = address
        self.size = len(data)
        self.kind = kind
        self.ptr = ptr_size
        self.e = endian
        self.name = name or (".eh_frame" if kind == "eh" else ".debug_frame")
        self._u32 = struct.Struct(endian + "I")
        self._u64 = struct.Struct(endian + "Q")
        self._cies: dict[int, CIE] = {}
        self._fdes: dict[int, FDE] = {}
        self._index: tuple[list[int], list[int], list[int]] | None = None   # starts, ends, offsets
        self.notes: list[str] = []
        self._hdr = None
        if hdr is not None and hdr_address is not None and kind == "eh":
            try:
                self._hdr = self._parse_hdr(hdr, hdr_address)
            except CFIError as exc:
                self.notes.append(f".eh_frame_hdr unusable ({exc}): FDEs found by a scan of .eh_frame")

    # -- pointers
    def _encoded(self, pos: int, end: int, enc: int, *, data_base: int = 0, func_base: int = 0,
                 data=None, base_address: int | None = None) -> tuple[int, int]:
        """An encoded pointer at `pos` (in `data`, the section by default)."""
        d = self.data if data is None else data
        where = self.address if base_address is None else base_address
        if enc == PE_omit:
            return 0, pos
        fmt = enc & 0x0F
        app = enc & 0x70
        if app == PE_aligned:
            pos = (pos + self.ptr - 1) & -self.ptr
        field_addr = where + pos
        if fmt == PE_absptr:
            size = self.ptr
            if pos + size > end:
                raise CFIError("pointer runs past its record")
            value = (self._u64 if size == 8 else self._u32).unpack_from(d, pos)[0]
            pos += size
        elif fmt == PE_uleb128:
            value, pos = uleb128(d, pos, end, CFIError)
        elif fmt == PE_sleb128:
            value, pos = sleb128(d, pos, end, CFIError)
        elif fmt in _FIXED:
            code, size = _FIXED[fmt]
            if pos + size > end:
                raise CFIError("pointer runs past its record")
            value = struct.unpack_from(self.e + code, d, pos)[0]
            pos += size
        else:
            raise CFIError(f"unknown pointer encoding {enc:#x}")
        if app == PE_pcrel:
            value += field_addr
        elif app == PE_datarel:
            value += data_base
        elif app == PE_funcrel:
            value += func_base
        elif app == PE_textrel:
            raise CFIError("text-relative pointers (DW_EH_PE_textrel) are not used on this architecture")
        elif app not in (0, PE_aligned):
            raise CFIError(f"unknown pointer application {enc:#x}")
        # indirect: the value is where the pointer is stored; only personality routines use it
        return value & MASK64, pos

    # -- .eh_frame_hdr
    def _parse_hdr(self, hdr, hdr_address: int):
        n = len(hdr)
        if n < 4:
            raise CFIError("shorter than its 4-byte header")
        version, ptr_enc, count_enc, table_enc = hdr[0], hdr[1], hdr[2], hdr[3]
        if version != 1:
            raise CFIError(f"version {version}")
        frame_ptr, pos = self._encoded(4, n, ptr_enc, data_base=hdr_address, data=hdr, base_address=hdr_address)
        if count_enc == PE_omit or table_enc == PE_omit:
            raise CFIError("no binary-search table")
        count, pos = self._encoded(pos, n, count_enc, data_base=hdr_address, data=hdr, base_address=hdr_address)
        fmt = table_enc & 0x0F
        if fmt not in _FIXED and fmt != PE_absptr or table_enc & 0x70 not in (0, PE_datarel):
            raise CFIError(f"table encoding {table_enc:#x} is not a fixed-size one")
        code, size = _FIXED.get(fmt, ("Q" if self.ptr == 8 else "I", self.ptr))
        if count > (n - pos) // (2 * size):
            raise CFIError(f"a table of {count} entries does not fit in {n} bytes")
        if frame_ptr != self.address:
            self.notes.append(f".eh_frame_hdr points at {frame_ptr:#x}, .eh_frame is at {self.address:#x}")
        base = hdr_address if table_enc & 0x70 == PE_datarel else 0
        return hdr, pos, count, struct.Struct(self.e + code * 2), size, base

    def _hdr_lookup(self, pc: int) -> int | None:
        """Section offset of the FDE whose initial location is the last <= pc, or None."""
        hdr, pos, count, entry, size, base = self._hdr
        lo, hi = 0, count
        step = 2 * size
        while lo < hi:
            mid = (lo + hi) >> 1
            if (entry.unpack_from(hdr, pos + step * mid)[0] + base) & MASK64 <= pc:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return None
        fde_addr = (entry.unpack_from(hdr, pos + step * (lo - 1))[1] + base) & MASK64
        off = fde_addr - self.address
        if not 0 <= off < self.size:
            raise CFIError(f".eh_frame_hdr entry points at {fde_addr:#x}, outside .eh_frame")
        return off

    # -- entries
    def _entry_header(self, off: int) -> tuple[int, int, int, bool]:
        """(start of the id field, end of the entry, id/CIE pointer, 64-bit format)."""
        if off + 4 > self.size:
            raise CFIError(f"entry at {off:#x} runs past the section")
        length = self._u32.unpack_from(self.data, off)[0]
        pos = off + 4
        wide = False
        if length == 0xFFFFFFFF:
            if pos + 8 > self.size:
                raise CFIError(f"entry at {off:#x} runs past the section")
            length = self._u64.unpack_from(self.data, pos)[0]
            pos += 8
            wide = True
        end = pos + length
        if length == 0:
            return pos, pos, 0, wide
        if end > self.size or length < 4:
            raise CFIError(f"entry at {off:#x} ({length:#x} bytes) runs past the section ({self.size:#x})")
        if wide:
            if pos + 8 > end:
                raise CFIError(f"entry at {off:#x} too short")
            ident = self._u64.unpack_from(self.data, pos)[0]
        else:
            ident = self._u32.unpack_from(self.data, pos)[0]
        return pos, end, ident, wide

    def _is_cie(self, ident: int, wide: bool) -> bool:
        if self.kind == "eh":
            return ident == 0
        return ident == (0xFFFFFFFFFFFFFFFF if wide else 0xFFFFFFFF)

    def cie_at(self, off: int) -> CIE:
        hit = self._cies.get(off)
        if hit is not None:
            return hit
        idpos, end, ident, wide = self._entry_header(off)
        if end == idpos or not self._is_cie(ident, wide):
            raise CFIError(f"no CIE at {off:#x}")
        d = self.data
        pos = idpos + (8 if wide else 4)
        if pos >= end:
            raise CFIError(f"CIE at {off:#x} too short")
        version = d[pos]
        pos += 1
        if version not in (1, 3, 4):
            raise CFIError(f"CIE at {off:#x} has version {version}")
        aug_end = bytes(d[pos:min(end, pos + 64)]).find(b"\0")
        if aug_end < 0:
            raise CFIError(f"CIE at {off:#x}: augmentation string not terminated")
        aug = bytes(d[pos:pos + aug_end]).decode("latin-1")
        pos += aug_end + 1
        address_size = self.ptr
        if aug.startswith("eh"):   # very old GCC: a pointer follows
            pos += self.ptr
        if version == 4:
            if pos + 2 > end:
                raise CFIError(f"CIE at {off:#x} too short")
            address_size = d[pos]
            pos += 2   # address_size, segment_selector_size
            if address_size not in (4, 8):
                raise CFIError(f"CIE at {off:#x}: address size {address_size}")
        code_align, pos = uleb128(d, pos, end, CFIError)
        data_align, pos = sleb128(d, pos, end, CFIError)
        if version == 1:
            if pos >= end:
                raise CFIError(f"CIE at {off:#x} too short")
            ra = d[pos]
            pos += 1
        else:
            ra, pos = uleb128(d, pos, end, CFIError)
        fde_enc = PE_absptr if self.kind == "debug" or address_size == self.ptr else (
            PE_udata4 if address_size == 4 else PE_udata8)
        lsda_enc = PE_omit
        signal = False
        has_z = aug.startswith("z")
        if has_z:
            aug_len, pos = uleb128(d, pos, end, CFIError)
            aug_data_end = pos + aug_len
            if aug_data_end > end:
                raise CFIError(f"CIE at {off:#x}: augmentation data runs past the entry")
            p = pos
            for ch in aug[1:]:
                if ch == "R":
                    if p >= aug_data_end:
                        raise CFIError(f"CIE at {off:#x}: augmentation data too short")
                    fde_enc = d[p]
                    p += 1
                elif ch == "L":
                    if p >= aug_data_end:
                        raise CFIError(f"CIE at {off:#x}: augmentation data too short")
                    lsda_enc = d[p]
                    p += 1
                elif ch == "P":
                    if p >= aug_data_end:
                        raise CFIError(f"CIE at {off:#x}: augmentation data too short")
                    penc = d[p]
                    _v, p = self._encoded(p + 1, aug_data_end, penc & 0x7F)
                elif ch == "S":
                    signal = True
                elif ch in "BG":   # AArch64 BTI / MTE-tagged frames: no data
                    pass
                else:
                    break   # unknown: the length lets us skip the rest
            pos = aug_data_end
        elif aug and aug not in ("eh",):
            if "S" in aug and set(aug) <= {"S"}:
                signal = True
            else:
                raise CFIError(f"CIE at {off:#x}: unknown augmentation {aug!r}")
        cie = CIE(off, version, aug, code_align, data_align, ra, fde_enc, lsda_enc, signal, address_size,
                  (pos, end), has_z)
        if len(self._cies) < 100_000:
            self._cies[off] = cie
        return cie

    def fde_at(self, off: int) -> FDE:
        hit = self._fdes.get(off)
        if hit is not None:
            return hit
        idpos, end, ident, wide = self._entry_header(off)
        if end == idpos or self._is_cie(ident, wide):
            raise CFIError(f"no FDE at {off:#x}")
        if self.kind == "eh":
            cie_off = idpos - ident
        else:
            cie_off = ident
        if not 0 <= cie_off < self.size:
            raise CFIError(f"FDE at {off:#x} points at a CIE outside the section ({cie_off:#x})")
        cie = self.cie_at(cie_off)
        pos = idpos + (8 if wide else 4)
        enc = cie.fde_encoding
        begin, pos = self._encoded(pos, end, enc)
        length, pos = self._encoded(pos, end, enc & 0x0F)
        if cie.has_z:
            aug_len, pos = uleb128(self.data, pos, end, CFIError)
            pos += aug_len
            if pos > end:
                raise CFIError(f"FDE at {off:#x}: augmentation data runs past the entry")
        fde = FDE(off, cie, begin, (begin + length) & MASK64, (pos, end))
        if len(self._fdes) < 100_000:
            self._fdes[off] = fde
        return fde

    def _build_index(self) -> tuple[list[int], list[int], list[int]]:
        rows: list[tuple[int, int, int]] = []
        off = 0
        bad = 0
        for _ in range(MAX_ENTRIES):
            if off + 4 > self.size:
                break
            try:
                idpos, end, ident, wide = self._entry_header(off)
            except CFIError as exc:
                self.notes.append(f"{self.name}: {exc}; the entries before it are used")
                break
            if end == idpos:
                if self.kind == "eh":
                    break            # the zero terminator
                off = end
                continue
            if not self._is_cie(ident, wide):
                try:
                    fde = self.fde_at(off)
                    if fde.pc_end > fde.pc_begin:
                        rows.append((fde.pc_begin, fde.pc_end, off))
                except CFIError as exc:
                    bad += 1
                    if bad <= 3:
                        self.notes.append(f"{self.name}: {exc}")
            off = end
        rows.sort()
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]

    def find(self, pc: int) -> FDE | None:
        """The FDE whose range holds pc, or None."""
        if self._hdr is not None:
            off = self._hdr_lookup(pc)
            if off is None:
                return None
            fde = self.fde_at(off)
            return fde if fde.pc_begin <= pc < fde.pc_end else None
        if self._index is None:
            self._index = self._build_index()
        starts, ends, offs = self._index
        k = bisect_right(starts, pc) - 1
        # overlapping ranges are rare; look back a few entries
        for j in range(k, max(k - 4, -1), -1):
            if starts[j] <= pc < ends[j]:
                return self.fde_at(offs[j])
        return None

    # -- rows
    def row(self, fde: FDE, pc: int) -> Row:
        """The rules in force at `pc` (an address inside the FDE's range)."""
        cie = fde.cie
        initial = Row()
        budget = [MAX_ROW_INSTRUCTIONS]
        self._execute(cie, cie.instructions, initial, None, None, fde.pc_begin, budget)
        row = initial.copy()
        self._execute(cie, fde.instructions, row, initial, pc, fde.pc_begin, budget)
        return row

    def _execute(self, cie: CIE, span: tuple[int, int], row: Row, initial: Row | None, target: int | None,
                 loc: int, budget: list[int]) -> None:
        d = self.data
        pos, end = span
        ca, da = cie.code_align, cie.data_align
        stack: list[Row] = []
        while pos < end:
            budget[0] -= 1
            if budget[0] < 0:
                raise CFIError(f"more than {MAX_ROW_INSTRUCTIONS} CFA instructions for one row")
            op = d[pos]
            pos += 1
            high, low = op & 0xC0, op & 0x3F
            if high == 0x40:                                   # DW_CFA_advance_loc
                loc += low * ca
                if target is not None and loc > target:
                    return
                continue
            if high == 0x80:                                   # DW_CFA_offset
                n, pos = uleb128(d, pos, end, CFIError)
                row.rules[low] = ("offset", n * da)
                continue
            if high == 0xC0:                                   # DW_CFA_restore
                self._restore(row, initial, low)
                continue
            if op == 0x00:                                     # nop
                continue
            if op == 0x01:                                     # set_loc
                loc, pos = self._encoded(pos, end, cie.fde_encoding)
                if target is not None and loc > target:
                    return
            elif op in (0x02, 0x03, 0x04):                     # advance_loc1/2/4
                size = {0x02: 1, 0x03: 2, 0x04: 4}[op]
                if pos + size > end:
                    raise CFIError("DW_CFA_advance_loc operand runs past the FDE")
                delta = int.from_bytes(bytes(d[pos:pos + size]), "little" if self.e == "<" else "big")
                pos += size
                loc += delta * ca
                if target is not None and loc > target:
                    return
            elif op == 0x05:                                   # offset_extended
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = uleb128(d, pos, end, CFIError)
                row.rules[r] = ("offset", n * da)
            elif op == 0x06:                                   # restore_extended
                r, pos = uleb128(d, pos, end, CFIError)
                self._restore(row, initial, r)
            elif op == 0x07:                                   # undefined
                r, pos = uleb128(d, pos, end, CFIError)
                row.rules[r] = ("undefined",)
            elif op == 0x08:                                   # same_value
                r, pos = uleb128(d, pos, end, CFIError)
                row.rules[r] = ("same",)
            elif op == 0x09:                                   # register
                r, pos = uleb128(d, pos, end, CFIError)
                r2, pos = uleb128(d, pos, end, CFIError)
                row.rules[r] = ("register", r2)
            elif op == 0x0A:                                   # remember_state
                if len(stack) >= MAX_STATE_DEPTH:
                    raise CFIError(f"DW_CFA_remember_state nested deeper than {MAX_STATE_DEPTH}")
                stack.append(row.copy())
            elif op == 0x0B:                                   # restore_state
                if not stack:
                    raise CFIError("DW_CFA_restore_state without remember_state")
                saved = stack.pop()
                # the CFA is part of the state too (DWARF 5: the whole row)
                row.cfa_reg, row.cfa_offset, row.cfa_expr = saved.cfa_reg, saved.cfa_offset, saved.cfa_expr
                row.rules = saved.rules
                row.ra_signed = saved.ra_signed
            elif op == 0x0C:                                   # def_cfa
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = uleb128(d, pos, end, CFIError)
                row.cfa_reg, row.cfa_offset, row.cfa_expr = r, n, None
            elif op == 0x0D:                                   # def_cfa_register
                r, pos = uleb128(d, pos, end, CFIError)
                row.cfa_reg, row.cfa_expr = r, None
            elif op == 0x0E:                                   # def_cfa_offset
                n, pos = uleb128(d, pos, end, CFIError)
                row.cfa_offset = n
            elif op == 0x0F:                                   # def_cfa_expression
                n, pos = uleb128(d, pos, end, CFIError)
                if pos + n > end:
                    raise CFIError("DW_CFA_def_cfa_expression runs past the FDE")
                row.cfa_expr = bytes(d[pos:pos + n])
                row.cfa_reg = None
                pos += n
            elif op in (0x10, 0x16):                           # expression, val_expression
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = uleb128(d, pos, end, CFIError)
                if pos + n > end:
                    raise CFIError("DW_CFA_expression runs past the FDE")
                row.rules[r] = ("expression" if op == 0x10 else "val_expression", bytes(d[pos:pos + n]))
                pos += n
            elif op == 0x11:                                   # offset_extended_sf
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = sleb128(d, pos, end, CFIError)
                row.rules[r] = ("offset", n * da)
            elif op == 0x12:                                   # def_cfa_sf
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = sleb128(d, pos, end, CFIError)
                row.cfa_reg, row.cfa_offset, row.cfa_expr = r, n * da, None
            elif op == 0x13:                                   # def_cfa_offset_sf
                n, pos = sleb128(d, pos, end, CFIError)
                row.cfa_offset = n * da
            elif op == 0x14:                                   # val_offset
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = uleb128(d, pos, end, CFIError)
                row.rules[r] = ("val_offset", n * da)
            elif op == 0x15:                                   # val_offset_sf
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = sleb128(d, pos, end, CFIError)
                row.rules[r] = ("val_offset", n * da)
            elif op == 0x2D:                                   # GNU_window_save / AArch64 negate_ra_state
                row.ra_signed = not row.ra_signed
            elif op == 0x2E:                                   # GNU_args_size
                n, pos = uleb128(d, pos, end, CFIError)
                row.args_size = n
            elif op == 0x2F:                                   # GNU_negative_offset_extended
                r, pos = uleb128(d, pos, end, CFIError)
                n, pos = uleb128(d, pos, end, CFIError)
                row.rules[r] = ("offset", -n * da)
            else:
                raise CFIError(f"unknown CFA instruction {op:#04x}")
            if pos > end:
                raise CFIError("CFA instruction operands run past the FDE")

    @staticmethod
    def _restore(row: Row, initial: Row | None, reg: int) -> None:
        if initial is not None and reg in initial.rules:
            row.rules[reg] = initial.rules[reg]
        else:
            row.rules.pop(reg, None)


# -- DWARF expressions --------------------------------------------------------------------------------

def _signed(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >> 63 else v


def evaluate(expr: bytes, read_reg: Callable[[int], int | None], read_word: Callable[[int, int], int | None],
             push: Iterable[int] = (), address_size: int = 8, endian: str = "<") -> int:
    """Evaluate a DWARF expression; the top of the stack is the result.

    read_reg(n) -> the register's value in the frame being unwound (None: unknown);
    read_word(address, size) -> memory (None: unreadable). Raises CFIError for what cannot be
    computed (unknown register, unreadable memory, malformed or unsupported operations)."""
    stack = [v & MASK64 for v in push]
    pos, end = 0, len(expr)
    steps = 0
    order = "little" if endian == "<" else "big"

    def pop() -> int:
        if not stack:
            raise CFIError("DWARF expression pops an empty stack")
        return stack.pop()

    def reg(n: int) -> int:
        v = read_reg(n)
        if v is None:
            raise CFIError(f"DWARF expression reads register {n}, whose value is unknown")
        return v

    def fixed(size: int, signed: bool) -> int:
        nonlocal pos
        if pos + size > end:
            raise CFIError("DWARF expression operand runs past the expression")
        v = int.from_bytes(expr[pos:pos + size], order, signed=signed)
        pos += size
        return v

    while pos < end:
        steps += 1
        if steps > MAX_EXPR_STEPS:
            raise CFIError(f"DWARF expression runs more than {MAX_EXPR_STEPS} steps (a loop?)")
        if len(stack) > MAX_EXPR_STACK:
            raise CFIError("DWARF expression stack overflow")
        op = expr[pos]
        pos += 1
        if 0x30 <= op <= 0x4F:                       # lit0..31
            stack.append(op - 0x30)
        elif 0x50 <= op <= 0x6F:                     # reg0..31: value in a register (location)
            stack.append(reg(op - 0x50) & MASK64)
        elif 0x70 <= op <= 0x8F:                     # breg0..31
            off, pos = sleb128(expr, pos, end, CFIError)
            stack.append((reg(op - 0x70) + off) & MASK64)
        elif op == 0x03:                             # addr
            stack.append(fixed(address_size, False))
        elif op in (0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F):   # const1u..const8s
            size = {0x08: 1, 0x09: 1, 0x0A: 2, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8, 0x0F: 8}[op]
            stack.append(fixed(size, op & 1 == 1) & MASK64)
        elif op == 0x10:                             # constu
            v, pos = uleb128(expr, pos, end, CFIError)
            stack.append(v & MASK64)
        elif op == 0x11:                             # consts
            v, pos = sleb128(expr, pos, end, CFIError)
            stack.append(v & MASK64)
        elif op == 0x12:                             # dup
            stack.append(stack[-1] if stack else pop())
        elif op == 0x13:                             # drop
            pop()
        elif op == 0x14:                             # over
            if len(stack) < 2:
                raise CFIError("DW_OP_over on a short stack")
            stack.append(stack[-2])
        elif op == 0x15:                             # pick
            i = fixed(1, False)
            if i >= len(stack):
                raise CFIError("DW_OP_pick past the stack")
            stack.append(stack[-1 - i])
        elif op == 0x16:                             # swap
            a, b = pop(), pop()
            stack += [a, b]
        elif op == 0x17:                             # rot
            a, b, c = pop(), pop(), pop()
            stack += [a, c, b]
        elif op in (0x06, 0x94):                     # deref, deref_size
            size = address_size if op == 0x06 else fixed(1, False)
            if size not in (1, 2, 4, 8):
                raise CFIError(f"DW_OP_deref_size {size}")
            addr = pop()
            v = read_word(addr, size)
            if v is None:
                raise CFIError(f"DWARF expression reads memory at {addr:#x}, which is not in the core")
            stack.append(v & MASK64)
        elif op == 0x19:                             # abs
            stack.append(abs(_signed(pop())) & MASK64)
        elif op == 0x1A:
            b, a = pop(), pop()
            stack.append(a & b)
        elif op == 0x1B:                             # div (signed)
            b, a = _signed(pop()), _signed(pop())
            if b == 0:
                raise CFIError("DWARF expression divides by zero")
            q = abs(a) // abs(b)
            stack.append((q if (a < 0) == (b < 0) else -q) & MASK64)
        elif op == 0x1C:
            b, a = pop(), pop()
            stack.append((a - b) & MASK64)
        elif op == 0x1D:                             # mod
            b, a = pop(), pop()
            if b == 0:
                raise CFIError("DWARF expression divides by zero")
            stack.append(a % b)
        elif op == 0x1E:
            b, a = pop(), pop()
            stack.append((a * b) & MASK64)
        elif op == 0x1F:
            stack.append(-pop() & MASK64)
        elif op == 0x20:
            stack.append(~pop() & MASK64)
        elif op == 0x21:
            b, a = pop(), pop()
            stack.append(a | b)
        elif op == 0x22:
            b, a = pop(), pop()
            stack.append((a + b) & MASK64)
        elif op == 0x23:                             # plus_uconst
            v, pos = uleb128(expr, pos, end, CFIError)
            stack.append((pop() + v) & MASK64)
        elif op == 0x24:                             # shl
            b, a = pop(), pop()
            stack.append((a << b) & MASK64 if b < 64 else 0)
        elif op == 0x25:                             # shr
            b, a = pop(), pop()
            stack.append(a >> b if b < 64 else 0)
        elif op == 0x26:                             # shra
            b, a = pop(), _signed(pop())
            stack.append((a >> min(b, 63)) & MASK64)
        elif op == 0x27:
            b, a = pop(), pop()
            stack.append(a ^ b)
        elif op == 0x28:                             # bra
            off = fixed(2, True)
            if pop() != 0:
                pos += off
                if not 0 <= pos <= end:
                    raise CFIError("DW_OP_bra jumps outside the expression")
        elif 0x29 <= op <= 0x2E:                     # eq ge gt le lt ne (signed)
            b, a = _signed(pop()), _signed(pop())
            r = {0x29: a == b, 0x2A: a >= b, 0x2B: a > b, 0x2C: a <= b, 0x2D: a < b, 0x2E: a != b}[op]
            stack.append(1 if r else 0)
        elif op == 0x2F:                             # skip
            off = fixed(2, True)
            pos += off
            if not 0 <= pos <= end:
                raise CFIError("DW_OP_skip jumps outside the expression")
        elif op == 0x90:                             # regx
            r, pos = uleb128(expr, pos, end, CFIError)
            stack.append(reg(r) & MASK64)
        elif op == 0x92:                             # bregx
            r, pos = uleb128(expr, pos, end, CFIError)
            off, pos = sleb128(expr, pos, end, CFIError)
            stack.append((reg(r) + off) & MASK64)
        elif op == 0x96:                             # nop
            pass
        else:
            raise CFIError(f"DWARF expression operation {op:#04x} is not supported in CFI")
    if not stack:
        raise CFIError("DWARF expression leaves an empty stack")
    return stack[-1]
