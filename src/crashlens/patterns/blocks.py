"""Which lines of a block of raw lines any of a set of anchor patterns may match (line selection).

The contract is *per line*: a line is an anchor line when ``regex.search(p, line)`` finds a
match for some anchor ``p`` on the UTF-8 decoded line.  :class:`AnchorMatcher` may report more
lines than that (text.select only widens its windows), never fewer.  Its
``scan(mv, start, end)`` takes a buffer region of complete lines (the last one ending with
``\\n``) and returns the sorted offsets of the ``\\n`` of candidate lines (an offset may
repeat); ``long_line()`` gives a feeder for one line too long to hold, fed in pieces.

With hyperscan each anchor is translated (patterns.translate), gets the suffix ``[^\\n]*$``
and is compiled with ``HS_FLAG_MULTILINE | HS_FLAG_PREFILTER``: hyperscan then reports a
pattern at most once per line, at the line's newline, so the Python callback runs once per
(anchor, matching line) however often the anchor occurs in the line.  An anchor whose
translation holds an end-of-line ``$`` elsewhere is compiled without the suffix and its match
ends are mapped to the end of their line.  A set of 32 anchors or more (the rule base) keeps
its databases in the on-disk cache (patterns.hscache).

Anchors that cannot be translated or that hyperscan refuses even in prefilter mode (the
culprits, found one by one when the set does not compile) run with the ``regex`` module
instead: one combined ``MULTILINE`` search over the decoded region, or line by line for
anchors that could behave differently on a block of lines (``\\A``, ``\\Z``, negative
look-arounds, inline flag changes ...) and for regions that are not valid UTF-8.  Without
hyperscan every anchor takes that path (``engine == "regex"``).
"""

from __future__ import annotations

from typing import Sequence

import regex

from . import hsdb
from .translate import Untranslatable, translate

__all__ = ["AnchorMatcher", "check_anchors"]

_NL = b"\n"


# Anchors that cannot be searched for in a multi-line block without risking a
# missed per-line match: string anchors, negative look-arounds (they may see
# the neighbouring line), flag changes, conditionals, verbs, reverse search.
_BLOCK_UNSAFE = regex.compile(r"\\[AZzGK]|\(\?<?!|\(\?\(|\(\*|\(\?[a-zA-Z0-9^]*[-sr^V]")
_LEADING_FLAGS = regex.compile(r"\(\?([imsx]+)\)")
_INLINE_FLAGS = regex.compile(r"\(\?[a-zA-Z^]")
_NUMBERED_REF = regex.compile(r"\\[1-9]|\\g<?[-+]?\d|\(\?\(\d|\(\?[-+]?\d|\(\?R")


def _scoped(a: str) -> str | None:
    """``a`` wrapped so that it can be one branch of an alternation, or None."""
    if _NUMBERED_REF.search(a):
        return None
    m = _LEADING_FLAGS.match(a)
    if m:
        body = a[m.end():]
        head = f"(?{m.group(1)}:"
    else:
        body, head = a, "(?:"
    if _INLINE_FLAGS.search(body):
        return None
    return head + body + ")"


def _combine(anchors: Sequence[str], flags: int = 0):
    """One compiled alternation of ``anchors``, or None when that is unsafe."""
    parts = [_scoped(a) for a in anchors]
    if not parts or any(p is None for p in parts):
        return None
    try:
        return regex.compile("|".join(parts), flags)  # type: ignore[arg-type]
    except regex.error:
        return None


class _RegexSet:
    """Anchors run with the ``regex`` module on decoded text."""

    OVERLAP = 1 << 20  # context carried between pieces of a line too long to hold

    def __init__(self, anchors: Sequence[str]):
        self.line_pats = [regex.compile(a) for a in anchors]
        self.line_any = (
            self.line_pats[0] if len(self.line_pats) == 1 else _combine(anchors)
        )
        safe = [a for a in anchors if not _BLOCK_UNSAFE.search(a)]
        unsafe = [a for a in anchors if _BLOCK_UNSAFE.search(a)]
        self.unsafe_pats = [regex.compile(a) for a in unsafe]
        self.unsafe_any = _combine(unsafe) if len(unsafe) > 1 else None
        combined = _combine(safe, regex.MULTILINE) if len(safe) > 1 else None
        if combined is not None:
            self.block_pats = [combined]
        else:
            self.block_pats = [regex.compile(a, regex.MULTILINE) for a in safe]

    def line_matches(self, line: str) -> bool:
        if self.line_any is not None:
            return self.line_any.search(line) is not None
        return any(p.search(line) for p in self.line_pats)

    def scan(self, mv: memoryview, start: int, end: int, out: list[int]) -> None:
        try:
            text = str(mv[start:end], "utf-8")
        except UnicodeDecodeError:
            # invalid UTF-8: the block search could see other characters than
            # the per-line decoding does; go line by line
            self._scan_lines(mv, start, end, out, self.line_pats, self.line_any)
            return
        if self.unsafe_pats:
            self._scan_lines(mv, start, end, out, self.unsafe_pats, self.unsafe_any)
        if not self.block_pats:
            return
        ascii_text = text.isascii()
        last = len(text) - 1
        find = text.find
        for pat in self.block_pats:
            search = pat.search
            pos = bpos = cpos = 0  # bpos/cpos: the same place in bytes / chars
            while pos <= last:
                m = search(text, pos)
                if m is None:
                    break
                nl = find("\n", m.start())
                if nl < 0:
                    nl = last
                if ascii_text:
                    out.append(start + nl)
                else:
                    bpos += len(text[cpos:nl].encode("utf-8"))
                    cpos = nl
                    out.append(start + bpos)
                pos = nl + 1

    @staticmethod
    def _scan_lines(mv, start, end, out, pats, any_pat) -> None:
        off = start
        for raw in bytes(mv[start:end]).split(_NL)[:-1]:
            line = raw.decode("utf-8", "replace")
            off += len(raw)
            if any_pat is not None:
                hit = any_pat.search(line) is not None
            else:
                hit = any(p.search(line) for p in pats)
            if hit:
                out.append(off)
            off += 1

    def long_line(self) -> "_RegexLong":
        return _RegexLong(self)


class _RegexLong:
    """Matches one line fed in pieces, each searched with the previous
    OVERLAP bytes in front of it (a match longer than that which straddles two
    pieces of a line over 16 MiB can be missed)."""

    def __init__(self, rs: _RegexSet):
        self.rs = rs
        self.carry = b""
        self.hit = False

    def feed(self, piece) -> None:
        if self.hit:
            return
        data = self.carry + bytes(piece)
        if self.rs.line_matches(data.decode("utf-8", "replace")):
            self.hit = True
        else:
            self.carry = data[-_RegexSet.OVERLAP:]

    def finish(self) -> bool:
        return self.hit


class _HyperscanSet:
    """Anchor translations in hyperscan databases.

    ``eol`` expressions end in ``[^\\n]*$`` and report the offset of the
    line's newline (once per line); ``plain`` ones (where hyperscan refused
    that suffix, e.g. an anchor ending in ``$``) report match ends that are
    mapped to the end of their line.
    """

    def __init__(self, eol: list[bytes], plain: list[bytes], block_dbs: list | None = None):
        self.groups = [(exprs, suffix) for exprs, suffix in ((eol, True), (plain, False)) if exprs]
        if block_dbs is not None:  # loaded from the on-disk cache, one database per group
            self.block = [([db], s) for db, (_e, s) in zip(block_dbs, self.groups)]
        else:  # errors go to the caller
            self.block = [([hsdb.database(e, hsdb.PREFILTER)], s) for e, s in self.groups]
        self._stream = None
        self._hits: list[int] = []
        append = self._hits.append

        def on_match(_id, _from, to, _flags, _ctx):
            append(to)

        self._on_match = on_match  # keep a reference: the extension does not

    def scan(self, mv: memoryview, start: int, end: int, out: list[int]) -> None:
        hits = self._hits
        region = mv[start:end]
        last = end - start - 1  # the region's final '\n'
        try:
            for dbs, suffix in self.block:
                for db in dbs:
                    db.scan(region, match_event_handler=self._on_match)
                if not hits:
                    continue
                if suffix:  # already the offset of a '\n' (or the region end)
                    out.extend(start + (h if h <= last else last) for h in hits)
                else:
                    hits.sort()
                    nl = -1
                    for h in hits:
                        if h > nl:
                            nl = _find_nl(mv, start, end, h)
                            out.append(start + nl)
                hits.clear()
        finally:
            hits.clear()
            region.release()

    def long_line(self) -> "_HyperscanLong":
        if self._stream is None:
            self._stream = [db for e, _s in self.groups for db in _stream_databases(e)]
        return _HyperscanLong(self._stream)


def _stream_databases(exprs: list[bytes]) -> list:
    """Stream-mode databases of expressions that all compiled in block mode."""
    hs = hsdb.hs
    try:
        return [hsdb.database(exprs, hsdb.PREFILTER, mode=hs.HS_MODE_STREAM)]
    except hs.error:  # pragma: no cover - they all compiled in block mode
        return [hsdb.database([e], hsdb.PREFILTER, mode=hs.HS_MODE_STREAM) for e in exprs]


def _find_nl(mv: memoryview, start: int, end: int, rel: int) -> int:
    """Offset (relative to start) of the first '\\n' at or after start+rel."""
    ba = mv.obj
    i = ba.find(_NL, start + rel, end)
    return (end - 1 if i < 0 else i) - start


class _HyperscanLong:
    def __init__(self, dbs):
        self.hit = False

        def on_match(_id, _from, _to, _flags, _ctx):
            self.hit = True

        self._on_match = on_match  # keep a reference: the extension does not
        self.streams = []
        for db in dbs:
            s = db.stream(match_event_handler=on_match)
            s.__enter__()
            self.streams.append(s)

    def feed(self, piece) -> None:
        if not self.hit:
            for s in self.streams:
                s.scan(piece)

    def finish(self) -> bool:
        for s in self.streams:
            s.close(match_event_handler=self._on_match)
        self.streams = []
        return self.hit


_checked: list = [(), ()]  # the last anchor list checked (as a tuple) and its result


def check_anchors(anchors) -> tuple[str, ...]:
    """The anchors, deduplicated; TypeError/ValueError for bad ones. The last list checked is
    remembered: a folder of 20k files must not check the rule base's anchors 20k times."""
    if isinstance(anchors, (str, bytes)):
        anchors = [anchors]
    key = tuple(anchors)
    if key == _checked[0] and key:
        return _checked[1]
    out = _check_anchors(key)
    _checked[:] = [key, out]
    return out


def _check_anchors(anchors: tuple) -> tuple[str, ...]:
    # compiled patterns, or objects with a `pattern` string that their owner validated
    # (engine.rules.LazyRegex), are taken as valid without compiling them here
    out = tuple(dict.fromkeys(a if isinstance(a, (str, bytes)) else getattr(a, "pattern", a) for a in anchors))
    compiled = {a.pattern for a in anchors if not isinstance(a, (str, bytes)) and isinstance(getattr(a, "pattern", None), str)}
    for a in out:
        if a in compiled:
            continue  # compiled by the caller: valid
        if not isinstance(a, str):
            raise TypeError(f"anchor patterns must be str, not {type(a).__name__}")
        try:
            regex.compile(a)  # the regex module caches compiled patterns
        except regex.error as exc:
            raise ValueError(f"invalid anchor pattern {a!r}: {exc}") from None
    return out


DISK_CACHE_FROM = 32  # anchor sets this large (a rule base) keep their database on disk


class AnchorMatcher:
    """The anchors compiled for scanning: hyperscan databases for those it takes
    (``hs``), ``regex`` for the rest (``rx``; their patterns in ``fallback``)."""

    def __init__(self, anchors: Sequence[str], use_hyperscan: bool | None = None,
                 checked: bool = False):
        # checked: anchors already went through check_anchors (select_lines).
        # Checking again would recompile every pattern with regex: patterns
        # compiled with other flags (the rule base's use V0) miss its cache.
        anchors = list(anchors) if checked else list(check_anchors(anchors))
        if use_hyperscan is None:
            use_hyperscan = hsdb.available()
        self.hs: _HyperscanSet | None = None
        if use_hyperscan and hsdb.available():
            from .hscache import cached_databases

            self.engine = "hyperscan"
            if len(anchors) >= DISK_CACHE_FROM:
                meta, dbs = cached_databases("anchors", "\0".join(anchors), lambda: self._build(anchors))
            else:  # a handful of anchors compiles in milliseconds: not worth a file
                meta, dbs = self._build(anchors)
            eol = [e.encode("ascii") for e in meta["eol"]]
            plain = [e.encode("ascii") for e in meta["plain"]]
            fallback = list(meta["fallback"])
            if eol or plain:
                self.hs = _HyperscanSet(eol, plain, dbs)
        else:
            self.engine = "regex"
            fallback = anchors
        self.rx = _RegexSet(fallback) if fallback else None
        self.n_regex = len(fallback)
        self.fallback = fallback

    @staticmethod
    def _build(anchors: list[str]) -> tuple[dict, list]:
        """Translate and compile the anchors: (meta for the cache, one database per group)."""
        fallback: list[str] = []
        hs = None
        translated: list[tuple[str, str]] = []
        for a in anchors:
            try:
                translated.append((a, translate(a)))
            except Untranslatable:
                fallback.append(a)
        # A translation contains a bare '$' only where the anchor has an
        # end-of-line assertion.  Ending in one, it already reports at the
        # newline; elsewhere hyperscan refuses the [^\n]*$ suffix after it.
        eol: list[bytes] = []
        plain: list[bytes] = []
        for _a, t in translated:
            dollars = t.count("$")
            if not dollars:
                eol.append(("(?:" + t + ")[^\\n]*$").encode("ascii"))
            elif dollars == 1 and t.endswith("$"):
                eol.append(t.encode("ascii"))
            else:
                plain.append(t.encode("ascii"))
        try:  # usually everything compiles together at the first go
            hs = _HyperscanSet(eol, plain) if translated else None
        except hsdb.hs.error:  # find the culprits one by one
            eol, plain = [], []
            for a, t in translated:
                e = ("(?:" + t + ")[^\\n]*$").encode("ascii")
                if t.count("$") == 1 and t.endswith("$") and hsdb.compiles(t.encode("ascii"), hsdb.PREFILTER):
                    eol.append(t.encode("ascii"))
                elif hsdb.compiles(e, hsdb.PREFILTER):
                    eol.append(e)
                elif hsdb.compiles(t.encode("ascii"), hsdb.PREFILTER):
                    plain.append(t.encode("ascii"))
                else:
                    fallback.append(a)
            if eol or plain:
                hs = _HyperscanSet(eol, plain)
        eol_s = [e.decode("ascii") for e in eol] if hs is not None else []
        plain_s = [e.decode("ascii") for e in plain] if hs is not None else []
        dbs = [dbs[0] for dbs, _s in hs.block] if hs is not None else []
        return {"eol": eol_s, "plain": plain_s, "fallback": fallback}, dbs

    def scan(self, mv: memoryview, start: int, end: int) -> list[int]:
        out: list[int] = []
        if self.hs is not None:
            self.hs.scan(mv, start, end, out)
        if self.rx is not None:
            self.rx.scan(mv, start, end, out)
        if len(out) > 1:
            out.sort()
        return out

    def long_line(self) -> "_LongAll":
        parts: list = []
        if self.hs is not None:
            parts.append(self.hs.long_line())
        if self.rx is not None:
            parts.append(self.rx.long_line())
        return _LongAll(parts)


class _LongAll:
    def __init__(self, parts):
        self.parts = parts

    def feed(self, piece) -> None:
        for p in self.parts:
            p.feed(piece)

    def finish(self) -> bool:
        hit = False
        for p in self.parts:
            hit = p.finish() or hit
        return hit

