"""Which host file a GPU core's module came from, and whether it is nvcc's SASS or the driver's
JIT of PTX (binary/cudaorigin), on real dumps: the complete ones (nvcc's sm_90 SASS loaded) and
fixtures/gpu-cores/jit (CUDA_FORCE_PTX_JIT=1, and a PTX-only build), against the executables
that ran (fixtures/gpu-cores/jit/crash_li.xz, crash_ptx.xz)."""

from __future__ import annotations

import json
import lzma
import shutil
import subprocess
from functools import cache
from pathlib import Path

import jsonschema
import pytest

from crashlens.binary.cudacore import read_gpu_core
from crashlens.binary.cudaorigin import match_module, module_origin, module_signature
from crashlens.pipeline import analyze_paths
from crashlens.report.json import to_dict
from crashlens.signature import signature as crash_signature

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "fixtures" / "gpu-cores"
SASS_DUMPS = ["complete/lw_trap", "complete/lw_misaligned", "complete/nr_trap"]
JIT_DUMPS = ["jit/forcejit_trap", "jit/ptxonly_trap"]


@cache
def signature(name: str) -> dict:
    data = lzma.decompress((GPU / f"{name}.nvcudmp.xz").read_bytes())
    core = read_gpu_core(data)
    off, size, relocated = core.images[core.faults[0].module_handle]
    assert relocated  # the image cudacore reads the kernel from
    return module_signature(data[off:off + size])


@pytest.fixture(scope="module")
def exes(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("exes")
    out = {}
    for name in ("crash_li", "crash_ptx"):
        p = d / name
        p.write_bytes(lzma.decompress((GPU / "jit" / f"{name}.xz").read_bytes()))
        out[name] = str(p)
    return out


@pytest.mark.parametrize("name", SASS_DUMPS)
def test_nvcc_sass_module_is_the_executables_sm90_cubin(name, exes):
    sig = signature(name)
    assert sig["arch"] == "sm_90" and "_Z11trap_kernelPfi" in sig["kernels"]
    assert sig["toolkit"]["options"].split() == ["-lineinfo", "-arch", "sm_90", "-m", "64"]
    m = match_module(sig, exes["crash_li"], 90)
    # never the same bytes (the driver grows .nv.global.init, rewrites .symtab; the build paths
    # differ): the code sections and the toolkit note are what match
    assert (m.kind, m.how, m.image, m.listed, m.arch) == ("sass", "code", 2, "crash_li.2.sm_90.cubin", "sm_90")
    origin, reason = module_origin(sig, 90, m)
    assert origin == "sass" and "crash_li.2.sm_90.cubin" in reason and "the device is sm_90" in reason
    # the PTX-only build holds these kernels too, but nvcc's SASS is no JIT of it
    assert match_module(sig, exes["crash_ptx"], 90) is None
    assert module_origin(sig, 90, None)[0] == "sass"


@pytest.mark.parametrize("name", JIT_DUMPS)
def test_jit_module_is_the_executables_ptx(name, exes):
    sig = signature(name)
    # the driver's ptxas: its own version, no `-m 64`, the device's 'a' variant
    assert sig["arch"] == "sm_90a"
    assert sig["toolkit"]["build"] == "Build system must define TOOLS_VERSION_EXTENDED"
    assert sig["toolkit"]["options"].split() == ["-lineinfo", "-arch", "sm_90a"]
    m = match_module(sig, exes["crash_li"], 90)
    assert (m.kind, m.how, m.image, m.arch) == ("ptx", "entries", 1, "compute_90")
    # the code is nvcc's sm_90 SASS byte for byte: only the toolkit note tells them apart
    assert m.same_code_sass == "crash_li.2.sm_90.cubin"
    nvcc = signature("complete/lw_trap")
    assert sig["kernels"] == nvcc["kernels"] and sig["toolkit"] != nvcc["toolkit"]
    origin, reason = module_origin(sig, 90, m)
    assert origin == "jit-from-ptx" and "compute_90 PTX" in reason
    m2 = match_module(sig, exes["crash_ptx"], 90)
    assert (m2.kind, m2.listed, m2.same_code_sass) == ("ptx", "crash_ptx.1.sm_90.ptx", None)
    # without a host file, the toolkit note alone says it
    assert module_origin(sig, 90, None)[0] == "jit-from-ptx"
    # PTX newer than the device is not JIT-compiled for it
    assert match_module(sig, exes["crash_ptx"], 80) is None


def test_unreadable_module():
    assert module_signature(b"not a cubin") is None
    assert module_origin(None, 90, None)[0] == "unknown"


def _analysis(paths):
    a = analyze_paths([str(p) for p in paths])
    doc = to_dict(a, crash_signature(a))
    jsonschema.validate(doc, json.loads((ROOT / "docs" / "analysis.schema.json").read_text()))
    return a, doc["gpu_crash"]


def test_analyze_names_the_host_file_and_says_sass(exes):
    a, g = _analysis([GPU / "complete" / "lw_misaligned.nvcudmp.xz", exes["crash_li"]])
    assert g["module_source"]["path"] == exes["crash_li"]
    assert (g["module_source"]["image"], g["module_source"]["match"]) == (2, "code")
    assert g["module_origin"] == "sass" and "module_signature" not in g
    assert "The kernel's code is the sm_90 SASS of crash_li (crash_li.2.sm_90.cubin)" in a.causes[0].explanation
    assert all("module_signature" not in e.facts for c in a.causes for e in c.evidence)


def test_analyze_says_jit_from_ptx(exes):
    a, g = _analysis([GPU / "jit" / "forcejit_trap.nvcudmp.xz", exes["crash_li"]])
    assert g["module_origin"] == "jit-from-ptx"
    assert (g["module_source"]["kind"], g["module_source"]["listed"]) == ("ptx", "crash_li.1.sm_90.ptx")
    assert "JIT-compiled by the driver from the compute_90 PTX of crash_li" in a.causes[0].explanation
    assert g["kernel_mangled"] == "_Z11trap_kernelPfi" and g["line"] == 59  # cuda-gdb: crash.cu:59


def test_analyze_without_host_file():
    a, g = _analysis([GPU / "jit" / "ptxonly_trap.nvcudmp.xz"])
    assert g["module_source"] is None and g["module_origin"] == "jit-from-ptx"
    assert "no host file given holds the PTX" in g["module_clause"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_local_rebuild_matches(tmp_path):
    """The same nvcc command here (another build folder, so other paths in the PTX text) gives the
    module of the device's dumps."""
    exe = tmp_path / "crash_li"
    subprocess.run(["nvcc", "-O2", "-lineinfo", "-arch=sm_90", "-o", str(exe),
                    str(ROOT / "bench" / "gpu" / "cudacore" / "crash.cu")], check=True, capture_output=True)
    sig = signature("complete/lw_trap")
    m = match_module(sig, str(exe), 90)
    if sig["toolkit"]["version"] not in subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout:
        pytest.skip("another nvcc version than the dumps' (13.0.88)")
    assert (m.kind, m.how, m.image) == ("sass", "code", 2)


def test_the_original_builds_cubin_has_the_dumps_code_not_its_bytes():
    """fixtures/gpu-cores/crash_li.sm_90.cubin is `cuobjdump -xelf` of the executable that made
    the complete dumps: same size, code sections and toolkit note as the loaded image, other bytes."""
    cubin = module_signature((GPU / "crash_li.sm_90.cubin").read_bytes())
    for name in SASS_DUMPS:
        sig = signature(name)
        assert cubin["kernels"] == sig["kernels"] and cubin["toolkit"] == sig["toolkit"]
        assert cubin["sha256"] != sig["sha256"]
