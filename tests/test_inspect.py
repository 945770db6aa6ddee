"""crashlens inspect and library evidence in analyze, on real CUDA binaries built with nvcc
(committed under fixtures/binaries with how they were built)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # noqa: F401 - the JSON shape is checked by hand below

from crashlens.analyze import Options, analyze_paths
from crashlens.inspect import inspect_file, library_facts

from .conftest import ROOT
from .test_cli import crashlens

BIN = ROOT / "fixtures" / "binaries"


def test_inspect_reports_cuda_images_and_compatibility():
    r = inspect_file(BIN / "libaxpy_sm80.so", gpu="H100", isa=False)
    f = library_facts(r)
    assert f["sass"] == "sm_80" and f["ptx"] == "compute_80"
    # sm_80 SASS cannot run on sm_90; compute_80 PTX can be JIT-compiled if the driver is new enough
    assert r.verdict is not None and r.verdict.compatible is None and r.verdict.jit
    r = inspect_file(BIN / "libaxpy_sm80.so", gpu="H100", driver="580.65.06", isa=False)
    assert r.verdict is not None and r.verdict.compatible is True
    r = inspect_file(BIN / "axpy_sm90a.o", gpu="sm_100", isa=False)
    assert r.verdict is not None and r.verdict.compatible is False
    assert "sm_90a" in r.verdict.reason


def test_inspect_cli_json(tmp_path: Path):
    r = crashlens("inspect", "--json", "--no-isa", "--gpu", "sm_86", str(BIN / "dlink_app"), str(BIN / "libaxpy_sm80.so"))
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "crashlens.inspect/1"
    app, lib = doc["files"]
    assert {(i["kind"], i["section"]) for i in app["cuda"]["images"]} >= {("sass", ".nv_fatbin"), ("ptx", "__nv_relfatbin")}
    assert lib["elf"]["soname"] is None or lib["elf"]["soname"].startswith("libaxpy")
    assert lib["cuda"]["compatible"] is True  # sm_80 SASS runs on sm_86 (same major, higher minor)
    assert app["cuda"]["device"] == "sm_86"


def test_inspect_bad_file_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "libbroken.so"
    bad.write_bytes(b"\x7fELF" + b"\x02\x01\x01" + b"\x00" * 9 + b"garbage")
    r = crashlens("inspect", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "crashlens: error:" in r.stderr


def test_analyze_names_the_library_without_gpu_code(tmp_path: Path):
    log = tmp_path / "run.log"
    log.write_text(
        "device 0: NVIDIA H100 80GB HBM3, compute capability 9.0\n"
        "CUDA error at main.cu:40 code=209(cudaErrorNoKernelImageForDevice) \"cudaGetLastError()\": "
        "no kernel image is available for execution on the device\n")
    a = analyze_paths([log, BIN / "axpy_sm90a.o"], Options(gpu="sm_100"))
    top = a.causes[0]
    assert top.category == "cuda-arch-unsupported"
    assert "axpy_sm90a.o" in top.explanation and "sm_90a" in top.explanation
    assert any(e.kind == "library" for e in top.evidence)
    assert any("axpy_sm90a.o" in r for r in top.remedies)


def test_library_found_by_lib_path(tmp_path: Path):
    log = tmp_path / "run.log"
    log.write_text(
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
        "frame #3: axpy_launch + 0x21 (0x7f0 in /opt/app/lib/libaxpy_sm80.so)\n")
    a = analyze_paths([log], Options(gpu="sm_75", lib_paths=(BIN,)))
    assert [r.path for r in a.libraries] == [str(BIN / "libaxpy_sm80.so")]
    assert a.libraries[0].device is not None and a.libraries[0].cuda_compatible is False
    a = analyze_paths([log], Options(gpu="sm_75"))
    assert not a.libraries and any("not found" in n for n in a.notes)


def test_sigill_names_the_library_whose_baseline_the_cpu_lacks(tmp_path: Path):
    import shutil
    import subprocess

    import pytest

    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the AVX2 library")
    src = tmp_path / "k.c"
    src.write_text(
        "#include <immintrin.h>\n#include <stddef.h>\n"
        "void saxpy(float *y, const float *x, float a, size_t n) {\n"
        "  __m256 va = _mm256_set1_ps(a);\n"
        "  for (size_t i = 0; i + 8 <= n; i += 8)\n"
        "    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));\n"
        "}\n"
        "void scale(float *x, float a, size_t n) { for (size_t i = 0; i < n; i++) x[i] *= a; }\n")
    libdir = tmp_path / "lib"
    libdir.mkdir()
    subprocess.run(["gcc", "-O2", "-mavx2", "-mfma", "-shared", "-fPIC", str(src), "-o", str(libdir / "libkern.so")],
                   check=True)
    (tmp_path / "run.log").write_text("$ python infer.py\nIllegal instruction (core dumped)\n")
    (tmp_path / "dmesg.txt").write_text(
        "[ 812.44] traps: python[4242] trap invalid opcode ip:7f3a1c2051a4 sp:7ffd8e1c2b10 error:0 "
        "in libkern.so[7f3a1c205000+2000]\n")
    (tmp_path / "cpuinfo.txt").write_text(
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU E5-2680 0 @ 2.70GHz\n"
        "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 "
        "ss ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 cx16 sse4_1 sse4_2 x2apic popcnt aes "
        "xsave avx hypervisor lahf_lm\n")
    a = analyze_paths([tmp_path / "run.log", tmp_path / "dmesg.txt", tmp_path / "cpuinfo.txt"],
                      Options(lib_paths=(libdir,)))
    top = a.causes[0]
    assert top.category == "cpu-isa-unsupported"
    assert "AVX2" in top.explanation and "FMA" in top.explanation
    lib = [e for e in top.evidence if e.kind == "library"]
    assert lib and lib[0].facts["library"] == "libkern.so" and lib[0].facts["cpu_ok"] is False


def test_inspect_image_header_decompresses_one_image():
    r = crashlens("inspect", "--image", "0", str(BIN / "libaxpy_sm80.so"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["compression"] == "zstd" and doc["cubin"]["sm"] == 80
    r = crashlens("inspect", "--image", "2", str(BIN / "libaxpy_sm80.so"))
    assert json.loads(r.stdout)["ptx"]["version"] == "9.0"
    r = crashlens("inspect", "--image", "99", str(BIN / "libaxpy_sm80.so"))
    assert r.returncode == 2 and "no CUDA image 99" in r.stderr


def test_dmesg_trap_without_core_decodes_the_instruction_from_the_library(tmp_path: Path):
    import shutil
    import subprocess

    import pytest

    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the AVX2 library")
    (tmp_path / "k.c").write_text(
        "#include <immintrin.h>\n#include <stddef.h>\n"
        "void saxpy(float *y, const float *x, float a, size_t n) {\n"
        "  __m256 va = _mm256_set1_ps(a);\n"
        "  for (size_t i = 0; i + 8 <= n; i += 8)\n"
        "    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));\n}\n")
    lib = tmp_path / "lib"
    lib.mkdir()
    subprocess.run(["gcc", "-O2", "-mavx2", "-mfma", "-shared", "-fPIC", str(tmp_path / "k.c"), "-o",
                    str(lib / "libkern.so")], check=True)
    # where saxpy's first AVX instruction lies within the executable mapping
    from crashlens.binary.elf import ElfFile
    from crashlens.binary.isa import function_census

    if not shutil.which("nm"):
        pytest.skip("nm is needed to find saxpy")
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib / "libkern.so")], capture_output=True, text=True).stdout
    saxpy = int(next(line.split()[0] for line in nm.splitlines() if line.endswith(" saxpy")), 16)
    with ElfFile(lib / "libkern.so") as elf:
        text = next(s for s in elf.segments if s.type == 1 and s.flags & 1)
        fc = function_census(elf, saxpy)
    addresses = [a for ext, addrs in fc.addresses.items() if ext in ("AVX", "AVX2", "FMA") for a in addrs]
    first = min(addresses)
    off = first - (text.vaddr & ~0xFFF)
    (tmp_path / "dmesg.txt").write_text(
        f"[ 812.44] traps: python[4242] trap invalid opcode ip:7f3a1c205{off:03x} sp:7ffd8e1c2b10 error:0 "
        f"in libkern.so[7f3a1c205000+2000]\n")
    a = analyze_paths([tmp_path / "dmesg.txt"],
                      Options(lib_paths=(lib,), cpu_flags=frozenset("fpu sse sse2 sse3 ssse3 sse4_1 sse4_2 avx".split())))
    top = a.causes[0]
    assert top.category == "cpu-isa-unsupported"
    crash = [e for e in top.evidence if e.kind == "crash"]
    assert crash and crash[0].facts["cpu_supports"] is False and crash[0].facts["function"] == "saxpy"
    assert "The faulting instruction is `v" in top.explanation
