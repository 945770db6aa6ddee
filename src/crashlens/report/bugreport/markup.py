"""Markdown pieces of a bug report: `file:line` of an evidence dict, fences and inline code that
the text cannot break. Also the Jinja filters of the same names (templates.py)."""

from __future__ import annotations

from typing import Any, Mapping


def where(source: str, line: int | None, end_line: int | None = None) -> str:
    """`source:line` or `source:line-end`; the source alone without a line."""
    if not line:
        return source
    return f"{source}:{line}" + (f"-{end_line}" if end_line and end_line != line else "")


def loc(e: Mapping[str, Any] | None) -> str:
    """`source:line` of an evidence/error/frame dict."""
    if not e:
        return ""
    src = e.get("source") or e.get("file") or e.get("module") or "?"
    return where(str(src), e.get("line"), e.get("end_line"))


def fence(text: Any, lang: str = "") -> str:
    """A fenced code block that the text cannot close early."""
    text = str(text).rstrip("\n")
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def code(text: Any) -> str:
    """Inline code that survives backticks in the text."""
    text = " ".join(str(text).split())
    n = 1
    while "`" * n in text:
        n += 1
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{'`' * n}{pad}{text}{pad}{'`' * n}"
