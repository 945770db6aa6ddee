"""Core files: real cores of real crashes, made here (fixtures/cores/*.c, gcc, ulimit -c).

Each program is built and crashed once per module; gdb, where it exists, checks the PC and
the instruction. Tests skip (with the reason) when gcc, a core file or gdb is unavailable.
"""

from __future__ import annotations

import importlib.util
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashlens.binary import isa
from crashlens.binary.core import (CoreError, ElfError, ElfFile, NT_FILE, NT_PRSTATUS, open_core,
                                   read_core, si_code_name)
from crashlens.binary.crashsite import (CrashSite, crash_site, decode_instruction, isa_verdict,
                                        parse_cpu_flags)

from .conftest import pages_touched

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("crashers", ROOT / "fixtures" / "cores" / "crashers.py")
crashers = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("crashers", crashers)
_spec.loader.exec_module(crashers)  # type: ignore[union-attr]

CPUINFO = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
CPU_FLAGS = parse_cpu_flags(CPUINFO) or frozenset()
X86_64 = os.uname().machine == "x86_64"
NO_FILES = (lambda p: None)  # noqa: E731 - a resolver that finds nothing

pytestmark = pytest.mark.skipif(not X86_64 or shutil.which("gcc") is None,
                                reason="real-core tests need an x86-64 Linux host with gcc")


class Made:
    def __init__(self, program: Path, core: Path, pid: int | None) -> None:
        self.program, self.core, self.pid = program, core, pid


def _make(tmp_path_factory, name: str, flags: tuple[str, ...], argv: tuple[str, ...] = ()) -> Made:
    work = tmp_path_factory.mktemp(name)
    try:
        prog = crashers.build(name, work, *flags)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"gcc cannot build {name}.c: {exc.stderr.strip()[:200]}")
    c = crashers.crash([str(prog), *argv], work)
    if c.core is None:
        pytest.skip(c.why)
    return Made(prog, c.core, c.pid)


@pytest.fixture(scope="module")
def amx(tmp_path_factory):
    return _make(tmp_path_factory, "amx", ("-O1", "-mamx-tile"))


@pytest.fixture(scope="module")
def segv(tmp_path_factory):
    return _make(tmp_path_factory, "segv", ("-O1",))


@pytest.fixture(scope="module")
def aborted(tmp_path_factory):
    return _make(tmp_path_factory, "abort", ("-O1",))


@pytest.fixture(scope="module")
def fpe(tmp_path_factory):
    return _make(tmp_path_factory, "fpe", ("-O1",))


@pytest.fixture(scope="module")
def threads(tmp_path_factory):
    return _make(tmp_path_factory, "threads", ("-O1", "-pthread"))


@pytest.fixture(scope="module")
def python_fault(tmp_path_factory):
    work = tmp_path_factory.mktemp("pyfault")
    c = crashers.crash([sys.executable, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"], work)
    if c.core is None:
        pytest.skip(c.why)
    return Made(Path(sys.executable), c.core, c.pid), c.stderr


def _gdb_check(made: Made, site: CrashSite, frame: int = 0) -> None:
    got = crashers.gdb_site(made.program, made.core, frame)
    if got is None:
        return  # no gdb here: crashlens stands alone
    pc, text = got
    assert site.pc == pc
    assert " ".join(site.instruction.text.split()) == " ".join(text.split())


# -- notes: every kind, on real cores ----------------------------------------------------------------

def test_segv_notes(segv):
    with read_core(segv.core) as core:
        assert core.machine == "x86-64" and not core.truncated
        assert core.pid == segv.pid and core.process.command == "segv"
        assert core.process.args.endswith("segv")
        assert core.process.uid == os.getuid() and core.process.gid == os.getgid()
        si = core.siginfo
        assert (si.signo, si.code, si.addr) == (11, 1, 0)
        assert si.code_name == "SEGV_MAPERR"
        (t,) = core.threads
        assert t.tid == segv.pid and t.cursig == 11
        assert set(t.registers) >= {"rip", "rsp", "rax", "orig_rax", "fs_base", "eflags"}
        assert t.registers["cs"] == 0x33
        # auxv, with strings read from the core's memory
        a = core.auxv
        assert a.execfn == str(segv.program)
        assert a.platform == "x86_64"
        assert a.pagesz == 4096 and a.uid == os.getuid()
        assert "sse2" in a.hwcap_names and "fpu" in a.hwcap_names
        exe = [m for m in core.files if m.path == str(segv.program)]
        assert exe and any(m.start <= a.entry < m.end for m in exe)
        assert core.read(a.phdr, 4) is not None
        # NT_FILE and modules: build-ids from the core's copy of each ELF header
        with ElfFile(segv.program) as elf:
            want = isa.build_id(elf)
        (mod,) = [m for m in core.modules if m.path == str(segv.program)]
        assert mod.build_id == want and mod.elf
        assert any("libc.so" in m.path for m in core.modules)
        # XSTATE: XCR0 against this CPU
        xs = core.xstate
        assert xs.xcr0 & 0x3 == 0x3 and "SSE" in xs.enabled
        if "avx512f" in CPU_FLAGS:
            assert xs.enables(0xE6) and "AVX-512-opmask" in xs.enabled
        if "amx_tile" not in CPU_FLAGS:
            assert not xs.xcr0 & 0x60000
        if any(t == 0x205 for _o, t, _s in core.note_types):   # NT_X86_XSAVE_LAYOUT (Linux 6.x)
            assert (2, 576, 256) in xs.layout                   # YMM_Hi128 at 576, 256 bytes
        thread, why = core.signalled_thread()
        assert thread is t and "NT_SIGINFO" in why


def test_segv_site_matches_gdb(segv):
    with read_core(segv.core) as core:
        site = crash_site(core, cpu_flags=CPUINFO)
    assert site.signal_name == "SIGSEGV" and site.si_code_name == "SEGV_MAPERR"
    assert site.fault_address == 0
    assert site.method == "prstatus"
    assert site.module == str(segv.program) and site.function == "store_value"
    assert site.function_source == "symtab" and site.build_id_match is True
    assert site.instruction.mnemonic == "mov" and site.instruction.source != "core"  # text pages are not dumped
    assert site.cpu_supports is None and "SIGILL only" in site.reason
    assert site.offset == site.pc - site.module_base
    with ElfFile(segv.program) as elf:
        from crashlens.binary.symbols import locate_function
        fn = locate_function(elf, site.module_address)
    assert fn.name == "store_value" and fn.start + site.function_offset == site.module_address
    _gdb_check(segv, site)
    j = site.to_json()
    assert j["signal"] == "SIGSEGV" and j["fault_address"] == "0x0" and j["function"] == "store_value"
    assert set(j) >= {"signal", "si_code", "fault_address", "pc", "module", "function", "offset", "instruction",
                      "required_isa", "cpu_supports"}


AMX_PATH = crashers.amx_path(CPUINFO)   # how this CPU faults: "xfd" (it has AMX) or "ud" (it has not)


@pytest.mark.parametrize("path", [AMX_PATH], ids=lambda p: f"{p}-this-cpu")
def test_sigill_amx_verdict(amx, path):
    """Built and crashed here: the faulting instruction is the one this CPU faults on."""
    with read_core(amx.core) as core:
        site = crash_site(core, cpu_flags=CPUINFO)
        bare = crash_site(core)  # no CPU flags: XCR0 and the tile state alone decide
    assert site.signal_name == "SIGILL"
    assert site.function == "tile_setup" and site.module == str(amx.program)
    assert site.instruction.mnemonic == crashers.AMX_FAULTING[path]
    assert "AMX-TILE" in site.required_isa
    assert site.fault_address == site.pc
    _gdb_check(amx, site)
    _assert_amx_verdict(path, site, bare)


def _assert_amx_verdict(path: str, site: CrashSite, bare: CrashSite) -> None:
    assert site.cpu_supports is False and bare.cpu_supports is False
    assert site.to_json()["cpu_supports"] is False
    if path == "xfd":
        # an AMX CPU: the tile configuration was loaded, the process never asked for tile-data permission
        assert site.xcr0 is not None and site.xcr0 & 0x60000 == 0x60000
        assert "ARCH_REQ_XCOMP_PERM" in site.reason and "tilezero" in site.reason
        assert "ARCH_REQ_XCOMP_PERM" in bare.reason
        return
    assert site.si_code_name == "ILL_ILLOPN"   # #UD
    assert "AMX-TILE" in site.reason and "ldtilecfg" in site.reason and "amx_tile" in site.reason
    assert site.xcr0 is not None and not site.xcr0 & 0x60000
    assert "XCR0" in bare.reason and "AMX" in bare.reason


@pytest.mark.parametrize("recording", crashers.AMX_RECORDINGS, ids=lambda r: f"{r}-recorded")
@pytest.mark.parametrize("mode", ["plain", "reraise"])
def test_sigill_amx_recorded_cores(tmp_path, recording, mode):
    """Real cores of fixtures/cores/amx.c from both kinds of CPU (amx/make.sh), read on any
    machine: without and behind a faulthandler-shaped handler that re-raised the signal."""
    rec = crashers.recorded_amx(recording, mode)
    path = rec.path
    core_file, program = crashers.unpack_recorded(rec, tmp_path)
    resolve = (lambda p: program if p.endswith("/amx") else None)  # noqa: E731 - the core's path was a tmp dir
    with read_core(core_file) as core:
        site = crash_site(core, cpu_flags=rec.cpuinfo, file_resolver=resolve)
        bare = crash_site(core, file_resolver=resolve)
    assert site.signal_name == "SIGILL" and site.build_id_match is True
    assert site.method == ("signal-frame" if mode == "reraise" else "prstatus")
    if mode == "reraise":
        assert site.raised_pc == rec.gdb_pc and site.raised_signal == 4 and site.signal_frame is not None
    assert (site.pc, site.instruction.text) == (rec.gdb_fault_pc, rec.gdb_fault_insn)   # what gdb said on that core
    assert site.function == "tile_setup" and site.instruction.mnemonic == crashers.AMX_FAULTING[path]
    _assert_amx_verdict(path, site, bare)


def test_sigabrt_from_assert(aborted):
    with read_core(aborted.core) as core:
        site = crash_site(core, cpu_flags=CPUINFO)
        assert core.siginfo.sender_pid == aborted.pid
    assert site.signal_name == "SIGABRT" and site.si_code_name == "SI_TKILL"
    assert site.sender_pid == aborted.pid
    assert site.method == "prstatus" and "raised directly" in site.method_reason   # no handler, no frame
    assert site.signal_frame is None
    assert "libc.so" in site.module
    assert site.cpu_supports is None
    _gdb_check(aborted, site)


def test_sigfpe_divide(fpe):
    with read_core(fpe.core) as core:
        site = crash_site(core)
    assert site.signal_name == "SIGFPE" and site.si_code_name == "FPE_INTDIV"
    assert site.fault_address == site.pc
    assert site.function == "divide" and site.instruction.mnemonic == "idiv"
    _gdb_check(fpe, site)


def test_crash_in_a_worker_thread(threads):
    with read_core(threads.core) as core:
        assert len(core.threads) == 4
        assert any(t.tid == threads.pid for t in core.threads)  # the main thread is there
        assert len({t.cursig for t in core.threads}) == 1       # the kernel gives them all the signal
        site = crash_site(core)
    assert site.thread != threads.pid
    assert site.function == "crash_in_worker"
    assert site.fault_address == 0x20 and site.signal_name == "SIGSEGV"
    assert "NT_SIGINFO" in site.thread_reason
    _gdb_check(threads, site)


def test_python_faulthandler_reraise(python_fault):
    made, stderr = python_fault
    assert "Fatal Python error: Segmentation fault" in stderr
    with read_core(made.core) as core:
        site = crash_site(core, cpu_flags=CPUINFO)
        assert core.siginfo.code_name == "SI_TKILL"
        raised_mod = core.mapping_at(site.raised_pc).path
    assert site.method == "signal-frame", site.method_reason
    assert site.pc != site.raised_pc                      # not raise()/pthread_kill
    assert "libc.so" in raised_mod
    assert site.signal_name == "SIGSEGV" and site.si_code_name == "SEGV_MAPERR"
    assert site.fault_address == 0                         # strlen(NULL), from cr2
    assert "libc.so" in site.module                         # strlen, inside libc
    assert site.signal_frame.restorer_checked and site.signal_frame.trapno == 14
    assert site.sp != site.signal_frame.address
    if site.function:                                       # libc's symbols come from a debug file
        assert "strlen" in site.function
    # gdb: the frame after "<signal handler called>" is the interrupted one
    frames = crashers.gdb_frames(made.program, made.core)
    marks = [int(re.match(r"#(\d+)", f).group(1)) for f in frames if "<signal handler called>" in f]
    if marks:
        got = crashers.gdb_site(made.program, made.core, marks[0] + 1)
        assert got is not None and got[0] == site.pc
        assert " ".join(got[1].split()) == " ".join(site.instruction.text.split())
    with read_core(made.core) as core:
        blind = crash_site(core, file_resolver=NO_FILES)  # libc not readable: the frame is still found
    assert blind.pc == site.pc and blind.function is None and blind.instruction is None
    assert any("not found on this machine" in n for n in blind.notes)


# -- truncated, compressed, corrupt ------------------------------------------------------------------

@pytest.fixture(scope="module")
def big(tmp_path_factory):
    return _make(tmp_path_factory, "big", ("-O1",), ("64",))


def test_truncated_core(big, tmp_path):
    full = read_core(big.core)
    site_full = crash_site(full, file_resolver=NO_FILES)
    whole = full.size
    stack = full.segment_at(full.threads[0].sp)
    cut_at = whole * 6 // 10
    dst = tmp_path / "core.cut"
    with open(big.core, "rb") as src, open(dst, "wb") as out:
        out.write(src.read(cut_at))
    lost = [s for s in full.segments if s.filesz and s.offset + s.filesz > cut_at]
    kept = [s for s in full.segments if s.filesz and s.offset + s.filesz <= cut_at]
    with read_core(dst) as cut:
        assert cut.truncated and any("truncated" in n and str(cut_at) in n for n in cut.notes)
        assert [t.registers for t in cut.threads] == [t.registers for t in full.threads]
        assert cut.read(kept[0].start, 64) == full.read(kept[0].start, 64)
        for s in lost:
            assert cut.read(s.end - 8, 8) is None
            assert cut.segment_at(s.start).cut
        partial = next(s for s in lost if s.offset < cut_at)
        n = cut_at - partial.offset
        assert cut.read(partial.start, n) == full.read(partial.start, n)
        assert cut.read(partial.start, n + 1) is None
        assert len(cut.read_available(partial.start, n + 4096)) == n
        site = crash_site(cut, file_resolver=NO_FILES)
    assert site.pc == site_full.pc and site.signal_name == "SIGSEGV" and site.fault_address == 8
    assert stack is not None
    full.close()
    # cut inside the notes: what was before the cut is still read, the rest is noted
    with read_core(big.core) as c:
        note_seg = next(s for s in c.elf.segments if s.type == 4)
    dst2 = tmp_path / "core.notes"
    with open(big.core, "rb") as src, open(dst2, "wb") as out:
        out.write(src.read(note_seg.offset + 600))   # prstatus + prpsinfo, then cut
    with read_core(dst2) as c:
        assert c.truncated and len(c.threads) == 1 and c.process is not None and c.auxv is None
        assert any("notes cut" in n for n in c.notes)
        site = crash_site(c)
        assert site.pc == site_full.pc


def test_compressed_cores(segv, tmp_path):
    raw = segv.core.read_bytes()
    with read_core(segv.core) as plain:
        want = crash_site(plain, file_resolver=NO_FILES)
        want_regs = [t.registers for t in plain.threads]
    packed = {
        "zst": zstandard.ZstdCompressor(level=3).compress(raw),
        "lz4": lz4.frame.compress(raw),
        "xz": lzma.compress(raw, preset=0),
    }
    for ext, data in packed.items():
        p = tmp_path / f"core.segv.{ext}"
        p.write_bytes(data)
        before = set(os.listdir(tmp_path))
        with read_core(p, tmpdir=str(tmp_path)) as core:
            assert set(os.listdir(tmp_path)) == before   # the temporary file is unlinked at once
            assert not core.truncated and [t.registers for t in core.threads] == want_regs
            assert any(f"decompressed from {'zstd' if ext == 'zst' else ext}" in n for n in core.notes)
            got = crash_site(core, file_resolver=NO_FILES)
            assert (got.pc, got.fault_address, got.signal) == (want.pc, want.fault_address, want.signal)
            assert core.read(core.threads[0].sp, 64) is not None
    # through the input layer: InputFile.open() gives the decompressed content
    from crashlens.inputs import collect_inputs
    inputs, _notes = collect_inputs([str(tmp_path / "core.segv.zst")])
    (inp,) = [i for i in inputs if i.kind == "elf-core"]
    with inp.open() as stream, open_core(stream, name=inp.name) as core:
        assert core.path == inp.name and [t.registers for t in core.threads] == want_regs
    # a stream that ends early: partial, marked, noted
    cut = tmp_path / "core.cut.zst"
    cut.write_bytes(packed["zst"][: len(packed["zst"]) * 3 // 4])
    with read_core(cut) as core:
        assert core.truncated and any("incomplete" in n for n in core.notes)
        assert core.threads and core.threads[0].registers == want_regs[0]
    # over the size limit: the first bytes only
    with read_core(tmp_path / "core.segv.zst", max_bytes=len(raw) // 2) as core:
        assert core.truncated and any("limit" in n for n in core.notes)
    with pytest.raises(CoreError):
        read_core(tmp_path / "nothing.zst")
    bad = tmp_path / "notcore.zst"
    bad.write_bytes(zstandard.ZstdCompressor().compress(b"hello world" * 100))
    with pytest.raises(CoreError):
        read_core(bad)


def test_not_a_core(segv, tmp_path):
    with pytest.raises(CoreError, match="not a core"):
        read_core(segv.program)
    p = tmp_path / "text"
    p.write_text("hello\n")
    with pytest.raises(CoreError):
        read_core(p)
    with read_core(segv.core) as core:
        assert core.read(0, 16) is None                  # unmapped
        assert core.read_available(1 << 60, 16) == b""
        assert core.read(core.threads[0].sp, 0) == b""
        with pytest.raises(CoreError):
            core.read(core.threads[0].sp, 1 << 40)


def _note_spans(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(header offset, namesz, descsz, type, desc offset) of every note of a 64-bit LE core."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    out = []
    for i in range(phnum):
        typ, _f, off, _v, _p, filesz, _m, _a = struct.unpack_from("<IIQQQQQQ", data, phoff + 56 * i)
        if typ != 4:
            continue
        pos = off
        while pos + 12 <= off + filesz:
            namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
            desc = pos + ((12 + namesz + 3) & ~3)
            out.append((pos, namesz, descsz, ntype, desc))
            pos = desc + ((descsz + 3) & ~3)
    return out


@pytest.fixture(scope="module")
def small_core(threads):
    return threads.core.read_bytes()


def _survives(data: bytes) -> None:
    try:
        elf = ElfFile.from_bytes(data, "mutated")
    except ElfError:
        return
    try:
        core = read_core(elf)
    except ElfError:   # CoreError included
        return
    site = crash_site(core, file_resolver=NO_FILES, cpu_flags=CPU_FLAGS)
    assert isinstance(site, CrashSite)
    site.to_json()
    core.to_json()
    for m in core.modules:
        m.to_json()


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_notes(small_core, data):
    buf = bytearray(small_core)
    spans = _note_spans(small_core)
    for _ in range(data.draw(st.integers(1, 6))):
        pos, namesz, descsz, ntype, desc = data.draw(st.sampled_from(spans))
        what = data.draw(st.sampled_from(["namesz", "descsz", "type", "byte", "count", "page", "strings", "cut"]))
        if what == "namesz":
            struct.pack_into("<I", buf, pos, data.draw(st.sampled_from([0, 1, 3, 5, 0xFFFF, 0xFFFFFFFF])))
        elif what == "descsz":
            struct.pack_into("<I", buf, pos + 4, data.draw(st.sampled_from(
                [0, 1, 8, 12, 100, descsz - 1, descsz + 8, 0x7FFFFFFF, 0xFFFFFFFF])))
        elif what == "type":
            struct.pack_into("<I", buf, pos + 8, data.draw(st.sampled_from(
                [1, 2, 3, 6, 0x202, 0x205, NT_FILE, 0x53494749, 0xDEAD])))
        elif what == "byte" and descsz:
            at = desc + data.draw(st.integers(0, descsz - 1))
            buf[at] = data.draw(st.integers(0, 255))
        elif what == "count" and ntype == NT_FILE:
            struct.pack_into("<Q", buf, desc, data.draw(st.sampled_from([0, 1, 2, 1000, 1 << 40, (1 << 64) - 1])))
        elif what == "page" and ntype == NT_FILE:
            struct.pack_into("<Q", buf, desc + 8, data.draw(st.sampled_from([0, 1, 3, 4096, 1 << 63])))
        elif what == "strings" and ntype == NT_FILE:
            count, = struct.unpack_from("<Q", buf, desc)
            start = desc + 16 + 24 * min(count, 1 << 16)
            for i in range(start, min(desc + descsz, len(buf))):
                if buf[i] == 0:
                    buf[i] = 0x41
        elif what == "cut":
            del buf[data.draw(st.integers(64, len(buf) - 1)):]
            break
        elif ntype == NT_PRSTATUS and descsz >= 300:
            struct.pack_into("<Q", buf, desc + 112 + 19 * 8, data.draw(st.integers(0, (1 << 64) - 1)))
    _survives(bytes(buf))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_headers(small_core, data):
    buf = bytearray(small_core)
    phoff, = struct.unpack_from("<Q", buf, 32)
    phnum, = struct.unpack_from("<H", buf, 56)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, phnum - 1))
        field = data.draw(st.sampled_from([8, 16, 32, 40]))   # offset, vaddr, filesz, memsz
        struct.pack_into("<Q", buf, phoff + 56 * i + field, data.draw(st.sampled_from(
            [0, 1, 0x1000, 1 << 32, 1 << 63, (1 << 64) - 1, len(buf), len(buf) + 4096])))
    if data.draw(st.booleans()):
        struct.pack_into("<H", buf, 56, data.draw(st.sampled_from([0, 1, phnum + 1, 0xFFFF])))
    _survives(bytes(buf))


# -- aarch64 (qemu-user writes the guest's core) --------------------------------------------------------

def test_aarch64_core(tmp_path):
    cc, qemu = shutil.which("aarch64-linux-gnu-gcc"), shutil.which("qemu-aarch64")
    if cc is None or qemu is None:
        pytest.skip("needs aarch64-linux-gnu-gcc and qemu-aarch64 (gcc-aarch64-linux-gnu, qemu-user)")
    try:
        prog = crashers.build("segv_a64", tmp_path, "-O1", "-static", cc=cc)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot cross-build: {exc.stderr.strip()[:200]}")
    c = crashers.crash([qemu, str(prog)], tmp_path)
    if c.core is None or not c.core.name.startswith("qemu_"):
        pytest.skip(c.why or "qemu wrote no guest core")
    with read_core(c.core) as core:
        assert core.machine == "aarch64"
        (t,) = core.threads
        assert t.cursig == 11 and len(t.registers) == 34
        assert list(t.registers)[:2] == ["x0", "x1"] and t.pc_name == "pc" and t.sp_name == "sp"
        assert t.registers["x0"] == 0x10 and t.registers["x1"] == 42   # store(0x10, 42)
        with ElfFile(prog) as elf:
            from crashlens.binary.symbols import locate_function
            assert locate_function(elf, t.pc).name == "store"
        assert core.process.command == "segv_a64"
        assert core.auxv.platform == "aarch64" and "fp" in core.auxv.hwcap_names
        assert core.auxv.execfn and core.auxv.execfn.endswith("segv_a64")
        site = crash_site(core)
        assert site.pc == t.pc and site.signal_name == "SIGSEGV" and site.cpu_supports is None


# -- notes-only triage does not grow with the core ---------------------------------------------------

@pytest.mark.slow
def test_triage_cost_is_flat(tmp_path_factory, segv):
    mib = int(os.environ.get("CRASHLENS_BIG_CORE_MIB", "1024"))
    free = shutil.disk_usage(tmp_path_factory.getbasetemp()).free
    if free < (mib + 512) << 20:
        pytest.skip(f"needs {mib} MiB of free disk for the big core")
    big = _make(tmp_path_factory, "big", ("-O1",), (str(mib),))
    try:
        assert big.core.stat().st_size > (mib - 16) << 20

        def triage(path):
            with read_core(path) as core:
                thread, _ = core.signalled_thread()
                core.to_json()
            return thread
        triage(segv.core)
        thread, large = pages_touched(lambda: triage(big.core))
        _, small = pages_touched(lambda: triage(segv.core))
        assert thread is not None and thread.cursig == 11
        # the pages of the core's memory are never touched: the page faults of reading the notes
        # of a big core stay those of a small one (a whole read would be {mib} MiB / 4 KiB of them)
        assert large < small + 512, f"notes-only triage touched {large} pages of a {mib} MiB core ({small} small)"
    finally:
        big.core.unlink()


# -- the verdict, instruction by instruction (real decoding, no core needed) ----------------------------

AVX512 = bytes.fromhex("62f1fe487f07")            # vmovdqu64 %zmm0,(%rdi)
AVX2 = bytes.fromhex("c5fd6f07")                  # vmovdqa (%rdi),%ymm0
LDTILECFG = bytes.fromhex("c4e2784907")           # ldtilecfg (%rdi)
TILEZERO = bytes.fromhex("c4e27b49c0")            # tilezero %tmm0
TZCNT = bytes.fromhex("f30fbcc7")                 # tzcnt %edi,%eax (BSF without BMI1)
PDEP = bytes.fromhex("c4e2f3f5c2")                # pdep (BMI2, general registers: no XCR0 state)
UD2 = bytes.fromhex("0f0b")
FULL_AVX512 = {"avx", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}


def test_decode_requirements():
    i = decode_instruction(AVX512, 0x1000)
    assert i.mnemonic == "vmovdqu64" and "AVX512F" in i.extensions and i.encoding == "EVEX"
    assert i.xcr0_needed == 0xE6 and i.text == "vmovdqu64 %zmm0,(%rdi)"
    assert decode_instruction(AVX2, 0).xcr0_needed == 0x6
    t = decode_instruction(LDTILECFG, 0)
    assert t.mnemonic == "ldtilecfg" and t.extensions == ("AMX-TILE",) and t.xcr0_needed & 0x60000 == 0x60000
    assert decode_instruction(PDEP, 0).xcr0_needed == 0 and "BMI2" in decode_instruction(PDEP, 0).extensions
    assert not decode_instruction(TZCNT, 0).faults
    assert not decode_instruction(b"\xff\xff\xff", 0).valid


def test_isa_verdicts():
    z = decode_instruction(AVX512, 0x1000)
    assert isa_verdict(z, signo=11)[0] is None
    ok, why = isa_verdict(z, signo=4, si_code=2, xcr0=0xE7, cpu_flags={"avx", "avx2"})
    assert ok is False and "AVX512F" in why and "avx512f" in why
    ok, why = isa_verdict(z, signo=4, si_code=2, xcr0=0x7, cpu_flags=FULL_AVX512)
    assert ok is False and "XCR0 0x7" in why and "AVX-512" in why and "disabled" in why
    ok, why = isa_verdict(decode_instruction(AVX2, 0), signo=4, si_code=2, xcr0=0x3, cpu_flags=None)
    assert ok is False and "XCR0 0x3 lacks AVX" in why
    ok, why = isa_verdict(z, signo=4, si_code=2, xcr0=0xE7, cpu_flags=FULL_AVX512)
    assert ok is True and "support" in why          # never blame what CPU and process support
    ok, why = isa_verdict(z, signo=4, si_code=2, xcr0=0xE7, cpu_flags=None)
    assert ok is None and "no CPU flags" in why
    t = decode_instruction(LDTILECFG, 0x2000)
    amx_cpu = FULL_AVX512 | {"amx_tile", "amx_int8", "amx_bf16"}
    z = decode_instruction(TILEZERO, 0x2005)
    # the XFD refusal of the first tile-data instruction: ILL_ILLOPC, or #NM in a signal frame ...
    ok, why = isa_verdict(z, signo=4, si_code=1, xcr0=0x602E7, cpu_flags=amx_cpu)
    assert ok is False and "ARCH_REQ_XCOMP_PERM" in why and "ILL_ILLOPC" in why
    ok, why = isa_verdict(z, signo=4, si_code=None, trapno=7, xcr0=0x602E7, cpu_flags=amx_cpu)
    assert ok is False and "ARCH_REQ_XCOMP_PERM" in why and "#NM" in why
    ok, why = isa_verdict(z, signo=4, si_code=1, xcr0=0x602E7, cpu_flags=None)
    assert ok is False and "permission" in why
    # ... or, on some hosts, a #UD (fixtures/cores/amx/xfd-ud): told apart by the loaded tile configuration
    ok, why = isa_verdict(z, signo=4, si_code=2, xcr0=0x602E7, cpu_flags=amx_cpu, tile_config=True)
    assert ok is False and "ARCH_REQ_XCOMP_PERM" in why and "TILECFG" in why
    ok, why = isa_verdict(z, signo=4, si_code=2, xcr0=0x602E7, cpu_flags=amx_cpu, tile_config=False)
    assert ok is None and "LDTILECFG" in why and "ARCH_REQ_XCOMP_PERM" in why
    ok, why = isa_verdict(z, signo=4, si_code=2, xcr0=0x602E7, cpu_flags=amx_cpu)
    assert ok is None and "not in the core" in why
    # LDTILECFG needs no tile-data permission: on an AMX CPU its SIGILL is a bad configuration
    ok, why = isa_verdict(t, signo=4, si_code=2, xcr0=0x602E7, cpu_flags=amx_cpu)
    assert ok is True and "no tile-data permission" in why
    ok, why = isa_verdict(t, signo=4, si_code=2, xcr0=0x2E7, cpu_flags=amx_cpu)
    assert ok is False and "XCR0 0x2e7" in why and "kernel" in why
    ok, why = isa_verdict(t, signo=4, si_code=2, xcr0=0x2E7, cpu_flags=None)
    assert ok is False and "AMX" in why
    ok, why = isa_verdict(t, signo=4, si_code=2, xcr0=None, cpu_flags=None)
    assert ok is None
    ok, why = isa_verdict(decode_instruction(TZCNT, 0), signo=4, cpu_flags=set())
    assert ok is True and "BSF" in why
    assert isa_verdict(decode_instruction(UD2, 0), signo=4)[0] is True
    assert isa_verdict(decode_instruction(b"\xff\xff\xff", 0), signo=4)[0] is None
    ok, why = isa_verdict(decode_instruction(PDEP, 0), signo=4, xcr0=0xE7, cpu_flags={"bmi1"})
    assert ok is False and "BMI2" in why
    assert isa_verdict(decode_instruction(PDEP, 0), signo=4, xcr0=0xE7, cpu_flags={"bmi2"})[0] is True


def test_cpu_flags_parsing():
    text = "processor\t: 0\nflags\t\t: fpu sse2 avx512f\nbugs\t\t: spectre\nprocessor\t: 1\nflags\t\t: fpu sse2 avx512f\n"
    assert parse_cpu_flags(text) == {"fpu", "sse2", "avx512f"}
    assert parse_cpu_flags("Flags:                           fpu vme AVX2\n") == {"fpu", "vme", "avx2"}
    assert parse_cpu_flags("avx avx2") == {"avx", "avx2"}
    assert parse_cpu_flags(None) is None
    assert si_code_name(4, 1) == "ILL_ILLOPC" and si_code_name(11, -6) == "SI_TKILL"
