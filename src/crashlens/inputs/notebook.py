"""A Jupyter notebook's outputs as a log: what its cells printed (streams, results) and the
tracebacks of the cells that raised, in cell order, with a line before each cell's output that
names the cell. The code of the cells is not read (it is source code, not evidence).

    notebook_log(data) -> (text, cells) | None     None when the bytes are not a notebook

Bounded by the caller's read limit; a notebook that is not valid JSON or has no cells is None.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["notebook_log", "MAX_NOTEBOOK_BYTES"]

MAX_NOTEBOOK_BYTES = 64 << 20   # a notebook above this is not parsed (its outputs would be images)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value) if value is not None else ""


def notebook_log(data: bytes) -> tuple[str, int] | None:
    """(the outputs as text, the number of cells that printed anything), or None."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        return None
    try:
        doc = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):   # not JSON, or nested deeper than the parser goes
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        return None
    out: list[str] = []
    printed = 0
    for n, cell in enumerate(doc["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        parts: list[str] = []
        for o in cell.get("outputs") or ():
            if not isinstance(o, dict):
                continue
            kind = o.get("output_type")
            if kind == "stream":
                parts.append(_text(o.get("text")))
            elif kind == "error":
                tb = o.get("traceback") or []
                parts.append("\n".join(_text(t) for t in tb) if tb else f"{o.get('ename')}: {o.get('evalue')}")
            elif kind in ("execute_result", "display_data"):
                plain = (o.get("data") or {}).get("text/plain")
                if plain:
                    parts.append(_text(plain))
        body = "".join(p if p.endswith("\n") else p + "\n" for p in parts if p)
        if body:
            printed += 1
            out.append(f"[notebook cell {n}, execution {cell.get('execution_count')}]\n{body}")
    return "".join(out), printed
