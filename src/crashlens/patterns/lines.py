"""Which lines each of many patterns may match, in one pass over all lines where possible.

Rule evaluation (engine.match) uses this for the line patterns of the rule base.  With
hyperscan every translatable pattern (patterns.translate) is compiled in prefilter mode into
one database, cached on disk, and the joined lines are scanned once; each candidate
(pattern, line) is then confirmed by the caller with the exact `regex` pattern, which also
yields the captures.  Without hyperscan, or for a pattern it cannot take, the pattern is
searched over the joined text with `regex` itself (MULTILINE): a match reports every line it
spans.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Sequence

import regex as re

from . import hsdb
from .translate import translate

# ALLOWEMPTY: a pattern that can match the empty string still gets a database entry here
# (the caller confirms every candidate); line selection does not set it.
_FLAGS = 0 if hsdb.hs is None else hsdb.PREFILTER | hsdb.hs.HS_FLAG_ALLOWEMPTY


class LineScanner:
    """The patterns compiled for scanning on first use: one hyperscan database (``db``) for
    those it takes, `regex` for the rest (their indices in ``fallback``)."""

    def __init__(self, patterns: Sequence) -> None:
        """patterns: compiled `regex` patterns, or objects with `.pattern` and `.flags` such as
        engine.rules.LazyRegex (compiled on first use)."""
        self.patterns = list(patterns)
        self._multiline: dict[int, re.Pattern[str]] = {}
        self.fallback: list[int] = list(range(len(self.patterns)))
        self.db = None
        self._compiled = False

    def _prepare(self) -> None:
        self._compiled = True
        if hsdb.available() and self.patterns:
            self.db, self.fallback = _cached_compile(self.patterns)

    def scan(self, texts: Sequence[str]) -> dict[int, set[int]]:
        """pattern index -> indices of the texts (lines) it may match (confirmed by the caller)."""
        hits: dict[int, set[int]] = {}
        if not texts:
            return hits
        blob = "\n".join(texts)
        if not self._compiled:
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


def _expression(p: re.Pattern[str]) -> bytes | None:
    try:
        return translate(p.pattern).encode("ascii")
    except Exception:  # noqa: BLE001 - untranslatable: the pattern is searched with regex instead
        return None


def _cached_compile(patterns: Sequence[Any]) -> tuple[Any, list[int]]:
    """(database, indices of the patterns left to regex), compiled once per pattern set; the
    database is kept in the user cache directory."""
    from .hscache import cached_databases

    def build():
        exprs = {i: _expression(p) for i, p in enumerate(patterns)}
        good = [i for i, e in exprs.items() if e is not None]
        db, refused = hsdb.database_without_culprits([exprs[i] for i in good], good, _FLAGS)
        bad = [i for i, e in exprs.items() if e is None]
        return {"bad": sorted(bad + refused) if refused else bad}, [db]

    meta, (db,) = cached_databases("lines", "\0".join(p.pattern for p in patterns), build)
    return db, list(meta["bad"])
