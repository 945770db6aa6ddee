"""Inspect one ELF file: its ELF facts, the CUDA images of its fatbins and the x86 ISA its code
needs, each judged against a device and a CPU when they are known. `crashlens inspect` prints
these reports; `analyze` turns them into `library` evidence for the rules.

Each part is read on its own: a part that cannot be read is an entry in `errors`, and the
other parts are still reported.

    inspect_file(path, gpu=..., driver=..., cpu_flags=...) -> LibraryReport   (crashlens inspect)
    inspect_libraries(inputs, items, lines, env, ...) -> (LibraryFacts, evidence, notes)   (analyze)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

from .errors import CrashlensError
from .model import Evidence, EvidenceKind, InputFile, LibraryFacts, Loc

if TYPE_CHECKING:  # the readers are imported when a file is inspected: `analyze` often has none
    from .binary.cudacompat import Verdict
    from .binary.elffacts import ElfFacts
    from .binary.fatbin import CudaImages


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
    from .binary.cudacompat import compatible
    from .binary.elf import ElfError, ElfFile
    from .binary.elffacts import read_elf_facts
    from .binary.fatbin import read_cuda_images

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


def library_summary(r: LibraryReport) -> LibraryFacts:
    """What the analysis keeps of a report (Analysis.libraries, the JSON's libraries[])."""
    cuda = r.cuda is not None and bool(r.cuda.images)
    missing = r.isa_missing
    return LibraryFacts(
        path=r.path,
        build_id=r.facts.build_id if r.facts is not None else None,
        soname=r.facts.soname if r.facts is not None else None,
        max_versions=dict(r.facts.max_versions) if r.facts is not None else {},
        sass=tuple(_archs(r.cuda, "sass")) if cuda else None,
        ptx=tuple(_archs(r.cuda, "ptx")) if cuda else None,
        cuda_images=len(r.cuda.images) if cuda else None,
        cuda_compatible=r.verdict.compatible if r.verdict is not None else None,
        cuda_reason=r.verdict.reason if r.verdict is not None else None,
        device=(r.verdict.device or r.gpu) if r.verdict is not None else None,
        isa_level=r.isa.level_name if r.isa is not None else None,
        isa_baseline_level=r.isa.baseline_level_name if r.isa is not None else None,
        isa_baseline=tuple(r.isa.baseline) if r.isa is not None else None,
        isa_dispatched=tuple(r.isa.dispatched) if r.isa is not None else None,
        isa_missing_baseline=tuple(sorted(missing.get("baseline") or {})) if missing is not None else None,
        isa_missing_dispatched=tuple(sorted(missing.get("dispatched") or {})) if missing is not None else None,
        cpu_ok=bool(missing.get("ok", not missing.get("baseline"))) if missing is not None else None,
        errors=tuple(r.errors),
    )


def _target(arch: str) -> tuple[tuple[int, int], str] | None:
    """((major, minor), variant) of "sm_80", "sm_90a", "compute_100f"; None for other spellings."""
    import re

    m = re.fullmatch(r"(?:sm|compute)_(\d{2,3})([af]?)", arch)
    return (divmod(int(m[1]), 10), m[2]) if m else None


def cuda_runs_on(sass: Sequence[str], ptx: Sequence[str]) -> list[tuple[int, int]] | None:
    """The compute capabilities of known GPUs (data/gpus.yaml, plus the SASS targets themselves)
    that a library's SASS runs on, when it has no PTX: the whole set of GPUs it can run on.
    None when it has PTX (JIT-compiled for any newer GPU: no upper bound) or no SASS.
    SASS sm_XY runs on X.Z with Z >= Y; sm_XYa on X.Y only; sm_XYf within the family
    (binary.cudacompat; FACTS.md 1.4)."""
    from .binary.cudacompat import _in_family
    from .knowledge import data

    if ptx or not sass:
        return None
    targets = [t for t in (_target(a) for a in sass) if t is not None]
    known = {tuple(int(x) for x in str(cc).split(".")) for cc in data("gpus.yaml")}
    known |= {cc for cc, _ in targets}
    out = []
    for dev in sorted(known):
        for cc, variant in targets:
            if (dev == cc if variant == "a" else _in_family(cc, dev) if variant == "f"
                    else cc[0] == dev[0] and dev[1] >= cc[1]):
                out.append(dev)
                break
    return out


def _gpus_text(ccs: Sequence[tuple[int, int]], per_cc: int = 2) -> str:
    """"8.0 (A100, A800), 8.6 (A40, A10)": compute capabilities with example products."""
    from .knowledge import data

    names = {tuple(int(x) for x in str(cc).split(".")): list(v) for cc, v in data("gpus.yaml").items()}
    parts = []
    for cc in ccs:
        shown = names.get(cc, [])[:per_cc]
        parts.append(f"{cc[0]}.{cc[1]}" + (f" ({', '.join(shown)})" if shown else ""))
    return ", ".join(parts)


def rule_facts(lib: LibraryFacts) -> dict[str, Any]:
    """The facts of `library` evidence (EvidenceKind.LIBRARY), for rule conditions and explanation
    fields: arch and extension lists as space-separated strings; a part not read is absent."""
    f: dict[str, Any] = {"path": lib.path, "library": lib.library, "build_id": lib.build_id, "soname": lib.soname}
    for k, v in lib.max_versions.items():
        f[f"max_{k.lower()}"] = v
    if lib.sass is not None:
        f["sass"] = " ".join(lib.sass)
        f["ptx"] = " ".join(lib.ptx or ())
        f["cuda_images"] = lib.cuda_images
        runs_on = cuda_runs_on(lib.sass, lib.ptx or ())
        f["cuda_sass_only"] = runs_on is not None
        if runs_on is not None:
            f["cuda_runs_on"] = (f"compute capability {_gpus_text(runs_on)}" if runs_on
                                 else "no known GPU")
    if lib.cuda_reason is not None:
        f["cuda_compatible"] = lib.cuda_compatible
        f["cuda_reason"] = lib.cuda_reason
        f["device"] = lib.device
    if lib.isa_level is not None:
        f["isa_level"] = lib.isa_level
        f["isa_baseline_level"] = lib.isa_baseline_level
        f["isa_baseline"] = " ".join(lib.isa_baseline or ())
        f["isa_dispatched"] = " ".join(lib.isa_dispatched or ())
    if lib.cpu_ok is not None:
        f["isa_missing_baseline"] = " ".join(lib.isa_missing_baseline or ())
        f["isa_missing_dispatched"] = " ".join(lib.isa_missing_dispatched or ())
        f["cpu_ok"] = lib.cpu_ok
    return f


def library_facts(r: LibraryReport) -> dict[str, Any]:
    """Plain facts of a report, for rules (conditions and explanation fields)."""
    return rule_facts(library_summary(r))


def library_evidence(r: LibraryReport | LibraryFacts, extra: Mapping[str, Any] | None = None) -> Evidence:
    lib = library_summary(r) if isinstance(r, LibraryReport) else r
    f = {**rule_facts(lib), **(extra or {})}
    bits = [f["library"]]
    if f.get("sass") or f.get("ptx"):
        bits.append(f"SASS {f.get('sass') or 'none'}; PTX {f.get('ptx') or 'none'}")
    if lib.cuda_reason is not None:
        bits.append(lib.cuda_reason)
    if f.get("cuda_suspect") and f.get("cuda_runs_on"):
        bits.append(f"no PTX: runs only on {f['cuda_runs_on']}")
    if f.get("isa_baseline"):
        bits.append(f"CPU baseline {f['isa_baseline']}")
    if f.get("isa_missing_baseline"):
        bits.append(f"this CPU lacks {f['isa_missing_baseline']}")
    return Evidence(EvidenceKind.LIBRARY, "; ".join(bits), Loc(r.path), facts=f)


# `inspect --image` holds the image in memory: real cubins and PTX modules are far below this
IMAGE_HEADER_MAX_SIZE = 256 << 20


def image_header(path: str | os.PathLike[str], index: int) -> dict[str, Any]:
    """Decompress one CUDA image and decode its header: the cubin's ELF header (EM_CUDA,
    e_flags) or the PTX module's .version/.target."""
    from dataclasses import asdict

    from .binary.elf import ElfFile
    from .binary.fatbin import FatbinError, cubin_header, decompress_image, ptx_header, read_cuda_images

    with ElfFile(path) as elf:
        images = read_cuda_images(elf).images
        if not 0 <= index < len(images):
            raise FatbinError(f"{path}: no CUDA image {index} (it has {len(images)})")
        image = images[index]
        data = decompress_image(elf, image, max_size=IMAGE_HEADER_MAX_SIZE)
    out: dict[str, Any] = {"path": os.fspath(path), "image": index, "kind": image.kind, "arch": image.arch,
                           "compression": image.compression, "bytes": len(data)}
    if image.kind == "sass":
        out["cubin"] = asdict(cubin_header(data))
    elif image.kind == "ptx":
        out["ptx"] = asdict(ptx_header(data))
    return out


# systemd-coredump / coredumpctl: "Module libfoo.so.1 [from rpm foo-1.2] with build-id 8f3c…"
_MODULE_BUILD_ID = r"\bModule (?P<module>\S+?)(?: from (?:rpm|deb) \S+)? with build-id (?P<build_id>[0-9a-f]{16,})\b"


def logged_build_ids(lines: Sequence[Evidence]) -> dict[str, str]:
    """basename -> build-id of the modules a log lists with their build-ids (coredumpctl's
    "Module libX.so with build-id …"): what a dmesg trap's library is checked against."""
    import regex as re

    pat = re.compile(_MODULE_BUILD_ID)
    out: dict[str, str] = {}
    for e in lines:
        if "build-id" not in e.text:
            continue
        for m in pat.finditer(e.text):
            out.setdefault(os.path.basename(m["module"]), m["build_id"])
    return out


def _sass_only_suspects(libs: Sequence[tuple[Any, LibraryFacts]]) -> dict[str, dict[str, Any]]:
    """When the device is unknown: the libraries whose SASS runs on a bounded set of GPUs (no
    PTX), given ones first, as extra `library` facts naming them all (`cuda_suspects`), for a
    `no kernel image` explanation that names them and says which GPUs they run on."""
    found = []
    for ref, lib in libs:
        runs_on = cuda_runs_on(lib.sass or (), lib.ptx or ()) if lib.sass is not None else None
        if runs_on is None:
            continue
        found.append((ref.evidence is not None, lib, runs_on))
    if not found:
        return {}
    found.sort(key=lambda t: t[0])  # given (no evidence) first, stable
    clauses = []
    for named, lib, runs_on in found:
        how = "named in the logs" if named else "given"
        where = f"compute capability {_gpus_text(runs_on)}" if runs_on else "no known GPU"
        clauses.append(f"the {how} library {lib.library} has SASS for {', '.join(lib.sass or ())} only and no PTX, "
                       f"so it runs only on {where}")
    text = "; ".join(clauses) + (f"; on any other GPU {'its' if len(found) == 1 else 'their'} kernels fail "
                                 f"with this error")
    names = ", ".join(lib.library for _, lib, _ in found)
    return {lib.path: {"cuda_suspect": True, "cuda_suspects": text, "cuda_suspect_names": names}
            for _, lib, _ in found}


def inspect_libraries(inputs: Sequence[InputFile], items: Sequence[Evidence], lines: Sequence[Evidence],
                      env: Mapping[str, Any], *, gpu: str | None = None, cpu_flags: Collection[str] | None = None,
                      lib_paths: Sequence[Path] = (), sysroot: Path | None = None, max_libraries: int = 32
                      ) -> tuple[list[LibraryFacts], list[Evidence], list[str]]:
    """The library stage of `analyze`: find the libraries the evidence involves (given as inputs,
    named by native frames, loader errors, dmesg `in libX.so[…]`), inspect them against the device
    (gpu, else the first the environment names) and the CPU flags, and return their facts,
    `library` evidence (and `crash` evidence for a dmesg SIGILL trap decoded from the file), notes."""
    from .inputs.libraries import LibraryRef, locate, named_libraries

    given = [(i.name, None) for i in inputs if i.kind == "elf" and "!" not in i.name]
    names = given + [(n, e) for n, e in named_libraries([*items, *lines])]
    refs = locate(names, inputs=inputs, lib_paths=lib_paths, sysroot=sysroot)
    if gpu is None:
        for g in env.get("gpus") or []:
            gpu = g.get("sm") or g.get("compute_capability") or g.get("name")
            if gpu:
                break
    flags = set(cpu_flags) if cpu_flags is not None else None
    build_ids = logged_build_ids(lines)
    # the x86 census costs seconds on big libraries: only when the crash is about CPU instructions
    want_isa = any(e.kind in ("dmesg", "outcome", "crash") and (e.facts.get("event") == "invalid-opcode" or e.facts.get("signal") == "SIGILL")
                   for e in items)
    libraries: list[LibraryFacts] = []
    evidence: list[Evidence] = []
    notes: list[str] = []
    seen: set[str] = set()
    missing = [r.name for r in refs if r.path is None and r.evidence is not None and "/" in r.name]
    inspected: list[tuple[LibraryRef, LibraryFacts, bool]] = []
    for ref in refs:
        if ref.path is None:
            continue
        real = os.path.realpath(ref.path)
        if real in seen:
            continue
        seen.add(real)
        if len(libraries) >= max_libraries:
            notes.append(f"more than {max_libraries} libraries involved; the rest were not inspected")
            break
        r = inspect_file(ref.path, gpu=gpu, driver=env.get("driver_version"), cpu_flags=flags, isa=want_isa)
        lib = library_summary(r)
        libraries.append(lib)
        inspected.append((ref, lib, r.facts is not None))
        notes += [f"{ref.path}: {e}" for e in r.errors[:3]]
    suspects = _sass_only_suspects([(ref, lib) for ref, lib, _ in inspected]) if gpu is None else {}
    for ref, lib, readable in inspected:
        if readable:
            evidence.append(library_evidence(lib, suspects.get(lib.path)))
        if ref.evidence is not None and ref.evidence.facts.get("event") == "invalid-opcode":
            from .binary.stage import trap_site

            crash = trap_site(ref.evidence, ref.path, flags, build_id=build_ids.get(os.path.basename(ref.path)))
            if crash is not None:
                evidence.append(crash)
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        notes.append(f"libraries named in the evidence were not found on this machine ({shown}); "
                     "pass --sysroot or --lib-path to inspect them")
    return libraries, evidence, notes
