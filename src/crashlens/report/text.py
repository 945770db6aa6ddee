"""Small formatting helpers shared by the renderers."""

from __future__ import annotations

from typing import Sequence

import regex as re

from ..model import Evidence, Frame


def one_line(text: object, width: int = 160) -> str:
    """Text on one line (runs of white space -> one space), cut to width with an ellipsis."""
    t = " ".join(str(text).split())
    return t if len(t) <= width else t[: width - 1] + "…"


_MD_SPECIAL = re.compile(r"""\\(?=[!-/:-@\[-`{-~])|[*<>]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|^[#+-](?=\s)|^\d+(?=[.)]\s)""",
                         re.M)


def md_text(text: object) -> str:
    """Plain text made safe for Markdown (GitHub): outside `code spans`, the characters that would
    start HTML (`<module>` disappears as an unknown tag), emphasis (`**batch`, `__init__`),
    headings or lists are backslash-escaped; code spans are kept as they are."""
    parts = re.split(r"(`+[^`]*?`+)", str(text))
    def esc(m: re.Match) -> str:
        s = m.group(0)
        return s + "\\" if s[:1].isdigit() else "\\" + s  # `1\. item`, `\<module>`

    return "".join(p if i % 2 else _MD_SPECIAL.sub(esc, p) for i, p in enumerate(parts))


def fmt_evidence(e: Evidence, width: int = 200) -> str:
    return f"{e.loc}: {one_line(e.text, width)}"


_ASSIGN = re.compile(r"^(?:return\s+|await\s+|yield\s+|[\w.\[\], ]+?\s*[-+*/]?=\s*(?!=))")


def call_of(code: str) -> str:
    """The call a source line makes, shortened: `x = F.conv2d(x, w, padding=1)` -> `F.conv2d(...)`."""
    code = _ASSIGN.sub("", code.strip(), count=1)
    m = re.match(r"([\w.]+)\((.*)\)?\s*$", code)
    if m and len(code) > 28:
        return f"{m.group(1)}(...)"
    return code if len(code) <= 60 else code[:59] + "…"


def _where(f: Frame) -> str:
    return f"{f.file.rsplit('/', 1)[-1]}:{f.line}" if f.file else (f.module.rsplit("/", 1)[-1] or "?")


def code_path_line(frames: Sequence[Frame], limit: int = 5) -> str:
    """The seed bug report's style: the innermost user frames, each step written as the call
    the previous frame made and where it landed, then the failing operation:
    `validation_step (lit.py:141) → self.model(...) (net.py:28) → F.conv2d → CUDA error…`."""
    frames = list(frames)
    users = [f for f in frames if f.kind == "user"][-limit:]
    tail = [f for f in frames if f.kind in ("native", "gpu")][-1:]
    if not users:  # no user frames: the innermost library or native frames
        inner = [f for f in frames if f.kind in ("library", "native") and (f.file or f.module)]
        parts = [f"{f.function or '?'} ({_where(f)})" for f in inner][-2 * limit:]
        if tail and tail[0] in inner[-2 * limit:]:
            tail = []
    else:
        parts = [f"{users[0].function or '?'} ({_where(users[0])})"]
        for prev, cur in zip(users, users[1:]):
            parts.append(f"{call_of(prev.code) if prev.code else cur.function} ({_where(cur)})")
        if users[-1].code:
            parts.append(call_of(users[-1].code))
    if tail and (tail[0].kind == "gpu" or not (tail[0].module or tail[0].file)):
        parts.append(tail[0].code or tail[0].function or "?")
    elif tail:
        parts.append(f"{tail[0].function or '?'} ({_where(tail[0])})")
    return " → ".join(parts)
