"""CUDA fatbin listing (binary/fatbin.py) and GPU compatibility (binary/cudacompat.py).

Three sources of real fatbins, from most to least available:

- fixtures/binaries/: small binaries built with nvcc 13.0, each with the listing cuobjdump
  printed for it (always run);
- nvcc, when installed: builds fatbins for sm_75, sm_80, sm_90a, sm_100f, PTX only, every
  --compress-mode, -rdc objects and a device-linked executable (skipped without nvcc);
- real NVIDIA/PyTorch libraries under $CRASHLENS_MATERIALS (default
  /tmp/crashlens-materials/lib; skipped where absent).

cuobjdump, where found ($CRASHLENS_CUOBJDUMP or PATH), is the reference for every listing.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import subprocess
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashlens.binary.cudacompat import Verdict, compatible, parse_gpu, ptx_isa_requirement
from crashlens.binary.elf import ElfError, ElfFile
from crashlens.binary.fatbin import (
    CudaImage,
    CudaImages,
    FatbinError,
    cubin_header,
    cuobjdump_listing,
    decompress_image,
    ptx_header,
    read_cuda_images,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "binaries"
FIXTURE_FILES = ["libaxpy_sm80.so", "axpy_sm90a.o", "dlink_app"]
MATERIALS = Path(os.environ.get("CRASHLENS_MATERIALS", "/tmp/crashlens-materials/lib"))


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    return "/usr/local/bin/nvcc" if os.access("/usr/local/bin/nvcc", os.X_OK) else None


def _cuobjdump() -> str | None:
    env = os.environ.get("CRASHLENS_CUOBJDUMP")
    if env and os.access(env, os.X_OK):
        return env
    found = shutil.which("cuobjdump")
    if found:
        return found
    # the test extras install NVIDIA's cuobjdump wheel: site-packages/nvidia/cu*/bin/cuobjdump
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for cand in sorted(Path(root).glob("cu*/bin/cuobjdump")):
            if os.access(cand, os.X_OK):
                return str(cand)
    return None


NVCC = _nvcc()
CUOBJDUMP = _cuobjdump()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, /usr/local/bin/nvcc)")
needs_cuobjdump = pytest.mark.skipif(
    CUOBJDUMP is None, reason="cuobjdump not found (set CRASHLENS_CUOBJDUMP or put it on PATH)"
)


def cuobjdump_lines(path: Path) -> list[str]:
    out = subprocess.run([CUOBJDUMP, "-all", "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, check=False)
    return [line for line in out.stdout.splitlines() if line.startswith(("ELF file", "PTX file"))]


def read(path: Path) -> tuple[ElfFile, CudaImages]:
    elf = ElfFile(path)
    return elf, read_cuda_images(elf)


def kinds(images: CudaImages) -> list[tuple[str, str]]:
    return [(i.kind, i.arch) for i in images.images]


def check_decompressed(elf: ElfFile, image: CudaImage) -> bytes:
    data = decompress_image(elf, image)
    assert len(data) == image.uncompressed_size
    if image.kind == "sass":
        head = cubin_header(data)
        assert head.sm == image.sm
        assert head.accelerated == (image.variant == "a")
        assert head.abi == "v2"  # CUDA 13 writes the new ABI for every SM
    elif image.kind == "ptx":
        head = ptx_header(data)
        assert head.version == image.ptx_version
        assert head.arch == f"sm_{image.sm}{image.variant}"
        assert head.address_size == 64
    return data


# ----------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_fixture_listing_matches_cuobjdump_record(name: str) -> None:
    elf, images = read(FIXTURES / name)
    assert images.errors == ()
    expected = (FIXTURES / f"{name}.cuobjdump.txt").read_text().splitlines()
    assert cuobjdump_listing(images) == expected
    for image in images.images:
        check_decompressed(elf, image)


@needs_cuobjdump
@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_fixture_listing_matches_live_cuobjdump(name: str) -> None:
    _, images = read(FIXTURES / name)
    assert cuobjdump_listing(images) == cuobjdump_lines(FIXTURES / name)


def test_fixture_shared_library_zstd() -> None:
    _, images = read(FIXTURES / "libaxpy_sm80.so")
    assert kinds(images) == [("sass", "sm_80"), ("sass", "sm_80"), ("ptx", "compute_80")]
    assert {i.compression for i in images.images} == {"zstd"}
    assert [(c.section, c.index, c.image_count) for c in images.containers] == [(".nv_fatbin", 0, 1), (".nv_fatbin", 1, 2)]
    ptx = images.ptx[0]
    assert ptx.ptx_version == "9.0" and ptx.code_version == (9, 0)
    assert (ptx.is_64bit, ptx.debug, ptx.host) == (True, False, "linux")
    for image in images.images:
        assert image.compressed_size <= image.stored_size < image.uncompressed_size


def test_fixture_sm90a_object() -> None:
    elf, images = read(FIXTURES / "axpy_sm90a.o")
    (image,) = images.images
    assert (image.kind, image.arch, image.sm, image.variant, image.compression) == ("sass", "sm_90a", 90, "a", "none")
    assert image.listed_arch == "sm_90a" and image.compute_capability == (9, 0)
    head = cubin_header(decompress_image(elf, image))
    # CUDA 13: new ABI, the SM in bits 8-15, 'a' only in .nv.compat
    assert (head.abi, head.osabi, head.abi_version, head.sm, head.accelerated) == ("v2", 0x41, 8, 90, True)
    assert head.e_flags == 0x06005A04 and head.arch == "sm_90a"


def test_fixture_device_linked_executable_lists_both_sections() -> None:
    elf, images = read(FIXTURES / "dlink_app")
    assert [i.section for i in images.images] == [".nv_fatbin"] * 2 + ["__nv_relfatbin"] * 6
    assert kinds(images)[:2] == [("sass", "sm_75"), ("sass", "sm_100f")]
    assert [i.listed_arch for i in images.images[:2]] == ["sm_75", "sm_100"]  # cuobjdump drops 'f' for ELF
    assert {i.compression for i in images.images} == {"lz4"}
    assert [i.container for i in images.images] == [0, 0, 0, 0, 0, 1, 1, 1]
    relocatable = [i for i in images.images if i.section == "__nv_relfatbin"]
    assert [i.kind for i in relocatable].count("ptx") == 2
    for image in relocatable:
        if image.kind == "sass":
            assert cubin_header(decompress_image(elf, image)).elf_type == 1  # ET_REL


# ----------------------------------------------------------------------------- nvcc builds

MULTI = [
    "-gencode", "arch=compute_75,code=sm_75",
    "-gencode", "arch=compute_80,code=sm_80",
    "-gencode", "arch=compute_90a,code=sm_90a",
    "-gencode", "arch=compute_100f,code=[sm_100f,compute_100f]",
    "-gencode", "arch=compute_90,code=compute_90",
]  # fmt: skip
MULTI_IMAGES = sorted(
    [("sass", "sm_75"), ("sass", "sm_80"), ("sass", "sm_90a"), ("sass", "sm_100f"), ("ptx", "compute_100f"), ("ptx", "compute_90")]
)
RDC = ["-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-gencode", "arch=compute_90a,code=sm_90a"]
COMPRESS = {"none": "none", "speed": "lz4", "size": "zstd"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if NVCC is None:
        pytest.skip("nvcc not found (PATH, /usr/local/bin/nvcc)")
    d = tmp_path_factory.mktemp("nvcc")
    for src in ("axpy.cu", "dlink_main.cu", "dlink_helper.cu"):
        shutil.copy(FIXTURES / src, d / src)
    jobs = {f"multi_{mode}.o": ["-c", "axpy.cu", *MULTI, f"--compress-mode={mode}", "-Xfatbin", "-compress-all"] for mode in COMPRESS}
    jobs["ptx_only.o"] = ["-c", "axpy.cu", "-gencode", "arch=compute_90,code=compute_90"]
    jobs["rdc_main.o"] = ["-c", "-rdc=true", "dlink_main.cu", *RDC]
    jobs["rdc_helper.o"] = ["-c", "-rdc=true", "dlink_helper.cu", *RDC]

    def run(name: str, args: list[str]) -> None:
        subprocess.run([NVCC, *args, "-o", name], cwd=d, check=True, capture_output=True)

    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(run, name, args) for name, args in jobs.items()]:
            future.result()
    run("app", [*RDC, "rdc_main.o", "rdc_helper.o"])
    return {name: d / name for name in [*jobs, "app"]}


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("mode", sorted(COMPRESS))
def test_nvcc_gencodes_and_compression(built: dict[str, Path], mode: str) -> None:
    elf, images = read(built[f"multi_{mode}.o"])
    assert images.errors == ()
    assert sorted(kinds(images)) == MULTI_IMAGES
    assert {i.compression for i in images.images} == {COMPRESS[mode]}
    by_arch = {i.arch: i for i in images.images}
    assert by_arch["sm_90a"].variant == "a" and by_arch["sm_100f"].variant == "f"
    assert by_arch["compute_100f"].ptx_version == "9.0" and by_arch["sm_75"].ptx_version is None
    assert by_arch["sm_100f"].header_size == 0x70 and by_arch["sm_75"].header_size == 0x40
    for image in images.images:
        check_decompressed(elf, image)


@needs_nvcc
def test_nvcc_compression_modes_hold_the_same_images(built: dict[str, Path]) -> None:
    contents = {}
    for mode in COMPRESS:
        elf, images = read(built[f"multi_{mode}.o"])
        contents[mode] = {i.arch: decompress_image(elf, i).rstrip(b"\0") for i in images.images}
    assert contents["none"] == contents["speed"] == contents["size"]


@needs_nvcc
def test_nvcc_ptx_only(built: dict[str, Path]) -> None:
    elf, images = read(built["ptx_only.o"])
    assert kinds(images) == [("ptx", "compute_90")]
    assert images.sass == ()
    check_decompressed(elf, images.images[0])
    assert compatible(images, "sm_120", driver="13.0").compatible is True
    assert compatible(images, "sm_80").compatible is False


@needs_nvcc
def test_nvcc_rdc_object_has_only_relfatbin(built: dict[str, Path]) -> None:
    elf, images = read(built["rdc_main.o"])
    assert elf.section(".nv_fatbin") is None
    assert {i.section for i in images.images} == {"__nv_relfatbin"}
    assert sorted(kinds(images)) == [("ptx", "compute_80"), ("sass", "sm_80"), ("sass", "sm_90a")]
    verdict = compatible(images, "sm_90")
    assert verdict.compatible is True and "relocatable" in verdict.reason


@needs_nvcc
def test_nvcc_device_linked_executable(built: dict[str, Path]) -> None:
    elf, images = read(built["app"])
    sections = [i.section for i in images.images]
    assert sections.index("__nv_relfatbin") == sections.count(".nv_fatbin") == 2
    assert len([c for c in images.containers if c.section == "__nv_relfatbin"]) == 2
    for image in images.images:
        check_decompressed(elf, image)


@needs_nvcc
@needs_cuobjdump
@pytest.mark.parametrize(
    "name", ["multi_none.o", "multi_speed.o", "multi_size.o", "ptx_only.o", "rdc_main.o", "rdc_helper.o", "app"]
)
def test_nvcc_builds_match_cuobjdump(built: dict[str, Path], name: str) -> None:
    _, images = read(built[name])
    assert cuobjdump_listing(images) == cuobjdump_lines(built[name])


# --------------------------------------------------------------------- real libraries

REAL = {  # file: (ELF images, PTX images), as cuobjdump 13.5 lists them (-all)
    "libtorch_cuda.so": (2975, 0),  # torch 2.14.1
    "libnccl.so.2": (946, 155),  # nvidia-nccl-cu13 2.30.7
    "libcublasLt.so.13": (5449, 288),  # nvidia-cublas 13.1.1.3
    "libcudnn_engines_precompiled.so.9": (3912, 95),  # nvidia-cudnn-cu13 9.24.0.43
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_library(name: str) -> None:
    path = MATERIALS / name
    if not path.exists():
        pytest.skip(f"{path} not present (see /work/shared/materials.md; set CRASHLENS_MATERIALS)")
    _, images = read(path)
    assert images.errors == ()
    assert (len(images.sass), len(images.ptx)) == REAL[name]
    if os.environ.get("CRASHLENS_COMPARE_REAL") and CUOBJDUMP:  # slow: cuobjdump takes seconds and GBs
        assert cuobjdump_listing(images) == cuobjdump_lines(path)


# ------------------------------------------------------------------- compatibility rules


def img(arch: str, *, ptx: str = "9.0", section: str = ".nv_fatbin", container: int = 0) -> CudaImage:
    """A CudaImage as read_cuda_images would make it, from "sm_90a" / "compute_100f"."""
    prefix, _, rest = arch.partition("_")
    variant = rest[-1] if rest[-1] in "af" else ""
    sm = int(rest.rstrip("af"))
    kind = "ptx" if prefix == "compute" else "sass"
    return CudaImage(
        kind=kind, arch=arch, sm=sm, variant=variant, section=section, container=container, index=0,
        offset=0, header_size=64, payload_offset=64, compression="none", stored_size=100,
        compressed_size=0, uncompressed_size=100, identifier="",
        code_version=tuple(map(int, ptx.split("."))) if kind == "ptx" else (1, 8),  # type: ignore[arg-type]
        ptx_version=ptx if kind == "ptx" else None, flags=0x11, is_64bit=True, debug=False,
        producer="", host="linux",
    )  # fmt: skip


@pytest.mark.parametrize(
    "arch, device, runs",
    [
        ("sm_80", "8.6", True),  # same major, higher minor
        ("sm_80", "8.0", True),
        ("sm_86", "8.0", False),  # lower minor
        ("sm_80", "9.0", False),  # other major
        ("sm_90", "10.0", False),
        ("sm_90a", "9.0", True),  # 'a': that arch only
        ("sm_90a", "10.0", False),
        ("sm_100a", "10.3", False),
        ("sm_100f", "10.0", True),  # 'f': the family, same or higher minor
        ("sm_100f", "10.3", True),
        ("sm_103f", "10.0", False),
        ("sm_100f", "11.0", False),
        ("sm_100f", "12.0", False),
        ("sm_100f", "10.1", False),  # 10.1 (Thor under CUDA 12) is a family of its own
        ("sm_120f", "12.1", True),
    ],
)
def test_sass_rules(arch: str, device: str, runs: bool) -> None:
    verdict = compatible([img(arch)], device)
    assert verdict.compatible is runs
    assert (verdict.runnable != []) is runs


@pytest.mark.parametrize(
    "arch, device, jits",
    [
        ("compute_80", "9.0", True),  # plain PTX: any newer device
        ("compute_80", "12.1", True),
        ("compute_90", "8.9", False),  # never backwards
        ("compute_90a", "9.0", True),
        ("compute_90a", "10.0", False),  # 'a' PTX: that arch only
        ("compute_100f", "10.3", True),  # 'f' PTX: the family only
        ("compute_100f", "12.0", False),
    ],
)
def test_ptx_rules(arch: str, device: str, jits: bool) -> None:
    verdict = compatible([img(arch)], device, driver="580.65.06")
    assert verdict.compatible is jits
    assert (verdict.jit != []) is jits


def test_reason_names_what_the_file_has_and_what_the_device_needs() -> None:
    verdict = compatible([img("sm_80"), img("sm_86")], "sm_90")
    assert verdict.compatible is False
    assert "no SASS for sm_90 (has sm_80, sm_86) and no PTX <= compute_90" in verdict.reason
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in verdict.reason
    verdict = compatible([img("sm_90a")], "sm_100")
    assert "sm_90a runs only on 9.0" in verdict.reason


def test_ptx_needs_a_driver_that_knows_its_isa() -> None:
    images = [img("sm_80"), img("compute_80", ptx="9.0")]
    unknown = compatible(images, "H100")
    assert unknown.compatible is None and unknown.device == "sm_90"
    assert "PTX ISA 9.0" in unknown.reason and "580.65.06" in unknown.reason
    assert [i.arch for i in unknown.jit] == ["compute_80"]
    for new_enough in ("580.65.06", "580", "13.0", 13000, "590.44.01"):
        verdict = compatible(images, "H100", driver=new_enough)
        assert verdict.compatible is True, new_enough
        assert verdict.jit and not verdict.runnable
    for too_old in ("535.104.05", "12.4", 12080, "575.57.08"):
        verdict = compatible(images, "H100", driver=too_old)
        assert verdict.compatible is False, too_old
        assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in verdict.reason
    old_ptx = compatible([img("compute_80", ptx="8.4")], "9.0", driver="12.4")
    assert old_ptx.compatible is True


def test_ptx_isa_table() -> None:
    assert ptx_isa_requirement("9.0") == ("13.0", "580.65.06")
    assert ptx_isa_requirement("8.4") == ("12.4", "550.54.14")
    assert ptx_isa_requirement("7.0") == ("11.0", "450.51.05")
    assert ptx_isa_requirement("1.0") is None


def test_newest_ptx_the_driver_takes_is_reported() -> None:
    images = [img("compute_75", ptx="8.0"), img("compute_90", ptx="9.0")]
    verdict = compatible(images, "sm_120", driver="12.4")
    assert verdict.compatible is True and [i.arch for i in verdict.jit] == ["compute_75"]


@pytest.mark.parametrize(
    "gpu, cc",
    [
        ("sm_90", (9, 0)), ("90", (9, 0)), ("9.0", (9, 0)), ("compute_90", (9, 0)), ("sm_90a", (9, 0)),
        ("sm_100", (10, 0)), ("10.3", (10, 3)), ("121", (12, 1)), (86, (8, 6)),
        ("H100", (9, 0)), ("NVIDIA H100 80GB HBM3", (9, 0)), ("RTX 4090", (8, 9)), ("Jetson Orin", (8, 7)),
        ("A100", (8, 0)), ("B200", (10, 0)), ("no such gpu", None),
    ],
)  # fmt: skip
def test_parse_gpu(gpu: str, cc: tuple[int, int] | None) -> None:
    assert parse_gpu(gpu) == cc


def test_unknown_gpu_and_empty_file() -> None:
    assert compatible([img("sm_80")], "Voodoo2").compatible is None
    assert compatible([], "sm_80").compatible is None


def test_loadable_fatbin_beats_relocatable_code() -> None:
    images = [img("sm_80"), img("sm_90", section="__nv_relfatbin")]
    verdict = compatible(images, "sm_90")
    assert verdict.compatible is False  # the runtime loads .nv_fatbin only
    assert compatible([img("sm_90", section="__nv_relfatbin")], "sm_90").compatible is True


def test_containers_without_an_image_for_the_device_are_reported() -> None:
    images = [img("sm_90", container=0), img("sm_100", container=1)]
    verdict = compatible(images, "sm_90")
    assert verdict.compatible is True
    assert verdict.uncovered == [(".nv_fatbin", 1)]
    assert "1 of 2 fatbins have no image for sm_90" in verdict.reason


def test_compat_on_fixtures() -> None:
    _, lib = read(FIXTURES / "libaxpy_sm80.so")
    assert compatible(lib, "A100").compatible is True
    assert compatible(lib, "RTX 3090").compatible is True  # sm_80 SASS on 8.6
    assert compatible(lib, "H100", driver="580.95.05").compatible is True  # compute_80 PTX, JIT
    assert compatible(lib, "H100", driver="550.54.14").compatible is False
    assert compatible(lib, "T4").compatible is False  # 7.5 < 8.0, PTX does not go backwards
    _, a = read(FIXTURES / "axpy_sm90a.o")
    assert compatible(a, "H100").compatible is True
    assert compatible(a, "B200").compatible is False
    _, app = read(FIXTURES / "dlink_app")
    assert compatible(app, "B300").compatible is True  # sm_100f SASS on 10.3
    assert compatible(app, "RTX 5090", driver="13.0").compatible is False  # no PTX in .nv_fatbin


def test_verdict_is_a_plain_dataclass() -> None:
    verdict = compatible([img("sm_80")], "sm_80")
    assert isinstance(verdict, Verdict)
    assert dataclasses.asdict(verdict)["compatible"] is True


# ------------------------------------------------------------------------- headers


def cubin_bytes(osabi: int, abi_version: int, e_version: int, e_flags: int, machine: int = 190) -> bytes:
    ident = b"\x7fELF" + bytes([2, 1, 1, osabi, abi_version]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", 2, machine, e_version, 0, 0, 0, e_flags, 64, 0, 0, 64, 0, 0)


def test_cubin_header_old_abi() -> None:
    # FACTS §2: a CUDA-12.1-era cubin: OSABI 0x33, ABI 7, e_version 121, e_flags 0x00460546
    head = cubin_header(cubin_bytes(0x33, 7, 121, 0x00460546))
    assert (head.abi, head.sm, head.virtual_sm, head.address_64, head.accelerated) == ("v1", 70, 70, True, False)
    assert head.arch == "sm_70" and head.virtual_arch == "compute_70" and head.elf_version == 121
    head = cubin_header(cubin_bytes(0x33, 7, 124, 0x005A0D5A))  # sm_90 + ACCELERATORS (0x800)
    assert head.arch == "sm_90a" and head.accelerated


def test_cubin_header_new_abi() -> None:
    head = cubin_header(cubin_bytes(0x41, 8, 1, 0x06004B04))  # sm_75 under CUDA 13
    assert (head.abi, head.sm, head.virtual_sm, head.address_64, head.arch) == ("v2", 75, None, None, "sm_75")
    assert cubin_header(cubin_bytes(0x41, 8, 1, 0x06006402)).sm == 100
    assert cubin_header(cubin_bytes(0x41, 8, 1, 0x06006402 | 0x8)).arch == "sm_100a"  # LLVM's EF_CUDA_ACCELERATORS


def test_cubin_header_rejects_non_cubins() -> None:
    with pytest.raises(FatbinError, match="EM_CUDA"):
        cubin_header(cubin_bytes(0, 0, 1, 0, machine=62))
    with pytest.raises(FatbinError):
        cubin_header(b"\x7fELF")
    with pytest.raises(FatbinError):
        cubin_header(b"//\n.version 9.0\n" + bytes(64))


def test_ptx_header() -> None:
    text = """//
// Generated by NVIDIA NVVM Compiler
// .version 1.0 is in a comment
//
/* .target sm_10 */
.version 9.0
.target sm_90a, debug   // trailing comment
.address_size 64

.visible .entry axpy(
"""
    head = ptx_header(text)
    assert (head.version, head.target, head.address_size, head.arch) == ("9.0", ("sm_90a", "debug"), 64, "sm_90a")
    assert ptx_header(text.encode() + b"\0\0\0") == head
    assert ptx_header("") == ptx_header(b"\0garbage")


# ---------------------------------------------------------------- damaged fatbins

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)


def make_elf(sections: dict[str, bytes]) -> bytes:
    """A minimal ELF64 relocatable file holding these PROGBITS sections (and .shstrtab)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    body = bytearray(64)
    placed = []
    for name, data in sections.items():
        while len(body) % 8:
            body.append(0)
        placed.append((names.index(name.encode() + b"\0"), 1, len(body), len(data)))
        body += data
    placed.append((names.index(b".shstrtab\0"), 3, len(body), len(names)))
    body += names
    while len(body) % 8:
        body.append(0)
    shoff = len(body)
    body += bytes(64)  # section 0
    for name_off, sh_type, off, size in placed:
        body += struct.pack("<IIQQQQIIQQ", name_off, sh_type, 0, 0, off, size, 0, 0, 8, 0)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(placed) + 1, len(placed))
    body[:64] = header
    return bytes(body)


def fatbin_sections(path: Path) -> dict[str, bytes]:
    elf = ElfFile(path)
    out = {}
    for s in elf.sections:
        if s.name in (".nv_fatbin", "__nv_relfatbin"):
            out[s.name] = bytes(elf.section_data(s))
    return out


DLINK = fatbin_sections(FIXTURES / "dlink_app")
LIB = fatbin_sections(FIXTURES / "libaxpy_sm80.so")
SM90A = fatbin_sections(FIXTURES / "axpy_sm90a.o")


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def images_of(sections: dict[str, bytes]) -> tuple[ElfFile, CudaImages]:
    elf = ElfFile.from_bytes(make_elf(sections), "<test>")
    return elf, read_cuda_images(elf)


def test_synthetic_elf_reads_like_the_original() -> None:
    _, images = images_of(DLINK)
    _, original = read(FIXTURES / "dlink_app")
    strip = lambda i: (i.kind, i.arch, i.section, i.container, i.index, i.stored_size)
    assert [strip(i) for i in images.images] == [strip(i) for i in original.images]


def test_container_running_past_its_section_is_an_error_and_the_walk_goes_on() -> None:
    bad = patched(DLINK[".nv_fatbin"], 8, "<Q", 1 << 40)
    _, images = images_of({".nv_fatbin": bad, "__nv_relfatbin": DLINK["__nv_relfatbin"]})
    assert len(images.errors) == 1 and "runs past the end of the section" in images.errors[0]
    assert ".nv_fatbin container 0" in images.errors[0]
    assert [c.error is not None for c in images.containers] == [True, False, False]
    assert len([i for i in images.images if i.section == "__nv_relfatbin"]) == 6
    assert len([i for i in images.images if i.section == ".nv_fatbin"]) == 2  # complete entries are kept


def test_entry_running_past_its_container() -> None:
    bad = patched(LIB[".nv_fatbin"], 16 + 8, "<Q", 1 << 33)  # first entry's payload size
    _, images = images_of({".nv_fatbin": bad})
    assert len(images.errors) == 1 and "runs past the container" in images.errors[0]
    assert ".nv_fatbin container 0" in images.errors[0]
    # The next container is where container 0's header says: its two images are read.
    assert [(i.container, i.kind) for i in images.images] == [(1, "sass"), (1, "ptx")]
    assert [c.image_count for c in images.containers] == [0, 2]


def test_implausible_entry_header_size() -> None:
    for value in (0, 8, 0x10000):
        bad = patched(SM90A[".nv_fatbin"], 16 + 4, "<I", value)
        _, images = images_of({".nv_fatbin": bad + SM90A[".nv_fatbin"]})
        assert "implausible entry header size" in images.errors[0]
        assert [i.container for i in images.images] == [1]


def test_bad_magic_and_short_tail() -> None:
    _, images = images_of({".nv_fatbin": b"\x01" * 40})
    assert "no fatbin header" in images.errors[0]
    _, images = images_of({".nv_fatbin": SM90A[".nv_fatbin"] + b"\x01\x02"})
    assert len(images.images) == 1 and "too short for a fatbin header" in images.errors[0]


def test_zero_padding_between_and_after_containers() -> None:
    one = SM90A[".nv_fatbin"]
    _, images = images_of({".nv_fatbin": one + bytes(24) + one + bytes(100)})
    assert images.errors == () and len(images.images) == 2
    assert [c.index for c in images.containers] == [0, 1]
    _, images = images_of({".nv_fatbin": bytes(64)})
    assert images.errors == () and images.images == ()
    _, images = images_of({".nv_fatbin": one + bytes(16) + b"junkjunk"})
    assert len(images.images) == 1 and "after zero padding" in images.errors[0]


def test_identifier_is_read_and_checked() -> None:
    data = bytearray(SM90A[".nv_fatbin"])
    # Point the identifier at 8 bytes of the (uncompressed) cubin: "\x7fELF" + class/data bytes.
    struct.pack_into("<II", data, 16 + 0x20, 0x40, 4)
    _, images = images_of({".nv_fatbin": bytes(data)})
    assert images.images[0].identifier == "\x7fELF"
    struct.pack_into("<II", data, 16 + 0x20, 0x40, 1 << 30)
    _, images = images_of({".nv_fatbin": bytes(data)})
    assert images.images[0].identifier == "" and "identifier" in images.errors[0]


def entry_offsets(data: bytes) -> list[int]:
    out, off = [], 0
    while off + 16 <= len(data):
        _m, _v, hsize, fat = struct.unpack_from("<IHHQ", data, off)
        p, end = off + hsize, off + hsize + fat
        while p < end:
            out.append(p)
            ehs, psz = struct.unpack_from("<IQ", data, p + 4)
            p += ehs + psz
        off = end
    return out


def test_decompression_bombs_are_refused() -> None:
    data = DLINK[".nv_fatbin"]
    first = entry_offsets(data)[0]  # LZ4
    elf, images = images_of({".nv_fatbin": patched(data, first + 0x38, "<Q", 3 << 30)})
    with pytest.raises(FatbinError, match="over the limit"):
        decompress_image(elf, images.images[0])
    elf, images = images_of({".nv_fatbin": patched(data, first + 0x38, "<Q", 600 << 20)})
    with pytest.raises(FatbinError, match="decompression bomb"):  # LZ4 cannot expand 1.6 KB to 600 MB
        decompress_image(elf, images.images[0])
    zstd = LIB[".nv_fatbin"]
    first = entry_offsets(zstd)[0]
    elf, images = images_of({".nv_fatbin": patched(zstd, first + 0x38, "<Q", 1000)})  # smaller than the truth
    with pytest.raises(FatbinError, match="zstd"):
        decompress_image(elf, images.images[0])
    elf, images = images_of({".nv_fatbin": patched(zstd, first + 0x38, "<Q", 100 << 20)})
    with pytest.raises(FatbinError, match="decompression bomb"):
        decompress_image(elf, images.images[0])
    elf, images = images_of(LIB)
    with pytest.raises(FatbinError, match="over the limit"):
        decompress_image(elf, images.images[0], max_size=1000)


def test_unknown_compression_is_refused() -> None:
    data = SM90A[".nv_fatbin"]
    first = entry_offsets(data)[0]
    elf, images = images_of({".nv_fatbin": patched(data, first + 0x28, "<Q", 0x100011 | 0x1000)})
    assert images.images[0].compression == "unknown"
    with pytest.raises(FatbinError, match="not LZ4 or zstd"):
        decompress_image(elf, images.images[0])


def test_truncated_files_never_raise() -> None:
    whole = (FIXTURES / "dlink_app").read_bytes()
    for cut in range(0, len(whole), 97):
        try:
            elf = ElfFile.from_bytes(whole[:cut])
        except ElfError:
            continue
        images = read_cuda_images(elf)
        assert isinstance(images, CudaImages)


# Hypothesis: mutate and truncate real fatbin bytes; only errors recorded per container
# (read_cuda_images), FatbinError/ElfError (decompress_image, cubin_header), never anything
# else, never a hang, and bounded memory.

SAMPLES = [("dlink", DLINK), ("lib", LIB), ("sm90a", SM90A)]
FIELDS = [(0x04, "<I"), (0x08, "<Q"), (0x10, "<I"), (0x14, "<I"), (0x1C, "<I"), (0x20, "<I"), (0x24, "<I"),
          (0x28, "<Q"), (0x38, "<Q"), (0x00, "<H")]  # fmt: skip
INTERESTING = st.sampled_from([0, 1, 7, 8, 0x40, 0x3F, 0x41, 0x70, 0xFFFF, 0xFFFFFFFF, 1 << 31, 1 << 40, (1 << 63) + 5])


def exercise(sections: dict[str, bytes]) -> None:
    tracemalloc.start()
    try:
        try:
            elf = ElfFile.from_bytes(make_elf(sections), "<fuzz>")
        except ElfError:
            return
        images = read_cuda_images(elf)
        assert all(isinstance(e, str) and "\n" not in e for e in images.errors)
        for image in images.images[:20]:
            try:
                data = decompress_image(elf, image, max_size=4 << 20)
            except (FatbinError, ElfError) as exc:
                assert str(exc)
                continue
            if image.kind == "sass":
                try:
                    cubin_header(data)
                except FatbinError:
                    pass
            else:
                ptx_header(data)
        _, peak = tracemalloc.get_traced_memory()
        assert peak < 64 << 20
    finally:
        tracemalloc.stop()


FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.timeout(300)
@FUZZ
@given(
    sample=st.sampled_from(SAMPLES),
    flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=12),
    cut=st.one_of(st.none(), st.integers(0, 1 << 20)),
)
def test_fuzz_random_bytes(sample: tuple[str, dict[str, bytes]], flips: list[tuple[int, int]], cut: int | None) -> None:
    sections = {}
    for name, data in sample[1].items():
        raw = bytearray(data)
        for pos, value in flips:
            raw[pos % len(raw)] = value
        if cut is not None:
            raw = raw[: cut % (len(raw) + 1)]
        sections[name] = bytes(raw)
    exercise(sections)


@pytest.mark.timeout(300)
@FUZZ
@given(
    sample=st.sampled_from(SAMPLES),
    edits=st.lists(
        st.tuples(st.integers(0, 50), st.sampled_from(FIELDS), st.one_of(INTERESTING, st.integers(0, (1 << 64) - 1))),
        min_size=1,
        max_size=4,
    ),
    container_edit=st.one_of(st.none(), st.tuples(st.sampled_from([(4, "<H"), (6, "<H"), (8, "<Q")]), INTERESTING)),
)
def test_fuzz_header_fields(
    sample: tuple[str, dict[str, bytes]], edits: list, container_edit: tuple | None
) -> None:
    sections = {}
    for name, data in sample[1].items():
        raw = bytearray(data)
        entries = entry_offsets(data)
        for which, (offset, fmt), value in edits:
            at = entries[which % len(entries)] + offset
            struct.pack_into(fmt, raw, at, value % (1 << (8 * struct.calcsize(fmt))))
        if container_edit is not None:
            (offset, fmt), value = container_edit
            struct.pack_into(fmt, raw, offset, value % (1 << (8 * struct.calcsize(fmt))))
        sections[name] = bytes(raw)
    exercise(sections)


@pytest.mark.timeout(300)
@settings(max_examples=150, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=8))
def test_fuzz_whole_file(flips: list[tuple[int, int]]) -> None:
    """Damage anywhere in a real file, ELF headers included: ElfError at most, from ElfFile."""
    raw = bytearray((FIXTURES / "dlink_app").read_bytes())
    for pos, value in flips:
        raw[pos % len(raw)] = value
    try:
        elf = ElfFile.from_bytes(bytes(raw))
    except ElfError:
        return
    images = read_cuda_images(elf)
    for image in images.images:
        try:
            decompress_image(elf, image, max_size=4 << 20)
        except (FatbinError, ElfError):
            pass


def test_listing_reads_headers_only() -> None:
    """A fatbin whose payloads are unreadable garbage still lists in full."""
    data = bytearray(DLINK["__nv_relfatbin"])
    for p in entry_offsets(bytes(data)):
        ehs, psz = struct.unpack_from("<IQ", data, p + 4)
        data[p + ehs : p + ehs + psz] = b"\xff" * psz
    _, images = images_of({"__nv_relfatbin": bytes(data)})
    assert len(images.images) == 6 and images.errors == ()


def test_image_count_is_bounded() -> None:
    """A crafted section of minimal entries stops at the per-file limit instead of running on."""
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, 0, 0, 0, 8, 1, 80, 0, 0, 0x11, 0, 0)
    count = 100_001
    section = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 64 * count) + entry * count
    _, images = images_of({".nv_fatbin": section})
    assert len(images.images) == 100_000
    assert "more than 100,000 images" in images.errors[-1]
