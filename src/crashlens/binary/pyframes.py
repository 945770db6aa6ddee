"""Python frames of a Python process's core, through pystack (an optional extra: `pip install
crashlens[python]`). pystack reads the interpreter's thread states from the core with the
interpreter's symbols; when it is missing or cannot read this core, the caller falls back to
a faulthandler dump in the logs."""

from __future__ import annotations

import os
from typing import Any

from ..model import Frame
from ..pathkinds import frame_kind


def python_frames(core_path: str, executable: str, tid: int | None = None) -> tuple[list[Frame] | None, str]:
    """(frames outermost first, or None; a one-line note about how they were found or why not)."""
    try:
        from pystack.engine import get_process_threads_for_core
    except ImportError:
        return None, "Python frames from the core need pystack (pip install 'crashlens[python]')"
    if not os.path.isfile(executable):
        return None, f"Python frames: the interpreter {executable} is not on this machine (pass --sysroot/--lib-path)"
    try:
        threads = list(get_process_threads_for_core(core_path, executable))
    except Exception as exc:  # noqa: BLE001 - pystack raises its own error types; report, don't fail
        return None, f"Python frames: pystack could not read the core: {type(exc).__name__}: {str(exc)[:160]}"
    if not threads:
        return None, "Python frames: pystack found no Python thread in the core"
    chosen: Any = next((t for t in threads if tid is not None and t.tid == tid), None) or \
        next((t for t in threads if getattr(t, "holds_the_gil", False)), None) or threads[0]
    frames: list[Frame] = []
    f = chosen.first_frame
    while f is not None and len(frames) < 512:
        if not getattr(f, "is_shim", False):
            code = f.code
            frames.append(Frame(frame_kind(code.filename), code.scope, code.filename, code.location.lineno))
        f = f.next
    return frames, f"Python frames of thread {chosen.tid} read from the core with pystack"
