"""CUDA fatbins inside ELF files: which GPU images (SASS, PTX, LTO-IR) a library carries.

`read_cuda_images(elf)` walks every fatbin container in every `.nv_fatbin` and
`__nv_relfatbin` section and lists each image from its 64-byte (or longer) entry header alone:
no payload is read or decompressed, so listing a 500 MB libtorch_cuda.so reads a few thousand
headers (with pread, so that the pages around them do not count in this process's RSS).
Images are listed in the order `cuobjdump -all --list-elf --list-ptx` prints them, and
`cuobjdump_listing()` reproduces its lines exactly (checked on libtorch_cuda.so, libnccl,
libcublasLt and cuDNN). `decompress_image(elf, image)` returns one image's bytes on request (LZ4
block or zstd, with limits against decompression bombs); `cubin_header(data)` and
`ptx_header(text)` decode what is inside.

Layouts (the project's FACTS.md §1 and §2, and fatbins built with nvcc 13.0
and listed with cuobjdump 13.5):

  container header, 16 bytes:  u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 fat_size
  entry header, >= 64 bytes:   u16 kind, u16 0x0101, u32 header_size, u64 payload_size,
                               u32 compressed_size, u32 options_offset, u16 minor, u16 major,
                               u32 arch, u32 identifier_offset, u32 identifier_size, u64 flags,
                               u64 reserved, u64 uncompressed_size

Kinds: 1 PTX, 2 ELF cubin ("sass"), 4 old cubin, 8 LTO-IR (nvcc `code=lto_90`; seen with
CUDA 13.0). Flags: 0x1 64-bit, 0x2 debug, 0x4/0x8 CUDA/OpenCL producer, 0x10/0x20/0x40
Linux/Mac/Windows host, 0x2000 LZ4, 0x8000 zstd, 0x100000 'a' target, 0x200000 'f' target.

Robustness: every size and offset is checked against its container and section, and every
step moves forward by at least a header, so the walk always ends. Damage is recorded as a
one-line error naming the section, container index and file offset, never raised:

- a container that runs past its section, or has an implausible header, ends the walk of that
  section (the next section is walked);
- an entry that runs past its container, or has an implausible header size, ends that
  container; the walk resumes at the next container, where the container's size says;
- images read before the damage are kept.
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass

from ..errors import CrashlensError
from .elf import ElfError, ElfFile

__all__ = [
    "FatbinError",
    "CudaImage",
    "FatbinContainer",
    "CudaImages",
    "CubinHeader",
    "PtxHeader",
    "read_cuda_images",
    "decompress_image",
    "cubin_header",
    "ptx_header",
    "cuobjdump_listing",
    "FATBIN_SECTIONS",
]

FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
FATBIN_MAGIC = 0xBA55ED50
EM_CUDA = 190

KIND_NAMES = {1: "ptx", 2: "sass", 4: "oldcubin", 8: "lto"}

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_PRODUCER_CUDA = 0x4
FLAG_PRODUCER_OPENCL = 0x8
FLAG_HOST_LINUX = 0x10
FLAG_HOST_MAC = 0x20
FLAG_HOST_WINDOWS = 0x40
FLAG_COMPRESS_LEGACY = 0x1000
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # 'a' target (sm_90a)
FLAG_FAMILY_SPECIFIC = 0x200000  # 'f' target (sm_100f)

# Plausibility limits for headers. Real entry headers are 0x40..0x78 bytes.
_MAX_CONTAINER_HEADER = 0x100
_MAX_ENTRY_HEADER = 0x1000
_MAX_IDENTIFIER = 4096
# Zero bytes between containers are skipped up to this many; more is trailing padding.
_MAX_ZERO_GAP = 4096
_READ_BLOCK = 4096
# Per file. Real libraries have a few thousand (libcublasLt.so.13: 2,782 containers, 5,737
# images); a crafted file of minimal headers could otherwise make millions.
_MAX_IMAGES = 100_000
_MAX_CONTAINERS = 100_000

# Decompression limits (decompress_image): the largest image and the largest ratio of
# uncompressed to compressed size that are believed. LZ4 cannot exceed ~255:1 at all.
MAX_IMAGE_SIZE = 1 << 30
MAX_RATIO = 1024
_LZ4_MAX_RATIO = 256

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")


class FatbinError(CrashlensError):
    help = "The CUDA fatbin data is damaged, truncated or of a kind crashlens does not know."


# ------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class CudaImage:
    """One GPU image of a fatbin, as its entry header describes it."""

    kind: str  # "sass" (ELF cubin), "ptx", "lto" (LTO-IR), "oldcubin", or "kind<N>"
    arch: str  # "sm_90", "sm_90a", "sm_100f" (SASS); "compute_90", "compute_100f" (PTX); "lto_90"
    sm: int  # the SM number: 75, 90, 100, 121
    variant: str  # "" | "a" (arch-specific) | "f" (family-specific)
    section: str  # ".nv_fatbin" or "__nv_relfatbin"
    container: int  # index of the container within its section (from 0)
    index: int  # index of the image within its container (from 0)
    offset: int  # file offset of the entry header
    header_size: int
    payload_offset: int  # file offset of the payload
    compression: str  # "none" | "lz4" | "zstd" | "unknown" (legacy flag 0x1000 alone)
    stored_size: int  # payload bytes as stored in the file (padded)
    compressed_size: int  # bytes of compressed data (0 when not compressed)
    uncompressed_size: int  # size of the image once decompressed
    identifier: str  # object name, "" when the entry has none
    code_version: tuple[int, int]  # (major, minor): PTX ISA version for PTX, (1, 8) for cubins
    ptx_version: str | None  # "9.0" for PTX, None otherwise
    flags: int  # the raw 64-bit flags
    is_64bit: bool
    debug: bool
    producer: str  # "cuda" | "opencl" | ""
    host: str  # "linux" | "mac" | "windows" | ""

    @property
    def compute_capability(self) -> tuple[int, int]:
        """(major, minor) of the target: sm_90 -> (9, 0), sm_121 -> (12, 1)."""
        return divmod(self.sm, 10)

    @property
    def listed_arch(self) -> str | None:
        """The arch as `cuobjdump --list-elf/--list-ptx` spells it in file names.

        cuobjdump reads a cubin's arch from the cubin itself, where 'a' is recorded and 'f'
        is not, so sm_100f SASS is listed as sm_100; PTX is listed as sm_XX with both
        variants. Other kinds are not listed (None).
        """
        if self.kind == "sass":
            return f"sm_{self.sm}a" if self.variant == "a" else f"sm_{self.sm}"
        if self.kind == "ptx":
            return f"sm_{self.sm}{self.variant}"
        return None


@dataclass(frozen=True)
class FatbinContainer:
    section: str
    index: int  # within its section
    offset: int  # file offset of the container header
    size: int  # header + fat_size, as the header claims
    version: int
    image_count: int  # how many images were read from it
    error: str | None  # what was wrong with it (its images up to the damage are kept)


@dataclass(frozen=True)
class CudaImages:
    path: str
    images: tuple[CudaImage, ...]
    containers: tuple[FatbinContainer, ...]
    errors: tuple[str, ...]  # one line each: where and what

    @property
    def sass(self) -> tuple[CudaImage, ...]:
        return tuple(i for i in self.images if i.kind == "sass")

    @property
    def ptx(self) -> tuple[CudaImage, ...]:
        return tuple(i for i in self.images if i.kind == "ptx")

    @property
    def archs(self) -> tuple[str, ...]:
        """Distinct arch strings, in order of first appearance."""
        return tuple(dict.fromkeys(i.arch for i in self.images))

    def __len__(self) -> int:
        return len(self.images)

    def __bool__(self) -> bool:
        return bool(self.images)


# ---------------------------------------------------------------------------- the walk


def _compression(flags: int) -> str:
    if flags & FLAG_ZSTD:
        return "zstd"
    if flags & FLAG_LZ4:
        return "lz4"
    if flags & FLAG_COMPRESS_LEGACY:
        return "unknown"
    return "none"


_PREFIX = {"sass": "sm", "ptx": "compute", "lto": "lto"}


_IMAGE_FIELDS = tuple(CudaImage.__dataclass_fields__)


@functools.lru_cache(maxsize=4096)
def _describe(kind_n: int, arch: int, flags: int, major: int, minor: int) -> dict:
    """The fields of an image that follow from its kind, arch, flags and version, as a dict of
    every field in declaration order (the per-image ones None). Cached: a library has
    thousands of images but a few dozen distinct combinations."""
    kind = KIND_NAMES.get(kind_n, f"kind{kind_n}")
    if flags & FLAG_ARCH_SPECIFIC:
        variant = "a"
    elif flags & FLAG_FAMILY_SPECIFIC:
        variant = "f"
    else:
        variant = ""
    if flags & FLAG_PRODUCER_CUDA:
        producer = "cuda"
    elif flags & FLAG_PRODUCER_OPENCL:
        producer = "opencl"
    else:
        producer = ""
    if flags & FLAG_HOST_LINUX:
        host = "linux"
    elif flags & FLAG_HOST_MAC:
        host = "mac"
    elif flags & FLAG_HOST_WINDOWS:
        host = "windows"
    else:
        host = ""
    known = dict.fromkeys(_IMAGE_FIELDS)
    known.update(
        kind=kind,
        arch=f"{_PREFIX.get(kind, 'sm')}_{arch}{variant}",
        sm=arch,
        variant=variant,
        compression=_compression(flags),
        code_version=(major, minor),
        ptx_version=f"{major}.{minor}" if kind_n == 1 else None,
        flags=flags,
        is_64bit=bool(flags & FLAG_64BIT),
        debug=bool(flags & FLAG_DEBUG),
        producer=producer,
        host=host,
    )
    return known


_new_object = object.__new__


def _image(section: str, ci: int, ii: int, at: int, fields: tuple, identifier: str) -> CudaImage:
    (kind_n, _magic, ehs, psz, csz, _opt, minor, major, arch, _io, _il, flags, _res, usz) = fields
    known = _describe(kind_n, arch, flags, major, minor)
    # Built without the frozen dataclass's __init__ (22 object.__setattr__ calls per image;
    # this is 3x faster): the same fields in the same order, the instance as immutable as any.
    image = _new_object(CudaImage)
    d = image.__dict__
    d.update(known)
    d["section"] = section
    d["container"] = ci
    d["index"] = ii
    d["offset"] = at
    d["header_size"] = ehs
    d["payload_offset"] = at + ehs
    d["stored_size"] = psz
    if known["compression"] == "none":
        d["compressed_size"] = 0
        d["uncompressed_size"] = usz or psz
    else:
        d["compressed_size"] = csz
        d["uncompressed_size"] = usz
    d["identifier"] = identifier
    return image


class _Where:
    """ "SECTION container N at 0xOFFSET", formatted only when an error needs it."""

    __slots__ = ("index", "offset", "section")

    def __init__(self, section: str, index: int, offset: int) -> None:
        self.section, self.index, self.offset = section, index, offset

    def __format__(self, spec: str) -> str:
        return f"{self.section} container {self.index} at {self.offset:#x}"


def _walk_section(
    elf: ElfFile, section: str, base: int, n: int,
    images: list[CudaImage], containers: list[FatbinContainer], errors: list[str],
) -> None:
    """Walk the containers of one section (file bytes base..base+n, already bounds-checked).

    Headers are read with pread, never through the mapping (see ElfFile.pread). Every read
    lies inside the section; every step moves forward by at least a header's size, so the
    loops end.
    """

    def rd(off: int, size: int) -> bytes:
        return elf.pread(base + off, size, section)

    # Headers are read in 4 KiB blocks: a container header and its first entry header come
    # in one read, and so do the next entry headers when payloads are small (libcublasLt.so.13:
    # 2,299 reads instead of 8,519).
    block = b""
    block_at = 0

    def header(off: int, size: int) -> bytes:
        nonlocal block, block_at
        if not (block_at <= off and off + size <= block_at + len(block)):
            block_at = off
            block = rd(off, min(max(size, _READ_BLOCK), n - off))
        return block[off - block_at : off - block_at + size]

    def zeros(start: int, end: int) -> bool:  # the first 4 KiB of start..end are zero
        return not any(rd(start, min(end - start, _MAX_ZERO_GAP)))

    off = 0
    ci = 0
    unpack_container = _CONTAINER.unpack_from
    unpack_entry = _ENTRY.unpack_from
    while off < n:
        where = _Where(section, ci, base + off)
        if len(containers) >= _MAX_CONTAINERS or len(images) >= _MAX_IMAGES:
            errors.append(f"{where}: more than {_MAX_CONTAINERS:,} containers or {_MAX_IMAGES:,} images; stopped")
            return
        if n - off < _CONTAINER.size:
            if not zeros(off, n):
                errors.append(f"{where}: {n - off} trailing bytes are too short for a fatbin header")
            return
        magic, version, hsize, fat_size = unpack_container(header(off, _CONTAINER.size))
        if magic != FATBIN_MAGIC:
            if magic == 0:  # zero padding between containers, or at the end
                gap = rd(off, min(n - off, _MAX_ZERO_GAP))
                stripped = gap.lstrip(b"\0")
                if not stripped:  # padding up to the end, or a long run of zeros: stop here
                    return
                nxt = off + (len(gap) - len(stripped)) // 8 * 8
                if n - nxt >= 4 and int.from_bytes(rd(nxt, 4), "little") == FATBIN_MAGIC:
                    off = nxt
                    continue
                errors.append(f"{section} at {base + nxt:#x}: no fatbin header after zero padding")
                return
            errors.append(f"{where}: no fatbin header (magic {magic:#010x})")
            return
        end = off + hsize + fat_size
        if hsize < _CONTAINER.size or hsize > _MAX_CONTAINER_HEADER:
            errors.append(f"{where}: implausible header size {hsize}")
            containers.append(FatbinContainer(section, ci, base + off, hsize + fat_size, version, 0, "bad header size"))
            return
        error: str | None = None
        stop_section = False
        if end > n:
            error = f"container size {hsize + fat_size:#x} runs past the end of the section ({n - off:#x} bytes left)"
            stop_section = True
        limit = min(end, n)
        p = off + hsize
        ii = 0
        while p < limit:
            if limit - p < _ENTRY.size:
                if not zeros(p, limit):
                    error = error or f"image {ii} at {base + p:#x}: {limit - p} bytes are too short for an entry header"
                break
            if len(images) >= _MAX_IMAGES:
                error = error or f"more than {_MAX_IMAGES:,} images in the file; stopped"
                stop_section = True
                break
            head = header(p, _ENTRY.size)
            fields = unpack_entry(head)
            ehs, psz = fields[2], fields[3]
            if not any(head) and zeros(p, limit):
                break  # zero padding at the end of the container
            if ehs < _ENTRY.size or ehs > _MAX_ENTRY_HEADER:
                error = error or f"image {ii} at {base + p:#x}: implausible entry header size {ehs:#x}"
                break
            nxt = p + ehs + psz
            if nxt > limit:
                what = "container" if limit == end else "section"
                error = error or (
                    f"image {ii} at {base + p:#x}: size {ehs:#x}+{psz:#x} runs past the {what} "
                    f"({limit - p:#x} bytes left)"
                )
                break
            identifier = ""
            id_off, id_len = fields[9], fields[10]
            if id_off and id_len:
                if id_len > _MAX_IDENTIFIER or p + id_off + id_len > nxt:
                    errors.append(
                        f"{where}: image {ii} at {base + p:#x}: identifier {id_off:#x}+{id_len:#x} "
                        f"lies outside the entry"
                    )
                else:
                    raw = rd(p + id_off, id_len)
                    identifier = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
            images.append(_image(section, ci, ii, base + p, fields, identifier))
            ii += 1
            p = nxt
        if error:
            errors.append(f"{where}: {error}")
        containers.append(FatbinContainer(section, ci, base + off, hsize + fat_size, version, ii, error))
        if stop_section:
            return
        off = end
        ci += 1


def read_cuda_images(elf: ElfFile) -> CudaImages:
    """Every image of every fatbin container of `elf`, from headers alone.

    Order: `.nv_fatbin` sections, then `__nv_relfatbin` sections (as cuobjdump -all lists
    them); within a section, containers and images in file order.
    """
    images: list[CudaImage] = []
    containers: list[FatbinContainer] = []
    errors: list[str] = []
    try:
        sections = elf.sections
    except ElfError as exc:
        return CudaImages(elf.path, (), (), (str(exc),))
    # cuobjdump -all lists the executable fatbins (.nv_fatbin) first, then the relocatable
    # ones; crashlens keeps that order (libnccl.so.2 has __nv_relfatbin before .nv_fatbin).
    ordered = [s for name in FATBIN_SECTIONS for s in sections if s.name == name]
    for s in ordered:
        if not s.has_data or s.size == 0:
            continue
        if s.offset < 0 or s.offset + s.size > elf.size:
            errors.append(f"{s.name}: section ({s.offset:#x}+{s.size:#x}) runs past the end of the file ({elf.size:#x} bytes)")
            continue
        try:
            _walk_section(elf, s.name, s.offset, s.size, images, containers, errors)
        except ElfError as exc:  # a failed read; the bounds were checked above
            errors.append(f"{s.name}: {exc}")
    return CudaImages(elf.path, tuple(images), tuple(containers), tuple(errors))


def cuobjdump_listing(images: CudaImages | tuple[CudaImage, ...], path: str | None = None) -> list[str]:
    """The lines `cuobjdump -all --list-elf --list-ptx PATH` prints for these images.

    "ELF file    1: libtorch_cuda.1.sm_75.cubin", "PTX file    1: libfoo.1.sm_90.ptx": ELF and
    PTX images are numbered separately, in file order; the name is the file's name without
    its last extension. LTO-IR and other kinds are not listed by cuobjdump.
    """
    if isinstance(images, CudaImages):
        path = path if path is not None else images.path
        images = images.images
    stem = os.path.splitext(os.path.basename(path or ""))[0]
    out: list[str] = []
    n_elf = n_ptx = 0
    for img in images:
        if img.kind == "sass":
            n_elf += 1
            out.append(f"ELF file {n_elf:4d}: {stem}.{n_elf}.{img.listed_arch}.cubin")
        elif img.kind == "ptx":
            n_ptx += 1
            out.append(f"PTX file {n_ptx:4d}: {stem}.{n_ptx}.{img.listed_arch}.ptx")
    return out


# ------------------------------------------------------------------------- decompression


def decompress_image(
    elf: ElfFile, image: CudaImage, *, max_size: int = MAX_IMAGE_SIZE, max_ratio: int = MAX_RATIO
) -> bytes:
    """The image's bytes, decompressed. Raises FatbinError (or ElfError) with a one-line reason.

    Refuses images whose declared uncompressed size is over `max_size`, or more than
    `max_ratio` times their compressed size, before decompressing anything.
    """
    where = f"{image.section} container {image.container} image {image.index} ({image.arch})"
    if image.compression == "none":
        return bytes(elf.read(image.payload_offset, image.stored_size, f"{where} payload"))
    if image.compression not in ("lz4", "zstd"):
        raise FatbinError(f"{where}: compression flag {image.flags:#x} is not LZ4 or zstd")
    csz, usz = image.compressed_size, image.uncompressed_size
    if csz <= 0 or csz > image.stored_size:
        raise FatbinError(f"{where}: compressed size {csz:#x} does not fit the stored payload ({image.stored_size:#x})")
    if usz <= 0:
        raise FatbinError(f"{where}: uncompressed size is 0")
    if usz > max_size:
        raise FatbinError(f"{where}: uncompressed size {usz:,} bytes is over the limit of {max_size:,} (decompression bomb?)")
    ratio_limit = min(max_ratio, _LZ4_MAX_RATIO) if image.compression == "lz4" else max_ratio
    if usz > csz * ratio_limit:
        raise FatbinError(
            f"{where}: {csz:,} bytes claim to expand to {usz:,} (over {ratio_limit}:1; decompression bomb?)"
        )
    raw = bytes(elf.read(image.payload_offset, csz, f"{where} payload"))
    if image.compression == "lz4":
        import lz4.block

        try:
            out = lz4.block.decompress(raw, uncompressed_size=usz)
        except (lz4.block.LZ4BlockError, ValueError, OverflowError) as exc:
            raise FatbinError(f"{where}: LZ4 data is corrupt ({exc})") from None
    else:
        import zstandard

        try:
            declared = zstandard.frame_content_size(raw)
        except zstandard.ZstdError as exc:
            raise FatbinError(f"{where}: not a zstd frame ({exc})") from None
        if declared > usz:  # -1 when the frame does not say
            raise FatbinError(f"{where}: zstd frame declares {declared:,} bytes, the entry {usz:,}")
        try:
            out = zstandard.ZstdDecompressor().decompress(raw, max_output_size=usz)
        except zstandard.ZstdError as exc:
            raise FatbinError(f"{where}: zstd data is corrupt ({exc})") from None
    if len(out) != usz:
        raise FatbinError(f"{where}: decompressed to {len(out):,} bytes, the entry says {usz:,}")
    return out


# ----------------------------------------------------------------------------- cubin header


@dataclass(frozen=True)
class CubinHeader:
    abi: str  # "v1" (OSABI 0x33, ABI version 7) or "v2" (OSABI 0x41, ABI version 8; all SMs from CUDA 13)
    osabi: int
    abi_version: int
    elf_type: int
    elf_version: int  # 121 etc. in old cubins, 1 in CUDA 13 ones
    e_flags: int
    sm: int  # 90
    virtual_sm: int | None  # old ABI only (bits 16-23); None when 0 or new ABI
    accelerated: bool  # an 'a' target: old-ABI flag 0x800, new-ABI 0x8, or .nv.compat attribute 9 = 1
    address_64: bool | None  # old ABI flag 0x400; None for the new ABI (no known bit)
    arch: str  # "sm_90a"; 'f' is never visible in a cubin

    @property
    def virtual_arch(self) -> str | None:
        return f"compute_{self.virtual_sm}" if self.virtual_sm else None


def _nv_compat_accelerated(data: bytes) -> bool | None:
    """Attribute 9 of the cubin's `.nv.compat` records (1 for 'a' targets); None if absent."""
    try:
        elf = ElfFile.from_bytes(data, "<cubin>")
        sec = elf.section(".nv.compat")
        if sec is None:
            return None
        raw = bytes(elf.section_data(sec))
    except ElfError:
        return None
    p = 0
    # Records: u8 format, u8 attribute, then a 2-byte value (formats 1-3) or a u16 size and
    # that many bytes (format 4), as in .nv.info.
    for _ in range(1024):
        if p + 4 > len(raw):
            break
        fmt, attr = raw[p], raw[p + 1]
        if fmt == 4:
            size = int.from_bytes(raw[p + 2 : p + 4], "little")
            p += 4 + size
            continue
        if fmt not in (1, 2, 3):
            break
        if attr == 9:
            return raw[p + 2] == 1
        p += 4
    return None


def cubin_header(data: bytes | memoryview) -> CubinHeader:
    """Decode a cubin's ELF header (EM_CUDA). Raises FatbinError if it is not a cubin.

    With the whole cubin (not just its first 64 bytes), an 'a' target is also recognised
    from the `.nv.compat` section, which is where CUDA 13 records it.
    """
    data = bytes(data)
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise FatbinError("not an ELF image (cubin)")
    if data[4] != 2 or data[5] != 1:
        raise FatbinError(f"cubin is not 64-bit little-endian (class {data[4]}, data {data[5]})")
    osabi, abi_version = data[7], data[8]
    e_type, machine, e_version = struct.unpack_from("<HHI", data, 16)
    (e_flags,) = struct.unpack_from("<I", data, 48)
    if machine != EM_CUDA:
        raise FatbinError(f"ELF machine {machine} is not EM_CUDA ({EM_CUDA})")
    new_abi = abi_version == 8 or osabi == 0x41
    if new_abi:
        sm = (e_flags >> 8) & 0xFF
        virtual_sm = None
        accelerated = bool(e_flags & 0x8)
        address_64: bool | None = None
    else:
        sm = e_flags & 0xFF
        virtual_sm = ((e_flags >> 16) & 0xFF) or None
        accelerated = bool(e_flags & 0x800)
        address_64 = bool(e_flags & 0x400)
    if not accelerated and len(data) > 64:
        accelerated = bool(_nv_compat_accelerated(data))
    return CubinHeader(
        abi="v2" if new_abi else "v1",
        osabi=osabi,
        abi_version=abi_version,
        elf_type=e_type,
        elf_version=e_version,
        e_flags=e_flags,
        sm=sm,
        virtual_sm=virtual_sm,
        accelerated=accelerated,
        address_64=address_64,
        arch=f"sm_{sm}{'a' if accelerated else ''}",
    )


# ------------------------------------------------------------------------------- PTX header


@dataclass(frozen=True)
class PtxHeader:
    version: str | None  # PTX ISA version, "9.0"
    target: tuple[str, ...]  # the .target operands: ("sm_90a",), ("sm_80", "debug")
    address_size: int | None  # 32 or 64

    @property
    def arch(self) -> str | None:
        """The first target that names an architecture ("sm_90a")."""
        for t in self.target:
            if t.startswith(("sm_", "compute_")):
                return t
        return None


def _strip_comments(text: str) -> str:
    out = []
    i, n = 0, len(text)
    while i < n:
        j = text.find("/", i)
        if j < 0 or j + 1 >= n:
            out.append(text[i:])
            break
        nxt = text[j + 1]
        if nxt == "/":
            out.append(text[i:j])
            k = text.find("\n", j)
            i = n if k < 0 else k
        elif nxt == "*":
            out.append(text[i:j] + " ")
            k = text.find("*/", j + 2)
            i = n if k < 0 else k + 2
        else:
            out.append(text[i : j + 1])
            i = j + 1
    return "".join(out)


def ptx_header(text: str | bytes) -> PtxHeader:
    """`.version`, `.target` and `.address_size` of a PTX module (read from its first 64 KiB)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text[:65536]).split(b"\0", 1)[0].decode("utf-8", "replace")
    else:
        text = text[:65536]
    version: str | None = None
    target: tuple[str, ...] = ()
    address_size: int | None = None
    for line in _strip_comments(text).splitlines():
        words = line.strip().split(None, 1)
        if not words:
            continue
        key = words[0]
        rest = words[1].strip() if len(words) > 1 else ""
        if key == ".version" and version is None:
            version = rest.split()[0] if rest else None
        elif key == ".target" and not target:
            target = tuple(t.strip() for t in rest.split(",") if t.strip())
        elif key == ".address_size" and address_size is None:
            try:
                address_size = int(rest.split()[0])
            except (ValueError, IndexError):
                pass
        elif key.startswith(".") and key not in (".version", ".target", ".address_size") and version and target:
            break  # past the module header
    return PtxHeader(version, target, address_size)
