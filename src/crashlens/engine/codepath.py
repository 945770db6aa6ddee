"""The code path of an analysis: the frames from the job's entry point to the failing operation.

    exception_for(primary, items) -> Evidence | None    the exception the primary error belongs to
    code_path(exc, cause, crash, fault, items) -> frames  outermost -> innermost

The exception is the one whose lines hold the primary error, else the nearest one after it in
the same source, else the last one with frames; when its handler failed (a secondary
exception), the exception it was handling. Its frames end with the failing operation: a `gpu`
frame for a GPU-runtime cause or a CUDA message, else a `native` frame named by the exception
type (unless the stack already ends in native code).

With a core, its native backtrace joins in: alone when the logs gave no frames (after the
Python frames pystack read from the core, below the interpreter's own frames), or, after a
faulthandler dump ("Fatal Python error"), below the dumped Python frames: where the Python call
ended up in native code. The interpreter's frames (eval loop, call machinery, faulthandler)
are left out: they say nothing about the job.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Sequence

import regex as re

from ..model import Cause, CrashReport, Evidence, EvidenceKind, Frame, FrameKind
from .rules import taxonomy

NATIVE_FRAMES = 16  # innermost native frames of a core's backtrace the path can show
BELOW_INTERPRETER = 8  # of those, the ones below the interpreter, after Python frames

_INTERPRETER = re.compile(r"(?:^|/)(?:python[\d.]*|libpython[\d.]*\.so[\d.]*)$")


def _cut(text: str, limit: int = 200) -> str:
    """A message cut for a frame line, marked as cut (redaction recognises a cut token by the mark)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def interpreter_frame(f: Frame) -> bool:
    """A frame of the Python interpreter itself (eval loop, call machinery, faulthandler)."""
    return bool(_INTERPRETER.search(f.module or "")) or f.function.startswith(("_Py", "Py", "faulthandler"))


def exception_for(primary: Evidence | None, items: Sequence[Evidence]) -> Evidence | None:
    excs = [e for e in items if e.kind == "exception"]
    if not excs:
        return None
    owner = None
    if primary is not None:
        for e in excs:
            if e.loc.source == primary.loc.source and e.loc.line <= primary.loc.line <= (e.loc.end_line or e.loc.line):
                owner = e
    if owner is None and primary is not None:
        # the nearest exception after the primary line in the same source (the error surfaced there)
        after = [e for e in excs if e.loc.source == primary.loc.source and e.loc.line >= primary.loc.line]
        owner = after[0] if after else None
    if owner is None:
        framed = [e for e in excs if e.frames and not e.facts.get("secondary")]
        owner = framed[-1] if framed else excs[-1]
    if owner.facts.get("secondary"):
        # the handler failed: walk back to the exception it was handling
        chain = [e for e in excs if e.facts.get("chain") == owner.facts.get("chain")]
        earlier = [e for e in chain if e.facts.get("chain_pos", 0) < owner.facts.get("chain_pos", 0)]
        if earlier:
            owner = earlier[-1]
    return owner


def chain_frames(exc: Evidence, items: Sequence[Evidence]) -> tuple[Frame, ...]:
    """An exception's frames with the calls that led to them: the first exception of a chain
    ("During handling…", "The above exception was the direct cause…") shows only the frames below
    the `try` that caught it, often all library frames; a later exception of the same chain
    shows the job's calls down to that point, which are put in front (up to the frame where the
    first one's traceback starts)."""
    frames = tuple(exc.frames)
    chain = exc.facts.get("chain")
    if not frames or chain is None or any(f.kind == FrameKind.USER for f in frames):
        return frames
    later = [e for e in items if e.kind == "exception" and e.facts.get("chain") == chain
             and int(e.facts.get("chain_pos") or 0) > int(exc.facts.get("chain_pos") or 0) and e.frames]
    for e in reversed(later):
        outer = list(e.frames)
        start = next((i for i, f in enumerate(outer) if (f.file, f.function) == (frames[0].file, frames[0].function)),
                     None)
        if start is None:
            users = [i for i, f in enumerate(outer) if f.kind == FrameKind.USER]
            start = users[-1] + 1 if users else None
        if start and any(f.kind == FrameKind.USER for f in outer[:start]):
            return tuple(outer[:start]) + frames
    return frames


def exception_path(exc: Evidence | None, cause: Cause | None, items: Sequence[Evidence] = ()) -> tuple[Frame, ...]:
    """An exception's frames, outermost -> innermost, ending with the failing operation."""
    if exc is None:
        return ()
    frames = list(chain_frames(exc, items))
    if cause is not None:
        layer = taxonomy().get(cause.category, {}).get("layer", "")
        msg = str(exc.facts.get("headline") or exc.text)
        if layer == "gpu-runtime" or "CUDA" in msg or "cuda" in msg:
            frames.append(Frame(FrameKind.GPU, "CUDA", code=_cut(msg)))
        elif not frames or frames[-1].kind != FrameKind.NATIVE:
            frames.append(Frame(FrameKind.NATIVE, exc.facts.get("type", ""), code=_cut(msg)))
    return tuple(frames)


def _as_path_frame(f: Frame) -> Frame:
    """A core's frame as the code path shows it: where it is, not how it was found."""
    return Frame(FrameKind.NATIVE, f.function, f.file, f.line, "", f.module)


def gpu_fault(items: Sequence[Evidence]) -> Evidence | None:
    """The GPU fault that explains the crash: a GPU core's first, else the first
    compute-sanitizer report of a crashing kind (a hazard report has no category)."""
    faults = [e for e in items if e.kind == EvidenceKind.GPU_FAULT]
    return (next((e for e in faults if e.facts.get("source") == "gpu-core"), None)
            or next((e for e in faults if e.facts.get("category")), None)
            or (faults[0] if faults else None))


def gpu_crash(fault: Evidence | None) -> dict | None:
    """The JSON's `gpu_crash` object of a `gpu-fault` evidence (docs/json-schema.md)."""
    if fault is None:
        return None
    f = {k: v for k, v in fault.facts.items() if k != "module_signature"}
    if f.get("source") == "gpu-core":
        f.setdefault("module_source", None)
    f["evidence"] = {"source": fault.loc.source, "line": fault.loc.line}
    f["device_backtrace"] = [{"function": fr.function, "file": fr.file or None, "line": fr.line, "pc": fr.pc,
                              "offset": fr.module_offset} for fr in fault.frames if fr.kind == FrameKind.GPU]
    f["host_backtrace"] = [{"function": fr.function, "module": fr.module or None, "offset": fr.module_offset}
                           for fr in fault.frames if fr.kind != FrameKind.GPU]
    return f


def _with_gpu(path: tuple[Frame, ...], fault: Evidence | None) -> tuple[Frame, ...]:
    """The code path continued into the kernel: ... the Python line where the error was
    noticed -> the kernel -> its source line (innermost device frame last)."""
    if fault is None:
        return path
    gpu = [fr for fr in fault.frames if fr.kind == FrameKind.GPU]
    if not gpu:
        return path
    kernel = fault.facts.get("kernel") or gpu[-1].function
    frames = list(reversed(gpu))
    if kernel and (frames[0].function != kernel or fault.facts.get("source") == "gpu-core"):
        dims = fault.facts.get("grid_dim"), fault.facts.get("block_dim")
        launch = f"{kernel.split('(')[0]}<<<{dims[0]},{dims[1]}>>>" if all(dims) else "kernel launch"
        frames.insert(0, Frame(FrameKind.GPU, function=kernel, code=launch))
    last = frames[-1]
    if last.line and len(frames) > 1:  # the text shows the innermost frame: kernel -> source line
        src = f"{last.function} ({os.path.basename(last.file)}:{last.line})" if last.file else last.function
        launch = frames[0].code if "<<<" in (frames[0].code or "") else ""
        frames[-1] = replace(last, code=f"{launch} → {src}" if launch else src)
    host = [] if path else [fr for fr in reversed(fault.frames) if fr.kind != FrameKind.GPU]
    return (*path, *host, *frames)


def code_path(exc: Evidence | None, cause: Cause | None, crash: CrashReport | None = None,
              fault: Evidence | None = None, items: Sequence[Evidence] = ()) -> tuple[Frame, ...]:
    """Frames outermost -> innermost, ending with the failing operation (with a GPU fault:
    its kernel and source line). `items`: the other exceptions, for the calls of a chain."""
    return _with_gpu(_code_path(exc, cause, crash, items), fault)


def _code_path(exc: Evidence | None, cause: Cause | None, crash: CrashReport | None = None,
               items: Sequence[Evidence] = ()) -> tuple[Frame, ...]:
    path = exception_path(exc, cause, items)
    if crash is None or crash.backtrace is None or not crash.backtrace.frames:
        return path
    native = [_as_path_frame(f) for f in reversed(crash.backtrace.frames[:NATIVE_FRAMES])]
    py = [Frame(f.kind, f.function, f.file, f.line) for f in crash.python_frames or ()]
    last = max((i for i, f in enumerate(native) if interpreter_frame(f)), default=-1)
    if not path and py:
        return tuple(py + native[last + 1:][-BELOW_INTERPRETER:])
    if not path:
        return tuple(native)
    if exc is not None and exc.facts.get("type") == "Fatal Python error":
        # faulthandler's Python frames (outermost first), then the native frames below the
        # interpreter: where the Python call ended up in native code
        return tuple([f for f in path if f.kind in (FrameKind.USER, FrameKind.LIBRARY)] + native[last + 1:][-BELOW_INTERPRETER:])
    return path
