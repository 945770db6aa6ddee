"""Can this GPU run this library's CUDA code? SASS and PTX images against a device.

`compatible(images, gpu, driver=None) -> Verdict`. Rules (the project's FACTS.md §1.4:
NVIDIA CUDA and Blackwell compatibility guides, PTX ISA docs):

  SASS sm_XY     runs on compute capability X.Z with Z >= Y (same major only)
  SASS sm_XYa    runs on X.Y only ('a' code does not carry forward)
  SASS sm_XYf    runs within its family: X.Z with Z >= Y. Family exception: 10.1 (Thor under
                 CUDA 12.x, renamed 11.0 in CUDA 13) is a family of its own.
  PTX compute_XY is JIT-compiled for any device >= X.Y, 'a' PTX only for X.Y, 'f' PTX only
                 within the family, and only by a driver that knows the PTX ISA version
                 (data/cuda_driver.yaml); otherwise CUDA_ERROR_UNSUPPORTED_PTX_VERSION.

Only the loadable fatbins count: `.nv_fatbin` images when the file has any. An `-rdc` object
has only `__nv_relfatbin` (relocatable code that a device link turns into a loadable fatbin);
its images are judged as if linked, and the reason says so. LTO-IR images are never loaded
by the driver and are ignored.

`gpu` may be "sm_90", "sm_90a", "compute_90", "90", "9.0", "10.3" or a product name ("H100",
"RTX 4090", "Jetson Orin"; see data/gpus.yaml). `driver` may be a driver version
("535.104.05", "580"), the CUDA version the driver supports ("12.4", as nvidia-smi prints it)
or cudaDriverGetVersion's number (12040).
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .fatbin import CudaImage, CudaImages

__all__ = ["Verdict", "compatible", "parse_gpu", "ptx_isa_requirement", "sass_runs_on", "ptx_jits_on"]

# Devices that form a family of their own ('f' code of neighbours does not run there).
_OWN_FAMILY = frozenset({(10, 1)})


@dataclass(frozen=True)
class Verdict:
    compatible: bool | None  # None: cannot tell (unknown GPU, no images, PTX with unknown driver)
    reason: str
    runnable: list[CudaImage] = field(default_factory=list)  # SASS that runs natively
    jit: list[CudaImage] = field(default_factory=list)  # PTX the driver can JIT-compile
    device: str | None = None  # the device as "sm_90" (None for an unknown GPU)
    # Fatbin containers (section, index) with no image for the device although others have
    # one: each container is one compiled module, so its kernels alone would fail with
    # "no kernel image is available" (often deliberate: arch-specific kernels).
    uncovered: list[tuple[str, int]] = field(default_factory=list)


# --------------------------------------------------------------------------- device parsing


def parse_gpu(gpu: str | float) -> tuple[int, int] | None:
    """(major, minor) compute capability of "sm_90", "90", "9.0", "10.3", "H100"...; None if unknown."""
    text = str(gpu).strip()
    m = re.fullmatch(r"(?:sm_|compute_|lto_)?(\d{2,3})[af]?", text, re.IGNORECASE)
    if m:
        return divmod(int(m[1]), 10)
    m = re.fullmatch(r"(\d{1,2})\.(\d)", text)
    if m:
        return int(m[1]), int(m[2])
    from ..gpus import gpu_compute_capability  # regex and the YAML table: only for a GPU name

    cc = gpu_compute_capability(text)
    if cc:
        major, _, minor = cc.partition(".")
        return int(major), int(minor or 0)
    return None


def _sm(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


# ------------------------------------------------------------------------------ the rules


def _in_family(target: tuple[int, int], device: tuple[int, int]) -> bool:
    if target == device:
        return True
    if target in _OWN_FAMILY or device in _OWN_FAMILY:
        return False
    return target[0] == device[0] and device[1] >= target[1]


def sass_runs_on(image: CudaImage, device: tuple[int, int]) -> bool:
    target = image.compute_capability
    if image.variant == "a":
        return target == device
    if image.variant == "f":
        return _in_family(target, device)
    return target[0] == device[0] and device[1] >= target[1]


def ptx_jits_on(image: CudaImage, device: tuple[int, int]) -> bool:
    """Whether the PTX's target allows this device (the driver version is a separate question)."""
    target = image.compute_capability
    if image.variant == "a":
        return target == device
    if image.variant == "f":
        return _in_family(target, device)
    return device >= target


# ------------------------------------------------------------------------- driver versions


def _vtuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


@functools.cache
def _tables() -> tuple[dict[str, tuple[str, str | None]], list[tuple[tuple[int, ...], str]]]:
    import yaml

    text = (importlib.resources.files("crashlens") / "data" / "cuda_driver.yaml").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    isa = {str(k): (str(v["cuda"]), None if v.get("driver") is None else str(v["driver"])) for k, v in data["ptx_isa"].items()}
    drivers = sorted(((_vtuple(str(d)), str(c)) for c, d in data["cuda_driver"].items()), reverse=True)
    return isa, drivers


def ptx_isa_requirement(ptx_version: str) -> tuple[str, str | None] | None:
    """(CUDA version, minimum Linux driver) that first loads this PTX ISA version; None if unknown."""
    return _tables()[0].get(ptx_version)


def _driver_cuda(driver: str | int) -> tuple[tuple[int, int], bool] | None:
    """The newest CUDA version a driver supports, from any of the accepted spellings, and
    whether that is only a lower bound (a driver newer than the newest one in the table)."""
    text = str(driver).strip()
    if re.fullmatch(r"\d{4,5}", text):  # cudaDriverGetVersion: 1000*major + 10*minor
        n = int(text)
        return (n // 1000, n % 1000 // 10), False
    parts = _vtuple(text)
    if not parts:
        return None
    if parts[0] < 100:  # "12.4": already a CUDA version
        return (parts[0], parts[1] if len(parts) > 1 else 0), False
    table = _tables()[1]
    for ga, cuda in table:  # a driver number: the newest CUDA whose GA driver it reaches
        if parts >= (ga[: len(parts)] if len(parts) < len(ga) else ga):
            major, minor = cuda.split(".")
            return (int(major), int(minor)), (ga, cuda) == table[0] and parts[0] > ga[0]
    return None


def _driver_supports(driver: str | int, ptx_version: str) -> bool | None:
    """Whether the driver loads PTX of this ISA version; None when crashlens cannot tell."""
    found = _driver_cuda(driver)
    if found is None:
        return None
    have, lower_bound = found
    need = ptx_isa_requirement(ptx_version)
    if need is not None:
        cuda = _vtuple(need[0])[:2]
    else:
        isa = _vtuple(ptx_version)
        known = sorted(_tables()[0], key=_vtuple)
        if not isa:
            return None
        if isa < _vtuple(known[0]):  # older than anything in the table
            return True
        if not isa > _vtuple(known[-1]):
            return None
        # Newer than the table, so newer than the newest CUDA it names.
        cuda = _vtuple(_tables()[0][known[-1]][0])[:2]
        if have <= cuda:
            return None if lower_bound else False
        return None
    if have >= cuda:
        return True
    return None if lower_bound else False


def _isa_text(ptx_version: str) -> str:
    need = ptx_isa_requirement(ptx_version)
    if need is None:
        return f"PTX ISA {ptx_version} (newer than crashlens's table)"
    cuda, drv = need
    return f"PTX ISA {ptx_version} (CUDA {cuda}" + (f", Linux driver >= {drv})" if drv else ")")


# ------------------------------------------------------------------------------ the verdict


def _arch_key(arch: str) -> tuple[int, str]:
    m = re.search(r"\d+", arch)
    return (int(m[0]) if m else 0, arch)


def _names(images: Iterable[CudaImage]) -> str:
    return ", ".join(sorted({i.arch for i in images}, key=_arch_key))


def compatible(images: CudaImages | Iterable[CudaImage], gpu: str | float, driver: str | int | None = None) -> Verdict:
    """Whether `gpu` can run this code: natively (SASS) or through the driver's PTX JIT."""
    all_images = list(images.images if isinstance(images, CudaImages) else images)
    device = parse_gpu(gpu)
    if device is None:
        return Verdict(None, f"unknown GPU {gpu!r}: give a compute capability (9.0), an arch (sm_90) or a known product name")
    dev = _sm(device)
    dev_cc = f"{device[0]}.{device[1]}"
    loadable = [i for i in all_images if i.section == ".nv_fatbin"]
    note = ""
    if not loadable:
        loadable = list(all_images)
        if loadable:
            note = " (relocatable device code only: this is what a device link would load)"
    sass = [i for i in loadable if i.kind == "sass"]
    ptx = [i for i in loadable if i.kind == "ptx"]
    if not sass and not ptx:
        return Verdict(None, "no CUDA SASS or PTX images found", device=dev)

    runnable = [i for i in sass if sass_runs_on(i, device)]
    candidates = [i for i in ptx if ptx_jits_on(i, device)]
    # The driver JIT-compiles the newest PTX the device allows; any one is enough.
    candidates.sort(key=lambda i: (i.compute_capability, _vtuple(i.ptx_version or "0")), reverse=True)
    if driver is not None:
        usable = [i for i in candidates if _driver_supports(driver, i.ptx_version or "") is not False]
    else:
        usable = candidates
    has = f"has {_names(sass)}" if sass else "has none"
    if runnable:
        exact = [i for i in runnable if i.compute_capability == device]
        which = _names(exact or runnable)
        covered = {(i.section, i.container) for i in runnable} | {(i.section, i.container) for i in usable}
        modules = list(dict.fromkeys((i.section, i.container) for i in sass + ptx))
        uncovered = [m for m in modules if m not in covered]
        gaps = ""
        if uncovered:
            first = uncovered[0]
            gaps = (
                f"; {len(uncovered)} of {len(modules)} fatbins have no image for {dev}, e.g. {first[0]} container "
                f"{first[1]} ({_names(i for i in sass + ptx if (i.section, i.container) == first)}): normal for "
                f"arch-specific kernels, but launching one of theirs would fail with 'no kernel image is available'"
            )
        return Verdict(True, f"{dev} ({dev_cc}) runs the {which} SASS natively{gaps}{note}", runnable, usable, dev, uncovered)

    # Why the SASS that is there does not run, where a reader might expect it to.
    why = []
    for i in sass:
        cc = i.compute_capability
        if device < cc:
            continue
        if i.variant == "a":
            why.append(f"{i.arch} runs only on {cc[0]}.{cc[1]}")
        elif i.variant == "f" and not _in_family(cc, device):
            why.append(f"{i.arch} runs only on {cc[0]}.x from {cc[0]}.{cc[1]}")
    why_text = f"; {', '.join(sorted(set(why), key=_arch_key))}" if why else ""
    no_sass = f"no SASS for {dev} ({has}{why_text})"

    if not candidates:
        ptx_has = f"; PTX present: {_names(ptx)}" if ptx else ""
        return Verdict(
            False,
            f"{no_sass} and no PTX <= compute_{device[0]}{device[1]}{ptx_has}; CUDA reports 'no kernel image "
            f"is available for execution on the device' (CUDA_ERROR_NO_BINARY_FOR_GPU){note}",
            [], [], dev,
        )
    versions = sorted({i.ptx_version or "?" for i in candidates}, key=_vtuple)
    lowest = versions[0]
    names = _names(candidates)
    if driver is None:
        return Verdict(
            None,
            f"{no_sass}; the {names} PTX can be JIT-compiled if the driver supports {_isa_text(lowest)}{note}",
            [], candidates, dev,
        )
    ok = [i for i in candidates if _driver_supports(driver, i.ptx_version or "") is True]
    if ok:
        return Verdict(
            True,
            f"{no_sass}; driver {driver} JIT-compiles the {_names(ok)} PTX, which needs {_isa_text(ok[0].ptx_version or '?')}{note}",
            [], ok, dev,
        )
    if usable:
        return Verdict(
            None,
            f"{no_sass}; the {names} PTX needs {_isa_text(lowest)} and crashlens cannot tell whether "
            f"driver {driver} supports it{note}",
            [], usable, dev,
        )
    return Verdict(
        False,
        f"{no_sass}; the {names} PTX needs {_isa_text(lowest)}, newer than driver {driver}; CUDA reports "
        f"'the provided PTX was compiled with an unsupported toolchain' (CUDA_ERROR_UNSUPPORTED_PTX_VERSION){note}",
        [], [], dev,
    )
