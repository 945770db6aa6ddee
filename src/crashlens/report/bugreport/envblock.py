"""The environment dumps of the inputs, verbatim: what a form's "Versions" field asks for.

    environment_blocks(analysis) -> str      "" when the logs hold no dump

A dump is a run of `key: value` lines naming environment facts (collect_env.py, `transformers
env`, Lightning's list; data/environment_blocks.yaml says which keys), with the headers, `[pip3]`
lines and short gaps between them, or an nvidia-smi table. Read from the original input lines
(ANSI codes and overdraws cleaned), at most a few dumps of bounded length; redaction is the
caller's (make.py scrubs every field).
"""

from __future__ import annotations

import functools
from typing import Iterable

import regex as re

from ... import knowledge
from ...model import Analysis

_READ = 4 << 20  # bytes of each text input looked at


@functools.cache
def _rules() -> tuple[re.Pattern, re.Pattern, re.Pattern, re.Pattern, int, int, int]:
    d = knowledge.data("environment_blocks.yaml")
    fact = re.compile("|".join(f"(?:{p})" for p in d["fact"]), re.I)
    also = re.compile("|".join(f"(?:{p})" for p in d["also"]))
    return (fact, also, re.compile(d["box"]["start"]), re.compile(d["box"]["marker"]),
            int(d["min_facts"]), int(d["max_lines"]), int(d["max_blocks"]))


_KEY = re.compile(r"^\s*(?:[-*•]\s+)?([`A-Za-z][^:]{0,63}?)\s*:\s+\S")
_NOT_KEY = re.compile(r"(?:Error|Exception|Warning|Traceback)\b|^\S+\.\S+$|\b(?:INFO|WARN|WARNING|ERROR|DEBUG)\b")


def _is_fact(line: str) -> bool:
    m = _KEY.match(line)
    if not m:
        return False
    key = m.group(1).replace("`", "").strip()
    return len(key.split()) <= 8 and not _NOT_KEY.search(key) and bool(_rules()[0].search(key))


def _blocks(lines: list[str]) -> Iterable[list[str]]:
    fact, also, box_start, box_marker, min_facts, max_lines, _ = _rules()
    i, n = 0, len(lines)
    while i < n:
        ln = lines[i]
        if box_start.match(ln) and any(box_marker.search(x) for x in lines[i + 1:i + 4]):
            j = i + 1
            while j < n and lines[j][:1] in ("|", "+") and j - i < max_lines:
                j += 1
            yield lines[i:j]
            i = j
            continue
        if not _is_fact(ln):
            i += 1
            continue
        j, facts, gap = i, 0, 0
        start = i
        while start > 0 and lines[start - 1].strip() and also.match(lines[start - 1]) and \
                lines[start - 1].rstrip().endswith(":"):  # a header right above ("Versions of ...:")
            start -= 1
        while j < n and j - start < max_lines:
            cur = lines[j]
            if not cur.strip():
                gap += 1
                if gap > 1:
                    break
            elif _is_fact(cur):
                facts, gap = facts + 1, 0
            elif also.match(cur) and not cur.lstrip().startswith(("```", "Traceback")):
                gap = 0
            else:
                break
            j += 1
        block = lines[start:j]
        while block and not block[-1].strip():
            block.pop()
        if facts >= min_facts:
            yield block
        i = max(j, i + 1)


def environment_blocks(a: Analysis) -> str:
    from ...text.normalize import clean

    max_blocks = _rules()[6]
    out: list[str] = []
    for inp in a.inputs:
        if inp.kind != "text" or len(out) >= max_blocks:
            continue
        try:
            with inp.open() as f:
                raw = f.read(_READ)
        except OSError:
            continue
        lines = [clean(x) for x in raw.decode("utf-8", "replace").splitlines()]
        for b in _blocks(lines):
            text = "\n".join(x.rstrip() for x in b)
            if text not in out:
                out.append(text)
            if len(out) >= max_blocks:
                break
    return "\n\n".join(out)
