"""ISA census (binary/isa/) and function boundaries (binary/symbols.py) on real binaries.

Every binary here is compiled by gcc in the test session (skipped with a reason without gcc),
then checked against what `nm` and `objdump -d` say about the same file.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashlens.binary import isa
from crashlens.binary.elf import ElfError, ElfFile
from crashlens.binary.symbols import FunctionTable, eh_frame_ranges, locate_function
from crashlens.errors import CrashlensError

GCC = shutil.which("gcc")
OBJDUMP = shutil.which("objdump")
NM = shutil.which("nm")

pytestmark = [
    pytest.mark.skipif(GCC is None, reason="gcc is needed to build the test binaries"),
    pytest.mark.timeout(300),
]

SOURCES = {
    # compiled for AVX2 throughout: every SIMD function is VEX-encoded
    "avx2": ("-O3 -mavx2 -mfma", r"""
void add_i32(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] += b[i]; }
void max_i32(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] = a[i] > b[i] ? a[i] : b[i]; }
void axpy(float *y, const float *x, float k, int n) { for (int i = 0; i < n; i++) y[i] += k * x[i]; }
double mean(const double *a, int n) { double s = 0; for (int i = 0; i < n; i++) s += a[i]; return n ? s / n : 0; }
int count_pos(const int *a, int n) { int c = 0; for (int i = 0; i < n; i++) c += a[i] > 0; return c; }
long fib(int n) { long a = 0, b = 1; while (n-- > 0) { long t = a + b; a = b; b = t; } return a; }
"""),
    "avx512": ("-O3 -mavx512f -mprefer-vector-width=512", r"""
void scale(float *a, const float *b, int n) { for (int i = 0; i < n; i++) a[i] = a[i] * 3.0f + b[i]; }
void add_i64(long *a, const long *b, int n) { for (int i = 0; i < n; i++) a[i] += b[i]; }
double dot(const double *a, const double *b, int n) { double s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s; }
long fib(int n) { long a = 0, b = 1; while (n-- > 0) { long t = a + b; a = b; b = t; } return a; }
"""),
    "amx": ("-O2 -mamx-tile", r"""
#include <immintrin.h>
void amx_zero(const void *cfg) { _tile_loadconfig(cfg); _tile_zero(0); _tile_release(); }
int plain(int x) { return x * 3 + 1; }
"""),
    "sse41": ("-O3 -msse4.1", r"""
#include <smmintrin.h>
void mul_i32(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] *= b[i]; }
void floor4(float *a, int n) { for (int i = 0; i + 4 <= n; i += 4) _mm_storeu_ps(a + i, _mm_floor_ps(_mm_loadu_ps(a + i))); }
int max_i32(const int *a, int n) { int m = 0; for (int i = 0; i < n; i++) m = a[i] > m ? a[i] : m; return m; }
"""),
    "plain": ("-O2", r"""
int add(int a, int b) { return a + b; }
double half(double x) { return x / 2; }
void copy(float *a, const float *b, int n) { for (int i = 0; i < n; i++) a[i] = b[i]; }
"""),
    # TZCNT/LZCNT: BMI1/LZCNT instructions that run as BSF/BSR on older CPUs instead of faulting
    "bitcount": ("-O2 -mbmi -mlzcnt", r"""
int ctz(unsigned x) { return __builtin_ctz(x); }
int clz(unsigned long x) { return __builtin_clzl(x); }
"""),
    # a static helper without an ISA name between two AVX2 kernels (kept in source order)
    "neighbours": ("-O3 -fno-toplevel-reorder -fno-inline", r"""
__attribute__((target("avx2"))) void kernel_avx2_add(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] += b[i]; }
__attribute__((target("avx2"))) void helper(int *a, int n) { for (int i = 0; i < n; i++) a[i] *= 3; }
__attribute__((target("avx2"))) void kernel_avx2_mul(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] *= b[i]; }
float plain_sum(const float *a, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
double plain_max(const double *a, int n) { double m = 0; for (int i = 0; i < n; i++) m = a[i] > m ? a[i] : m; return m; }
"""),
    # GCC function multiversioning: scale.avx512f, scale.avx2, scale.default and an ifunc
    "fmv": ("-O3", r"""
__attribute__((target_clones("avx512f", "avx2", "default")))
void scale(float *a, const float *b, int n) { for (int i = 0; i < n; i++) a[i] = a[i] * 3.0f + b[i]; }
int plain_sum(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
float norm2(const float *a, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i] * a[i]; return s; }
"""),
    # manual dispatch; the AVX2 kernel's name says nothing about AVX2
    "manual": ("-O3", r"""
__attribute__((target("avx2"), noinline)) static void kernel_fast(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] += b[i] * 7; }
__attribute__((noinline)) static void kernel_plain(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] += b[i] * 7; }
void run(int *a, const int *b, int n) { if (__builtin_cpu_supports("avx2")) kernel_fast(a, b, n); else kernel_plain(a, b, n); }
float other(const float *a, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i] * a[i]; return s; }
"""),
}


def _gcc(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([GCC, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def libs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("isa-libs")
    out: dict[str, Path] = {}
    for name, (flags, src) in SOURCES.items():
        (d / f"{name}.c").write_text(src)
        lib = d / f"lib{name}.so"
        r = _gcc([*flags.split(), "-fPIC", "-shared", "-o", str(lib), f"{name}.c"], d)
        if r.returncode != 0:
            if name == "amx":  # an older gcc without -mamx-tile: only the AMX tests skip
                continue
            pytest.fail(f"gcc failed for {name}: {r.stderr}")
        out[name] = lib
    return out


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def census(path: Path, **kw) -> isa.IsaCensus:
    return isa.isa_census(path, cache=False, **kw)


def nm_functions(path: Path) -> dict[str, tuple[int, int]]:
    """name -> (address, size) of defined function symbols, per nm."""
    if NM is None:
        pytest.skip("nm is needed")
    out = subprocess.run([NM, "-S", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    funcs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTiW":
            funcs[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return funcs


OBJDUMP_LINE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(\S+)")
PREFIXES = {0x66, 0x67, 0xF2, 0xF3, 0x2E, 0x3E, 0x26, 0x64, 0x65, 0x36, 0xF0}


def objdump(path: Path) -> list[tuple[int, list[int], str]]:
    """(address, bytes, mnemonic) of every instruction objdump decodes in executable sections."""
    if OBJDUMP is None:
        pytest.skip("objdump is needed")
    text = subprocess.run([OBJDUMP, "-d", "-w", str(path)], capture_output=True, text=True, check=True).stdout
    out = []
    for line in text.splitlines():
        m = OBJDUMP_LINE.match(line)
        if m:
            out.append((int(m.group(1), 16), [int(b, 16) for b in m.group(2).split()], m.group(3)))
    return out


def encoding(raw: list[int]) -> str:
    i = 0
    while i < len(raw) and raw[i] in PREFIXES:
        i += 1
    if i < len(raw) and 0x40 <= raw[i] <= 0x4F:
        return "legacy"
    if i < len(raw) and raw[i] in (0xC4, 0xC5):
        return "vex"
    if i < len(raw) and raw[i] == 0x62:
        return "evex"
    return "legacy"


def all_addresses(path: Path, names: set[str]) -> set[int]:
    """Addresses of instructions needing any of `names`, from function_census of every function."""
    out: set[int] = set()
    for fname, (addr, size) in nm_functions(path).items():
        if size == 0:
            continue
        fc = isa.function_census(path, addr)
        for ext, addrs in fc.addresses.items():
            if ext in names:
                out.update(addrs)
    return out


# -- census: counts, levels, functions, verdicts ------------------------------------------------

def test_avx2_build_is_baseline_v3(libs):
    c = census(libs["avx2"])
    assert {"AVX", "AVX2"} <= set(c.baseline)
    assert c.level == 3 and c.baseline_level == 3
    avx2 = c.extensions["AVX2"]
    assert avx2.verdict == "baseline" and avx2.rule in ("share", "level")
    names = {f.name for f in avx2.functions}
    assert {"add_i32", "max_i32"} <= names
    assert "fib" not in {f.name for u in c.extensions.values() for f in u.functions}
    assert avx2.instructions == sum(f.count for f in avx2.functions) > 0
    assert len(avx2.first_addresses) == min(16, avx2.instructions)
    assert list(avx2.first_addresses) == sorted(avx2.first_addresses)
    assert c.extensions["FMA"].instructions > 0  # axpy with -mfma


def test_avx512_build_is_baseline_v4(libs):
    c = census(libs["avx512"])
    assert "AVX512F" in c.baseline
    assert c.level == 4 and c.baseline_level == 4
    assert {"scale", "add_i64", "dot"} <= {f.name for f in c.extensions["AVX512F"].functions}
    assert c.extensions["AVX512F"].rule in ("share", "needed")


def test_sse41_build_is_baseline_v2(libs):
    c = census(libs["sse41"])
    assert "SSE4.1" in c.baseline
    assert c.level == 2 and c.baseline_level == 2
    assert "floor4" in {f.name for f in c.extensions["SSE4.1"].functions}
    ins = isa.instruction_at(libs["sse41"], c.extensions["SSE4.1"].first_addresses[0])
    assert ins.extensions == ("SSE4.1",)
    assert ins.mnemonic in {"pmulld", "roundps", "pmaxsd", "pminsd", "pblendvb", "blendvps", "ptest", "pinsrd",
                            "pextrd", "pmovsxdq", "pmovzxdq"}


def test_plain_build_uses_nothing_beyond_baseline(libs):
    c = census(libs["plain"])
    faulting = {n for n, u in c.extensions.items() if u.faulting}
    assert faulting == set()
    assert c.level == 1 and c.baseline_level == 1
    assert c.functions >= 3 and c.simd_functions >= 2 and c.instructions > 0
    assert c.undecodable == 0


def test_amx_tile(libs):
    if "amx" not in libs:
        pytest.skip("this gcc has no -mamx-tile")
    c = census(libs["amx"])
    amx = c.extensions["AMX-TILE"]
    assert [f.name for f in amx.functions] == ["amx_zero"]
    assert amx.instructions == 3  # ldtilecfg, tilezero, tilerelease
    addr = nm_functions(libs["amx"])["amx_zero"][0]
    fc = isa.function_census(libs["amx"], addr + 1)
    assert fc.name == "amx_zero" and fc.extensions["AMX-TILE"] == 3
    mnemonics = [isa.instruction_at(libs["amx"], a) for a in fc.addresses["AMX-TILE"]]
    assert [m.mnemonic for m in mnemonics] == ["ldtilecfg", "tilezero", "tilerelease"]
    assert all(m.extensions == ("AMX-TILE",) for m in mnemonics)
    # objdump agrees on where they are
    od = {a: mn for a, _raw, mn in objdump(libs["amx"])}
    assert [od[a] for a in fc.addresses["AMX-TILE"]] == ["ldtilecfg", "tilezero", "tilerelease"]
    # no AMX on a CPU without it: and even with it, the permission note
    miss = isa.missing_for_cpu(c, {"avx2", "avx512f", "amx_tile"})
    assert any("arch_prctl" in n for n in miss["notes"])
    miss = isa.missing_for_cpu(c, {"avx2"})
    assert set(miss["baseline"]) | set(miss["dispatched"]) == {"AMX-TILE"}


def test_non_faulting_instructions(libs):
    c = census(libs["bitcount"])
    assert c.extensions["BMI1"].instructions >= 1 and c.extensions["BMI1"].faulting == 0
    assert c.extensions["LZCNT"].instructions >= 1 and c.extensions["LZCNT"].faulting == 0
    assert c.level == 1  # nothing here can raise SIGILL
    miss = isa.missing_for_cpu(c, V2)
    assert miss["ok"] and {"BMI1", "LZCNT"} <= set(miss["non_faulting"])
    assert "BSF" in miss["non_faulting"]["BMI1"] and "BSR" in miss["non_faulting"]["LZCNT"]
    d = isa.decode_at(libs["bitcount"], c.extensions["LZCNT"].first_addresses[0])
    assert d.mnemonic == "lzcnt" and not d.faults and "BSR" in d.why_not


def test_target_clones_are_dispatched(libs):
    c = census(libs["fmv"])
    assert c.level == 4 and c.baseline_level == 1
    for ext in ("AVX", "AVX512F"):
        use = c.extensions[ext]
        assert use.verdict == "dispatched" and use.rule == "hinted", (ext, use.reason)
        assert all(f.name.startswith("scale.") for f in use.functions)
    assert {f.name for f in c.extensions["AVX512F"].functions} == {"scale.avx512f"}
    assert not [n for n, u in c.extensions.items() if u.verdict == "baseline" and u.faulting]


def test_manual_cpu_check_is_dispatched(libs):
    c = census(libs["manual"])
    use = c.extensions["AVX2"]
    assert [f.name for f in use.functions] == ["kernel_fast"]
    assert use.verdict == "dispatched" and use.rule == "guarded", use.reason
    assert "run" in use.reason
    assert c.baseline_level == 1 and c.level == 3


def test_neighbours_lend_their_hint(libs):
    c = census(libs["neighbours"])
    use = c.extensions["AVX2"]
    assert {f.name for f in use.functions} == {"kernel_avx2_add", "helper", "kernel_avx2_mul"}
    assert use.verdict == "dispatched" and use.rule == "hinted", use.reason
    assert "1 more sit among such functions" in use.reason


@pytest.mark.parametrize("name, rank", [
    ("_ZN2at6native6AVX51212_GLOBAL__N_1", 46), ("mkl_blas_avx2_sgemm", 30), ("scale.avx2.0", 30),
    ("foo.arch_x86_64_v3.1", 30), ("scale.default.2", None), ("Sleef_sind4_u10avx2", 30),
    ("xnn_f32_gemm_minmax_ukernel_4x8__avx512skx", 46), ("memcpy", None), ("UnaryOpsKernel.cpp.AVX2.cpp", 30),
    ("mkl_sparse_d_csr_mv_mc3_", 24), ("__strlen_evex", 46), ("kernel_sse41", 24), ("kernel_ssse3", 21),
    ("mkl_vml_kernel_dSin_Z0HAynn", 46), ("mkl_vml_kernel_dSin_L9LAynn", 30), ("mkl_vml_kernel_dSin_E2HAynn", None),
    ("l9_ippsZero_8u", 30), ("sprintf", None), ("x_spr_y", 46), ("amx_gemm", 51), ("avx_vnni_dot", 36),
])
def test_name_hints(name, rank):
    h = isa.tables().hint(name)
    assert (h[0] if h else None) == rank


LIBTORCH = Path("/tmp/crashlens-materials/lib/libtorch_cpu.so")


@pytest.mark.slow
@pytest.mark.skipif(not LIBTORCH.is_file(), reason=f"{LIBTORCH} is absent (see shared/materials.md)")
@pytest.mark.timeout(600)
def test_libtorch_kernels_are_dispatched():
    """torch 2.13.0+cpu: AVX2/AVX-512/AMX kernels behind DispatchStub and MKL's CPU dispatch."""
    c = census(LIBTORCH)
    assert c.level == 4 and c.baseline_level == 1 and c.baseline == ()
    for ext in ("AVX", "AVX2", "FMA", "AVX512F", "AVX512BW", "AMX-TILE"):
        assert c.extensions[ext].verdict == "dispatched", (ext, c.extensions[ext].reason)
    assert c.extensions["AVX512F"].instructions > 1_000_000
    miss = isa.missing_for_cpu(c, V3)
    assert miss["ok"] and "AVX512F" in miss["dispatched"]
    f = isa.function_census(LIBTORCH, c.extensions["AVX512F"].first_addresses[0])
    assert f.extensions.get("AVX512F", 0) >= 1 and f.name


PLAIN_TU = r"""
#include <smmintrin.h>
FN void NAME(floor)(float *a, int n) { for (int i = 0; i + 4 <= n; i += 4) _mm_storeu_ps(a + i, _mm_floor_ps(_mm_loadu_ps(a + i))); }
FN float NAME(sum)(const float *a, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
FN double NAME(dsum)(const double *a, int n) { double s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
FN void NAME(scale)(float *a, float k, int n) { for (int i = 0; i < n; i++) a[i] *= k; }
FN void NAME(dscale)(double *a, double k, int n) { for (int i = 0; i < n; i++) a[i] *= k; }
"""
KERNEL_TU = r"""
FN void NAME(kernel)(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] += b[i] * 3; }
void (*const NAME(entry))(int *, const int *, int) = NAME(kernel);
"""


def test_spread_over_plain_source_files(tmp_path):
    """numpy-style build: every ordinary source compiled with -msse4.1 (a v2 baseline), one
    kernel source compiled twice (generic and -mavx2), reached through exported pointers.
    The AVX2 kernel is a static function of kern.c, which .symtab lists twice: no plain file."""
    objs = []
    for i in range(4):
        # static: local symbols follow their STT_FILE entry in .symtab (`used` keeps them)
        (tmp_path / f"plain{i}.c").write_text(
            f"#define FN __attribute__((used)) static\n#define NAME(x) p{i}_##x\n" + PLAIN_TU)
        objs.append(f"plain{i}.o")
        r = _gcc(["-O2", "-msse4.1", "-fPIC", "-c", f"plain{i}.c", "-o", objs[-1]], tmp_path)
        assert r.returncode == 0, r.stderr
    (tmp_path / "kern.c").write_text("#define CAT_(a, b) a##b\n#define CAT(a, b) CAT_(a, b)\n"
                                     "#define FN __attribute__((used)) static\n"
                                     "#define NAME(x) CAT(x, SUFFIX)\n" + KERNEL_TU)
    for suffix, flags in (("_x", ["-msse2"]), ("_y", ["-mavx2"])):
        objs.append(f"kern{suffix}.o")
        r = _gcc(["-O3", *flags, f"-DSUFFIX={suffix}", "-fPIC", "-c", "kern.c", "-o", objs[-1]], tmp_path)
        assert r.returncode == 0, r.stderr
    lib = tmp_path / "libspread.so"
    r = _gcc(["-shared", "-o", str(lib), *objs], tmp_path)
    assert r.returncode == 0, r.stderr
    c = census(lib)
    sse41 = c.extensions["SSE4.1"]
    assert {f.name for f in sse41.functions} == {f"p{i}_floor" for i in range(4)}
    assert sse41.verdict == "baseline" and sse41.rule == "spread", sse41.reason
    avx2 = c.extensions["AVX2"]
    assert [f.name for f in avx2.functions] == ["kernel_y"]
    assert avx2.verdict == "dispatched", avx2.reason
    assert c.baseline_level == 2 and c.level == 3


def _numpy_core() -> Path | None:
    import importlib.util
    spec = importlib.util.find_spec("numpy")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    found = sorted((root / "_core").glob("_multiarray_umath*.so"))
    version = (root / "version.py").read_text() if (root / "version.py").is_file() else ""
    m = re.search(r'^version = "(\d+)\.(\d+)', version, re.M)
    if not found or not m or (int(m.group(1)), int(m.group(2))) < (2, 4):
        return None
    return found[0]


@pytest.mark.skipif(_numpy_core() is None, reason="needs numpy >= 2.4 installed (x86-64-v2 baseline)")
def test_numpy_baseline_is_v2():
    """NumPy >= 2.4 is built with an X86_V2 baseline, AVX2/AVX-512 dispatched (FACTS.md 7)."""
    c = census(_numpy_core())
    assert c.baseline_level == 2, c.baseline
    assert {"SSE3", "SSSE3", "SSE4.1", "SSE4.2", "POPCNT"} <= set(c.baseline)
    for ext in ("AVX", "AVX2", "AVX512F"):
        assert c.extensions[ext].verdict == "dispatched", c.extensions[ext].reason
    miss = isa.missing_for_cpu(c, {"pni", "ssse3"})  # a CPU without SSE4 (Core 2 Merom)
    assert not miss["ok"] and {"SSE4.1", "SSE4.2", "POPCNT"} <= set(miss["baseline"])


def test_gnu_property_needed_level_wins(libs, tmp_path):
    lib = tmp_path / "libneeded.so"
    (tmp_path / "s.c").write_text(SOURCES["sse41"][1])
    r = _gcc(["-O3", "-msse4.1", "-fPIC", "-shared", "-Wl,-z,x86-64-v3", "-o", str(lib), "s.c"], tmp_path)
    if r.returncode != 0:
        pytest.skip(f"this linker has no -z x86-64-v3: {r.stderr.strip()[:200]}")
    c = census(lib)
    assert c.gnu_property.get("needed_level") == 3
    use = c.extensions["SSE4.1"]
    assert use.verdict == "baseline" and use.rule == "needed"
    miss = isa.missing_for_cpu(c, {"sse4_1", "sse4_2", "popcnt", "ssse3", "pni", "cx16", "lahf_lm"})
    assert not miss["ok"] and any("ISA level" in n for n in miss["notes"])


# -- cross-checks with objdump ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["avx512", "avx2", "fmv", "manual", "plain"])
def test_instruction_count_matches_objdump(libs, name):
    c = census(libs[name])
    assert c.instructions == len(objdump(libs[name]))


@pytest.mark.parametrize("name", ["avx512", "avx2", "fmv"])
def test_vector_encodings_match_objdump(libs, name):
    """Every VEX/EVEX instruction objdump shows is counted under an AVX-family extension, and
    only those: the address sets are equal."""
    od = objdump(libs[name])
    vex = {a for a, raw, _ in od if encoding(raw) in ("vex", "evex")}
    evex = {a for a, raw, _ in od if encoding(raw) == "evex"}
    avx_family = {"AVX", "AVX2", "FMA", "F16C", "AVX512F", "AVX512VL", "AVX512BW", "AVX512DQ", "AVX512CD"}
    assert all_addresses(libs[name], avx_family) == vex
    if name != "avx2":
        assert all_addresses(libs[name], {e for e in avx_family if e.startswith("AVX512")}) >= evex
        assert len(evex) > 0
    zmm = sum(1 for a, _raw, mn in od if a in evex)
    c = census(libs[name])
    if name == "avx512":
        assert c.extensions["AVX512F"].instructions >= zmm > 0


def test_function_census_and_instruction_at(libs):
    lib = libs["avx512"]
    funcs = nm_functions(lib)
    start, size = funcs["scale"]
    fc = isa.function_census(lib, start + size - 1)  # any address inside
    assert (fc.start, fc.end, fc.name) == (start, start + size, "scale")
    assert fc.level == 4 and fc.extensions["AVX512F"] > 0
    c = census(lib)
    per_fn = {f.name: f.count for f in c.extensions["AVX512F"].functions}
    assert fc.extensions["AVX512F"] == per_fn["scale"]
    od = {a: (raw, mn) for a, raw, mn in objdump(lib)}
    for a in fc.addresses["AVX512F"][:20]:
        mn, exts = isa.instruction_at(lib, a)
        assert "AVX512F" in exts
        assert od[a][1].startswith(mn) or mn.startswith(od[a][1].rstrip("lqwb")), (hex(a), mn, od[a][1])
        d = isa.decode_at(lib, a)
        assert d.aligned and d.function == "scale" and d.length == len(od[a][0]) and d.faults
    # an address inside an instruction still decodes, flagged as unaligned
    a = fc.addresses["AVX512F"][0]
    d = isa.decode_at(lib, a + 1)
    assert not d.aligned


def test_census_cached_by_build_id(libs, tmp_path):
    first = isa.isa_census(libs["avx2"])
    assert not first.cached and first.build_id
    again = isa.isa_census(libs["avx2"])
    assert again.cached
    assert again.extensions == first.extensions
    assert again.baseline == first.baseline and again.level == first.level
    assert (Path(os.environ["XDG_CACHE_HOME"]) / "crashlens" / "isa.sqlite").is_file()
    # a copy with the same build-id hits the cache, whatever its path
    copy = tmp_path / "copy.so"
    shutil.copy(libs["avx2"], copy)
    assert isa.isa_census(copy).cached


def test_corrupt_cache_is_ignored(libs):
    db = Path(os.environ["XDG_CACHE_HOME"]) / "crashlens" / "isa.sqlite"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"SQLite format 3\0" + os.urandom(4000))
    c = isa.isa_census(libs["sse41"])
    assert not c.cached and "SSE4.1" in c.extensions
    db.write_bytes(b"not a database at all")
    assert "SSE4.1" in isa.isa_census(libs["sse41"]).extensions


def test_locked_cache_is_ignored(libs):
    isa.isa_census(libs["plain"])  # creates the database
    db = Path(os.environ["XDG_CACHE_HOME"]) / "crashlens" / "isa.sqlite"
    lock = sqlite3.connect(str(db))
    lock.execute("BEGIN EXCLUSIVE")
    try:
        c = isa.isa_census(libs["avx2"])
        assert not c.cached and "AVX2" in c.baseline
    finally:
        lock.rollback()
        lock.close()


def test_unwritable_cache_dir_is_ignored(libs, tmp_path, monkeypatch):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert "AVX2" in isa.isa_census(libs["avx2"]).baseline


def test_parallel_and_serial_agree(libs):
    a = census(libs["avx512"], jobs=1)
    b = census(libs["avx512"], jobs=2)
    assert a.extensions == b.extensions and a.instructions == b.instructions


# -- CPU comparison --------------------------------------------------------------------------------

V2 = {"pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16", "lahf_lm"}
V3 = V2 | {"avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "abm", "movbe", "xsave"}
V4 = V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}


def test_missing_for_cpu(libs):
    c = census(libs["avx2"])
    miss = isa.missing_for_cpu(c, V2)
    assert miss["cpu_level"] == 2 and miss["cpu_level_name"] == "x86-64-v2" and not miss["ok"]
    assert {"AVX", "AVX2", "FMA"} <= set(miss["baseline"])
    assert miss["baseline"]["AVX2"] == "will crash at load/first use"
    assert miss["details"]["AVX2"]["verdict"] == "baseline" and miss["details"]["AVX2"]["first_address"]
    assert isa.missing_for_cpu(c, V3)["ok"]

    f = census(libs["fmv"])
    miss = isa.missing_for_cpu(f, V2)
    assert miss["ok"] and not miss["baseline"]
    assert {"AVX", "AVX512F"} <= set(miss["dispatched"])
    assert miss["dispatched"]["AVX512F"] == "fine if the dispatcher checks CPUID"
    assert isa.missing_for_cpu(f, set())["cpu_level"] == 1
    assert isa.missing_for_cpu(f, V4)["cpu_level"] == 4


def test_extension_table():
    assert isa.extension("sse4_1").name == "SSE4.1"
    assert isa.extension("avx512_vnni").name == "AVX512-VNNI"
    assert isa.extension("AMX_TILE").cpuinfo == ("amx_tile",)
    assert isa.extension("pni").name == "SSE3"
    assert isa.extension("LZCNT").cpuinfo == ("abm",)
    levels = {e.name: e.level for e in isa.extensions()}
    assert levels["POPCNT"] == 2 and levels["MOVBE"] == 3 and levels["AVX512VL"] == 4 and levels["AES"] is None
    assert isa.extension("nonsense") is None


# -- symbols -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["manual", "fmv", "avx2"])
def test_function_table_matches_nm(libs, name):
    with ElfFile(libs[name]) as elf:
        table = FunctionTable(elf)
        assert table.sources == ("symtab",)
        for fname, (addr, size) in nm_functions(libs[name]).items():
            fn = table.lookup(addr)
            assert fn is not None and fn.start == addr, fname
            if size:
                assert fn.end == addr + size
            assert locate_function(elf, addr + max(size, 1) - 1) == fn or fn.estimated
        assert list(table.starts) == sorted(table.starts)
        assert all(e <= s for e, s in zip(table.ends, table.starts[1:]))
        scale = table.symbols_named("scale") if name == "fmv" else []
        if name == "fmv":
            assert any(s.type_name == "ifunc" for s in scale)
            assert table.ifunc_resolvers


def test_stripped_library_uses_eh_frame(libs, tmp_path):
    stripped = tmp_path / "libstripped.so"
    shutil.copy(libs["manual"], stripped)
    if shutil.which("strip") is None:
        pytest.skip("strip is needed")
    subprocess.run(["strip", "-s", str(stripped)], check=True)
    kernel_fast = nm_functions(libs["manual"])["kernel_fast"]
    with ElfFile(stripped) as elf:
        table = FunctionTable(elf)
        assert "eh_frame" in table.sources
        fn = table.lookup(kernel_fast[0] + 4)
        assert fn is not None and fn.start == kernel_fast[0] and fn.name is None and fn.source == "eh_frame"
        assert locate_function(elf, kernel_fast[0] + 4).start == kernel_fast[0]
        ranges = eh_frame_ranges(elf)
        assert (kernel_fast[0], kernel_fast[0] + kernel_fast[1]) in ranges
    c = census(stripped)
    use = c.extensions["AVX2"]
    assert [f.start for f in use.functions] == [kernel_fast[0]] and use.functions[0].name is None
    assert c.instructions == census(libs["manual"]).instructions


# -- robustness ------------------------------------------------------------------------------------

def _text(path: Path):
    with ElfFile(path) as elf:
        return elf.section(".text")


def test_garbage_in_text(libs, tmp_path):
    bad = tmp_path / "libgarbage.so"
    data = bytearray(libs["avx2"].read_bytes())
    text = _text(libs["avx2"])
    rnd = __import__("random").Random(7)
    data[text.offset:text.offset + text.size] = bytes(rnd.getrandbits(8) for _ in range(text.size))
    bad.write_bytes(bytes(data))
    c = census(bad)
    assert c.instructions > 0 and c.undecodable > 0 and c.undecodable_addresses
    fc = isa.function_census(bad, text.addr + 7)
    assert fc.instructions > 0
    d = isa.decode_at(bad, c.undecodable_addresses[0])
    assert d.mnemonic == "(bad)" and d.extensions == ()


@pytest.mark.parametrize("keep", [0, 10, 64, 1000, 0.5, 0.9])
def test_truncated_file(libs, tmp_path, keep):
    data = libs["avx2"].read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    cut = tmp_path / "libcut.so"
    cut.write_bytes(data[:n])
    with pytest.raises(ElfError):
        isa.isa_census(cut, cache=False)


def test_not_x86(libs, tmp_path):
    data = bytearray(libs["plain"].read_bytes())
    struct.pack_into("<H", data, 18, 183)  # e_machine = EM_AARCH64
    arm = tmp_path / "libarm.so"
    arm.write_bytes(bytes(data))
    with pytest.raises(isa.IsaError, match="aarch64"):
        isa.isa_census(arm, cache=False)
    with pytest.raises(isa.IsaError):
        isa.function_census(arm, 0x1000)
    not_elf = tmp_path / "notes.txt"
    not_elf.write_text("hello, this is not an ELF file at all\n" * 10)
    with pytest.raises(ElfError):
        isa.isa_census(not_elf, cache=False)
    with pytest.raises(ElfError):
        isa.isa_census(tmp_path / "missing.so", cache=False)


def test_address_outside_code(libs):
    with pytest.raises(isa.IsaError):
        isa.function_census(libs["plain"], 0x10)
    with pytest.raises(isa.IsaError):
        isa.instruction_at(libs["plain"], 0xFFFF_FFFF_0000)


@settings(max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(-8192, 1 << 16), st.integers(0, 255)), min_size=1, max_size=12))
def test_mutated_files_fail_cleanly(libs, tmp_path_factory, edits):
    """Random byte edits (ELF header, section headers and string tables at the end, code,
    .eh_frame, symbols): a census or a CrashlensError, nothing else, and no hang."""
    data = bytearray(libs["sse41"].read_bytes())
    for pos, value in edits:
        data[pos % len(data)] = value  # negative: counted from the end (section headers)
    path = tmp_path_factory.mktemp("fuzz") / "lib.so"
    path.write_bytes(bytes(data))
    try:
        c = isa.isa_census(path, cache=False, jobs=1)
        assert c.instructions >= 0
        isa.function_census(path, _text(libs["sse41"]).addr + 3)
        with ElfFile(path) as elf:
            FunctionTable(elf, eh_frame=True)
            locate_function(elf, _text(libs["sse41"]).addr + 3)
    except CrashlensError:
        pass
