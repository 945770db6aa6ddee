"""Native backtraces and symbols from real cores (fixtures/cores/*.c, *.cpp; gcc, g++, ulimit -c).

Every crash is made here and, where gdb exists, compared with gdb's own unwinding of the same
core (through gdb's Python API: each frame's type, pc and function). The comparison is on
gdb's real frames (NORMAL and SIGTRAMP): same pcs in the same order, same function names
after normalising the spellings of one function (glibc's __GI_ aliases, GCC's .cold/.part
clone suffixes, C++ parameter lists and template return types). gdb's INLINE and TAILCALL
frames are not real frames: an inlined call is in Frame.inlined (checked against gdb's inline
frames), a tail call leaves no trace on the stack and crashlens does not reconstruct it from
DW_TAG_call_site as gdb does (pthread_kill -> __pthread_kill_internal in glibc 2.36).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashlens.binary.core import read_core
from crashlens.binary.crashsite import crash_site
from crashlens.binary.dwarfcfi import CFIError, CFITable, evaluate
from crashlens.binary.elf import ElfFile
from crashlens.binary.symbolize import Symbolizer, demangle, find_debug_file, symbolize
from crashlens.binary.unwind import Backtrace, Unwinder, backtrace, culprit, plain_name
from crashlens.report.json import backtrace_json
from crashlens.errors import CrashlensError

from .conftest import names_function

ROOT = Path(__file__).resolve().parents[1]
CORES = ROOT / "fixtures" / "cores"
_spec = importlib.util.spec_from_file_location("crashers", CORES / "crashers.py")
crashers = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("crashers", crashers)
_spec.loader.exec_module(crashers)  # type: ignore[union-attr]

X86_64 = os.uname().machine == "x86_64"
GDB = shutil.which("gdb")
LIBC = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6")
             if os.path.exists(p)), "/lib/x86_64-linux-gnu/libc.so.6")
NO_FILES = (lambda p: None)  # noqa: E731

pytestmark = pytest.mark.skipif(not X86_64 or shutil.which("gcc") is None,
                                reason="real-core tests need an x86-64 Linux host with gcc")

DEEP = ["deep_kernel", "deep_tile", "deep_block", "deep_layer", "deep_forward"]
LIB_FLAGS = ["-shared", "-fPIC", "-O2", "-fomit-frame-pointer", "-fvisibility=hidden", "-g"]


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=cwd)
    except FileNotFoundError as exc:
        pytest.skip(f"{cmd[0]} is missing: {exc}")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"{' '.join(cmd[:2])} failed: {exc.stderr.strip()[:300]}")


@dataclass
class Made:
    program: Path
    core: Path
    pid: int | None
    stderr: str = ""
    work: Path | None = None


def _crash(argv: list[str], work: Path) -> Made:
    c = crashers.crash(argv, work)
    if c.core is None:
        pytest.skip(c.why)
    return Made(Path(argv[0]), c.core, c.pid, c.stderr, work)


def build_deep(work: Path, *extra: str) -> tuple[Path, Path, Path]:
    """libdeep.so (-O2 -fomit-frame-pointer, stripped, .gnu_debuglink to libdeep.so.debug
    beside it) and the program that calls it. Returns (program, library, debug file)."""
    work.mkdir(parents=True, exist_ok=True)
    lib, dbg = work / "libdeep.so", work / "libdeep.so.debug"
    _run(["gcc", *LIB_FLAGS, *extra, str(CORES / "libdeep.c"), "-o", str(lib)])
    _run(["objcopy", "--only-keep-debug", lib.name, dbg.name], cwd=work)
    _run(["objcopy", "--strip-all", lib.name], cwd=work)
    _run(["objcopy", f"--add-gnu-debuglink={dbg.name}", lib.name], cwd=work)
    prog = work / "deep"
    _run(["gcc", "-O2", "-g", str(CORES / "deep.c"), "-o", str(prog), f"-L{work}", "-ldeep",
          "-Wl,-rpath,$ORIGIN"])
    return prog, lib, dbg


# -- gdb ------------------------------------------------------------------------------------------

GDB_SCRIPT = r'''
import gdb
gdb.execute("set backtrace past-main on")
gdb.execute("set backtrace past-entry on")
kinds = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.SIGTRAMP_FRAME: "sigtramp",
         gdb.TAILCALL_FRAME: "tailcall"}
for th in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
    th.switch()
    print("THREAD|%d" % th.ptid[1])
    f = gdb.newest_frame()
    n = 0
    while f is not None and n < 300:
        sal = f.find_sal()
        print("FRAME|%s|%#x|%s|%s|%s" % (kinds.get(f.type(), f.type()), f.pc(), f.name(),
                                        sal.symtab.filename if sal.symtab else "", sal.line))
        try:
            f = f.older()
        except gdb.error:
            break
        n += 1
'''


@dataclass(frozen=True)
class GdbFrame:
    kind: str
    pc: int
    name: str | None
    file: str
    line: int


def gdb_threads(program: Path, core: Path, tmp: Path) -> dict[int, list[GdbFrame]]:
    """{tid: frames} as gdb unwinds them (empty when gdb is missing)."""
    if GDB is None:
        return {}
    script = tmp / "frames.py"
    script.write_text(GDB_SCRIPT)
    proc = subprocess.run([GDB, "-batch", "-nx", "-x", str(script), str(program), str(core)],
                          capture_output=True, text=True, timeout=300)
    out: dict[int, list[GdbFrame]] = {}
    cur: list[GdbFrame] | None = None
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if parts[0] == "THREAD":
            cur = out.setdefault(int(parts[1]), [])
        elif parts[0] == "FRAME" and cur is not None:
            name = None if parts[3] == "None" else parts[3]
            cur.append(GdbFrame(parts[1], int(parts[2], 16), name, parts[4], int(parts[5] or 0)))
    return out


def _outer_name(name: str) -> str:
    """The last space-separated word at template depth 0: drops a C++ return type."""
    depth, cut = 0, 0
    for i, ch in enumerate(name):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i + 1
    return name[cut:]


def canon(name: str) -> str:
    n = _outer_name(plain_name(name.split("@")[0]))
    for _ in range(4):
        for prefix in ("__GI_", "__libc_", "_"):
            if n.startswith(prefix) and len(n) > len(prefix):
                n = n[len(prefix):]
    return n


def same_function(ours: str | None, theirs: str) -> bool:
    return ours is not None and canon(ours) == canon(theirs)


def is_alias(frame, name: str) -> bool:
    """gdb names a function by its DWARF name, crashlens by its preferred symbol: the same
    function when `name` is a symbol of the module (or its debug file) at the frame's function start."""
    from crashlens.binary.symbols import symbol_sections
    if not frame.module or frame.module_address is None or frame.function_offset is None:
        return False
    start = frame.module_address - frame.function_offset
    elfs = []
    try:
        e = ElfFile(frame.module)
    except CrashlensError:
        return False
    elfs.append(e)
    found = find_debug_file(e, frame.module)
    if found is not None:
        elfs.append(found[1])
    try:
        for elf in elfs:
            for tab in symbol_sections(elf).values():
                if any(tab.entry(i)[4] == start for i in tab.find(name)):
                    return True
        return False
    finally:
        for elf in elfs:
            elf.close()


def compare_with_gdb(bt: Backtrace, frames: list[GdbFrame]) -> list[str]:
    """Assert crashlens's frames match gdb's real frames; return gdb's frames that have no
    crashlens frame of their own (inline, tail call) for the report."""
    real = [g for g in frames if g.kind in ("normal", "sigtramp")]
    skipped = [f"{g.kind} {g.name}" for g in frames if g.kind not in ("normal", "sigtramp")]
    assert len(real) == len(bt.frames), (f"gdb: {[(hex(g.pc), g.name) for g in real]}\n"
                                         f"crashlens:\n{bt.format()}\n{bt.notes}")
    for g, f in zip(real, bt.frames):
        assert g.pc == f.pc, f"frame {f.index}: gdb pc {g.pc:#x}, crashlens {f.pc:#x}\n{bt.format()}"
        if g.kind == "sigtramp":
            assert f.signal_frame, f.location
        elif g.name:
            assert same_function(f.function, g.name) or is_alias(f, g.name), (
                f"frame {f.index}: gdb {g.name}, crashlens {f.function}")
    # inline frames gdb shows before each real frame are crashlens's Frame.inlined, in order
    it = iter(bt.frames)
    pending: list[str] = []
    for g in frames:
        if g.kind == "inline":
            pending.append(g.name or "??")
        elif g.kind in ("normal", "sigtramp"):
            f = next(it)
            if pending or f.inlined:
                assert [canon(i.function) for i in f.inlined] == [canon(p) for p in pending], (
                    f"frame {f.index}: gdb inlines {pending}, crashlens {[i.function for i in f.inlined]}")
            pending = []
        else:
            pending = []
    return skipped


def _check_gdb(made: Made, bt: Backtrace, tmp: Path, tid: int | None = None) -> list[str]:
    threads = gdb_threads(made.program, made.core, tmp)
    if not threads:
        return []
    frames = threads[tid if tid is not None else bt.thread]
    skipped = compare_with_gdb(bt, frames)
    if os.environ.get("CRASHLENS_GDB_REPORT"):
        real = [g for g in frames if g.kind in ("normal", "sigtramp")]
        print(f"\n[gdb] {made.program.name} thread {bt.thread}: {len(real)} real frames, same pcs and functions; "
              f"gdb-only {skipped}; crashlens inlined entries {sum(len(f.inlined) for f in bt.frames)}")
    return skipped


# -- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    work = tmp_path_factory.mktemp("deep")
    prog, lib, dbg = build_deep(work)
    made = _crash([str(prog)], work)
    made.program = prog
    return made


@pytest.fixture(scope="module")
def aborted(tmp_path_factory):
    work = tmp_path_factory.mktemp("abort")
    try:
        prog = crashers.build("abort", work, "-O1")
    except subprocess.CalledProcessError as exc:
        pytest.skip(exc.stderr[:200])
    return _crash([str(prog)], work)


@pytest.fixture(scope="module")
def terminate(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    work = tmp_path_factory.mktemp("terminate")
    prog = work / "terminate"
    _run(["g++", "-O2", "-g", str(CORES / "terminate.cpp"), "-o", str(prog)])
    return _crash([str(prog)], work)


@pytest.fixture(scope="module")
def threads(tmp_path_factory):
    work = tmp_path_factory.mktemp("threads")
    try:
        prog = crashers.build("threads", work, "-O1", "-pthread")
    except subprocess.CalledProcessError as exc:
        pytest.skip(exc.stderr[:200])
    return _crash([str(prog)], work)


@pytest.fixture(scope="module")
def python_fault(tmp_path_factory):
    work = tmp_path_factory.mktemp("pyfault")
    exe = os.path.realpath(sys.executable)
    made = _crash([exe, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"], work)
    made.program = Path(exe)
    return made


# -- the stripped -O2 library, five frames deep ------------------------------------------------------

def test_deep_stripped_library(deep, tmp_path):
    with read_core(deep.core) as core:
        bt = backtrace(core)
        site = crash_site(core)
    assert bt.thread == deep.pid and not bt.truncated and "outermost" in bt.end
    names = bt.functions()
    assert names[:6] == DEEP + ["main"], bt.format()
    assert [f.trust for f in bt.frames[:6]] == ["context"] + ["cfi"] * 5
    assert all(os.path.basename(f.module) == "libdeep.so" for f in bt.frames[:5])
    assert bt.frames[5].module == str(deep.program)
    assert bt.frames[0].pc == site.pc
    # file:line from the separate debug file's line table, return addresses looked up at pc-1
    src = str(CORES / "libdeep.c")
    assert [(f.file, f.line) for f in bt.frames[:5]] == [(src, 14), (src, 25), (src, 33), (src, 41), (src, 50)]
    assert bt.frames[5].file == str(CORES / "deep.c") and bt.frames[5].line == 15
    assert [f.return_address for f in bt.frames[:3]] == [False, True, True]
    # offsets: pc - module base, pc - function start
    f1 = bt.frames[1]
    assert f1.module_offset == f1.pc - f1.module_base
    with ElfFile(deep.work / "libdeep.so.debug") as dbg:
        from crashlens.binary.symbols import locate_function
        fn = locate_function(dbg, f1.module_address)
    assert fn.name == "deep_tile" and f1.function_offset == f1.module_address - fn.start
    # the outermost frames: libc's start-up and _start (a static function of libc: named only
    # where libc's symbols are here, as with Debian's libc6-dbg)
    assert names[-1] == "_start"
    if names_function(LIBC, "__libc_start_call_main"):
        assert "__libc_start_call_main" in names
    assert culprit(bt) is bt.frames[0]          # not an abort: the faulting frame
    j = backtrace_json(bt)
    assert j[0]["trust"] == "context" and j[1]["function"] == "deep_tile" and j[1]["line"] == 25
    assert set(j[0]) >= {"pc", "module", "function", "offset", "file", "line", "trust"}
    assert j[1]["offset"] == hex(f1.module_offset) and j[1]["function_offset"] == hex(f1.function_offset)
    _check_gdb(deep, bt, tmp_path)


def test_debug_file_layouts(deep, tmp_path):
    """The same core, its library's debug file moved between the places gdb looks."""
    lib_path = str(deep.work / "libdeep.so")
    dbg_src = deep.work / "libdeep.so.debug"
    with ElfFile(dbg_src) as e:
        from crashlens.binary import isa
        bid = isa.build_id(e)

    def run(layout: str) -> Backtrace:
        root = tmp_path / layout
        libdir = root / "lib"
        libdir.mkdir(parents=True)
        shutil.copy(lib_path, libdir / "libdeep.so")
        debug_dirs: tuple[str, ...] = (str(root / "debug"),)
        if layout == "debuglink-same-dir":
            shutil.copy(dbg_src, libdir / "libdeep.so.debug")
        elif layout == "debuglink-.debug":
            (libdir / ".debug").mkdir()
            shutil.copy(dbg_src, libdir / ".debug" / "libdeep.so.debug")
        elif layout == "debuglink-debug-root":
            d = root / "debug" / str(libdir).lstrip("/")
            d.mkdir(parents=True)
            shutil.copy(dbg_src, d / "libdeep.so.debug")
        elif layout == "build-id":
            d = root / "debug" / ".build-id" / bid[:2]
            d.mkdir(parents=True)
            shutil.copy(dbg_src, d / (bid[2:] + ".debug"))
        elif layout == "build-id-sysroot":
            d = root / "sysroot" / "usr" / "lib" / "debug" / ".build-id" / bid[:2]
            d.mkdir(parents=True)
            shutil.copy(dbg_src, d / (bid[2:] + ".debug"))
            debug_dirs = ("/usr/lib/debug",)
        resolver = (lambda p: str(libdir / "libdeep.so") if p == lib_path else p)
        sysroot = root / "sysroot" if layout == "build-id-sysroot" else None
        with read_core(deep.core) as core:
            u = Unwinder(core, file_resolver=resolver, debug_dirs=debug_dirs, sysroot=sysroot)
            try:
                bt = u.backtrace()
                mods = {m["path"]: m for m in u.modules()}
            finally:
                u.close()
        assert mods[lib_path]["found_at"] == str(libdir / "libdeep.so") and not mods[lib_path]["mismatch"]
        return bt

    for layout in ("debuglink-same-dir", "debuglink-.debug", "debuglink-debug-root", "build-id", "build-id-sysroot"):
        bt = run(layout)
        assert bt.functions()[:5] == DEEP, (layout, bt.format())
        assert bt.frames[1].line == 25, layout
    # no debug file: only the exported function has a name (.dynsym); the frames still unwind (.eh_frame)
    bt = run("none")
    assert bt.functions()[:5] == ["", "", "", "", "deep_forward"], bt.format()
    assert [f.trust for f in bt.frames[:6]] == ["context"] + ["cfi"] * 5
    assert not bt.frames[0].file


def test_debug_frame_only_in_the_debug_file(tmp_path):
    """CFI only in .debug_frame (-fno-asynchronous-unwind-tables), which stripping moves into the
    separate debug file: found there, or, without it, frames found by scanning."""
    prog, lib, dbg = build_deep(tmp_path / "w", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")
    with ElfFile(lib) as e:
        assert e.section(".debug_frame") is None
    with ElfFile(dbg) as e:
        assert e.section(".debug_frame") is not None
    made = _crash([str(prog)], tmp_path / "w")
    with read_core(made.core) as core:
        bt = backtrace(core)
        hidden = tmp_path / "elsewhere.debug"
        dbg.rename(hidden)
        blind = backtrace(core, debug_dirs=())
    assert bt.functions()[:6] == DEEP + ["main"], bt.format()
    assert [f.trust for f in bt.frames[:6]] == ["context"] + ["cfi"] * 5
    # without the debug file: no CFI for the library, yet the return addresses are found on the stack
    assert [f.module_offset for f in blind.frames[:6]] == [f.module_offset for f in bt.frames[:6]], blind.format()
    assert [f.trust for f in blind.frames[1:6]] == ["scan"] * 5
    assert any("scanning the stack" in n for n in blind.notes)


# -- aborts: the culprit -------------------------------------------------------------------------------

def test_assert_abort_culprit(aborted, tmp_path):
    with read_core(aborted.core) as core:
        bt = backtrace(core)
    names = bt.functions()
    assert "abort" in names and "raise" in names and "__assert_fail" in names, bt.format()
    c = culprit(bt)
    assert c is not None and c.function == "check_config" and c.module == str(aborted.program), bt.format()
    assert c.file.endswith("abort.c") and c.line == 6
    assert names[names.index("check_config") + 1] == "main"
    skipped = _check_gdb(aborted, bt, tmp_path)
    assert all(s.startswith(("tailcall", "inline")) for s in skipped)


def test_cxx_terminate(terminate, tmp_path):
    if shutil.which("c++filt") is None:
        pytest.skip("c++filt (binutils) is missing: names stay mangled")
    with read_core(terminate.core) as core:
        bt = backtrace(core)
    names = bt.functions()
    assert "std::terminate()" in names and "__cxa_throw" in names, bt.format()
    c = culprit(bt)
    assert c is not None and plain_name(c.function) == "ml::ShardLoader::load", bt.format()
    assert c.mangled and c.mangled.startswith("_ZN2ml11ShardLoader4loadEi")
    i = names.index(c.function)
    assert plain_name(names[i + 1]).endswith("ml::run_epoch<ml::ShardLoader>") and names[i + 2] == "main"
    assert all(f.trust in ("context", "cfi") for f in bt.frames)
    _check_gdb(terminate, bt, tmp_path)


def test_culprit_rules():
    from crashlens.model import Frame, FrameTrust

    def fr(i, fn, mod):
        return Frame("native", fn or "", module=mod, index=i, pc=0x1000 + i, sp=0, trust=FrameTrust.CFI,
                     module_base=0, module_offset=0)
    libc, app, cxx = "/lib/x86_64-linux-gnu/libc.so.6", "/opt/app/train", "/usr/lib/libstdc++.so.6"
    bt = Backtrace((fr(0, "__pthread_kill_implementation", libc), fr(1, "raise", libc), fr(2, "abort", libc),
                    fr(3, "__libc_message_impl", libc), fr(4, "malloc_printerr", libc), fr(5, "_int_free", libc),
                    fr(6, "free", libc), fr(7, "ctc_beam_free", app), fr(8, "main", app)), 1)
    assert culprit(bt).function == "ctc_beam_free"
    bt = Backtrace((fr(0, "raise", libc), fr(1, "abort", libc), fr(2, None, cxx), fr(3, "std::terminate()", cxx),
                    fr(4, "__cxa_throw", cxx), fr(5, "std::__throw_out_of_range_fmt(char const*, ...)", cxx),
                    fr(6, "load(int) [clone .cold]", app)), 1)
    assert culprit(bt).function == "load(int) [clone .cold]"
    assert culprit(Backtrace((fr(0, "store", app),), 1)).function == "store"
    assert culprit(Backtrace((fr(0, "raise", libc), fr(1, "abort", libc)), 1)) is None
    assert culprit(Backtrace((), 1)) is None
    assert plain_name("__assert_fail_base.cold") == "__assert_fail_base"
    assert plain_name("foo.constprop.0.isra.0") == "foo"


# -- threads --------------------------------------------------------------------------------------

def test_threads(threads, tmp_path):
    with read_core(threads.core) as core:
        with Unwinder(core) as u:
            all_bt = u.backtraces()
    first = all_bt[0]
    assert first.thread != threads.pid
    assert first.functions()[:2] == ["crash_in_worker", "worker"], first.format()
    if names_function(LIBC, "start_thread"):   # static in glibc >= 2.34: needs libc's symbols
        assert "start_thread" in first.functions() and canon(first.functions()[-1]) == "clone3"
    else:
        assert len(first.frames) >= 4 and all("libc.so" in (f.module or "") for f in first.frames[2:])
    main = next(b for b in all_bt if b.thread == threads.pid)
    assert "main" in main.functions(), main.format()
    if names_function(LIBC, "__pthread_clockjoin_ex"):   # the static join helper: named with libc's symbols
        assert any("join" in (n or "") for n in main.functions()), main.format()
    idle = [b for b in all_bt if b is not first and b is not main]
    assert len(idle) == 2 and all("idle" in b.functions() for b in idle)
    got = gdb_threads(threads.program, threads.core, tmp_path)
    for b in all_bt:
        if got:
            skipped = compare_with_gdb(b, got[b.thread])
            if os.environ.get("CRASHLENS_GDB_REPORT"):
                print(f"\n[gdb] threads thread {b.thread}: {len(b.frames)} real frames, same pcs and functions; "
                      f"gdb-only {skipped}")


# -- Python: faulthandler re-raised the SIGSEGV --------------------------------------------------------

def test_python_faulthandler(python_fault, tmp_path):
    with read_core(python_fault.core) as core:
        site = crash_site(core)
        assert site.method == "signal-frame"
        with Unwinder(core) as u:
            whole = u.backtrace()
            from_fault = u.backtrace(start=site.registers)
    # from the recovered context: strlen (libc) <- string_at (_ctypes) <- libffi <- ... <- python
    f = from_fault.frames
    assert f[0].pc == site.pc and f[0].trust == "context" and "libc.so" in f[0].module
    assert not f[0].function or "strlen" in f[0].function
    mods = [os.path.basename(x.module or "?") for x in f]
    assert mods[1].startswith("_ctypes"), from_fault.format()
    ctypes_so = f[1].module
    if names_function(ctypes_so, "string_at"):       # stripped in distribution builds (Ubuntu's python3.12)
        assert f[1].function == "string_at", from_fault.format()
    assert any(m.startswith("libffi") for m in mods), from_fault.format()
    if names_function(ctypes_so, "_ctypes_callproc"):
        assert "_ctypes_callproc" in from_fault.functions()
    assert "_PyEval_EvalFrameDefault" in from_fault.functions()
    exe_frames = [x for x in f if x.module == str(python_fault.program)]
    assert exe_frames and from_fault.functions()[-1] == "_start"
    assert all(x.trust in ("context", "cfi") for x in f), from_fault.format()
    # the whole thread: the re-raise, the signal trampoline, then the same frames
    k = next(i for i, x in enumerate(whole.frames) if x.signal_frame)
    assert "raise" in whole.functions()[:k]
    assert [x.pc for x in whole.frames[k + 1:]] == [x.pc for x in f]
    assert not whole.frames[k + 1].return_address          # the interrupted pc is exact
    assert culprit(whole, site.signal_name).pc == site.pc   # the handler's frames are skipped
    # string_at is inlined into string_at (gdb shows both)
    assert any(i.function == "string_at" for i in f[1].inlined) or GDB is None or not names_function(
        ctypes_so, "string_at")
    skipped = _check_gdb(python_fault, whole, tmp_path)
    assert all(s.startswith(("tailcall", "inline")) for s in skipped)


# -- missing, mismatched, corrupt, truncated ------------------------------------------------------------

def test_missing_library(deep):
    lib = str(deep.work / "libdeep.so")
    with read_core(deep.core) as core:
        full = backtrace(core)
        bt = backtrace(core, file_resolver=lambda p: None if p == lib else p)
    assert [f.module_offset for f in bt.frames[:6]] == [f.module_offset for f in full.frames[:6]], bt.format()
    assert [f.trust for f in bt.frames[:6]] == ["context"] + ["scan"] * 5
    assert not bt.frames[0].function and bt.frames[5].function == "main"
    assert any("not found on this machine" in n for n in bt.notes)
    assert any("not verified" in n for n in bt.notes)
    assert bt.functions()[-1] == "_start"


def test_cfi_from_the_core(tmp_path, deep):
    """coredump_filter bit 2 dumps file-backed pages: a missing library's .eh_frame is read
    from the core's memory."""
    work = tmp_path / "w"
    prog, lib, dbg = build_deep(work)
    c = crashers.crash(["bash", "-c", f"echo 0x3f > /proc/self/coredump_filter && exec {prog}"], work)
    if c.core is None:
        pytest.skip(c.why)
    with read_core(c.core) as core:
        bt = backtrace(core, file_resolver=lambda p: None if p == str(lib) else p)
    assert [f.trust for f in bt.frames[:6]] == ["context"] + ["cfi"] * 5, bt.format()
    with read_core(deep.core) as core:
        ref = backtrace(core)
    assert [f.module_offset for f in bt.frames[:6]] == [f.module_offset for f in ref.frames[:6]]


def test_build_id_mismatch(deep, tmp_path):
    other = tmp_path / "libdeep.so"
    _run(["gcc", *LIB_FLAGS, "-DOTHER_BUILD=1", "-O1", str(CORES / "libdeep.c"), "-o", str(other)])
    lib = str(deep.work / "libdeep.so")
    with read_core(deep.core) as core:
        with Unwinder(core, file_resolver=lambda p: str(other) if p == lib else p) as u:
            bt = u.backtrace()
            mods = {m["path"]: m for m in u.modules()}
    assert mods[lib]["mismatch"] is True and mods[lib]["found_at"] == str(other)
    assert any("build-id mismatch" in n for n in bt.notes)
    assert not bt.frames[0].function                   # the other build's names are not used
    assert [f.trust for f in bt.frames[1:6]] == ["scan"] * 5 and bt.frames[5].function == "main"


def test_truncated_core(deep, tmp_path):
    with read_core(deep.core) as core:
        full = backtrace(core)
        stack = core.segment_at(core.threads[0].sp)
    data = deep.core.read_bytes()
    for cut_at, what in ((stack.offset + (full.frames[2].sp - stack.start), "inside the stack"),
                         (stack.offset, "before the stack"), (4096, "in the notes")):
        p = tmp_path / f"core.{cut_at}"
        p.write_bytes(data[:cut_at])
        try:
            core = read_core(p)
        except CrashlensError:
            continue
        with core:
            bt = backtrace(core)
        assert isinstance(bt, Backtrace), what
        if bt.frames:
            assert bt.frames[0].pc == full.frames[0].pc, what
            assert len(bt.frames) < len(full.frames) or bt.frames == full.frames, what
            assert bt.notes, what
        backtrace_json(bt)


@pytest.fixture(scope="module")
def eh_frame_span(deep):
    with ElfFile(deep.work / "libdeep.so") as e:
        hdr, eh = e.section(".eh_frame_hdr"), e.section(".eh_frame")
        return (hdr.offset, hdr.size), (eh.offset, eh.size), (deep.work / "libdeep.so").read_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_corrupt_eh_frame(deep, eh_frame_span, tmp_path, data):
    (ho, hs), (eo, es), raw = eh_frame_span
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 8))):
        off, size = data.draw(st.sampled_from([(ho, hs), (eo, es), (eo, es)]))
        at = off + data.draw(st.integers(0, size - 1))
        kind = data.draw(st.sampled_from(["byte", "word", "zero"]))
        if kind == "byte":
            buf[at] = data.draw(st.integers(0, 255))
        elif kind == "word" and at + 4 <= off + size:
            struct.pack_into("<I", buf, at, data.draw(st.sampled_from([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80, 0x10000])))
        elif kind == "zero":
            buf[at:at + 16] = bytes(len(buf[at:at + 16]))
    copy = tmp_path / f"libdeep-{data.draw(st.integers(0, 1 << 30))}.so"
    copy.write_bytes(bytes(buf))
    lib = str(deep.work / "libdeep.so")
    with read_core(deep.core) as core:
        bt = backtrace(core, file_resolver=lambda p: str(copy) if p == lib else p, debug_dirs=())
    assert bt.frames and bt.frames[0].trust == "context"
    assert all(f.trust in ("context", "cfi", "fp", "scan") for f in bt.frames)
    backtrace_json(bt)
    copy.unlink()


@pytest.fixture(scope="module")
def deep_core_bytes(deep):
    with read_core(deep.core) as core:
        seg = core.segment_at(core.threads[0].sp)
        lo = seg.offset + (core.threads[0].sp - seg.start)
        return deep.core.read_bytes(), lo, seg.offset + seg.available


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_garbage_on_the_stack(deep, deep_core_bytes, tmp_path, data):
    """Corrupt stack words (saved registers, return addresses, frame pointers): the walk ends
    with notes, in bounded time, never with an exception."""
    raw, lo, hi = deep_core_bytes
    buf = bytearray(raw)
    with read_core(deep.core) as core:
        code = [f.pc for f in backtrace(core, lines=False).frames]
    for _ in range(data.draw(st.integers(1, 12))):
        at = lo + 8 * data.draw(st.integers(0, min(512, (hi - lo) // 8 - 1)))
        value = data.draw(st.sampled_from([0, 1, 8, (1 << 64) - 1, lo, data.draw(st.sampled_from(code)),
                                           data.draw(st.sampled_from(code)) + 1, 0x7FFF_FFFF_F000]))
        struct.pack_into("<Q", buf, at, value)
    p = tmp_path / f"core.{data.draw(st.integers(0, 1 << 30))}"
    p.write_bytes(bytes(buf))
    with read_core(p) as core:
        bt = backtrace(core, lines=False)
    assert bt.frames and bt.frames[0].pc == code[0] and len(bt.frames) <= 256
    assert bt.end
    backtrace_json(bt)
    p.unlink()


def test_bad_start_registers(deep):
    with read_core(deep.core) as core:
        bt = backtrace(core, start={"rip": 0, "rsp": 8})
        assert bt.frames[0].pc == 0 and bt.notes
        bt = backtrace(core, start={"rip": core.threads[0].pc})
        assert not bt.frames and bt.notes
        bt = backtrace(core, thread=123456789)
        assert not bt.frames and "no thread" in bt.notes[0]
        sp = core.threads[0].sp
        bt = backtrace(core, start={"rip": 0, "rsp": sp, "rbp": sp})   # a call through a null pointer
        assert bt.frames[0].pc == 0
        bt = backtrace(core, max_frames=3)
        assert len(bt.frames) == 3 and bt.truncated and bt.end == "max_frames"


# -- symbolize on its own --------------------------------------------------------------------------

def test_symbolize_api(deep):
    with read_core(deep.core) as core:
        bt = backtrace(core)
        f1 = bt.frames[1]
        mod = core.module_of(f1.pc)
        s = symbolize(f1.pc, mod, core=core, return_address=True)
        assert (s.function, s.offset, s.line) == ("deep_tile", f1.function_offset, 25)
        # a return address looked up as is: still deep_tile, but the line after the call
        s0 = symbolize(f1.pc, mod, core=core)
        assert s0.function == "deep_tile"
        with Symbolizer(core) as sym:
            assert sym.symbolize(bt.frames[0].pc).function == "deep_kernel"
            assert sym.symbolize(1).function is None
    # an ELF file on its own: addresses are the file's
    dbg = deep.work / "libdeep.so.debug"
    s = symbolize(f1.module_address - 1, str(deep.work / "libdeep.so"))
    assert s.function == "deep_tile" and s.line == 25
    with ElfFile(deep.work / "libdeep.so") as e:
        path, dfile, how = find_debug_file(e, str(deep.work / "libdeep.so"), ())
        dfile.close()
    assert path == str(dbg) and how == "debuglink"


def test_demangle():
    got = demangle(["_ZN2ml11ShardLoader4loadEi", "main", "_Znotvalid"])
    if shutil.which("c++filt") is None:
        assert got["_ZN2ml11ShardLoader4loadEi"] == "_ZN2ml11ShardLoader4loadEi"
    else:
        assert got["_ZN2ml11ShardLoader4loadEi"] == "ml::ShardLoader::load(int)"
    assert got["main"] == "main" and got["_Znotvalid"] == "_Znotvalid"


# -- CFI and expressions, by hand -----------------------------------------------------------------------

def _cie(aug: bytes, instructions: bytes, code_align=1, data_align=-8, ra=16, aug_data=b"") -> bytes:
    body = struct.pack("<I", 0) + bytes([1]) + aug + b"\0" + bytes([code_align]) + bytes([data_align & 0x7F]) + bytes([ra])
    if aug.startswith(b"z"):
        body += bytes([len(aug_data)]) + aug_data
    body += instructions
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def _fde(cie_at: int, at: int, pc_begin: int, length: int, instructions: bytes) -> bytes:
    body = struct.pack("<I", at + 4 - cie_at)
    body += struct.pack("<iI", pc_begin - (0x1000 + at + 8), length)   # pcrel sdata4 (section at 0x1000)
    body += b"\0" + instructions
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def test_cfi_rules_by_hand():
    # CIE: CFA = rsp+8, ra at cfa-8; FDE: push rbp (advance 1: cfa+16, rbp at cfa-16),
    # remember, advance 4: def_cfa rbp+16, advance 4: restore_state (back to rsp+16)
    cie = _cie(b"zR", bytes([0x0C, 7, 8, 0x90, 1]), aug_data=bytes([0x1B]))
    fde_ins = bytes([0x41, 0x0E, 16, 0x86, 2, 0x0A, 0x44, 0x0C, 6, 16, 0x44, 0x0B])
    sec = cie + _fde(0, len(cie), 0x2000, 0x40, fde_ins) + b"\0\0\0\0"
    t = CFITable(sec, 0x1000, "eh")
    assert t.find(0x1FFF) is None and t.find(0x2040) is None
    fde = t.find(0x2000)
    assert fde is not None and fde.pc_begin == 0x2000 and fde.pc_end == 0x2040
    r0 = t.row(fde, 0x2000)
    assert (r0.cfa_reg, r0.cfa_offset) == (7, 8) and r0.rules[16] == ("offset", -8)
    r1 = t.row(fde, 0x2001)
    assert (r1.cfa_reg, r1.cfa_offset) == (7, 16) and r1.rules[6] == ("offset", -16)
    r2 = t.row(fde, 0x2005)
    assert (r2.cfa_reg, r2.cfa_offset) == (6, 16)
    r3 = t.row(fde, 0x2009)
    assert (r3.cfa_reg, r3.cfa_offset) == (7, 16) and r3.rules[6] == ("offset", -16)
    # malformed: restore_state without remember_state
    bad = cie + _fde(0, len(cie), 0x3000, 0x10, bytes([0x0B])) + b"\0\0\0\0"
    t2 = CFITable(bad, 0x1000, "eh")
    with pytest.raises(CFIError):
        t2.row(t2.find(0x3000), 0x3000)
    broken = CFITable(b"\xff\xff\xff\x7f" + b"\0" * 12, 0, "eh")     # an entry longer than the section
    assert broken.find(0) is None and "runs past" in broken.notes[0]


def test_dwarf_expressions():
    regs = {7: 0x7FF0_0000, 16: 0x401_00B}
    mem = {0x7FF0_0000 + 160: 0xAAAA}
    read = lambda a, n: mem.get(a)  # noqa: E731
    # the PLT's CFA: rsp + 8 + ((rip & 15) >= 11 ? 8 : 0)
    plt = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
    assert evaluate(plt, regs.get, read) == 0x7FF0_0000 + 16
    regs[16] = 0x401_003
    assert evaluate(plt, regs.get, read) == 0x7FF0_0000 + 8
    # __restore_rt's CFA: *(rsp + 160)
    assert evaluate(bytes([0x77, 0xA0, 0x01, 0x06]), regs.get, read) == 0xAAAA
    with pytest.raises(CFIError):
        evaluate(bytes([0x78, 0]), regs.get, read)        # r8 unknown
    with pytest.raises(CFIError):
        evaluate(bytes([0x30, 0x06]), regs.get, read)     # *0: not in the core
    with pytest.raises(CFIError):
        evaluate(bytes([0x2F, 0xFD, 0xFF]), regs.get, read)   # skip -3: a loop, bounded
    assert evaluate(bytes([0x35, 0x33, 0x1C]), regs.get, read) == 2                 # lit5 lit3 minus
    assert evaluate(bytes([0x32, 0x33, 0x1C]), regs.get, read) == (1 << 64) - 1     # wraps at 64 bits
