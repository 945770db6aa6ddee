"""analyze with real cores: the crash site joins the log evidence in the ranking."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from crashlens.pipeline import Options, analyze_paths

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "fixtures" / "cores"))
import crashers  # noqa: E402  (fixtures/cores/crashers.py builds and crashes the programs)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to build the crashing programs")


def _core(name: str, tmp: Path, *flags: str):
    prog = crashers.build(name, tmp, *flags)
    c = crashers.crash([str(prog)], tmp)
    if c.core is None:
        pytest.skip(f"no core file: {c.why}")
    return prog, c.core


CPUINFO = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
AMX_PATH = crashers.amx_path(CPUINFO)   # "xfd": this CPU has AMX; "ud": it has not


@pytest.mark.parametrize("path", [AMX_PATH], ids=lambda p: f"{p}-this-cpu")
def test_amx_sigill_core_gives_instruction_and_verdict(tmp_path: Path, path: str):
    prog, core = _core("amx", tmp_path, "-mamx-tile")
    log = tmp_path / "run.log"
    log.write_text(f"$ {prog}\nIllegal instruction (core dumped)\n")
    _assert_amx_analysis(analyze_paths([log, core]), path, "tile_setup")


@pytest.mark.parametrize("recording", crashers.AMX_RECORDINGS, ids=lambda r: f"{r}-recorded")
@pytest.mark.parametrize("mode", ["plain", "reraise"])
def test_amx_sigill_recorded_core_with_its_cpuinfo(tmp_path: Path, recording: str, mode: str):
    """A core from another machine, its program under --lib-path and that machine's cpuinfo
    beside it: the verdict is about that CPU, not this one."""
    rec = crashers.recorded_amx(recording, mode)
    path = rec.path
    core, program = crashers.unpack_recorded(rec, tmp_path)
    (tmp_path / "cpuinfo.txt").write_text(rec.cpuinfo)
    log = tmp_path / "run.log"
    fatal = "Fatal Python error: Illegal instruction\n" if mode == "reraise" else ""
    log.write_text(f"$ ./amx {mode}\n{fatal}Illegal instruction (core dumped)\n")
    a = analyze_paths([log, core, tmp_path / "cpuinfo.txt"], Options(lib_paths=(program.parent,)))
    _assert_amx_analysis(a, path, "tile_setup")
    assert a.crash.pc == rec.gdb_fault_pc


def _assert_amx_analysis(a, path: str, function: str) -> None:
    top = a.causes[0]
    assert top.category == "cpu-isa-unsupported" and top.confidence >= 0.9
    assert crashers.AMX_FAULTING[path] in top.explanation and "AMX-TILE" in top.explanation
    if path == "xfd":
        assert "ARCH_REQ_XCOMP_PERM" in top.explanation
    assert any(e.kind == "crash" for e in top.evidence)
    assert a.crash is not None and a.crash.cpu_supports is False and a.crash.function == function
    from crashlens.report.json import to_dict
    from crashlens.signature import signature

    doc = to_dict(a, signature(a))
    assert doc["crash"]["signal"] == "SIGILL" and doc["crash"]["required_isa"] == ["AMX-TILE"]
    assert doc["crash"]["instruction"].split()[0] == crashers.AMX_FAULTING[path]
    json.dumps(doc)


def test_segfault_core_stays_native_segfault(tmp_path: Path):
    prog, core = _core("segv", tmp_path)
    a = analyze_paths([core])
    assert a.causes[0].category == "native-segfault"
    assert a.crash is not None and a.crash.signal == "SIGSEGV" and a.crash.fault_address == 0
    assert "cpu-isa-unsupported" not in [c.category for c in a.causes]


def test_abort_core_is_native_abort(tmp_path: Path):
    prog, core = _core("abort", tmp_path)
    a = analyze_paths([core])
    assert a.causes[0].category == "native-abort"
    assert a.crash is not None and a.crash.signal == "SIGABRT"


def test_abort_core_names_the_culprit_and_gives_a_backtrace(tmp_path: Path):
    prog, core = _core("abort", tmp_path)
    a = analyze_paths([core])
    assert a.crash is not None and a.crash.culprit is not None and a.crash.culprit.function == "check_config"
    from crashlens.report.json import to_dict
    from crashlens.signature import signature

    doc = to_dict(a, signature(a))
    functions = [f["function"] for f in doc["backtrace"]]
    assert "check_config" in functions and functions.index("check_config") > 0
    assert all(f["trust"] in ("context", "cfi", "fp", "scan") for f in doc["backtrace"])
    assert "check_config" in a.causes[0].explanation
    assert any(f.function == "check_config" for f in a.code_path)


def test_faulthandler_log_and_core_merge_python_and_native_frames(tmp_path: Path):
    import subprocess

    script = tmp_path / "job.py"
    script.write_text("import ctypes\n\ndef load(p):\n    return ctypes.string_at(p)\n\ndef main():\n    load(0)\n\nmain()\n")
    log = tmp_path / "run.log"
    with log.open("w") as out:
        subprocess.run(["bash", "-c", f"ulimit -c unlimited; exec {sys.executable} -X faulthandler {script}"],
                       cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    cores = sorted(tmp_path.glob("core*"))
    if not cores:
        pytest.skip("no core file was written")
    a = analyze_paths([log, cores[0]])
    assert a.causes[0].category == "native-segfault"
    kinds = [f.kind for f in a.code_path]
    functions = [f.function for f in a.code_path]
    # the Python frames from faulthandler come first, then the native frames below the interpreter
    assert "load" in functions and "main" in functions and kinds[-1] == "native"
    assert functions.index("load") < len(functions) - 1
    assert not any(f.kind == "native" and (f.module or "").rsplit("/", 1)[-1].startswith("python") for f in a.code_path)


def test_library_found_by_build_id_under_lib_path(tmp_path: Path):
    """The crashed program's file was moved and renamed: found again by its build-id."""
    prog, core = _core("segv", tmp_path)
    elsewhere = tmp_path / "libs" / "deeper"
    elsewhere.mkdir(parents=True)
    moved = elsewhere / "renamed.so"
    prog.rename(moved)
    a = analyze_paths([core], Options(lib_paths=(tmp_path / "libs",)))
    mods = {m.path: m for m in a.crash.modules}
    assert mods[str(prog)].found_at == str(moved) and mods[str(prog)].mismatch is False
    assert a.crash.function == "store_value"


def test_python_frames_from_the_core_with_pystack(tmp_path: Path):
    pytest.importorskip("pystack.engine", reason="pystack (the [python] extra) is not installed")
    import subprocess

    script = tmp_path / "job.py"
    script.write_text("import ctypes\n\ndef load(p):\n    return ctypes.string_at(p)\n\ndef main():\n    load(0)\n\nmain()\n")
    subprocess.run(["bash", "-c", f"ulimit -c unlimited; exec {sys.executable} {script}"], cwd=tmp_path,
                   capture_output=True)
    cores = sorted(tmp_path.glob("core*"))
    if not cores:
        pytest.skip("no core file was written")
    a = analyze_paths([cores[0]])  # no log: the Python frames come from the core itself
    assert a.causes[0].category == "native-segfault"
    py = a.crash.python_frames
    assert py and [f.function for f in py][-3:] == ["main", "load", "string_at"]
    functions = [f.function for f in a.code_path]
    assert functions.index("load") < functions.index("string_at") and a.code_path[-1].kind == "native"


def test_faulthandler_python_amx_core_from_an_amx_host(tmp_path: Path):
    """A real Python process with faulthandler on (PYTHONFAULTHANDLER=1) that called AMX code
    through ctypes on an AMX host without tile-data permission (fixtures/cores/amx/xfd-ud-python,
    H100 host): the core shows the handler's re-raise in pthread_kill; the crash is the
    interrupted tile-data instruction in the signal frame, as gdb's `<signal handler called>`
    frame shows it (core.gdb), and the verdict is the missing permission."""
    import lzma
    import re

    d = ROOT / "fixtures" / "cores" / "amx" / "xfd-ud-python"
    core = tmp_path / "core"
    core.write_bytes(lzma.decompress((d / "core.xz").read_bytes()))
    libs = tmp_path / "lib"
    libs.mkdir()
    (libs / "libamx.so").write_bytes((d / "libamx.so").read_bytes())
    (libs / "libc.so.6").write_bytes(lzma.decompress((d / "libc.so.6.xz").read_bytes()))
    (tmp_path / "cpuinfo.txt").write_text(crashers.recorded_amx("xfd-ud", "plain").cpuinfo)
    a = analyze_paths([d / "run.log", core, tmp_path / "cpuinfo.txt"], Options(lib_paths=(libs,)))
    gdb = (d / "core.gdb").read_text()
    after_handler = re.search(r"<signal handler called>\n#\d+\s+(0x[0-9a-f]+)", gdb).group(1)
    assert a.crash is not None and a.crash.pc == int(after_handler, 16)
    assert a.crash.function == "tile_setup" and a.crash.cpu_supports is False
    top = a.causes[0]
    assert top.category == "cpu-isa-unsupported" and top.confidence >= 0.9
    assert "tilezero" in top.explanation and "ARCH_REQ_XCOMP_PERM" in top.explanation
    assert "native-abort" not in [c.category for c in a.causes[:1]]
    functions = [f.function for f in a.code_path]
    assert functions.index("setup") < functions.index("tile_setup")
