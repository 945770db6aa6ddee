"""A cubin's functions, SASS line table and instruction words: GPU pc -> function, source line.

    cubin = Cubin.from_bytes(data)                 an EM_CUDA ELF image (a module of a GPU core,
                                                   or `cuobjdump -xelf` output)
    cubin.locate_offset(function, offset)          -> SassLocation (kernel- or section-relative
                                                   offset, what compute-sanitizer prints)
    cubin.locate_address(address)                  -> SassLocation (an absolute pc, in the
                                                   relocated image a GPU core holds)

Layout facts (all standard ELF/DWARF; checked on the sm_90 cubins nvcc 13.0 built in
fixtures/gpu-cores against `nvdisasm -g` and `readelf --debug-dump=rawline`):

- Each kernel lives in its own section `.text.<mangled name>`; device functions that are not
  inlined are local FUNC symbols inside the calling kernel's section (named
  `$<kernel>$<function>`); a symbol's value is section-relative in the image nvcc writes.
- `-lineinfo` (or `-G`) adds `.debug_line` (SASS address -> CUDA source line, DWARF 2 line
  program, one sequence per kernel section) and `.nv_debug_line_sass` (SASS -> PTX line, the
  same format). Each sequence starts with DW_LNE_set_address 0, relocated by
  `.rela.debug_line` (Elf64_Rela: r_offset, r_info = symbol << 32 | type, r_addend) against the
  kernel's section symbol; that relocation names the section a sequence belongs to. Without
  relocations (a relocated image) the addresses are absolute.
- sm_70 and later instructions are 16 bytes; the words are shown as two little-endian u64, as
  nvdisasm/cuobjdump print them.

The text of the instruction comes from `nvdisasm` when it is on PATH (NVIDIA ships it as the
`nvidia-cuda-nvdisasm` wheel), otherwise only the raw words are given.
"""

from __future__ import annotations

import bisect
import functools
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field

EM_CUDA = 190
SHT_SYMTAB = 2
SHT_RELA = 4
STT_FUNC = 2
STT_SECTION = 3


@dataclass(frozen=True)
class SassLocation:
    """Where a GPU pc lies in a cubin."""

    function: str | None = None  # mangled name of the innermost function symbol
    kernel: str | None = None  # the kernel (section) it belongs to
    function_offset: int | None = None  # pc - function start
    section_offset: int | None = None  # pc - section (kernel) start: compute-sanitizer's +0x..
    file: str | None = None
    line: int | None = None
    words: tuple[int, ...] = ()  # the raw instruction words at the pc
    instruction: str | None = None  # nvdisasm's text, when nvdisasm is available
    notes: tuple[str, ...] = ()


@dataclass
class _Sym:
    name: str
    value: int
    size: int
    shndx: int
    kind: int


@dataclass
class Cubin:
    data: bytes
    sections: list[tuple[str, int, int, int, int, int, int]] = field(default_factory=list)
    # (name, type, offset, size, link, info, addr)
    symbols: list[_Sym] = field(default_factory=list)
    sequences: list[tuple[int | None, list[int], list[tuple[str | None, int]]]] = field(default_factory=list)
    # (section index or None when absolute, addresses, rows (file, line))
    arch: int | None = None
    notes: list[str] = field(default_factory=list)

    # ---------------------------------------------------------------- reading
    @classmethod
    def from_bytes(cls, data: bytes) -> "Cubin":
        """Parse what the image holds; a damaged image yields what could be read and notes."""
        c = cls(bytes(data))
        try:
            c._parse()
        except (struct.error, IndexError, ValueError) as exc:
            c.notes.append(f"cubin unreadable past a point ({type(exc).__name__}: {exc})")
        return c

    def _parse(self) -> None:
        d = self.data
        if d[:4] != b"\x7fELF" or d[4] != 2 or d[5] != 1:
            raise ValueError("not a little-endian ELF64 image")
        (e_machine,) = struct.unpack_from("<H", d, 18)
        if e_machine != EM_CUDA:
            raise ValueError(f"e_machine {e_machine} is not EM_CUDA (190)")
        e_flags, = struct.unpack_from("<I", d, 48)
        self.arch = ((e_flags >> 8) & 0xFF) if d[8] == 8 or d[7] == 0x41 else (e_flags & 0xFF)
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
        stroff = raw[shstrndx][4] if shstrndx < len(raw) else 0
        for (name, typ, _flags, addr, off, size, link, info, _al, _es) in raw:
            self.sections.append((_cstr(d, stroff + name), typ, off, size, link, info, addr))
        for s in self.sections:
            if s[1] == SHT_SYMTAB:
                strtab = self.sections[s[4]][2]
                for i in range(s[3] // 24):
                    n, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", d, s[2] + i * 24)
                    # A relocated image (the modules of a GPU core) gives the loaded kernels'
                    # sections their load address (sh_addr) and their symbols absolute values;
                    # kept here section-relative like the unrelocated image's, so one lookup
                    # serves both (checked on fixtures/gpu-cores/complete: only the launched
                    # kernel's section is placed, the others keep address 0).
                    base = self.sections[shndx][6] if 0 < shndx < len(self.sections) else 0
                    if base and value >= base:
                        value -= base
                    self.symbols.append(_Sym(_cstr(d, strtab + n), value, size, shndx, info & 0xF))
                break
        line = self._section(".debug_line")
        if line is not None:
            self._read_lines(line)
        else:
            self.notes.append("no .debug_line: the module was built without -lineinfo/-G, so no source lines")

    def _section(self, name: str) -> int | None:
        for i, s in enumerate(self.sections):
            if s[0] == name:
                return i
        return None

    def _relocations_for(self, index: int) -> dict[int, int]:
        """r_offset -> target section index of the RELA section that applies to section index."""
        out: dict[int, int] = {}
        for s in self.sections:
            if s[1] == SHT_RELA and s[5] == index:
                for i in range(s[3] // 24):
                    r_off, r_info, addend = struct.unpack_from("<QQq", self.data, s[2] + i * 24)
                    sym = r_info >> 32
                    if 0 < sym <= len(self.symbols):
                        tgt = self.symbols[sym]
                        out[r_off] = tgt.shndx if addend == 0 and tgt.value == 0 else tgt.shndx
        return out

    def _read_lines(self, index: int) -> None:
        _name, _t, off, size, *_ = self.sections[index]
        relocs = self._relocations_for(index)
        d = self.data
        pos, end = off, off + size
        while pos + 4 <= end:
            unit_len, = struct.unpack_from("<I", d, pos)
            if unit_len == 0xFFFFFFFF or unit_len == 0:
                self.notes.append(".debug_line: 64-bit DWARF or an empty unit: not read")
                return
            unit_end = pos + 4 + unit_len
            version, = struct.unpack_from("<H", d, pos + 4)
            if version > 4:
                self.notes.append(f".debug_line: DWARF version {version} not read")
                return
            hdr_len, = struct.unpack_from("<I", d, pos + 6)
            p = pos + 10
            min_inst = d[p]; p += 1
            if version >= 4:
                p += 1  # maximum_operations_per_instruction
            p += 1  # default_is_stmt
            line_base = struct.unpack_from("<b", d, p)[0]; line_range = d[p + 1]; opcode_base = d[p + 2]
            std_lengths = list(d[p + 3:p + 2 + opcode_base])
            p += 2 + opcode_base
            dirs = [""]
            while d[p]:
                s = _cstr(d, p); dirs.append(s); p += len(s.encode()) + 1
            p += 1
            files: list[str] = [""]
            while d[p]:
                s = _cstr(d, p); p += len(s.encode()) + 1
                di, p = _uleb(d, p); _, p = _uleb(d, p); _, p = _uleb(d, p)
                files.append(os.path.join(dirs[di], s) if 0 < di < len(dirs) and not s.startswith("/") else s)
            p = pos + 10 + hdr_len
            self._run_program(d, p, unit_end, min_inst, line_base, line_range, opcode_base, std_lengths, files,
                              relocs, off)
            pos = unit_end

    def _run_program(self, d, p, end, min_inst, line_base, line_range, opcode_base, std_lengths, files,
                     relocs, sec_off) -> None:
        addr, file, line = 0, 1, 1
        seq_sec: int | None = None
        addrs: list[int] = []
        rows: list[tuple[str | None, int]] = []

        def emit() -> None:
            addrs.append(addr)
            rows.append((files[file] if 0 < file < len(files) else None, line))

        while p < end:
            op = d[p]; p += 1
            if op >= opcode_base:
                adj = op - opcode_base
                addr += (adj // line_range) * min_inst
                line += line_base + adj % line_range
                emit()
            elif op == 0:
                ln, p = _uleb(d, p)
                sub = d[p]
                if sub == 1:  # end_sequence
                    emit()
                    self.sequences.append((seq_sec, addrs, rows))
                    addrs, rows = [], []
                    addr, file, line, seq_sec = 0, 1, 1, None
                elif sub == 2:  # set_address
                    addr, = struct.unpack_from("<Q", d, p + 1)
                    seq_sec = relocs.get(p + 1 - sec_off)
                p += ln
            elif op == 1:
                emit()
            elif op == 2:
                v, p = _uleb(d, p); addr += v * min_inst
            elif op == 3:
                v, p = _sleb(d, p); line += v
            elif op == 4:
                file, p = _uleb(d, p)
            elif op in (5,):
                _, p = _uleb(d, p)
            elif op in (6, 7, 10, 11):
                pass
            elif op == 8:
                addr += ((255 - opcode_base) // line_range) * min_inst
            elif op == 9:
                addr += struct.unpack_from("<H", d, p)[0]; p += 2
            else:
                for _ in range(std_lengths[op - 1] if op - 1 < len(std_lengths) else 0):
                    _, p = _uleb(d, p)

    # ---------------------------------------------------------------- lookups
    def kernel_section(self, name: str) -> int | None:
        """The section index of a kernel or function (mangled name or `.text.` section name)."""
        i = self._section(name if name.startswith(".text.") else ".text." + name)
        if i is not None:
            return i
        for s in self.symbols:
            if s.name == name and s.kind == STT_FUNC:
                return s.shndx
        return None

    def kernel_names(self) -> list[str]:
        return [s[0][len(".text."):] for s in self.sections if s[0].startswith(".text.")]

    def function_containing(self, shndx: int | None, value: int) -> _Sym | None:
        best = None
        for s in self.symbols:
            if s.kind != STT_FUNC or (shndx is not None and s.shndx != shndx):
                continue
            if s.value <= value < s.value + max(s.size, 1) and (best is None or s.value >= best.value):
                best = s
        return best

    def line_at(self, shndx: int | None, address: int) -> tuple[str | None, int | None]:
        for sec, addrs, rows in self.sequences:
            if shndx is not None and sec is not None and sec != shndx:
                continue
            if not addrs or not addrs[0] <= address < addrs[-1]:
                continue
            i = bisect.bisect_right(addrs, address) - 1
            f, ln = rows[i]
            return f, ln
        return None, None

    def locate_offset(self, function: str, offset: int) -> SassLocation:
        """A kernel- (section-) relative offset: what compute-sanitizer's `name+0x140` means
        (the innermost function is named, the offset counts from its kernel's section start)."""
        shndx = self.kernel_section(function)
        if shndx is None:
            return SassLocation(notes=(f"{function} is not in this cubin",))
        return self._locate(shndx, offset, offset)

    def section_at(self, address: int) -> int | None:
        """The code section a relocated image placed over an absolute pc (sh_addr..+size)."""
        for i, s in enumerate(self.sections):
            if s[6] and s[0].startswith(".text.") and s[6] <= address < s[6] + s[3]:
                return i
        return None

    def locate_pc(self, pc: int) -> SassLocation:
        """A GPU pc (a virtual address of a GPU core) in this relocated image: its kernel
        section by load address, then function, offset, line and words as for an offset."""
        shndx = self.section_at(pc)
        if shndx is None:
            return self.locate_address(pc)
        off = pc - self.sections[shndx][6]
        # the loaded kernel's line sequence is absolute (its relocation applied), the others not
        return self._locate(shndx, off, pc, disasm=False)

    def words_at(self, pc: int) -> tuple[int, ...]:
        """The raw instruction words (two little-endian u64) at an absolute pc, () if outside."""
        shndx = self.section_at(pc)
        if shndx is None:
            return ()
        _n, _t, off, size, _l, _i, addr = self.sections[shndx]
        rel = (pc - addr) & ~0xF
        return struct.unpack_from("<QQ", self.data, off + rel) if rel + 16 <= size else ()

    def locate_address(self, address: int) -> SassLocation:
        """An absolute pc in a relocated image (symbol values and line addresses absolute)."""
        sym = self.function_containing(None, address)
        if sym is None:
            return SassLocation(notes=(f"0x{address:x} is in no function of this cubin",))
        sec = self.sections[sym.shndx] if sym.shndx < len(self.sections) else None
        base = sec[6] if sec else 0
        return self._locate(sym.shndx, address - base, address)

    def _locate(self, shndx: int, sec_offset: int, line_addr: int, disasm: bool = True) -> SassLocation:
        name, _t, off, size, *_ = self.sections[shndx]
        kernel = name[len(".text."):] if name.startswith(".text.") else name
        sym = self.function_containing(shndx, sec_offset) or self.function_containing(shndx, line_addr)
        fn = sym.name if sym else kernel
        fn_off = (sec_offset - sym.value) if sym and sym.value <= sec_offset else sec_offset
        file, line = self.line_at(shndx, sec_offset)
        if line is None and line_addr != sec_offset:
            file, line = self.line_at(None, line_addr)
        words: tuple[int, ...] = ()
        if 0 <= sec_offset and sec_offset + 16 <= size:
            words = struct.unpack_from("<QQ", self.data, off + (sec_offset & ~0xF))
        notes = tuple(self.notes) if line is None else ()
        return SassLocation(function=fn, kernel=kernel, function_offset=fn_off, section_offset=sec_offset,
                            file=file, line=line, words=words,
                            instruction=nvdisasm_instruction(self.data, kernel, sec_offset & ~0xF) if disasm else None,
                            notes=notes)


def _cstr(d: bytes, p: int) -> str:
    e = d.find(b"\0", p)
    return d[p:e if e >= 0 else len(d)].decode("utf-8", "replace")


def _uleb(d: bytes, p: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = d[p]; p += 1
        v |= (b & 0x7F) << shift; shift += 7
        if not b & 0x80:
            return v, p


def _sleb(d: bytes, p: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = d[p]; p += 1
        v |= (b & 0x7F) << shift; shift += 7
        if not b & 0x80:
            if b & 0x40:
                v -= 1 << shift
            return v, p


def nvdisasm_path() -> str | None:
    """nvdisasm on PATH, or the one of the `nvidia-cuda-nvdisasm` wheel in this environment."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia  # type: ignore[import-not-found]
        for root in getattr(nvidia, "__path__", []):
            for sub in ("cu13/bin", "cuda_nvdisasm/bin", "cu12/bin"):
                p = os.path.join(root, sub, "nvdisasm")
                if os.access(p, os.X_OK):
                    return p
    except ImportError:
        pass
    return None


def nvdisasm_instruction(data: bytes, kernel: str, offset: int) -> str | None:
    text = _nvdisasm_text(data)
    if not text:
        return None
    want = f"/*{offset:04x}*/"
    section = f".text.{kernel}"
    inside = False
    for ln in text.splitlines():
        if ln.startswith("//----") and ".text." in ln:
            inside = ln.split()[-2] == section if len(ln.split()) >= 2 else False
            inside = section in ln.split()
        elif inside and want in ln:
            instr = ln.split(want, 1)[1].split("/*", 1)[0].strip().rstrip(";").strip()
            return instr or None
    return None


def nvdisasm_window(arch: int | None, base: int, code: bytes) -> dict[int, str]:
    """{address: instruction text} of raw SASS bytes placed at `base` (`nvdisasm -b SM<arch>
    -base`): a few instructions around a GPU core's pcs, so nvdisasm decodes 48 bytes, not the
    whole module. {} without nvdisasm, an arch or output."""
    tool = nvdisasm_path()
    if tool is None or not arch or os.environ.get("CRASHLENS_NO_NVDISASM"):
        return {}
    text = _nvdisasm_raw(tool, arch, base, bytes(code))
    out: dict[int, str] = {}
    for ln in (text or "").splitlines():
        ln = ln.strip()
        if ln.startswith("/*") and "*/" in ln:
            addr, rest = ln[2:].split("*/", 1)
            try:
                out[int(addr, 16)] = rest.split("/*", 1)[0].strip().rstrip(";").strip()
            except ValueError:
                continue
    return out


@functools.lru_cache(maxsize=64)
def _nvdisasm_raw(tool: str, arch: int, base: int, code: bytes) -> str | None:
    with tempfile.NamedTemporaryFile(suffix=".sass") as fh:
        fh.write(code)
        fh.flush()
        try:
            r = subprocess.run([tool, "-b", f"SM{arch}", "-base", f"0x{base:x}", fh.name],
                               capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
    return r.stdout if r.returncode == 0 else None


@functools.lru_cache(maxsize=32)
def _nvdisasm_text(data: bytes) -> str | None:
    tool = nvdisasm_path()
    if tool is None or os.environ.get("CRASHLENS_NO_NVDISASM"):
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(data)
        fh.flush()
        try:
            r = subprocess.run([tool, "-c", fh.name], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
    return r.stdout if r.returncode == 0 else None
