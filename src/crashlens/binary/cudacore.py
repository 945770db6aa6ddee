"""Reader of CUDA GPU core dumps (`.nvcudmp`, written with CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1).

    core = read_gpu_core(data)      -> GpuCore: devices, contexts, modules, grids, the warps and
                                       lanes that stopped the kernel (kernel, coordinates, pc,
                                       error pc, function, offset, file:line, instruction, device
                                       call stack), notes
    is_gpu_core(prefix)             -> the first bytes are those of a GPU core dump

Only the tables are read (section headers, then the `.cudbg.*` table sections and the module
image of the faulting grid); the memory sections (`.cudbg.global`, `.cudbg.shared`,
`.cudbg.local`, registers, predicates, parameters) are never touched, so the time does not grow
with the dump's memory.

Layout. Sources (public; nothing copied): NVIDIA's `cudacoredump.h` ("Public format description
of the CUDA coredump", shipped with the CUDA toolkit in extras/Debugger/include and with the
NVIDIA/cuda-gdb sources; its format history runs r346 .. r575), `cudadebugger.h` for the
exception codes (CUDBGException_t), and LLDB's NVIDIA GPU core reader (llvm-project, lldb
NVGPU plugin: rows read up to their on-disk size, missing later fields read as zero). Checked
field by field on the three complete H100 dumps of fixtures/gpu-cores/complete (driver 580.159,
CUDA 13.0) against cuda-gdb 13.0's answers on them (tests/test_cudacore_complete.py).

- An ELF64 little-endian file of type ET_CORE, e_machine EM_CUDA (190), EI_OSABI 0x33 (CUDA),
  EI_ABIVERSION 7. No program headers; everything is in sections.
- Section types are SHT_LOUSER (0x80000000) + n: 1 managed memory, 2 global, 3 local, 4 shared,
  5 registers, 6 module ELF image, 7 relocated module ELF image, 8 backtrace table, 9 device
  table (`.cudbg.devtbl`), 10 context table, 11 SM table, 12 grid table, 13 CTA table, 14 warp
  table, 15 lane table, 16 module table, 17 predicates, 18 parameter memory, 19/20 uniform
  registers/predicates (r400), 21 constant banks (r550), 22 metadata (r565), 23 convergence
  barriers (r575).
- A table is an array of rows of `sh_entsize` bytes; drivers append fields, so the row size is
  read from the header and fields past it read as zero. The r580 driver writes `.cudbg.meta`
  with sh_entsize 0 (one 32-byte row): a table without a row size has its baseline size.
  Row sizes seen on r580: device 88, context 40, module 8, grid 136, SM 48, CTA 56, warp 64,
  lane 56, backtrace 24, meta 32.
- A table's parent is `sh_link` (the parent table's section index) and `sh_info` (the row in
  it): context, grid and SM tables hang off the device table (info: device row), module tables
  off a context table, module images off a module table (info: module row), CTA tables off the
  SM table (info: SM row), warp tables off a CTA table, lane tables off a warp table, backtrace
  tables off a lane table (info: lane row). Strings (device name, type, SM type, generator) are
  offsets into `.strtab`.
- Rows (byte offsets):
  device   {0 u64 name, 8 type, 16 sm_type; 24 u32 dev_id, 28 pci_bus, 32 pci_dev, 36 num_sms,
           40 warps/SM, 44 lanes/warp, 48 regs/lane, 52 preds/lane, 56 sm_major, 60 sm_minor,
           64 instruction_size, 68 status; r400: 72 uniform regs, 76 uniform preds; r575: 80
           convergence barriers}; cuda-gdb prints the PCI id as "bus:dev.0" in hex ("00:06.0").
  context  {0 u64 id, 8 shared window, 16 local window, 24 global window; 32 u32 device index,
           36 host tid}
  module   {0 u64 handle}
  grid     {0 u64 grid_id, 8 context_id, 16 function, 24 function_entry, 32 module_handle,
           40 parent grid, 48 params_offset; 56 u32 kernel_type, 60 origin, 64 status, 68
           num_regs, 72 grid x/y/z, 84 block x/y/z, 96 launch_blocking, 100 host_tid; r525: 104
           cluster dims; r565: 120 preferred cluster dims}
  SM       {0 u32 sm_id; r555: 8 u32 exception, 12 error_pc_valid, 16 u64 error_pc, 24 cluster
           target block}: the SM's exception survives warps that have exited
  CTA      {0 u64 grid_id; 8 u32 block x/y/z; r525: 24 cluster idx; r565: 40 cluster dims}
  warp     {0 u64 error_pc; 8 u32 warp_id, 12 valid_lanes, 16 active_lanes, 20 is_broken, 24
           error_pc_valid; r525: 32 num_regs; r570: 40 shared size; r575: 48 in-syscall, CBU
           masks}
  lane     {0 u64 virtual_pc, 8 u64 pc offset in its function; 16 u32 lane, 20 thread x/y/z,
           32 exception, 36 call_depth, 40 syscall_call_depth, 44 cc; r575: 48 CBU state}
  backtrace {0 u64 return offset in the caller, 8 u64 virtual return address; 16 u32 level}
  meta     {0 u64 generator name; 8 u32 driver major/minor, 16 CUDA driver major/minor, 24
           flags, 28 timestamp}
- A grid's kernel is the function placed at `function_entry` in the relocated image of its
  module (`module_handle`); in that image only the loaded kernels' sections have an address
  (sh_addr), so a pc's section is the one whose [addr, addr+size) holds it.
- What stopped the kernel: a lane whose `exception` is set (the warp's `error_pc`, when valid,
  is the instruction that faulted; the lane's pc is where the warp stopped, usually one
  instruction later). A warp with `is_broken` set and no exception stopped at a breakpoint or
  a trap instruction (`__trap()`, and the trap `assert` ends with): cuda-gdb reports it as
  "signal SIGTRAP, Trace/breakpoint trap"; its active lanes are the ones that trapped, and the
  lane pc is the instruction after the trap (the BPT.TRAP is read just before it). cuda-gdb's
  focus is the first such lane by device, SM, warp, lane: `GpuCore.faults[0]`.

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
# the fields read of each table (bytes): the baseline row; a row given shorter is damaged, a row
# given without a size (sh_entsize 0: r580's .cudbg.meta) is taken to be this long
ROW = {T_DEV: 72, T_CTX: 40, T_MOD: 8, T_GRID: 104, T_SM: 4, T_CTA: 20, T_WARP: 28, T_LANE: 40, T_BT: 20,
       T_META: 32}
# ... and the longest prefix of the newest rows (cudacoredump.h r575) this reader knows
FULL = {T_DEV: 88, T_CTX: 40, T_MOD: 8, T_GRID: 136, T_SM: 40, T_CTA: 56, T_WARP: 64, T_LANE: 56, T_BT: 24,
        T_META: 32}
SASS_BPT = 0x95C  # sm_70+ opcode (low 12 bits of the first word) of BPT (BPT.TRAP, BPT.INT)


def is_gpu_core(prefix: bytes) -> bool:
    return (len(prefix) >= 20 and prefix[:4] == b"\x7fELF" and prefix[4] == 2 and prefix[5] == 1
            and struct.unpack_from("<HH", prefix, 16) == (ET_CORE, EM_CUDA))


@dataclass(frozen=True)
class GpuDevice:
    index: int
    dev_id: int
    name: str | None  # "NVIDIA H100 80GB HBM3"
    type: str | None  # "GH100GL-A" (cuda-gdb's Description)
    sm_type: str | None  # "sm_90"
    sm_version: str | None  # "9.0"
    num_sms: int | None
    pci_bus: int | None
    pci_dev: int | None = None
    warps_per_sm: int | None = None
    lanes_per_warp: int | None = None
    regs_per_lane: int | None = None

    @property
    def pci(self) -> str | None:
        """The PCI bus/device id as cuda-gdb's `info cuda devices` prints it: "00:06.0"."""
        return None if self.pci_bus is None else f"{self.pci_bus:02x}:{self.pci_dev or 0:02x}.0"


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
    kernel: str | None  # mangled: _Z11trap_kernelPfi
    grid_dim: tuple[int, int, int]
    block_dim: tuple[int, int, int]
    kernel_demangled: str | None = None  # trap_kernel(float*, int)
    status: int | None = None  # CUDBGGridStatus (2: active)


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
    """One lane (thread) that stopped its kernel, with its warp's context."""

    exception_code: int  # CUDBGException_t; 0 for a trap (signal set)
    exception: str  # cuda-gdb's label: "Warp Misaligned Address", "Trace/breakpoint trap"
    exception_name: str  # CUDBG_EXCEPTION_WARP_MISALIGNED_ADDRESS, SIGTRAP
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
    pc: int  # the lane's pc: where the warp stopped (cuda-gdb's $pc, frame #0)
    error_pc: int | None  # the warp's error pc, when valid: the instruction that faulted
    kernel: str | None  # mangled
    grid_dim: tuple[int, int, int] | None
    block_dim: tuple[int, int, int] | None
    module_handle: int | None
    location: SassLocation | None  # at the error pc when valid, else at the pc
    backtrace: tuple[GpuFrame, ...] = ()
    kernel_demangled: str | None = None
    pc_location: SassLocation | None = None  # at the pc (cuda-gdb's `info line *$pc`)
    signal: str | None = None  # "SIGTRAP" for a warp stopped at a trap, no exception
    trap: SassLocation | None = None  # the BPT instruction just before the pc of a trapped warp
    broken: bool = False  # the warp is in the broken (stopped at a breakpoint/trap) mask


@dataclass
class GpuCore:
    size: int
    complete: bool = False
    devices: list[GpuDevice] = field(default_factory=list)
    contexts: list[dict[str, int]] = field(default_factory=list)
    modules: list[GpuModule] = field(default_factory=list)
    grids: list[GpuGrid] = field(default_factory=list)
    faults: list[GpuLaneFault] = field(default_factory=list)
    sm_exceptions: list[dict[str, Any]] = field(default_factory=list)  # r555: per-SM exception rows
    images: dict[int, tuple[int, int, bool]] = field(default_factory=dict)  # module handle -> (offset, size, relocated)
    driver: str | None = None
    generator: str | None = None
    sections: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def first_fault(self) -> GpuLaneFault | None:
        """cuda-gdb's focus: the first stopped lane by device, SM, warp, lane."""
        return self.faults[0] if self.faults else None


def exception_info(code: int) -> dict[str, Any]:
    info = knowledge.data("cuda_exceptions.yaml").get("exceptions", {}).get(code)
    return info or {"name": f"CUDBG_EXCEPTION_{code}", "label": f"CUDA exception {code}", "category": None}


def trap_info(in_assert: bool) -> dict[str, Any]:
    t = {"name": "SIGTRAP", "label": "Trace/breakpoint trap", "category": None,
         **knowledge.data("cuda_exceptions.yaml").get("trap", {})}
    if in_assert:
        t["label"] += " (a failed assert)"
    return t


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.secs: list[tuple[str, int, int, int, int, int, int, int]] = []
        # (name, type, addr, offset, size, link, info, entsize)
        self.strtab: tuple[int, int] | None = None

    def rows(self, i: int, typ: int) -> list[bytes]:
        """The rows of table section i, each zero-padded to the fields this reader knows."""
        name, _t, _a, off, size, _l, _i, ent = self.secs[i]
        ent = ent or ROW[typ]
        if ent < ROW[typ]:
            raise ValueError(f"section {i} ({name}): rows of {ent} bytes, fewer than the {ROW[typ]} its fields take")
        if off + size > len(self.d):
            raise ValueError(f"section {i} ({name}) ends past the end of the file")
        pad = b"\0" * max(0, FULL[typ] - ent)
        return [bytes(self.d[off + k * ent: off + (k + 1) * ent]) + pad for k in range(size // ent)]

    def string(self, idx: int) -> str | None:
        if self.strtab is None:
            return None
        off, size = self.strtab
        if not 0 <= idx < size:
            return None
        end = self.d.find(b"\0", off + idx, off + size)
        return bytes(self.d[off + idx: end if end >= 0 else off + size]).decode("utf-8", "replace")


def read_gpu_core(data: bytes, locate: bool = True) -> GpuCore:
    """Everything the tables of a GPU core dump say; never raises on bad input."""
    core = GpuCore(size=len(data))
    try:
        _read(data, core, locate)
    except (struct.error, ValueError, IndexError, KeyError, OverflowError) as exc:
        core.notes.append(f"GPU core dump damaged: {exc}; what came before was read")
    return core


def _demangle(names: list[str]) -> dict[str, str]:
    from .symbolize import demangle

    return demangle(names)


def _read(data: bytes, core: GpuCore, locate: bool) -> None:
    if not is_gpu_core(bytes(data[:64])):
        raise ValueError("not a CUDA GPU core dump (an ELF64 ET_CORE file of machine EM_CUDA)")
    if len(data) < 64:
        raise ValueError(f"only {len(data)} bytes: the ELF header is cut")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if (shnum == 0 or shstrndx == 0xFFFF) and shoff and shentsize >= 64 and shoff + 64 <= len(data):
        # ELF extended section numbering (a large process's dump has more than 65,279 sections):
        # e_shnum 0 and e_shstrndx SHN_XINDEX, the real values in section 0's sh_size and sh_link
        size0, link0 = struct.unpack_from("<QI", data, shoff + 0x20)
        if shnum == 0:
            shnum = size0
        if shstrndx == 0xFFFF:
            shstrndx = link0
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
            names.append(bytes(data[soff + s[0]: e if e >= 0 else soff]).decode("ascii", "replace"))
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

    # metadata (r565+)
    for k in by_type.get(T_META, []):
        for row in r.rows(k, T_META)[:1]:
            gen, dmaj, dmin, cmaj, cmin = struct.unpack_from("<QIIII", row, 0)
            core.generator = r.string(gen)
            core.driver = (f"{dmaj}.{dmin:02d} (CUDA {cmaj}.{cmin})" if dmaj else f"CUDA {cmaj}.{cmin}")
    # devices
    dev_rows: dict[int, GpuDevice] = {}
    for k in by_type.get(T_DEV, []):
        for i, row in enumerate(r.rows(k, T_DEV)):
            n, t, smt = struct.unpack_from("<QQQ", row, 0)
            dev_id, pci_bus, pci_dev, num_sms, warps, lanes, regs, _preds, major, minor = struct.unpack_from("<10I", row, 24)
            dev = GpuDevice(i, dev_id, r.string(n), r.string(t), r.string(smt), f"{major}.{minor}", num_sms,
                            pci_bus, pci_dev, warps, lanes, regs)
            dev_rows[i] = dev
            core.devices.append(dev)
    # contexts and modules
    ctx_of_row: dict[tuple[int, int], int] = {}
    for k in by_type.get(T_CTX, []):
        for i, row in enumerate(r.rows(k, T_CTX)):
            cid, _sw, _lw, _gw, dev_idx, tid = struct.unpack_from("<QQQQII", row, 0)
            ctx_of_row[(k, i)] = cid
            core.contexts.append({"id": cid, "device": dev_rows[dev_idx].dev_id if dev_idx in dev_rows else dev_idx,
                                  "host_tid": tid})
    mod_row: dict[tuple[int, int], tuple[int, int | None]] = {}
    for k in by_type.get(T_MOD, []):
        link, info = r.secs[k][5], r.secs[k][6]
        for i, row in enumerate(r.rows(k, T_MOD)):
            mod_row[(k, i)] = (struct.unpack_from("<Q", row, 0)[0], ctx_of_row.get((link, info)))
    images: dict[int, tuple[int, bool]] = {}  # module handle -> (section index of its image, relocated)
    for t, relocated in ((T_ELF, False), (T_RELF, True)):
        for k in by_type.get(t, []):
            handle, _ctx = mod_row.get((r.secs[k][5], r.secs[k][6]), (None, None))
            if handle is not None and (relocated or handle not in images):
                images[handle] = (k, relocated)
    core.images = {h: (r.secs[k][3], r.secs[k][4], rel) for h, (k, rel) in images.items()}
    cubins: dict[int, Cubin] = {}

    def cubin(handle: int | None) -> Cubin | None:
        if handle is None or handle not in images:
            return None
        if handle not in cubins:
            s = r.secs[images[handle][0]]
            cubins[handle] = Cubin.from_bytes(bytes(data[s[3]:s[3] + s[4]]))
        return cubins[handle]

    # grids: the kernel is the section placed at the grid's function entry
    grids: dict[tuple[int, int], GpuGrid] = {}
    for k in by_type.get(T_GRID, []):
        dev = dev_rows.get(r.secs[k][6])
        for row in r.rows(k, T_GRID):
            gid, ctx, _fn, entry, mod, _parent, _params = struct.unpack_from("<7Q", row, 0)
            _ktype, _origin, status, _nregs = struct.unpack_from("<4I", row, 56)
            dims = struct.unpack_from("<6I", row, 72)
            c = cubin(mod)
            kernel = None
            if c is not None:
                sec = c.section_at(entry)
                if sec is not None:
                    kernel = c.sections[sec][0][len(".text."):]
                else:
                    sym = c.function_containing(None, entry)
                    kernel = sym.name if sym else None
            g = GpuGrid(gid, dev.dev_id if dev else -1, ctx, mod, entry, kernel, dims[:3], dims[3:], None, status)
            grids[(g.device, gid)] = g
            core.grids.append(g)
    demangled = _demangle([g.kernel for g in core.grids if g.kernel])
    core.grids = [GpuGrid(g.grid_id, g.device, g.context_id, g.module_handle, g.function_entry, g.kernel,
                          g.grid_dim, g.block_dim, demangled.get(g.kernel or "", g.kernel), g.status)
                  for g in core.grids]
    grids = {(g.device, g.grid_id): g for g in core.grids}
    for (k, i), (handle, ctx) in mod_row.items():
        img = images.get(handle)
        used = any(g.module_handle == handle for g in core.grids)
        c = cubin(handle) if img and used else None  # only the modules a grid runs are parsed
        core.modules.append(GpuModule(handle, ctx, r.secs[img[0]][4] if img else 0, bool(img and img[1]),
                                      c.arch if c else None, tuple(c.kernel_names()) if c else ()))
    # SM -> CTA -> warp -> lane -> backtrace
    sm_of: dict[tuple[int, int], tuple[int, int]] = {}  # (section, row) -> (device id, sm id)
    for k in by_type.get(T_SM, []):
        dev = dev_rows.get(r.secs[k][6])
        for i, row in enumerate(r.rows(k, T_SM)):
            sm_id, _pad, exc, epc_valid, epc = struct.unpack_from("<IIIIQ", row, 0)
            sm_of[(k, i)] = (dev.dev_id if dev else -1, sm_id)
            if exc:
                core.sm_exceptions.append({"device": dev.dev_id if dev else -1, "sm": sm_id, "exception_code": exc,
                                           "error_pc": epc if epc_valid else None})
    cta_of: dict[tuple[int, int], tuple[int, int, int, tuple[int, int, int]]] = {}
    for k in by_type.get(T_CTA, []):
        dev_id, sm = sm_of.get((r.secs[k][5], r.secs[k][6]), (-1, -1))
        for i, row in enumerate(r.rows(k, T_CTA)):
            gid, bx, by, bz = struct.unpack_from("<QIII", row, 0)
            cta_of[(k, i)] = (dev_id, sm, gid, (bx, by, bz))
    warp_of: dict[tuple[int, int], tuple] = {}
    for k in by_type.get(T_WARP, []):
        cta = cta_of.get((r.secs[k][5], r.secs[k][6]))
        for i, row in enumerate(r.rows(k, T_WARP)):
            epc, wid, valid, active, broken, epc_valid = struct.unpack_from("<QIIIII", row, 0)
            warp_of[(k, i)] = (cta, wid, valid, active, epc if epc_valid else None, bool(broken))
    bt_of: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for k in by_type.get(T_BT, []):
        if not r.secs[k][4]:
            continue
        for row in r.rows(k, T_BT):
            ret, vret, level = struct.unpack_from("<QQI", row, 0)
            bt_of.setdefault((r.secs[k][5], r.secs[k][6]), []).append((level, vret, ret))
    assert_fns = set(knowledge.data("cuda_exceptions.yaml").get("trap", {}).get("assert_functions", ()))
    found: list[tuple[tuple[int, ...], GpuLaneFault]] = []
    locs: dict[tuple[int | None, int], SassLocation | None] = {}

    def where(c: Cubin | None, handle: int | None, pc: int | None) -> SassLocation | None:
        if c is None or pc is None or not locate:
            return None
        if (handle, pc) not in locs:
            locs[(handle, pc)] = c.locate_pc(pc)
        return locs[(handle, pc)]

    for k in by_type.get(T_LANE, []):
        warp = warp_of.get((r.secs[k][5], r.secs[k][6]))
        if warp is None:
            continue
        cta, wid, valid, active, epc, broken = warp
        dev_id, sm, gid, block = cta if cta else (-1, -1, None, (0, 0, 0))
        for i, row in enumerate(r.rows(k, T_LANE)):
            vpc, _fn_off, ln, tx, ty, tz, exc, _depth = struct.unpack_from("<QQIIIIII", row, 0)
            trapped = not exc and broken and (active >> ln) & 1 and (valid >> ln) & 1
            if not exc and not trapped:
                continue
            grid = grids.get((dev_id, gid)) if gid is not None else None
            handle = grid.module_handle if grid else None
            c = cubin(handle)
            pc_loc = where(c, handle, vpc)
            frames = []
            for level, vret, ret in sorted(bt_of.get((k, i), [])):
                fl = where(c, handle, vret - 1 if vret else None) if vret else None
                frames.append(GpuFrame(level, vret or ret, fl.function if fl else None, fl.function_offset if fl else None,
                                       fl.file if fl else None, fl.line if fl else None))
            trap = None
            if exc:
                info = exception_info(exc)
                loc = where(c, handle, epc) if epc is not None else pc_loc
                signal = None
            else:
                if c is not None and locate:
                    words = c.words_at(vpc - 16)
                    if words and words[0] & 0xFFF == SASS_BPT:
                        trap = where(c, handle, vpc - 16)
                fns = {x.function for x in (pc_loc, trap, *frames) if x is not None and x.function}
                info = trap_info(bool(fns & assert_fns))
                loc, signal = pc_loc, info["name"]
            fault = GpuLaneFault(
                exc, info["label"], info["name"], info.get("category"), dev_id, sm, wid, ln, gid, block,
                (tx, ty, tz), valid, active, vpc, epc, grid.kernel if grid else None,
                grid.grid_dim if grid else None, grid.block_dim if grid else None,
                handle, loc, tuple(frames), grid.kernel_demangled if grid else None, pc_loc, signal, trap, broken)
            found.append(((0 if exc else 1, dev_id, sm, wid, ln), fault))
    # cuda-gdb's focus first: lanes with an exception before trapped ones, then by device, SM, warp, lane
    core.faults = [f for _key, f in sorted(found, key=lambda kf: kf[0])]
    if locate and core.faults:
        core.faults = _with_instructions(core.faults, cubins)
    core.complete = not short
    if not core.devices:
        core.notes.append("GPU core dump: no device table")
    elif not core.faults:
        if core.sm_exceptions:
            e = core.sm_exceptions[0]
            info = exception_info(e["exception_code"])
            epc = f" at pc 0x{e['error_pc']:x}" if e["error_pc"] is not None else ""
            core.notes.append(f"GPU core dump: SM {e['sm']} of device {e['device']} recorded {info['label']}{epc}, "
                              f"but no warp holding it was left when the dump was written")
        else:
            core.notes.append("GPU core dump: no lane holds an exception and no warp stopped at a trap")


def _with_instructions(faults: list[GpuLaneFault], cubins: dict[int, Cubin]) -> list[GpuLaneFault]:
    """nvdisasm's text of the instructions at the focus fault's pcs (one nvdisasm run on the
    few instructions around them; the other lanes share them when at the same pcs)."""
    from dataclasses import replace

    from .cubin_lines import nvdisasm_window

    first = faults[0]
    c = cubins.get(first.module_handle) if first.module_handle is not None else None
    if c is None:
        return faults
    pcs = sorted({p & ~0xF for p in (first.pc, first.error_pc, first.pc - 16 if first.trap else None) if p is not None})
    lo, hi = pcs[0], pcs[-1] + 16
    if hi - lo > 4096 or c.section_at(lo) is None or c.section_at(hi - 16) != c.section_at(lo):
        return faults
    shndx = c.section_at(lo)
    _n, _t, off, _size, _l, _i, addr = c.sections[shndx]
    text = nvdisasm_window(c.arch, lo, c.data[off + lo - addr: off + hi - addr])
    if not text:
        return faults

    def fill(loc: SassLocation | None, pc: int | None) -> SassLocation | None:
        if loc is None or pc is None or loc.instruction or (pc & ~0xF) not in text:
            return loc
        return replace(loc, instruction=text[pc & ~0xF])

    out = []
    for f in faults:
        if f.module_handle != first.module_handle:
            out.append(f)
            continue
        pc_loc = fill(f.pc_location, f.pc)
        loc = fill(f.location, f.error_pc if f.error_pc is not None and not f.signal else f.pc)
        trap = fill(f.trap, f.pc - 16)
        out.append(replace(f, location=loc, pc_location=pc_loc, trap=trap))
    return out
