"""Inspect one ELF file: its ELF facts, the CUDA images of its fatbins and the x86 ISA its code
needs, each judged against a device and a CPU when they are known. `crashlens inspect` prints
these reports; `analyze` turns them into `library` evidence for the rules.

Each part is read on its own: a part that cannot be read is an entry in `errors`, and the
other parts are still reported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Collection

from .binary.cudacompat import Verdict, compatible
from .binary.elf import ElfError, ElfFile
from .binary.elffacts import ElfFacts, read_elf_facts
from .binary.fatbin import CudaImages, read_cuda_images
from .errors import CrashlensError
from .model import Evidence, Loc


@dataclass(frozen=True)
class LibraryReport:
    path: str
    facts: ElfFacts | None
    cuda: CudaImages | None
    verdict: Verdict | None  # against the device, when one is known
    isa: Any | None  # binary.isa.IsaCensus, when the census was asked for
    isa_missing: dict[str, Any] | None  # against the CPU flags, when they are known
    errors: tuple[str, ...] = ()
    gpu: str | None = None


def inspect_file(path: str | os.PathLike[str], *, gpu: str | None = None, driver: str | None = None,
                 cpu_flags: Collection[str] | None = None, isa: bool = True, cuda: bool = True) -> LibraryReport:
    path = os.fspath(path)
    errors: list[str] = []
    try:
        elf = ElfFile(path)
    except ElfError as exc:
        return LibraryReport(path, None, None, None, None, None, (str(exc),), gpu)
    with elf:
        facts = images = verdict = census = missing = None
        try:
            facts = read_elf_facts(elf)
            errors += [f"elf: {e}" for e in facts.errors]
        except CrashlensError as exc:
            errors.append(f"elf: {exc}")
        if cuda:
            try:
                images = read_cuda_images(elf)
                errors += [f"cuda: {e}" for e in images.errors]
                if gpu and images.images:
                    verdict = compatible(images, gpu, driver)
            except CrashlensError as exc:
                errors.append(f"cuda: {exc}")
        if isa and elf.e_machine == 62:
            try:
                from .binary.isa import isa_census, missing_for_cpu

                census = isa_census(elf)
                if cpu_flags is not None:
                    missing = missing_for_cpu(census, set(cpu_flags))
            except CrashlensError as exc:
                errors.append(f"isa: {exc}")
    return LibraryReport(path, facts, images, verdict, census, missing, tuple(errors), gpu)


def _archs(images: CudaImages, kind: str) -> list[str]:
    return sorted({i.listed_arch if kind == "sass" else i.arch for i in images.images if i.kind == kind},
                  key=lambda a: (int("".join(c for c in a if c.isdigit()) or 0), a))


def library_facts(r: LibraryReport) -> dict[str, Any]:
    """Plain facts of a report, for rules (conditions and explanation fields) and JSON."""
    f: dict[str, Any] = {"path": r.path, "library": os.path.basename(r.path)}
    if r.facts is not None:
        f["build_id"] = r.facts.build_id
        f["soname"] = r.facts.soname
        for k, v in r.facts.max_versions.items():
            f[f"max_{k.lower()}"] = v
    if r.cuda is not None and r.cuda.images:
        f["sass"] = " ".join(_archs(r.cuda, "sass"))
        f["ptx"] = " ".join(_archs(r.cuda, "ptx"))
        f["cuda_images"] = len(r.cuda.images)
    if r.verdict is not None:
        f["cuda_compatible"] = r.verdict.compatible
        f["cuda_reason"] = r.verdict.reason
        f["device"] = r.verdict.device or r.gpu
    if r.isa is not None:
        f["isa_level"] = r.isa.level_name
        f["isa_baseline_level"] = r.isa.baseline_level_name
        f["isa_baseline"] = " ".join(r.isa.baseline)
        f["isa_dispatched"] = " ".join(r.isa.dispatched)
    if r.isa_missing is not None:
        f["isa_missing_baseline"] = " ".join(sorted(r.isa_missing.get("baseline") or {}))
        f["isa_missing_dispatched"] = " ".join(sorted(r.isa_missing.get("dispatched") or {}))
        f["cpu_ok"] = bool(r.isa_missing.get("ok", not r.isa_missing.get("baseline")))
    return f


def library_evidence(r: LibraryReport) -> Evidence:
    f = library_facts(r)
    bits = [f["library"]]
    if f.get("sass") or f.get("ptx"):
        bits.append(f"SASS {f.get('sass') or 'none'}; PTX {f.get('ptx') or 'none'}")
    if r.verdict is not None:
        bits.append(r.verdict.reason)
    if f.get("isa_baseline"):
        bits.append(f"CPU baseline {f['isa_baseline']}")
    if f.get("isa_missing_baseline"):
        bits.append(f"this CPU lacks {f['isa_missing_baseline']}")
    return Evidence("library", "; ".join(bits), Loc(r.path), facts=f)


def image_header(path: str | os.PathLike[str], index: int) -> dict[str, Any]:
    """Decompress one CUDA image and decode its header: the cubin's ELF header (EM_CUDA,
    e_flags) or the PTX module's .version/.target."""
    from dataclasses import asdict

    from .binary.fatbin import FatbinError, cubin_header, decompress_image, ptx_header

    with ElfFile(path) as elf:
        images = read_cuda_images(elf).images
        if not 0 <= index < len(images):
            raise FatbinError(f"{path}: no CUDA image {index} (it has {len(images)})")
        image = images[index]
        data = decompress_image(elf, image)
    out: dict[str, Any] = {"path": os.fspath(path), "image": index, "kind": image.kind, "arch": image.arch,
                           "compression": image.compression, "bytes": len(data)}
    if image.kind == "sass":
        out["cubin"] = asdict(cubin_header(data))
    elif image.kind == "ptx":
        out["ptx"] = asdict(ptx_header(data))
    return out
