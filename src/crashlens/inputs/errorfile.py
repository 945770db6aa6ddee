"""A torchelastic error file (the JSON that `@record` writes to TORCHELASTIC_ERROR_FILE) as a
log: the failing process's traceback (`py_callstack`), tagged with the rank its path names
(`…/attempt_0/<local rank>/error.json`) so that it reads as that rank's output.

    elastic_error_log(data, name) -> text | None     None when the bytes are not such a file
"""

from __future__ import annotations

import json
import re

__all__ = ["elastic_error_log", "error_file_time", "MAX_ERROR_FILE_BYTES"]

MAX_ERROR_FILE_BYTES = 16 << 20
_RANK_DIR = re.compile(r"attempt_\d+[/\\](\d+)[/\\][^/\\]+$")


def elastic_error_log(data: bytes, name: str) -> str | None:
    if len(data) > MAX_ERROR_FILE_BYTES:
        return None
    try:
        doc = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):   # not JSON, or nested deeper than the parser goes
        return None
    msg = doc.get("message") if isinstance(doc, dict) else None
    if not isinstance(msg, dict):
        return None
    extra = msg.get("extraInfo") if isinstance(msg.get("extraInfo"), dict) else {}
    stack = extra.get("py_callstack") or ""
    text = str(stack) if stack else str(msg.get("message") or "")
    if not text.strip():
        return None
    when = extra.get("timestamp")
    m = _RANK_DIR.search(name)
    tag = f"[rank{m.group(1)}]: " if m else ""
    head = f"{tag}[torchelastic error file{f', timestamp {when}' if when else ''}]\n"
    return head + "".join(f"{tag}{line}\n" for line in text.rstrip("\n").split("\n"))


def error_file_time(data: bytes) -> float | None:
    """When the failing process wrote its error file (`extraInfo.timestamp`, seconds since the
    epoch), or None."""
    if len(data) > MAX_ERROR_FILE_BYTES:
        return None
    try:
        doc = json.loads(data.decode("utf-8", "replace"))
        extra = doc["message"]["extraInfo"]
        return float(extra["timestamp"])
    except (ValueError, RecursionError, KeyError, TypeError):
        return None
