"""Find which lines each pattern matches, in one pass over all lines where possible.

With hyperscan (x86-64) every pattern is compiled in prefilter mode into one database and
the joined lines are scanned once; each candidate (pattern, line) is then confirmed with the
exact `regex` pattern, which also yields the captures. Without hyperscan, or for a pattern
hyperscan refuses, each pattern is searched over the joined text with `regex` itself.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

import regex as re

try:  # optional accelerator
    import hyperscan as _hs
except ImportError:  # pragma: no cover - platform without a wheel
    _hs = None


class LineScanner:
    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.patterns = list(patterns)
        self.multiline = [re.compile(p.pattern, p.flags | re.MULTILINE) for p in self.patterns]
        self.fallback: list[int] = []
        self.db = None
        if _hs is not None and self.patterns:
            self.db, self.fallback = _compile(self.patterns)
        else:
            self.fallback = list(range(len(self.patterns)))

    @property
    def engine(self) -> str:
        return "hyperscan" if self.db is not None else "regex"

    def scan(self, texts: Sequence[str]) -> dict[int, set[int]]:
        """pattern index -> indices of the texts (lines) it may match (confirmed by the caller)."""
        hits: dict[int, set[int]] = {}
        if not texts:
            return hits
        blob = "\n".join(texts)
        if self.db is not None:
            data = blob.encode("utf-8", "surrogatepass")
            starts, pos = [], 0
            for t in texts:
                starts.append(pos)
                pos += len(t.encode("utf-8", "surrogatepass")) + 1

            def on_match(pid: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
                # `to` is the end offset: the match ends on the line that holds byte to-1
                hits.setdefault(pid, set()).add(bisect_right(starts, max(to - 1, 0)) - 1)

            self.db.scan(data, match_event_handler=on_match)
        if self.fallback:
            starts, pos = [], 0
            for t in texts:
                starts.append(pos)
                pos += len(t) + 1
            for pid in self.fallback:
                for m in self.multiline[pid].finditer(blob):
                    first = bisect_right(starts, m.start()) - 1
                    last = bisect_right(starts, max(m.end() - 1, m.start())) - 1
                    hits.setdefault(pid, set()).update(range(first, last + 1))
        return hits


def _compile(patterns: Sequence[re.Pattern[str]]):
    assert _hs is not None
    good: list[int] = []
    bad: list[int] = []
    flags_base = _hs.HS_FLAG_PREFILTER | _hs.HS_FLAG_MULTILINE | _hs.HS_FLAG_ALLOWEMPTY
    for i, p in enumerate(patterns):
        flags = flags_base | (_hs.HS_FLAG_CASELESS if p.flags & re.IGNORECASE else 0)
        if not p.pattern.isascii():
            flags |= _hs.HS_FLAG_UTF8
        try:
            db = _hs.Database()
            db.compile(expressions=[p.pattern.encode()], ids=[0], elements=1, flags=[flags])
            good.append(i)
        except Exception:
            bad.append(i)
    if not good:
        return None, bad
    db = _hs.Database()
    flags = []
    for i in good:
        p = patterns[i]
        f = flags_base | (_hs.HS_FLAG_CASELESS if p.flags & re.IGNORECASE else 0)
        if not p.pattern.isascii():
            f |= _hs.HS_FLAG_UTF8
        flags.append(f)
    # ids are the original pattern indices
    db.compile(expressions=[patterns[i].pattern.encode() for i in good], ids=good, elements=len(good), flags=flags)
    return db, bad
