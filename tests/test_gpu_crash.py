"""GPU crashes: compute-sanitizer reports, cubin SASS line tables and GPU core dumps, on the real
artifacts of fixtures/gpu-cores (H100, CUDA 13.0; see its README)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from crashlens.pipeline import analyze_paths
from crashlens.binary.cubin_lines import Cubin
from crashlens.binary.cudacore import is_gpu_core, read_gpu_core
from crashlens.model import Line, Loc
from crashlens.parsers.sanitizer import parse_sanitizer

FX = Path(__file__).resolve().parent.parent / "fixtures" / "gpu-cores"
os.environ.setdefault("CRASHLENS_NO_NVDISASM", "1")

# demangled name as compute-sanitizer prints it -> the kernel section's mangled name
KERNELS = {
    "write_wild(int *, int)": "_Z10write_wildPii",
    "write_misaligned(int *, int)": "_Z16write_misalignedPii",
    "trap_kernel(float *, int)": "_Z11trap_kernelPfi",
    "void scatter_kernel<float>(T1 *, const long long *, const T1 *, int)": "_Z14scatter_kernelIfEvPT_PKxPKS0_i",
    "racy_sum(int *)": "_Z8racy_sumPi",
    "read_uninit(const float *, float *, int)": "_Z11read_uninitPKfPfi",
    "divergent_barrier(int *)": "_Z17divergent_barrierPi",
}


def lines_of(path: Path) -> list[Line]:
    return [Line(Loc(path.name, i + 1), t.rstrip("\n")) for i, t in enumerate(path.read_text().splitlines())]


def sanitizer(name: str):
    return parse_sanitizer(lines_of(FX / name))


def test_memcheck_report_names_kernel_thread_line_and_host_stack():
    (e,) = sanitizer("san_memcheck_wild.log")
    f = e.facts
    assert (f["kernel"], f["function"], f["offset"]) == ("write_wild(int *, int)", "store_value(int *, int)", 0x140)
    assert (f["file"], f["line"], f["thread"], f["block"]) == ("crash.cu", 38, "(5,0,0)", "(1,0,0)")
    assert (f["access"], f["space"], f["size"], f["address"], f["address_is"]) == ("write", "global", 4, "0x100", "out of bounds")
    assert f["category"] == "gpu-illegal-memory-access" and f["tool"] == "memcheck"
    assert [fr.function for fr in e.frames] == ["store_value(int *, int)", "write_wild(int *, int)", "main"]
    assert e.frames[1].line == 46 and e.frames[2].module == "crash_li"


@pytest.mark.parametrize("log,category,line,reports", [
    ("san_memcheck_misaligned.log", "gpu-illegal-memory-access", 53, 8),
    ("san_memcheck_trap.log", "device-side-assert", 59, 1),
    ("san_memcheck_oob.log", "gpu-illegal-memory-access", 70, 1),
    ("san_memcheck_assert.log", "device-side-assert", None, 1),
    ("san_racecheck_race.log", None, 77, 1),
    ("san_initcheck_uninit.log", None, 84, 100),
    ("san_synccheck_badsync.log", None, 88, 16),
])
def test_every_sanitizer_tool(log, category, line, reports):
    (e,) = sanitizer(log)
    assert e.facts["category"] == category and e.facts.get("line") == line and e.facts["reports"] == reports


def test_cubin_line_table_matches_compute_sanitizer():
    """The -lineinfo cubin's .debug_line gives, at every offset the sanitizer reported, the line
    the sanitizer printed (and nvdisasm -g annotates)."""
    cubin = Cubin.from_bytes((FX / "crash_li.sm_90.cubin").read_bytes())
    assert cubin.arch == 90 and not cubin.notes
    checked = 0
    for log in sorted(FX.glob("san_*.log")):
        if log.name == "san_memcheck_wild_misaligned.log":  # an earlier revision of crash.cu
            continue
        for e in parse_sanitizer(lines_of(log)):
            kernel = KERNELS.get(e.facts.get("kernel", ""))
            if kernel is None or "line" not in e.facts:
                continue
            loc = cubin.locate_offset(kernel, e.facts["offset"])
            assert (os.path.basename(loc.file), loc.line) == (e.facts["file"], e.facts["line"]), log.name
            for fr in e.frames[1:]:
                if fr.line and fr.module_offset is not None and fr.function in KERNELS:
                    assert cubin.locate_offset(KERNELS[fr.function], fr.module_offset).line == fr.line
            checked += 1
    assert checked >= 6
    loc = cubin.locate_offset("_Z10write_wildPii", 0x140)
    assert loc.function == "$_Z10write_wildPii$_Z11store_valuePii" and loc.function_offset == 0x20
    # the raw words of `ST.E desc[UR4][R2.64], R7` as nvdisasm prints them (crash_li.nvdisasm.txt)
    text = (FX / "crash_li.nvdisasm.txt").read_text()
    want = f"/* 0x{loc.words[0]:016x} */"
    assert want in text


def test_cubin_without_lineinfo_says_so():
    loc = Cubin.from_bytes((FX / "crash.sm_90.cubin").read_bytes()).locate_offset("_Z10write_wildPii", 0x140)
    assert loc.line is None and "without -lineinfo" in loc.notes[0] and loc.words


def test_sanitizer_log_analysis_names_kernel_and_line():
    a = analyze_paths([str(FX / "san_memcheck_wild.log")])
    assert a.causes[0].category == "gpu-illegal-memory-access"
    g = a.gpu_crash
    assert (g["kernel"], g["file"], g["line"], g["thread"], g["block"]) == ("write_wild(int *, int)", "crash.cu", 38, "(5,0,0)", "(1,0,0)")
    assert [f.function for f in a.code_path][-2:] == ["write_wild(int *, int)", "store_value(int *, int)"]
    assert a.code_path[-1].line == 38


@pytest.mark.parametrize("dump", ["trap_li.nvcudmp", "torch_embed.nvcudmp"])
def test_truncated_real_gpu_core_gives_a_clear_partial_answer(dump):
    data = (FX / dump).read_bytes()
    assert is_gpu_core(data[:64])
    core = read_gpu_core(data)
    assert not core.faults and not core.devices
    assert "truncated" in core.notes[0] and "68,672 bytes" in core.notes[0]


def test_masked_case_with_truncated_core(tmp_path):
    a = analyze_paths([str(FX / "torch_embed.log"), str(FX / "torch_embed.nvcudmp")])
    assert a.causes[0].category == "device-side-assert"
    assert any("FileNotFoundError" in s.evidence.text for s in a.secondary_errors)
    assert any("GPU core dump truncated" in n for n in a.notes)


def test_corrupt_gpu_cores_never_raise():
    data = (FX / "trap_li.nvcudmp").read_bytes()
    rnd = random.Random(7)
    for cut in (0, 4, 19, 20, 63, 64, 65, 4096):
        assert read_gpu_core(data[:cut]).notes
    for _ in range(200):
        b = bytearray(data[:4096])
        for _ in range(16):
            b[rnd.randrange(20, len(b))] = rnd.randrange(256)
        read_gpu_core(bytes(b))  # must not raise
    assert read_gpu_core(b"not a core").notes


def test_json_has_gpu_crash(tmp_path):
    from crashlens.report.json import to_dict
    from crashlens.signature import signature

    a = analyze_paths([str(FX / "san_memcheck_oob.log")])
    d = json.loads(json.dumps(to_dict(a, signature(a)), default=str))
    assert d["gpu_crash"]["line"] == 70 and d["gpu_crash"]["source"] == "compute-sanitizer"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((FX.parent.parent / "docs" / "analysis.schema.json").read_text())
    jsonschema.validate(d, schema)
