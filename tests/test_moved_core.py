"""Cores analysed where the process did not run (issue 10, section 3).

A CI artifact holds the executable, its libraries and the core, in a folder whose absolute path
is not the one the process ran from. `crashlens analyze ./prog core` must find the executable
as `gdb ./prog core` does: because it was given, by basename under --lib-path, by build-id when
renamed. Each case is compared with gdb's own unwinding of the same files
(`set solib-search-path`): crashlens must give every one of gdb's real frames (same pc, same
function, same order) and no frame gdb does not have.

fixtures/cores/movedprog.c calls libmoved.so, which calls back into the executable, which
faults: the executable's frames sit above and below the library's, so its CFI is needed to
unwind past them (-O2 -fomit-frame-pointer).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from crashlens.pipeline import Options, analyze_paths

from .test_unwind import CORES, GDB, GdbFrame, X86_64, _run, canon, crashers, is_alias

pytestmark = pytest.mark.skipif(not X86_64 or shutil.which("gcc") is None,
                                reason="real-core tests need an x86-64 Linux host with gcc")

FLAGS = ["-O2", "-g", "-fomit-frame-pointer"]
EXE_FUNCTIONS = {"visit", "run_step", "run_job", "main", "_start"}


@dataclass(frozen=True)
class Built:
    prog: Path   # where the process ran (removed once moved)
    dest: Path   # the folder the artifacts were moved to
    pid: int | None


def build_and_crash(work: Path) -> tuple[Path, Path, Path, int | None]:
    """Compile libmoved.so and movedprog in work/build, crash it there; (program, library, core, pid)."""
    build = work / "build"
    build.mkdir(parents=True)
    lib = build / "libmoved.so"
    _run(["gcc", *FLAGS, "-shared", "-fPIC", "-fvisibility=hidden", str(CORES / "libmoved.c"), "-o", str(lib)])
    prog = build / "movedprog"
    _run(["gcc", *FLAGS, str(CORES / "movedprog.c"), "-o", str(prog), f"-L{build}", "-lmoved",
          "-Wl,-rpath,$ORIGIN"])
    c = crashers.crash([str(prog)], build)
    if c.core is None:
        pytest.skip(c.why)
    return prog, lib, c.core, c.pid


@pytest.fixture(scope="module")
def moved(tmp_path_factory) -> Built:
    """The program, its library and its core moved from build/ to artifacts/ci/job-7/ (another
    absolute path: the process's own folder no longer exists)."""
    work = tmp_path_factory.mktemp("moved")
    prog, lib, core, pid = build_and_crash(work)
    dest = work / "artifacts" / "ci" / "job-7"
    dest.mkdir(parents=True)
    for f in (prog, lib, core):
        shutil.move(str(f), dest / f.name)
    shutil.rmtree(prog.parent)
    return Built(prog, dest, pid)


def gdb_real_frames(program: Path, core: Path, solib_dir: Path, tmp: Path) -> list[GdbFrame]:
    """gdb's real frames (NORMAL, SIGTRAMP) of the crashing thread with `set solib-search-path`."""
    if GDB is None:
        pytest.skip("gdb is needed for the comparison")
    script = tmp / "frames.py"
    from .test_unwind import GDB_SCRIPT

    script.write_text(f'import gdb\ngdb.execute("set solib-search-path {solib_dir}")\n' + GDB_SCRIPT)
    proc = subprocess.run([GDB, "-batch", "-nx", "-x", str(script), str(program), str(core)],
                          capture_output=True, text=True, timeout=300)
    threads: dict[int, list[GdbFrame]] = {}
    cur = None
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if parts[0] == "THREAD":
            cur = threads.setdefault(int(parts[1]), [])
        elif parts[0] == "FRAME" and cur is not None:
            cur.append(GdbFrame(parts[1], int(parts[2], 16), None if parts[3] == "None" else parts[3], parts[4],
                                int(parts[5] or 0)))
    assert threads, proc.stderr[-2000:]
    frames = next(iter(threads.values())) if len(threads) == 1 else threads[max(threads)]
    return [g for g in frames if g.kind in ("normal", "sigtramp")]


def coverage(frames, gdb: list[GdbFrame]) -> tuple[float, list[str]]:
    """(share of gdb's frames crashlens gives with the same pc and function, in order;
    crashlens's frames gdb does not have)."""
    matched, extra = 0, []
    it = iter(gdb)
    want = next(it, None)
    for f in frames:
        if want is not None and f.pc == want.pc:
            if want.name is None or (f.function and canon(f.function) == canon(want.name)) or is_alias(f, want.name):
                matched += 1
            want = next(it, None)
        else:
            extra.append(f"{f.pc:#x} {f.function} ({f.trust})")
    return matched / len(gdb), extra


def _check(a, gdb: list[GdbFrame]) -> None:
    assert a.crash is not None and a.crash.backtrace is not None
    frames = a.crash.backtrace.frames
    cov, extra = coverage(frames, gdb)
    shown = "\n".join(f"{f.pc:#x} {f.function} {f.trust}" for f in frames)
    assert cov == 1.0 and not extra, f"coverage {cov:.0%}, extra {extra}\n{shown}\nnotes {a.notes}"
    assert [f.trust for f in frames[1:]] == ["cfi"] * (len(frames) - 1), shown
    assert {f.function for f in frames} >= EXE_FUNCTIONS - {"_start"}


def test_given_executable_is_found_and_unwound_like_gdb(moved: Built, tmp_path: Path, monkeypatch):
    """`crashlens analyze --lib-path . ./movedprog core` in the artifact folder."""
    monkeypatch.chdir(moved.dest)
    a = analyze_paths(["./movedprog", "core"], Options(lib_paths=(Path("."),)))
    mods = {os.path.basename(m.path): m for m in a.crash.modules}
    assert mods["movedprog"].path == str(moved.prog)
    assert mods["movedprog"].found_at is not None and mods["movedprog"].mismatch is False
    assert os.path.samefile(mods["movedprog"].found_at, moved.dest / "movedprog")
    assert mods["libmoved.so"].found_at is not None
    assert a.crash.function == "visit"
    _check(a, gdb_real_frames(moved.dest / "movedprog", moved.dest / "core", moved.dest, tmp_path))


def test_given_executable_without_lib_path_finds_its_libraries_beside_it(moved: Built, tmp_path: Path):
    """`crashlens analyze DIR/movedprog DIR/core`: libmoved.so beside them is taken (its build-id
    matches the core's)."""
    a = analyze_paths([moved.dest / "movedprog", moved.dest / "core"])
    mods = {os.path.basename(m.path): m for m in a.crash.modules}
    assert mods["libmoved.so"].found_at == str(moved.dest / "libmoved.so") and mods["libmoved.so"].mismatch is False
    _check(a, gdb_real_frames(moved.dest / "movedprog", moved.dest / "core", moved.dest, tmp_path))


def test_executable_found_by_basename_under_lib_path(moved: Built, tmp_path: Path):
    """Only the core is given; the executable is somewhere under --lib-path."""
    a = analyze_paths([moved.dest / "core"], Options(lib_paths=(moved.dest.parent.parent,)))
    mods = {os.path.basename(m.path): m for m in a.crash.modules}
    assert mods["movedprog"].found_at == str(moved.dest / "movedprog")
    _check(a, gdb_real_frames(moved.dest / "movedprog", moved.dest / "core", moved.dest, tmp_path))


def test_renamed_executable_found_by_build_id(moved: Built, tmp_path: Path):
    """The executable was renamed: given as an input under another name, or only under --lib-path."""
    ci, other = tmp_path / "ci", tmp_path / "bin"
    ci.mkdir()
    other.mkdir()
    for f in ("core", "libmoved.so"):
        shutil.copy2(moved.dest / f, ci / f)
    renamed = other / "trainer-v2"
    shutil.copy2(moved.dest / "movedprog", renamed)
    gdb = gdb_real_frames(renamed, ci / "core", ci, tmp_path)
    for paths, opts in (([renamed, ci / "core"], Options()),
                        ([ci / "core"], Options(lib_paths=(other,)))):
        a = analyze_paths(paths, opts)
        exe = next(m for m in a.crash.modules if os.path.basename(m.path) == "movedprog")
        assert exe.found_at == str(renamed) and exe.mismatch is False
        _check(a, gdb)


def test_another_build_of_the_executable_is_reported_not_used(moved: Built, tmp_path: Path):
    """A rebuilt movedprog (another build-id) given by name: reported as a mismatch, never used
    for names or CFI (gdb would warn and use it)."""
    other = tmp_path / "rebuilt"
    other.mkdir()
    _run(["gcc", *FLAGS, "-DREBUILT=1", "-Wl,--build-id=0x1234", str(CORES / "movedprog.c"), "-o",
          str(other / "movedprog"), f"-L{moved.dest}", "-lmoved"])
    a = analyze_paths([other / "movedprog", moved.dest / "core"], Options(lib_paths=(moved.dest,)))
    exe = next(m for m in a.crash.modules if os.path.basename(m.path) == "movedprog")
    # the right build is beside the core: the build-id picks it over the file given by name
    assert exe.found_at == str(moved.dest / "movedprog") and exe.mismatch is False
    (moved_copy := tmp_path / "only-core").mkdir()
    shutil.copy2(moved.dest / "core", moved_copy / "core")
    a = analyze_paths([other / "movedprog", moved_copy / "core"], Options(lib_paths=(moved.dest / "none",)))
    exe = next(m for m in a.crash.modules if os.path.basename(m.path) == "movedprog")
    assert exe.found_at == str(other / "movedprog") and exe.mismatch is True
    assert a.crash.backtrace.frames[0].function != "visit" or a.crash.backtrace.frames[0].module_address is None
    assert any("build-id mismatch" in n for n in a.notes), a.notes


def test_core_alone_in_its_artifact_folder_finds_its_files_beside_it(moved: Built, tmp_path: Path):
    """`crashlens analyze core` in the folder CI uploaded: the executable and library beside the
    core are taken by build-id; with the core alone, a note says how to give the executable."""
    a = analyze_paths([moved.dest / "core"])
    mods = {os.path.basename(m.path): m for m in a.crash.modules}
    assert mods["movedprog"].found_at == str(moved.dest / "movedprog")
    _check(a, gdb_real_frames(moved.dest / "movedprog", moved.dest / "core", moved.dest, tmp_path))
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy2(moved.dest / "core", alone / "core")
    a = analyze_paths([alone / "core"])
    assert any("the executable" in n and "was not found here" in n for n in a.notes), a.notes
