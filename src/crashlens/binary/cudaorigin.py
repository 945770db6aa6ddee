"""Where a GPU core's module came from: which host file's fatbin image it is, and whether its
SASS was built ahead of time (nvcc) or JIT-compiled by the driver from PTX.

    sig = module_signature(cubin)           -> plain dict: arch, size, sha256, kernels (name ->
                                               [size, sha256 of its code]), toolkit (the
                                               `.note.nv.tkinfo` note: tool, version, build, options)
    m = match_module(sig, path, device_sm)  -> ModuleMatch | None: the fatbin image of `path`
                                               the module is
    origin, reason = module_origin(sig, device_sm, match)

What matches, found on the real dumps of fixtures/gpu-cores (crash.cu, `nvcc -O2 -lineinfo
-arch=sm_90`, CUDA 13.0, driver 580) against the same command's executable rebuilt elsewhere:

- The loaded image is never byte-identical to the fatbin's cubin, even unrelocated
  (`.cudbg.elfimg`): the driver grows `.nv.global.init` (89 -> 100 bytes) and rewrites
  `.symtab`; the relocated image (`.cudbg.relfimg`) also differs in `.debug_line`,
  `.debug_frame`, `.nv_debug_line_sass`, `.nv.constant4`; `.nv_debug_ptx_txt` holds the build's
  paths. Identical bytes are still tried first.
- Every `.text.<function>` section (name, size, bytes) is identical in the fatbin's cubin and
  in both images: the match is the set of code sections, each hashed with the instructions its
  `.rel(a).text.*` relocations patch blanked (none in these kernels), plus the toolkit note.
- A module the driver JIT-compiled from the executable's PTX (CUDA_FORCE_PTX_JIT=1, or a
  PTX-only build; fixtures/gpu-cores/jit) has the same code sections as nvcc's sm_90 SASS, byte
  for byte; what differs is the toolkit note: nvcc's ptxas writes `V13.0.88`, `Build
  cuda_13.0.r13.0/…`, `-lineinfo  -arch sm_90 -m 64`; the driver's writes its own version
  (`V13.0.98`), `Build system must define TOOLS_VERSION_EXTENDED` and `-lineinfo  -arch sm_90a`
  (no `-m 64`), and targets the device's 'a' variant (`.nv.compat` attribute 9 = 1, so the
  cubin reads sm_90a where the fatbin holds only sm_90). So a SASS image matches only with the
  same code and the same toolkit note; the same code from another compiler run is not it.

`.note.nv.tkinfo` (note type 2000, owner "NVIDIA Corp"): u32 format (2), u32 0, then four u32
offsets (tool, version, build, options) into the NUL-separated strings that follow (read here;
the layout is not documented by NVIDIA).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any

from .elf import ElfError, ElfFile
from .fatbin import FatbinError, cubin_header, decompress_image, read_cuda_images

TKINFO_TYPE = 2000
SHT_REL, SHT_RELA = 9, 4


def _toolkit(elf: ElfFile) -> dict[str, str] | None:
    sec = elf.section(".note.nv.tkinfo")
    if sec is None:
        return None
    raw = bytes(elf.section_data(sec))
    if len(raw) < 12:
        return None
    namesz, descsz, ntype = struct.unpack_from("<III", raw, 0)
    desc = 12 + ((namesz + 3) & ~3)
    if ntype != TKINFO_TYPE or desc + 24 > len(raw):
        return None
    d = raw[desc: desc + descsz]
    strings = d[24:]
    out = {}
    for key, at in zip(("tool", "version", "build", "options"), struct.unpack_from("<4I", d, 8)):
        if at < len(strings):
            end = strings.find(b"\0", at)
            out[key] = strings[at: end if end >= 0 else len(strings)].decode("utf-8", "replace").strip()
    return out or None


def module_signature(image: bytes) -> dict[str, Any] | None:
    """What identifies a cubin across loading: its arch, its code sections and its toolkit note."""
    try:
        hdr = cubin_header(image)
        elf = ElfFile.from_bytes(bytes(image), "<cubin>")
        sections = elf.sections
        blank: dict[int, set[int]] = {}
        for s in sections:
            if s.type in (SHT_REL, SHT_RELA) and s.info < len(sections) and sections[s.info].name.startswith(".text."):
                ent = s.entsize or (24 if s.type == SHT_RELA else 16)
                raw = bytes(elf.section_data(s))
                blank.setdefault(s.info, set()).update(
                    struct.unpack_from("<Q", raw, k)[0] & ~0xF for k in range(0, len(raw) - ent + 1, ent))
        kernels = {}
        for s in sections:
            if s.name.startswith(".text.") and s.has_data:
                code = bytearray(elf.section_data(s))
                for off in blank.get(s.index, ()):
                    code[off: off + 16] = bytes(len(code[off: off + 16]))
                kernels[s.name[len(".text."):]] = [s.size, hashlib.sha256(code).hexdigest()]
        toolkit = _toolkit(elf)
    except (FatbinError, ElfError, struct.error, ValueError, IndexError):
        return None
    return {"arch": hdr.arch, "sm": hdr.sm, "size": len(image), "sha256": hashlib.sha256(image).hexdigest(),
            "kernels": kernels, "toolkit": toolkit}


@dataclass(frozen=True)
class ModuleMatch:
    path: str
    kind: str  # "sass" (a cubin of the fatbin) or "ptx" (PTX that holds the module's kernels)
    how: str  # "identical" (same bytes), "code" (same code sections and toolkit note), "entries" (PTX)
    image: int  # cuobjdump's number of the image among its kind (ELF file N / PTX file N), from 1
    listed: str  # cuobjdump's name for it: crash_li.2.sm_90.cubin
    arch: str  # the fatbin entry's arch: sm_90, compute_90
    section: str
    container: int
    index: int  # within its container
    same_code_sass: str | None = None  # a SASS image with the module's code but another toolkit note


def _ptx_names(text: bytes) -> set[str]:
    import re

    return {m.decode() for m in re.findall(rb"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", text)}


def match_module(sig: dict[str, Any], path: str, device_sm: int | None = None) -> ModuleMatch | None:
    """The fatbin image of the ELF file at `path` the module of signature `sig` is: a cubin with
    the same bytes, or with the same code sections and toolkit note; failing that, a PTX image
    (for an arch the device can JIT) whose entries and functions name all the module's code."""
    from .fatbin import cuobjdump_listing

    if not sig or not sig.get("kernels"):
        return None
    try:
        with ElfFile(path) as elf:
            images = read_cuda_images(elf).images
            listing = cuobjdump_listing(images, path)
            listed = [x.split(": ", 1)[1] for x in listing]
            numbered = [i for i in images if i.kind in ("sass", "ptx")]
            number: dict[int, tuple[int, str]] = {}
            n = {"sass": 0, "ptx": 0}
            for img, name in zip(numbered, listed):
                n[img.kind] += 1
                number[id(img)] = (n[img.kind], name)
            same_code: str | None = None
            ptx_hit: ModuleMatch | None = None
            for img in images:
                if img.kind == "sass" and img.sm == sig["sm"]:
                    # the loaded image is the cubin give or take a few bytes (28,640 -> 28,648):
                    # skip the images of another size before decompressing them (big libraries)
                    if abs((img.uncompressed_size or img.stored_size) - sig["size"]) > max(4096, sig["size"] // 8):
                        continue
                    try:
                        data = decompress_image(elf, img)
                    except (FatbinError, ElfError):
                        continue
                    no, name = number.get(id(img), (0, ""))
                    how = "identical" if hashlib.sha256(data).hexdigest() == sig["sha256"] else None
                    if how is None:
                        other = module_signature(data)
                        if other and other["kernels"] == sig["kernels"]:
                            if other["toolkit"] == sig["toolkit"]:
                                how = "code"
                            else:
                                same_code = same_code or name
                    if how:
                        return ModuleMatch(path, "sass", how, no, name, img.arch, img.section, img.container, img.index)
                elif (img.kind == "ptx" and ptx_hit is None and (device_sm is None or img.sm <= device_sm)
                      and _driver_jit(sig.get("toolkit")) is not False):  # nvcc's SASS is no JIT of this PTX
                    try:
                        text = decompress_image(elf, img)
                    except (FatbinError, ElfError):
                        continue
                    if set(sig["kernels"]) <= _ptx_names(text):
                        no, name = number.get(id(img), (0, ""))
                        ptx_hit = ModuleMatch(path, "ptx", "entries", no, name, img.arch, img.section, img.container,
                                              img.index)
            if ptx_hit is not None:
                from dataclasses import replace

                return replace(ptx_hit, same_code_sass=same_code)
    except (ElfError, FatbinError, OSError):
        return None
    return None


def _driver_jit(toolkit: dict[str, str] | None) -> bool | None:
    """The toolkit note is the driver's JIT ptxas (True), nvcc's ptxas (False), or unknown."""
    if not toolkit or toolkit.get("tool") != "ptxas":
        return None
    build, options = toolkit.get("build", ""), toolkit.get("options", "").split()
    if build.startswith("Build cuda_") and "-m" in options:
        return False
    if not build.startswith("Build cuda_") and "-m" not in options:
        return True
    return None


def _tk(toolkit: dict[str, str] | None) -> str:
    if not toolkit:
        return "no toolkit note"
    ver = toolkit.get("version", "").rsplit(", ", 1)[-1]
    return f"{toolkit.get('tool', '?')} {ver} `{' '.join(toolkit.get('options', '').split())}`"


def module_origin(sig: dict[str, Any] | None, device_sm: int | None,
                  match: ModuleMatch | None = None) -> tuple[str, str]:
    """("sass" | "jit-from-ptx" | "unknown", the reason in one sentence)."""
    if not sig:
        return "unknown", "the module's image is not in the dump or is not a readable cubin"
    dev = f"sm_{device_sm}" if device_sm else "unknown"
    jit = _driver_jit(sig.get("toolkit"))
    tk = _tk(sig.get("toolkit"))
    if match is not None and match.kind == "sass":
        how = "the same bytes" if match.how == "identical" else "the same code sections and toolkit note"
        return "sass", (f"the module is {match.listed} ({match.arch} SASS) of {match.path}, {how}, built ahead of "
                        f"time ({tk}); the device is {dev}")
    if match is not None and match.kind == "ptx":
        extra = (f"; {match.same_code_sass} has the same code but another toolkit note" if match.same_code_sass
                 else "")
        return "jit-from-ptx", (f"no SASS image of {match.path} is the module, its {match.arch} PTX "
                                f"({match.listed}) holds its kernels, and the module's toolkit note is the "
                                f"driver's JIT compiler ({tk}, {sig['arch']}; the device is {dev}){extra}")
    if jit is True:
        return "jit-from-ptx", (f"the module's toolkit note is the driver's JIT compiler ({tk}, {sig['arch']}), "
                                f"not nvcc's (`Build cuda_…`, `-m 64`); the device is {dev}; no host file given "
                                f"holds its PTX")
    if jit is False:
        return "sass", (f"the module was built by nvcc's ptxas ({tk}) for {sig['arch']}, the device is {dev}; "
                        f"no host file given holds it, to confirm")
    return "unknown", f"the module ({sig['arch']}, {tk}) matches no host file given and its toolkit note says neither"
