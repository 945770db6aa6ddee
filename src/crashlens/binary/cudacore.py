"""Reader of CUDA GPU core dumps (`.nvcudmp`, written with CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1).

    core = read_gpu_core(data)      -> GpuCore: devices, contexts, modules, grids, the warps and
                                       lanes that hold an exception (kernel, coordinates, pc,
                                       function, offset, file:line, device call stack), notes
    is_gpu_core(prefix)             -> the first bytes are those of a GPU core dump

Only the tables are read (section headers, then the `.cudbg.*` table sections and the module
images of the faulting pcs); the memory sections (`.cudbg.global`, `.cudbg.shared`,
`.cudbg.local`, registers) are never touched, so the time does not grow with the dump's memory.

Layout (public: NVIDIA/cuda-gdb `include/cudacoredump.h` for the table rows and section types,
`libcudacore/cudacore.c` for how tables link, `include/cudadebugger.h` for exception codes; no
code copied):

- An ELF64 little-endian file of type ET_CORE, e_machine EM_CUDA (190), EI_OSABI 0x33 (CUDA),
  EI_ABIVERSION 7. No program headers; everything is in sections.
- Section types are SHT_LOUSER (0x80000000) + n: 1 managed memory, 2 global, 3 local, 4 shared,
  5 registers, 6 module ELF image, 7 relocated module ELF image, 8 backtrace table, 9 device
  table (`.cudbg.devtbl`), 10 context table, 11 SM table, 12 grid table, 13 CTA table, 14 warp
  table, 15 lane table, 16 module table, 17 predicates, 18 parameter memory, 19/20 uniform
  registers/predicates, 21 constant banks (r550), 22 metadata (r565), 23 CBU barriers (r575).
- Every table is an array of rows of `sh_entsize` bytes (newer drivers append fields, so the
  row size is read from the header, never assumed); a table's parent is given by `sh_link`
  (the parent table's section index) and `sh_info` (the row in it): SM tables and grid tables
  hang off a device row, CTA tables off an SM row, warp tables off a CTA row, lane tables off a
  warp row, backtrace tables off a lane row, module tables off a context row, module images off
  a module row. Strings (device name and type, SM type) are offsets into `.strtab`.
- Rows (offsets in bytes): device {u64 name, type, sm_type; u32 dev_id, pci_bus, pci_dev,
  num_sms, warps_per_sm, lanes_per_warp, regs_per_lane, preds_per_lane, sm_major, sm_minor,
  instruction_size, status}; context {u64 id, shared, local, global window; u32 device index,
  host tid}; grid {u64 grid_id, context_id, function, function_entry, module_handle, parent
  grid, params_offset; u32 kernel_type, origin, status, num_regs, grid x/y/z, block x/y/z,
  launch_blocking, host_tid}; SM {u32 sm_id}; CTA {u64 grid_id; u32 block x/y/z}; warp {u64
  error_pc; u32 warp_id, valid_lanes, active_lanes, broken, error_pc_valid}; lane {u64
  virtual_pc, phys_pc; u32 lane, thread x/y/z, exception, call_depth, syscall_call_depth, cc};
  backtrace {u64 return_address, virtual_return_address; u32 level}; module {u64 handle};
  metadata {u64 generator name; u32 driver major/minor, CUDA driver major/minor, flags, time}.
- A grid's kernel is the function symbol at `function_entry` in the relocated image of its
  module (`module_handle`); a pc's module is the relocated image whose code sections hold it.

A damaged or truncated dump gives what could be read and a note saying what could not (the
real truncated dumps of fixtures/gpu-cores: a section table past the end of the file).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from .. import knowledge
from .cubin_lines import Cubin, SassLocation

EM_CUDA = 190
ET_CORE = 4
SHT_LOUSER = 0x80000000
T_GLOBAL, T_LOCAL, T_SHARED, T_REGS = 2, 3, 4, 5
T_ELF, T_RELF, T_BT, T_DEV, T_CTX, T_SM, T_GRID, T_CTA, T_WARP, T_LANE, T_MOD = range(6, 17)
T_META = 22


def is_gpu_core(prefix: bytes) -> bool:
    return (len(prefix) >= 20 and prefix[:4] == b"\x7fELF" and prefix[4] == 2 and prefix[5] == 1
            and struct.unpack_from("<HH", prefix, 16) == (ET_CORE, EM_CUDA))


@dataclass(frozen=True)
class GpuDevice:
    index: int
    dev_id: int
    name: str | None
    type: str | None
    sm_type: str | None
    sm_version: str | None  # "9.0"
    num_sms: int | None
    pci_bus: int | None


@dataclass(frozen=True)
class GpuModule:
    handle: int
    context_id: int | None
    size: int
    relocated: bool
    arch: int | None  # SM of the image (90)
    kernels: tuple[str, ...]


@dataclass(frozen=True)
class GpuGrid:
    grid_id: int
    device: int
    context_id: int
    module_handle: int
    function_entry: int
    kernel: str | None
    grid_dim: tuple[int, int, int]
    block_dim: tuple[int, int, int]


@dataclass(frozen=True)
class GpuFrame:
    level: int
    pc: int
    function: str | None = None
    offset: int | None = None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class GpuLaneFault:
    """One lane (thread) that holds an exception, with its warp's context."""

    exception_code: int
    exception: str  # cuda-gdb's label: "Warp Illegal Address"
    exception_name: str  # CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS
    category: str | None
    device: int
    sm: int
    warp: int
    lane: int
    grid_id: int | None
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    lane_mask: int  # the warp's valid lanes
    active_mask: int
    pc: int
    error_pc: int | None  # when the warp's error pc is valid
    kernel: str | None
    grid_dim: tuple[int, int, int] | None
    block_dim: tuple[int, int, int] | None
    module_handle: int | None
    location: SassLocation | None
    backtrace: tuple[GpuFrame, ...] = ()


@dataclass
class GpuCore:
    size: int
    complete: bool = False
    devices: list[GpuDevice] = field(default_factory=list)
    contexts: list[dict[str, int]] = field(default_factory=list)
    modules: list[GpuModule] = field(default_factory=list)
    grids: list[GpuGrid] = field(default_factory=list)
    faults: list[GpuLaneFault] = field(default_factory=list)
    driver: str | None = None
    generator: str | None = None
    sections: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def first_fault(self) -> GpuLaneFault | None:
        return self.faults[0] if self.faults else None


def exception_info(code: int) -> dict[str, Any]:
    info = knowledge.data("cuda_exceptions.yaml").get("exceptions", {}).get(code)
    return info or {"name": f"CUDBG_EXCEPTION_{code}", "label": f"CUDA exception {code}", "category": None}


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.secs: list[tuple[str, int, int, int, int, int, int, int]] = []
        # (name, type, addr, offset, size, link, info, entsize)
        self.strtab: tuple[int, int] | None = None

    def rows(self, i: int, minimum: int) -> list[bytes]:
        _n, _t, _a, off, size, _l, _i, ent = self.secs[i]
        if ent < minimum or off + size > len(self.d):
            raise ValueError(f"section {i} ({self.secs[i][0]}) rows of {ent} bytes or past the end of the file")
        return [self.d[off + k * ent: off + (k + 1) * ent] for k in range(size // ent)]

    def string(self, idx: int) -> str | None:
        if self.strtab is None:
            return None
        off, size = self.strtab
        if not 0 <= idx < size:
            return None
        end = self.d.find(b"\0", off + idx, off + size)
        return self.d[off + idx: end if end >= 0 else off + size].decode("utf-8", "replace")


def read_gpu_core(data: bytes, locate: bool = True) -> GpuCore:
    """Everything the tables of a GPU core dump say; never raises on bad input."""
    core = GpuCore(size=len(data))
    try:
        _read(data, core, locate)
    except (struct.error, ValueError, IndexError, KeyError) as exc:
        core.notes.append(f"GPU core dump damaged: {exc}; what came before was read")
    return core


def _read(data: bytes, core: GpuCore, locate: bool) -> None:
    if not is_gpu_core(data[:64]):
        raise ValueError("not a CUDA GPU core dump (an ELF64 ET_CORE file of machine EM_CUDA)")
    if len(data) < 64:
        raise ValueError(f"only {len(data)} bytes: the ELF header is cut")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    core.sections = shnum
    end = shoff + shentsize * shnum
    if shentsize < 64 or end > len(data):
        core.notes.append(
            f"GPU core dump truncated: {len(data):,} bytes, but its section table ({shnum:,} sections) "
            f"lies at {shoff:,}-{end:,}: the driver stopped writing it (or the copy was cut), so no "
            f"device, kernel or exception can be read")
        return
    r = _Reader(data)
    for k in range(shnum):
        name, typ, _fl, addr, off, size, link, info, _al, ent = struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize)
        r.secs.append((name, typ, addr, off, size, link, info, ent))  # name: resolved below
    if shstrndx < shnum:
        _n, _t, _a, soff, ssize, *_ = r.secs[shstrndx]
        names = []
        for s in r.secs:
            e = data.find(b"\0", soff + s[0], soff + ssize)
            names.append(data[soff + s[0]: e if e >= 0 else soff].decode("ascii", "replace"))
        r.secs = [(names[k],) + s[1:] for k, s in enumerate(r.secs)]
    for k, s in enumerate(r.secs):
        if s[0] == ".strtab":
            r.strtab = (s[3], s[4])
    short = [k for k, s in enumerate(r.secs) if s[1] not in (0, 8) and s[3] + s[4] > len(data)]
    if short:
        core.notes.append(f"GPU core dump truncated: {len(short)} section(s) end past the end of the file; "
                          f"the tables before it were read")
    by_type: dict[int, list[int]] = {}
    for k, s in enumerate(r.secs):
        if s[1] >= SHT_LOUSER and k not in short:
            by_type.setdefault(s[1] - SHT_LOUSER, []).append(k)

    # devices
    dev_rows: dict[int, GpuDevice] = {}
    for k in by_type.get(T_DEV, []):
        for i, row in enumerate(r.rows(k, 72)):
            n, t, smt = struct.unpack_from("<QQQ", row, 0)
            dev_id, pci_bus, _pci_dev, num_sms, *_rest = struct.unpack_from("<12I", row, 24)
            major, minor = struct.unpack_from("<II", row, 24 + 8 * 4)
            dev = GpuDevice(i, dev_id, r.string(n), r.string(t), r.string(smt), f"{major}.{minor}", num_sms, pci_bus)
            dev_rows[i] = dev
            core.devices.append(dev)
    for k in by_type.get(T_META, []):
        for row in r.rows(k, 32):
            gen, dmaj, dmin, cmaj, cmin = struct.unpack_from("<QIIII", row, 0)
            core.generator = r.string(gen)
            core.driver = f"{dmaj}.{dmin:02d} (CUDA {cmaj}.{cmin})" if dmaj else f"CUDA {cmaj}.{cmin}"
    # contexts and modules
    ctx_of_row: dict[tuple[int, int], int] = {}
    for k in by_type.get(T_CTX, []):
        for i, row in enumerate(r.rows(k, 40)):
            cid, _sw, _lw, _gw, dev_idx, tid = struct.unpack_from("<QQQQII", row, 0)
            ctx_of_row[(k, i)] = cid
            core.contexts.append({"id": cid, "device": dev_rows[dev_idx].dev_id if dev_idx in dev_rows else dev_idx,
                                  "host_tid": tid})
    mod_row: dict[tuple[int, int], tuple[int, int | None]] = {}
    for k in by_type.get(T_MOD, []):
        link, info = r.secs[k][5], r.secs[k][6]
        for i, row in enumerate(r.rows(k, 8)):
            mod_row[(k, i)] = (struct.unpack_from("<Q", row, 0)[0], ctx_of_row.get((link, info)))
    images: dict[int, tuple[int, bool]] = {}  # module handle -> section index of its image
    for t, relocated in ((T_ELF, False), (T_RELF, True)):
        for k in by_type.get(t, []):
            handle, _ctx = mod_row.get((r.secs[k][5], r.secs[k][6]), (None, None))
            if handle is not None and (relocated or handle not in images):
                images[handle] = (k, relocated)
    cubins: dict[int, Cubin] = {}

    def cubin(handle: int | None) -> Cubin | None:
        if handle is None or handle not in images:
            return None
        if handle not in cubins:
            s = r.secs[images[handle][0]]
            cubins[handle] = Cubin.from_bytes(data[s[3]:s[3] + s[4]])
        return cubins[handle]

    for (k, i), (handle, ctx) in mod_row.items():
        img = images.get(handle)
        c = cubin(handle) if img else None
        core.modules.append(GpuModule(handle, ctx, r.secs[img[0]][4] if img else 0, bool(img and img[1]),
                                      c.arch if c else None, tuple(c.kernel_names()) if c else ()))
    # grids
    grids: dict[tuple[int, int], GpuGrid] = {}
    for k in by_type.get(T_GRID, []):
        dev = dev_rows.get(r.secs[k][6])
        for row in r.rows(k, 104):
            gid, ctx, _fn, entry, mod, _parent, _params = struct.unpack_from("<7Q", row, 0)
            dims = struct.unpack_from("<6I", row, 56 + 16)
            c = cubin(mod)
            kernel = None
            if c is not None:
                sym = c.function_containing(None, entry)
                kernel = sym.name if sym else None
            g = GpuGrid(gid, dev.dev_id if dev else -1, ctx, mod, entry, kernel, dims[:3], dims[3:])
            grids[(g.device, gid)] = g
            core.grids.append(g)
    # SM -> CTA -> warp -> lane -> backtrace
    sm_of: dict[tuple[int, int], tuple[int, int]] = {}  # (section, row) -> (device id, sm id)
    for k in by_type.get(T_SM, []):
        dev = dev_rows.get(r.secs[k][6])
        for i, row in enumerate(r.rows(k, 4)):
            sm_of[(k, i)] = (dev.dev_id if dev else -1, struct.unpack_from("<I", row, 0)[0])
    cta_of: dict[tuple[int, int], tuple[int, int, int, tuple[int, int, int]]] = {}
    for k in by_type.get(T_CTA, []):
        dev_id, sm = sm_of.get((r.secs[k][5], r.secs[k][6]), (-1, -1))
        for i, row in enumerate(r.rows(k, 20)):
            gid, bx, by, bz = struct.unpack_from("<QIII", row, 0)
            cta_of[(k, i)] = (dev_id, sm, gid, (bx, by, bz))
    warp_of: dict[tuple[int, int], tuple] = {}
    for k in by_type.get(T_WARP, []):
        cta = cta_of.get((r.secs[k][5], r.secs[k][6]))
        for i, row in enumerate(r.rows(k, 28)):
            epc, wid, valid, active, _broken, epc_valid = struct.unpack_from("<QIIIII", row, 0)
            warp_of[(k, i)] = (cta, wid, valid, active, epc if epc_valid else None)
    bt_of: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for k in by_type.get(T_BT, []):
        for row in r.rows(k, 20):
            ret, vret, level = struct.unpack_from("<QQI", row, 0)
            bt_of.setdefault((r.secs[k][5], r.secs[k][6]), []).append((level, vret or ret))
    for k in by_type.get(T_LANE, []):
        warp = warp_of.get((r.secs[k][5], r.secs[k][6]))
        if warp is None:
            continue
        cta, wid, valid, active, epc = warp
        dev_id, sm, gid, block = cta if cta else (-1, -1, None, (0, 0, 0))
        for i, row in enumerate(r.rows(k, 40)):
            vpc, _ppc, ln, tx, ty, tz, exc = struct.unpack_from("<QQIIIII", row, 0)
            if exc == 0:
                continue
            info = exception_info(exc)
            grid = grids.get((dev_id, gid)) if gid is not None else None
            pc = epc if epc is not None else vpc
            c = cubin(grid.module_handle) if grid else None
            loc = c.locate_address(pc) if (c is not None and locate) else None
            frames = []
            for level, ra in sorted(bt_of.get((k, i), [])):
                fl = c.locate_address(ra - 1 if ra else ra) if c is not None and locate else None
                frames.append(GpuFrame(level, ra, fl.function if fl else None, fl.function_offset if fl else None,
                                       fl.file if fl else None, fl.line if fl else None))
            core.faults.append(GpuLaneFault(
                exc, info["label"], info["name"], info.get("category"), dev_id, sm, wid, ln, gid, block,
                (tx, ty, tz), valid, active, vpc, epc, grid.kernel if grid else None,
                grid.grid_dim if grid else None, grid.block_dim if grid else None,
                grid.module_handle if grid else None, loc, tuple(frames)))
    core.complete = not short
    if not core.devices:
        core.notes.append("GPU core dump: no device table")
    elif not core.faults:
        core.notes.append("GPU core dump: no lane holds an exception")
