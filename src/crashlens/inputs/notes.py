"""Notes about many inputs, summarised: a hostile archive (a 42.zip-style nest, a folder of
200k files) must not print one line per member for the same reason.

    summarise_notes(notes, keep=5) -> notes

Notes are "<name>: <reason>". Notes whose reasons are the same (digits aside) are kept for
the first `keep` names; the rest become one line at the end: "… and N more: <reason>".
"""

from __future__ import annotations

import re
from typing import Sequence

_NAME = re.compile(r"^(\S+?): ")
_DIGITS = re.compile(r"\d+")


def summarise_notes(notes: Sequence[str], keep: int = 5) -> list[str]:
    out: list[str] = []
    counts: dict[str, int] = {}
    first_reason: dict[str, str] = {}
    for note in notes:
        m = _NAME.match(note)
        if m is None:
            out.append(note)
            continue
        reason = note[m.end():]
        key = _DIGITS.sub("#", reason)
        n = counts.get(key, 0) + 1
        counts[key] = n
        if n <= keep:
            out.append(note)
            first_reason.setdefault(key, reason)
    for key, n in counts.items():
        if n > keep:
            out.append(f"… and {n - keep:,} more inputs like the above: {first_reason[key]}")
    return out
