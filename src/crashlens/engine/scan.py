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


# Below this many characters, searching each pattern with `regex` is faster than compiling
# (or loading) a hyperscan database.
HYPERSCAN_FROM = 0  # the database is cached on disk: even small logs scan faster with it


class LineScanner:
    def __init__(self, patterns: Sequence) -> None:
        """patterns: compiled `regex` patterns or engine.rules.LazyRegex (compiled on first use)."""
        self.patterns = list(patterns)
        self._multiline: dict[int, re.Pattern[str]] = {}
        self.fallback: list[int] = list(range(len(self.patterns)))
        self.db = None
        self._compiled = False
        self.engine = "regex"

    def _prepare(self) -> None:
        self._compiled = True
        if _hs is not None and self.patterns:
            self.db, self.fallback = _cached_compile(self.patterns)
            if self.db is not None:
                self.engine = "hyperscan"

    def scan(self, texts: Sequence[str]) -> dict[int, set[int]]:
        """pattern index -> indices of the texts (lines) it may match (confirmed by the caller)."""
        hits: dict[int, set[int]] = {}
        if not texts:
            return hits
        blob = "\n".join(texts)
        if len(blob) >= HYPERSCAN_FROM and not self._compiled:
            self._prepare()
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
        todo = self.fallback if self.db is not None else range(len(self.patterns))
        if todo:
            starts, pos = [], 0
            for t in texts:
                starts.append(pos)
                pos += len(t) + 1
            for pid in todo:
                ml = self._multiline.get(pid)
                if ml is None:
                    p = self.patterns[pid]
                    ml = self._multiline[pid] = re.compile(p.pattern, p.flags | re.MULTILINE)
                for m in ml.finditer(blob):
                    first = bisect_right(starts, m.start()) - 1
                    last = bisect_right(starts, max(m.end() - 1, m.start())) - 1
                    hits.setdefault(pid, set()).update(range(first, last + 1))
        return hits


# Expressions are the `regex` patterns rewritten by text.select.translate into byte patterns
# that match at least every line the original matches (case folding, Unicode classes and
# look-arounds widened); hyperscan then prefilters, and the exact pattern confirms.
_FLAGS = 0 if _hs is None else (_hs.HS_FLAG_PREFILTER | _hs.HS_FLAG_MULTILINE | _hs.HS_FLAG_ALLOWEMPTY)


def _expression(p: re.Pattern[str]) -> bytes | None:
    from ..text.select import translate

    try:
        return translate(p.pattern).encode("ascii")
    except Exception:  # noqa: BLE001 - untranslatable: the pattern is searched with regex instead
        return None


def _cached_compile(patterns: Sequence[re.Pattern[str]]):
    """Compile once per pattern set; the database is kept in the user cache directory."""
    from ..hscache import cached_databases

    def build():
        db, bad = _compile(patterns)
        return {"bad": bad}, [db]

    meta, (db,) = cached_databases("lines", "\0".join(p.pattern for p in patterns), build)
    return db, list(meta["bad"])


def _compile(patterns: Sequence[re.Pattern[str]]):
    """One database of every translatable pattern; the others (and any hyperscan refuses) are
    returned as `bad`, to be searched with regex."""
    assert _hs is not None
    exprs = {i: _expression(p) for i, p in enumerate(patterns)}
    good = [i for i, e in exprs.items() if e is not None]
    bad = [i for i, e in exprs.items() if e is None]

    def build(ids: list[int]):
        db = _hs.Database()
        db.compile(expressions=[exprs[i] for i in ids], ids=ids, elements=len(ids), flags=[_FLAGS] * len(ids))
        return db

    try:
        return (build(good) if good else None), bad
    except Exception:  # noqa: BLE001 - find the ones hyperscan refuses
        pass
    ok = []
    for i in good:
        try:
            build([i])
            ok.append(i)
        except Exception:  # noqa: BLE001
            bad.append(i)
    return (build(ok) if ok else None), sorted(bad)
