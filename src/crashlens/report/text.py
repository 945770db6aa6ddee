"""Small formatting helpers shared by the renderers."""

from __future__ import annotations

from typing import Sequence

from ..model import Evidence, Frame


def fmt_evidence(e: Evidence, width: int = 200) -> str:
    text = " ".join(e.text.split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{e.loc}: {text}"


def frame_label(f: Frame) -> str:
    if f.kind == "gpu":
        return f"{f.code or 'GPU kernel'}"
    if f.kind == "native" and not f.file:
        name = f.function or "?"
        return f"{name} ({f.module.rsplit('/', 1)[-1]})" if f.module else name
    where = f.file.rsplit("/", 1)[-1] if f.file else ""
    call = f.code or f.function or "?"
    head = f"{f.function} " if f.function and f.code and f.kind == "user" else ""
    return f"{head}{call} ({where}:{f.line})" if where else call


def code_path_line(frames: Sequence[Frame], limit: int = 8) -> str:
    """outermost user frame … innermost user frame → first library call → failing operation."""
    frames = list(frames)
    users = [i for i, f in enumerate(frames) if f.kind == "user"]
    picked: list[Frame] = []
    if users:
        picked = [frames[i] for i in users][-limit:]
        after = frames[users[-1] + 1:]
        lib = [f for f in after if f.kind == "library"]
        if lib:
            picked.append(lib[0])
        picked += [f for f in after if f.kind in ("native", "gpu")][-2:]
    else:
        picked = frames[-limit:]
    return " → ".join(frame_label(f) for f in picked)
