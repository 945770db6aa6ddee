"""crashlens inspect and library evidence in analyze, on real CUDA binaries built with nvcc
(committed under fixtures/binaries with how they were built)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # noqa: F401 - the JSON shape is checked by hand below

from crashlens.pipeline import Options, analyze_paths
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


# -- issue 10, section 4: library evidence when the device is unknown ---------------------------------

NO_KERNEL_LOG = (
    '$ TORCH_CUDA_ARCH_LIST="8.0" python setup.py build_ext --inplace\n'
    "/usr/local/cuda/bin/nvcc -c csrc/axpy.cu -o build/axpy.o -gencode arch=compute_80,code=sm_80 -O3\n"
    "$ python train.py\n"
    "Traceback (most recent call last):\n"
    '  File "/home/u/proj/train.py", line 12, in <module>\n'
    "    out = ext.axpy(x, y, 2.0)\n"
    "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")


def test_no_kernel_image_names_the_given_sass_only_library_and_the_gpus_it_runs_on(tmp_path: Path):
    """No GPU in the log; the extension given has SASS sm_80 and no PTX: the cause names it, says
    which GPUs it runs on, and cites the build lines (-gencode without PTX, TORCH_CUDA_ARCH_LIST)."""
    log = tmp_path / "run.log"
    log.write_text(NO_KERNEL_LOG)
    a = analyze_paths([log, BIN / "libext_sm80.so", BIN / "libext_sm80_sm90_ptx.so"])
    top = a.causes[0]
    assert top.category == "cuda-arch-unsupported"
    text = top.explanation
    assert "libext_sm80.so has SASS for sm_80 only and no PTX" in text
    assert "8.0 (A100" in text and "8.6 (" in text and "8.9 (L4" in text and "9.0" not in text.split("runs only on")[1]
    assert "libext_sm80_sm90_ptx.so" not in text  # it has PTX: it runs on any newer GPU
    assert "-gencode arch=compute_80,code=sm_80" in text and "TORCH_CUDA_ARCH_LIST=8.0" in text
    cited = [e.loc.line for e in top.evidence if e.kind == "line"]
    assert {1, 2, 7} <= set(cited)
    lib = [e for e in top.evidence if e.kind == "library"]
    assert [e.facts["library"] for e in lib] == ["libext_sm80.so"] and lib[0].facts["cuda_sass_only"] is True
    assert any("libext_sm80.so" in r for r in top.remedies)


def test_no_kernel_image_with_ptx_in_the_build_is_not_blamed_on_sass_only(tmp_path: Path):
    log = tmp_path / "run.log"
    log.write_text(NO_KERNEL_LOG.replace("code=sm_80", "code=[sm_80,compute_80]").replace('"8.0"', '"8.0+PTX"'))
    a = analyze_paths([log, BIN / "libaxpy_sm80.so"])  # sm_80 SASS and compute_80 PTX
    top = a.causes[0]
    assert top.category == "cuda-arch-unsupported"
    assert "compiles SASS only" not in top.explanation and "without +PTX" not in top.explanation
    assert "no PTX" not in top.explanation.split("PTX runs on")[1]
    # one -gencode with PTX among SASS-only ones: the build has PTX
    log.write_text(NO_KERNEL_LOG.replace("code=sm_80", "code=sm_80 -gencode=arch=compute_90,code=compute_90"))
    assert "compiles SASS only" not in analyze_paths([log]).causes[0].explanation


def test_library_runs_on_sets():
    from crashlens.inspect import cuda_runs_on

    assert cuda_runs_on(["sm_80"], []) == [(8, 0), (8, 6), (8, 7), (8, 9)]
    assert cuda_runs_on(["sm_90a"], []) == [(9, 0)]
    assert cuda_runs_on(["sm_80"], ["compute_80"]) is None
    assert (10, 1) not in cuda_runs_on(["sm_100f"], []) and (10, 3) in cuda_runs_on(["sm_100f"], [])


def _trap_library(tmp_path: Path):
    """libtrap.so with a __builtin_trap() (ud2) in check() and a loop's jmp in loop(): (path, ud2
    offset, jmp offset) within the executable mapping, as dmesg's `in libtrap.so[base+size]` gives them."""
    import re
    import shutil
    import subprocess

    import pytest

    if not shutil.which("gcc") or not shutil.which("objdump"):
        pytest.skip("gcc and objdump are needed")
    src = tmp_path / "t.c"
    src.write_text("int check(int x) { if (x > 3) __builtin_trap(); return x * 2; }\n"
                   "int loop(int *v, int n) { int s = 0; for (int i = 0; i < n; i++) { if (v[i] < 0) continue; "
                   "s += v[i]; } return s; }\n")
    lib = tmp_path / "lib" / "libtrap.so"
    lib.parent.mkdir()
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    dis = subprocess.run(["objdump", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    ud2 = int(re.search(r"^\s*([0-9a-f]+):\s+0f 0b\s+ud2", dis, re.M).group(1), 16)
    body = dis[dis.index("<loop>:"):]
    jmp = int(re.search(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*jmp\s", body, re.M).group(1), 16)
    from crashlens.binary.elf import ElfFile

    with ElfFile(lib) as elf:
        text = next(s for s in elf.segments if s.type == 1 and s.flags & 1)
        bid = __import__("crashlens.binary.elffacts", fromlist=["x"]).read_elf_facts(elf).build_id
    page = text.vaddr & ~0xFFF
    return lib, ud2 - page, jmp - page, bid


def _dmesg(tmp_path: Path, off: int, extra: str = "") -> Path:
    d = tmp_path / "dmesg.txt"
    d.write_text(f"[ 812.44] traps: python[4242] trap invalid opcode ip:7f3a1c205{off:03x} sp:7ffd8e1c2b10 error:0 "
                 f"in libtrap.so[7f3a1c205000+2000]\n{extra}")
    return d


def test_dmesg_trap_on_a_jmp_is_not_called_a_deliberate_trap(tmp_path: Path):
    """The library on disk has a `jmp` at the trap's offset: another build than the one that ran.
    Never 'a deliberate ud2 trap shown by the core' (there is no core)."""
    lib, ud2, jmp, bid = _trap_library(tmp_path)
    a = analyze_paths([_dmesg(tmp_path, jmp)], Options(lib_paths=(lib.parent,)))
    assert "native-abort" not in [c.category for c in a.causes]
    text = " ".join(c.explanation for c in a.causes)
    assert "The core shows" not in text and "deliberate" not in text
    assert "cannot raise #UD" in text and "another build" in text
    crash = [e for c in a.causes for e in c.evidence if e.kind == "crash"]
    assert crash and crash[0].facts["cpu_supports"] is None and "instruction" not in crash[0].facts


def test_dmesg_trap_on_a_ud2_says_it_was_read_from_the_file_not_a_core(tmp_path: Path):
    lib, ud2, jmp, bid = _trap_library(tmp_path)
    a = analyze_paths([_dmesg(tmp_path, ud2)], Options(lib_paths=(lib.parent,)))
    top = a.causes[0]
    assert top.category == "native-abort" and top.evidence[0].kind == "crash"
    assert "The core shows" not in top.explanation and "There is no core" in top.explanation
    assert "`ud2`" in top.explanation and "No core or logged build-id" in top.explanation
    # a build-id logged for the crashed process (coredumpctl) that matches: confirmed
    a = analyze_paths([_dmesg(tmp_path, ud2, f"  Module libtrap.so with build-id {bid}\n")],
                      Options(lib_paths=(lib.parent,)))
    assert a.causes[0].category == "native-abort" and "matches the one logged" in a.causes[0].explanation
    # one that differs: the file here is another build, no instruction is claimed
    a = analyze_paths([_dmesg(tmp_path, ud2, "  Module libtrap.so with build-id " + "ab" * 20 + "\n")],
                      Options(lib_paths=(lib.parent,)))
    assert "native-abort" not in [c.category for c in a.causes]
    assert "another build" in " ".join(c.explanation for c in a.causes)
