"""Streaming line selection with bounded memory for very large logs.

:func:`select_lines` reads a binary stream once, in large chunks, and yields
``(line_number, text)`` for the lines worth looking at.  A small stream (fewer
than ``full_below`` bytes) is yielded whole.  A large one is reduced to the
first ``head`` lines, the last ``tail`` lines and a window of ``before`` /
``after`` lines around every line that matches one of the anchor patterns.

Matching
--------
Anchors are regular expressions in the syntax of the ``regex`` module.  The
contract is *per line*: a line is an anchor line when ``regex.search(p, line)``
finds a match for some anchor ``p`` on the decoded line.  The scan may report
more lines than that (extra windows are harmless), but never fewer.

With :mod:`hyperscan` available each anchor is parsed with Python's own
regular-expression parser and rewritten into a byte-level pattern that matches
a superset of what the original matches on the UTF-8 decoded line: non-ASCII
characters, ``\\w``/``\\d``/``\\s``, case folding, ``.`` and negated classes
are widened to cover every byte sequence that could decode to a matching
character; look-arounds, back-references and ``\\B`` are dropped (that only
widens); ``\\b`` is kept next to a character that is surely an ASCII word
character (there the byte-level test cannot miss) and dropped elsewhere.  Each
rewritten pattern gets the suffix ``[^\\n]*$`` and is compiled with
``HS_FLAG_MULTILINE | HS_FLAG_PREFILTER``: hyperscan then reports a pattern at
most once per line, at the line's newline, so the Python callback runs once
per (anchor, matching line) however often the anchor occurs in the line.
``HS_FLAG_SINGLEMATCH`` is deliberately not used: it reports a pattern once
per scan call, i.e. once per 16 MiB chunk.

Anchors that Python's parser does not read exactly as ``regex`` does
(``regex``-only syntax such as ``\\p{L}``, ``(?|...)``, fuzzy matching, POSIX
classes) or that hyperscan cannot compile even in prefilter mode run with the
``regex`` module instead: one combined ``MULTILINE`` search over the decoded
chunk, or line by line for anchors that could behave differently on a block
of lines (``\\A``, ``\\Z``, negative look-arounds, inline flag changes ...)
and for chunks that are not valid UTF-8.  Without hyperscan every anchor takes
that path (``SelectStats.engine == "regex"``).

Memory and speed
----------------
Two buffers of 16 MiB plus 8 MiB (room for an unfinished line carried over
from the previous read): a helper thread reads the next chunk into one while
the other is scanned (reads release the GIL).  Chunks end at line boundaries.
Newlines are counted once per chunk (``bytearray.count``) and line numbers
of anchor lines are derived in the same pass.  The last ``max(tail, before)``
lines are kept in a ring (each cut to ``max_line`` bytes) until they can no
longer be part of the tail or of a later window.  A line longer than 8 MiB is
never held: its first ``max_line`` bytes are kept while the rest streams past,
scanned (hyperscan stream mode; the regex fallback searches overlapping
pieces) and counted.  Work in Python is proportional to the number of anchor
lines and selected lines, not to the size of the stream.

Parallel scan
-------------
Scanning (hyperscan) and counting newlines (``bytearray.count``) hold the
GIL, so threads cannot share them.  A regular file (``open(path, "rb")``, or
what ``crashlens.inputs`` opens for a file) of at least ``full_below`` bytes
and at least two ranges of ``MIN_RANGE`` (64 MiB) is therefore split into up
to ``min(CPUs, MAX_WORKERS)`` byte ranges, scanned by forked worker processes
(which inherit the compiled anchors) and by the calling process.  Ranges begin
where the sequential loop begins a block, so every process sees exactly the
blocks that loop would see, and the output (lines, line numbers and
:class:`SelectStats`) is identical.  Each worker sends back its line count,
its anchor lines grouped into runs of touching windows and its streamed long
lines; the caller then reads with ``pread`` only the lines it yields (a few
MiB at a time; longer lines are cut without being held).  The stream object
itself is not read; at the end it is left at end of file.  Any failure falls
back to the sequential path (skipping lines already yielded).  The
environment variable ``CRASHLENS_SELECT_PROCS`` caps the number of processes
(``1``: always sequential).  On 2 CPUs this roughly halves the time for a
1 GB log.
"""

from __future__ import annotations

import array
import bisect
import heapq
import io
import os
import pickle
import re
import signal
import stat
import sys
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Iterator, NamedTuple, Sequence

import regex

try:  # Python >= 3.11
    from re import _constants as _sre_c  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

try:
    import hyperscan as _hs
except Exception:  # pragma: no cover - depends on the platform
    _hs = None

__all__ = ["SelectStats", "select_lines", "CHUNK_SIZE"]

#: Bytes read per chunk.  Module-level so tests can shrink it.
CHUNK_SIZE = 16 << 20

_NL = b"\n"


@dataclass
class SelectStats:
    """Counters filled in while :func:`select_lines` runs (final once exhausted)."""

    total_lines: int = 0
    total_bytes: int = 0
    kept_lines: int = 0
    truncated_lines: int = 0  # yielded lines that were cut at max_line
    mode: str = "full"  # "full" (every line) or "selected"
    engine: str = ""  # "hyperscan" or "regex"
    regex_anchors: int = 0  # anchors that had to be run with the regex module


# --------------------------------------------------------------------------
# Anchor pattern -> byte-level superset pattern for hyperscan
# --------------------------------------------------------------------------


class _Untranslatable(Exception):
    pass


_ALL = frozenset(range(128)) - {10}  # one ASCII byte of a line (never \n)
_DIGIT = frozenset(range(48, 58))
_WORD = frozenset(
    list(range(48, 58)) + list(range(65, 91)) + list(range(97, 123)) + [95]
)
_SPACE_MIN = frozenset([9, 11, 12, 13, 32])  # \s in both re and regex
_SPACE_MAX = _SPACE_MIN | frozenset(range(28, 32))  # re also has \x1c-\x1f
# Non-ASCII characters whose case-insensitive match includes ASCII letters.
_FOLD_TO_ASCII = {0x130: "iI", 0x131: "iI", 0x17F: "sS", 0x212A: "kK"}
# Any character that is not ASCII: a lead byte and up to 3 continuation
# bytes.  Also covers every U+FFFD that errors="replace" produces.
_NONASCII = r"[\x80-\xff][\x80-\xbf]{0,3}"

_AT_START = {_sre_c.AT_BEGINNING, _sre_c.AT_BEGINNING_STRING}
_AT_END = {_sre_c.AT_END, _sre_c.AT_END_STRING}
_REPEATS = {_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT}
if hasattr(_sre_c, "POSSESSIVE_REPEAT"):
    _REPEATS.add(_sre_c.POSSESSIVE_REPEAT)
_ATOMIC = getattr(_sre_c, "ATOMIC_GROUP", None)
_CHAR_OPS = {_sre_c.LITERAL, _sre_c.NOT_LITERAL, _sre_c.ANY, _sre_c.IN}
_IGNORECASE = _sre_c.SRE_FLAG_IGNORECASE


def _swap_ascii(codes: set[int]) -> set[int]:
    out = set(codes)
    for c in codes:
        ch = chr(c)
        if ch.isalpha():
            out.add(ord(ch.swapcase()))
    return out


def _cat_members(cat, superset: bool) -> frozenset[int]:
    """ASCII members of a category; a superset or a subset of both engines'."""
    c = _sre_c
    if cat is c.CATEGORY_DIGIT:
        return _DIGIT
    if cat is c.CATEGORY_NOT_DIGIT:
        return _ALL - _DIGIT
    if cat is c.CATEGORY_WORD:
        return _WORD
    if cat is c.CATEGORY_NOT_WORD:
        return _ALL - _WORD
    if cat is c.CATEGORY_SPACE:
        return _SPACE_MAX if superset else _SPACE_MIN
    if cat is c.CATEGORY_NOT_SPACE:
        return (_ALL - _SPACE_MIN) if superset else (_ALL - _SPACE_MAX)
    raise _Untranslatable(f"category {cat}")


def _literal_set(code: int, ic: bool) -> tuple[set[int], bool]:
    """(ASCII bytes, may-be-non-ASCII) that a literal character can match."""
    if code < 128:
        s = {code}
        if ic:
            s = _swap_ascii(s)
            return s, chr(code).lower() in "iks"
        return s, False
    s: set[int] = set()
    if ic:
        ch = chr(code)
        for v in (ch.lower(), ch.upper(), ch.casefold(), ch.swapcase()):
            if len(v) == 1 and ord(v) < 128:
                s.add(ord(v))
        s.update(ord(x) for x in _FOLD_TO_ASCII.get(code, ""))
        s = _swap_ascii(s)
    return s, True


def _charset(op, av, ic: bool) -> tuple[set[int], bool] | bytes:
    """Superset of one-character element as (ASCII set, non-ASCII flag).

    A non-ASCII literal matched case-sensitively is returned as its exact
    UTF-8 bytes instead.
    """
    c = _sre_c
    if op is c.LITERAL:
        if av >= 128 and not ic and av != 0xFFFD and not 0xD800 <= av < 0xE000:
            return chr(av).encode("utf-8")
        return _literal_set(av, ic)
    if op is c.NOT_LITERAL:
        return set(_ALL - {av}), True
    if op is c.ANY:
        return set(_ALL), True
    if op is c.IN:
        items = list(av)
        negate = bool(items) and items[0][0] is c.NEGATE
        if negate:
            items = items[1:]
        if negate:
            # Only members certain to be in the class may be removed.
            sure: set[int] = set()
            for iop, iav in items:
                if iop is c.LITERAL:
                    if iav < 128:
                        sure.add(iav)
                elif iop is c.RANGE:
                    lo, hi = iav
                    sure.update(range(lo, min(hi, 127) + 1))
                elif iop is c.CATEGORY:
                    sure |= _cat_members(iav, superset=False)
                else:
                    raise _Untranslatable(f"class item {iop}")
            return set(_ALL - sure), True
        s: set[int] = set()
        nonascii = False
        for iop, iav in items:
            if iop is c.LITERAL:
                ls, na = _literal_set(iav, ic)
                s |= ls
                nonascii |= na
            elif iop is c.RANGE:
                lo, hi = iav
                part = set(range(lo, min(hi, 127) + 1))
                if ic:
                    part = _swap_ascii(part)
                    if any(ch in part for ch in b"iksIKS"):
                        nonascii = True
                s |= part
                if hi >= 128:
                    nonascii = True
                    if ic:
                        for code, letters in _FOLD_TO_ASCII.items():
                            if lo <= code <= hi:
                                s.update(ord(x) for x in letters)
                        # other non-ASCII letters in the range may fold to
                        # ASCII ones through lower()/upper()
                        if lo < 0x250:
                            for code in range(max(lo, 128), min(hi, 0x24F) + 1):
                                s |= _literal_set(code, True)[0]
            elif iop is c.CATEGORY:
                s |= _cat_members(iav, superset=True)
                nonascii = True
            else:
                raise _Untranslatable(f"class item {iop}")
        s.discard(10)
        return s, nonascii
    raise _Untranslatable(f"op {op}")


def _byte_class(codes) -> str:
    codes = sorted(set(codes))
    if not codes:
        raise _Untranslatable("empty class")
    if len(codes) == 1:
        return "\\x%02x" % codes[0]
    parts = []
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        if j == i:
            parts.append("\\x%02x" % codes[i])
        else:
            parts.append("\\x%02x-\\x%02x" % (codes[i], codes[j]))
        i = j + 1
    return "[" + "".join(parts) + "]"


def _exact_bytes(b: bytes) -> str:
    return "".join("\\x%02x" % x for x in b)


def _single(cs) -> str:
    if isinstance(cs, bytes):
        return _exact_bytes(cs)
    s, nonascii = cs
    if not nonascii:
        return _byte_class(s)
    if not s:
        return "(?:" + _NONASCII + ")"
    return "(?:" + _byte_class(s) + "|" + _NONASCII + ")"


def _quant(lo: int, hi) -> str:
    if _unbounded(hi):
        return "*" if lo == 0 else "+" if lo == 1 else "{%d,}" % lo
    if lo == hi:
        return "" if lo == 1 else "{%d}" % lo
    return "{%d,%d}" % (lo, hi)


def _ascii_word_edge(item, ic: bool, last: bool) -> bool:
    """Does item surely begin (last=False) or end (last=True) with one ASCII
    word character, matched as one byte?"""
    op, av = item
    if op is _sre_c.LITERAL:
        if av >= 128 or av not in _WORD:
            return False
        # with IGNORECASE k, s, i also match non-ASCII letters (Kelvin sign...)
        return not ic or chr(av).lower() not in "iks"
    if op is _sre_c.SUBPATTERN:
        _group, add, dele, p = av
        ic2 = (ic or bool(add & _IGNORECASE)) and not (dele & _IGNORECASE)
        return len(p) > 0 and _ascii_word_edge(p[-1 if last else 0], ic2, last)
    if op is _sre_c.BRANCH:
        return all(len(p) > 0 and _ascii_word_edge(p[-1 if last else 0], ic, last) for p in av[1])
    return False


# Under IGNORECASE these ASCII letters also match non-ASCII characters.
_FOLD_EXTRA = {
    "k": "\\xe2\\x84\\xaa",  # U+212A KELVIN SIGN
    "s": "\\xc5\\xbf",  # U+017F LATIN SMALL LETTER LONG S
    "i": "\\xc4\\xb0|\\xc4\\xb1",  # U+0130, U+0131 (dotted / dotless I)
}


def _ic_literal(code: int) -> str | None:
    """Case-insensitive ASCII literal as a hyperscan caseless piece."""
    ch = chr(code)
    if ch.isalpha():
        extra = _FOLD_EXTRA.get(ch.lower())
        return ch if extra is None else "(?:" + ch + "|" + extra + ")"
    return "\\x%02x" % code


def _unbounded(hi) -> bool:
    return hi is _sre_c.MAXREPEAT or hi == _sre_c.MAXREPEAT


def _trim_edges(items: list, lead: bool, trail: bool) -> list:
    """Whether a line contains a match does not change when a repeat
    ``X{m,}`` that begins (or ends) the pattern becomes ``X{m}`` (dropped if
    m == 0).  Hyperscan scans much faster without such loose edges."""
    while lead and items and items[0][0] in _REPEATS and _unbounded(items[0][1][1]):
        op, (lo, _hi, item) = items[0]
        if lo:
            items[0] = (op, (lo, lo, item))
            break
        items.pop(0)
    while trail and items and items[-1][0] in _REPEATS and _unbounded(items[-1][1][1]):
        op, (lo, _hi, item) = items[-1]
        if lo:
            items[-1] = (op, (lo, lo, item))
            break
        items.pop()
    return items


def _tr(sub, ic: bool, lead: bool = False, trail: bool = False) -> str:
    """Translate a sequence; ``lead``/``trail``: it begins/ends the pattern."""
    items = _trim_edges(list(sub), lead, trail)
    out = []
    run: list[str] = []  # case-insensitive ASCII literals, emitted as (?i:...)
    for i, (op, av) in enumerate(items):
        if ic and op is _sre_c.LITERAL and av < 128:
            run.append(_ic_literal(av))  # type: ignore[arg-type]
            continue
        if run:
            out.append("(?i:" + "".join(run) + ")")
            run = []
        if op is _sre_c.AT and av is _sre_c.AT_BOUNDARY:
            # Next to a character that is surely an ASCII word character, a
            # byte-level \b holds wherever Python's Unicode \b does (the other
            # side is a non-word character: ASCII, or a non-ASCII byte).
            if (i + 1 < len(items) and _ascii_word_edge(items[i + 1], ic, False)) or (
                i > 0 and _ascii_word_edge(items[i - 1], ic, True)
            ):
                out.append("\\b")
            continue
        out.append(_tr_item(op, av, ic, lead and i == 0, trail and i == len(items) - 1))
    if run:
        out.append("(?i:" + "".join(run) + ")")
    return "".join(out)


def _tr_item(op, av, ic: bool, lead: bool = False, trail: bool = False) -> str:
    c = _sre_c
    if op in _CHAR_OPS:
        return _single(_charset(op, av, ic))
    if op is c.AT:
        if av in _AT_START:
            return "^"
        if av in _AT_END:
            return "$"
        return ""  # \b, \B: dropping an assertion only widens
    if op is c.SUBPATTERN:
        _group, add, dele, p = av
        ic2 = (ic or bool(add & _IGNORECASE)) and not (dele & _IGNORECASE)
        return "(?:" + _tr(p, ic2, lead, trail) + ")"
    if op is c.BRANCH:
        return "(?:" + "|".join(_tr(p, ic, lead, trail) for p in av[1]) + ")"
    if op in _REPEATS:
        lo, hi, item = av
        if hi == 0:
            return ""
        if len(item) == 1 and item[0][0] in _CHAR_OPS:
            cs = _charset(item[0][0], item[0][1], ic)
            if not isinstance(cs, bytes):
                s, nonascii = cs
                if not nonascii:
                    return _byte_class(s) + _quant(lo, hi)
                cls = _byte_class(set(s) | set(range(128, 256)))
                # n characters are n..4n bytes
                return cls + _quant(lo, hi if _unbounded(hi) else 4 * hi)
        return "(?:" + _tr(item, ic) + ")" + _quant(lo, hi)
    if _ATOMIC is not None and op is _ATOMIC:
        return "(?:" + _tr(av, ic) + ")"
    if op is c.GROUPREF:
        return "[^\\n]*"
    if op is c.GROUPREF_EXISTS:
        _group, yes, no = av
        return "(?:" + _tr(yes, ic) + "|" + (_tr(no, ic) if no else "") + ")"
    if op in (c.ASSERT, c.ASSERT_NOT):
        return ""
    raise _Untranslatable(f"op {op}")


_QUANT_BRACE = re.compile(r"\{(?:\d+(?:,\d*)?|,\d+)\}")


def _check_braces(pattern: str) -> None:
    """Reject '{' that Python would read as a literal (regex: fuzzy etc.)."""
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            continue
        elif ch == "{" and not _QUANT_BRACE.match(pattern, i):
            raise _Untranslatable("literal '{' (regex-only syntax?)")
        i += 1


def translate(pattern: str) -> str:
    """Byte-level pattern that matches (at least) every line that ``pattern``
    matches with ``regex.search`` on the UTF-8 decoded line.

    Raises ``_Untranslatable`` when Python's parser does not understand the
    pattern exactly as the ``regex`` module would.
    """
    _check_braces(pattern)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tree = _sre_parse.parse(pattern, 0)
    except Exception as exc:  # re.error, FutureWarning, DeprecationWarning
        raise _Untranslatable(str(exc)) from None
    ic = bool(tree.state.flags & _IGNORECASE)
    return _tr(tree, ic, lead=True, trail=True)


# --------------------------------------------------------------------------
# Matchers: find candidate lines in a buffer region of complete lines
# --------------------------------------------------------------------------
# A matcher's scan(mv, start, end, out) appends, for each candidate line in
# mv[start:end] (complete lines, the last one ending with '\n'), the offset of
# that line's '\n'.  Several entries for one line and any order are allowed.

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
        self.flags = _hs.HS_FLAG_MULTILINE | _hs.HS_FLAG_PREFILTER
        self.groups = [(exprs, suffix) for exprs, suffix in ((eol, True), (plain, False)) if exprs]
        if block_dbs is not None:  # loaded from the on-disk cache, one database per group
            self.block = [([db], s) for db, (_e, s) in zip(block_dbs, self.groups)]
        else:
            self.block = [(self._compile_all(e, _hs.HS_MODE_BLOCK), s) for e, s in self.groups]
        self._stream = None
        self._hits: list[int] = []
        append = self._hits.append

        def on_match(_id, _from, to, _flags, _ctx):
            append(to)

        self._on_match = on_match  # keep a reference: the extension does not

    def _compile(self, exprs, mode):
        db = _hs.Database(mode=mode)
        db.compile(
            expressions=list(exprs),
            ids=list(range(len(exprs))),
            elements=len(exprs),
            flags=[self.flags] * len(exprs),
        )
        return db

    def _compile_all(self, exprs, mode) -> list:
        if mode == _hs.HS_MODE_BLOCK:  # errors go to the caller
            return [self._compile(exprs, mode)]
        try:
            return [self._compile(exprs, mode)]
        except _hs.error:  # pragma: no cover - they all compiled in block mode
            return [self._compile([e], mode) for e in exprs]

    @staticmethod
    def compiles(expr: bytes) -> bool:
        try:
            _hs.Database(mode=_hs.HS_MODE_BLOCK).compile(
                expressions=[expr],
                ids=[0],
                elements=1,
                flags=[_hs.HS_FLAG_MULTILINE | _hs.HS_FLAG_PREFILTER],
            )
            return True
        except _hs.error:
            return False

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
            self._stream = [
                db for e, _s in self.groups for db in self._compile_all(e, _hs.HS_MODE_STREAM)
            ]
        return _HyperscanLong(self._stream)


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


def _check_anchors(anchors) -> tuple[str, ...]:
    """The anchors, deduplicated; TypeError/ValueError for bad ones."""
    if isinstance(anchors, (str, bytes)):
        anchors = [anchors]
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


class _Matcher:
    def __init__(self, anchors: Sequence[str], use_hyperscan: bool | None = None,
                 checked: bool = False):
        # checked: anchors already went through _check_anchors (select_lines).
        # Checking again would recompile every pattern with regex: patterns
        # compiled with other flags (the rule base's use V0) miss its cache.
        anchors = list(anchors) if checked else list(_check_anchors(anchors))
        if use_hyperscan is None:
            use_hyperscan = _hs is not None
        self.hs: _HyperscanSet | None = None
        if use_hyperscan and _hs is not None:
            from ..hscache import cached_databases

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
            except _Untranslatable:
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
        except _hs.error:  # find the culprits one by one
            eol, plain = [], []
            for a, t in translated:
                e = ("(?:" + t + ")[^\\n]*$").encode("ascii")
                if t.count("$") == 1 and t.endswith("$") and _HyperscanSet.compiles(t.encode("ascii")):
                    eol.append(t.encode("ascii"))
                elif _HyperscanSet.compiles(e):
                    eol.append(e)
                elif _HyperscanSet.compiles(t.encode("ascii")):
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


# --------------------------------------------------------------------------
# Line selection
# --------------------------------------------------------------------------


def _cut_point(b, limit: int) -> int:
    """Cut position <= limit (len(b) > limit) that does not split a UTF-8
    character; ``limit`` itself when the bytes there are not UTF-8."""
    k = limit
    while k > limit - 3 and k > 0 and (b[k] & 0xC0) == 0x80:
        k -= 1
    if k > 0 and (b[k] & 0xC0) == 0x80:
        return limit
    return k


def _decode(b, max_line: int, cut: int, stats: SelectStats) -> str:
    """Decode one line, cut at max_line bytes (``cut``: bytes already dropped)."""
    if len(b) > max_line:
        k = _cut_point(b, max_line)
        cut += len(b) - k
        b = b[:k]
    if cut:
        stats.truncated_lines += 1
        return b.decode("utf-8", "replace") + f" …[cut {cut} bytes]"
    return b.decode("utf-8", "replace")


def _back_lines(ba, start: int, e: int, k: int) -> int:
    """Offset where the line k lines above the one ending at e begins
    (``start`` if the block begins first)."""
    span = (k + 1) * 256
    while True:
        g = max(start, e - span)
        if ba.count(_NL, g, e) > k:
            return g + len(ba[g:e].rsplit(_NL, k + 1)[0]) + 1
        if g == start:
            return start
        span *= 4


def _take_lines(ba, off: int, end: int, n: int) -> list:
    """The n lines that begin at ``off`` (each without its '\\n')."""
    span = max(n * 256, 4096)
    while True:
        stop = min(end, off + span)
        parts = ba[off:stop].split(_NL, n)
        if len(parts) > n or stop == end:
            del parts[n:]
            return parts
        span *= 4


def _read_into(stream, mv: memoryview, want: int) -> int:
    """Fill mv[:want] as far as the stream allows; 0 only at end of stream."""
    got = 0
    readinto = getattr(stream, "readinto", None)
    while got < want:
        if readinto is not None:
            n = readinto(mv[got:want])
        else:
            data = stream.read(want - got)
            n = len(data) if data else 0
            if n:
                mv[got:got + n] = data
        if not n:
            break
        got += n
    return got


def _read_head(stream, limit: int) -> bytes | bytearray:
    """Up to ``limit`` bytes from the start of the stream (fewer at its end)."""
    pieces = []
    got = 0
    while got < limit:
        want = min(limit - got, CHUNK_SIZE)
        buf = bytearray(want)
        with memoryview(buf) as mv:
            n = _read_into(stream, mv, want)
        if n < want:
            del buf[n:]
        pieces.append(buf)
        got += n
        if n < want:
            break
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def select_lines(
    stream: BinaryIO,
    anchors: Sequence[str],
    *,
    full_below: int = 8 << 20,
    before: int = 150,
    after: int = 60,
    head: int = 300,
    tail: int = 3000,
    max_line: int = 65536,
    stats: SelectStats | None = None,
) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for the lines of ``stream`` worth keeping.

    Line numbers are 1-based and are those of the original stream; lines come
    in ascending order, each at most once, decoded as UTF-8 (errors replaced)
    and without their ``\\n`` (a ``\\r`` stays).  A stream of fewer than
    ``full_below`` bytes is yielded whole (``stats.mode == "full"``).
    Otherwise (``"selected"``) only the first ``head`` lines, the last
    ``tail`` lines and the window ``[n - before, n + after]`` around every line
    ``n`` that an anchor matches are yielded.  A line longer than ``max_line``
    bytes is cut there and gets the suffix ``" …[cut N bytes]"``.

    Invalid anchors raise ``ValueError`` when this function is called.  The
    stream is read lazily by the returned iterator, in 16 MiB chunks (a large
    regular file: by several processes at once, see "Parallel scan"); the
    anchors are compiled for the scan only when the stream turns out to be
    large, and the compiled set is cached (per thread) for later calls with
    the same anchors.  ``stats`` is updated as lines are produced and is final
    once the iterator is exhausted.
    """
    for name, v in (("before", before), ("after", after), ("head", head), ("tail", tail)):
        if v < 0:
            raise ValueError(f"{name} must be >= 0")
    if max_line < 1:
        raise ValueError("max_line must be >= 1")
    if stats is None:
        stats = SelectStats()
    anchors = _check_anchors(anchors)
    use_hs = _hs is not None
    stats.engine = "hyperscan" if use_hs else "regex"
    sel = _Selector(stream, (anchors, use_hs), before, after, head, tail, max_line, stats)
    return sel.run(full_below)


_cache = threading.local()


def _get_matcher(key: tuple[tuple[str, ...], bool]) -> _Matcher:
    """Compiled anchors, cached per thread (hyperscan scratch space is not
    shared between threads); compiling a few hundred anchors takes ~0.1 s."""
    lru = getattr(_cache, "lru", None)
    if lru is None:
        lru = _cache.lru = OrderedDict()
    m = lru.get(key)
    if m is None:
        m = lru[key] = _Matcher(key[0], key[1], checked=True)
        while len(lru) > 4:
            lru.popitem(last=False)
    else:
        lru.move_to_end(key)
    return m


class _Selector:
    def __init__(self, stream, matcher_key, before, after, head, tail, max_line, stats):
        self.stream = stream
        self.matcher_key = matcher_key
        self.before = before
        self.after = after
        self.head = head
        self.tail = tail
        self.max_line = max_line
        self.stats = stats
        self.keep = max(before, tail)  # lines the ring must hold
        self.M = 0  # number of complete lines processed
        self.ring: list[bytes] = []  # lines M-len(ring)+1 .. M, each cut to max_line
        self.cuts: dict[int, int] = {}  # line number -> bytes already cut off
        # Windows [a, b, off], sorted, disjoint and not adjacent; ``off`` is
        # the offset of line a in the block being processed when a lies there.
        self.iv: list[list] = [[1, head, None]] if head > 0 else []

    def _full(self, data: bytes) -> Iterator[tuple[int, str]]:
        st = self.stats
        st.mode = "full"
        lines = data.split(_NL)
        if lines[-1] == b"":
            lines.pop()
        st.total_lines = len(lines)
        ml = self.max_line
        for i, line in enumerate(lines, 1):
            st.kept_lines += 1
            yield i, _decode(line, ml, 0, st)

    def run(self, full_below: int) -> Iterator[tuple[int, str]]:
        done = 0  # line number of the last line the parallel path yielded
        try:
            plan = _plan_parallel(self.stream, full_below)
        except Exception:  # noqa: BLE001 - any doubt: the sequential path
            plan = None
        if plan is not None:
            it = self._run_parallel(plan)
            try:
                while True:
                    try:
                        item = next(it)
                    except StopIteration:
                        return
                    except Exception:  # noqa: BLE001 - start again sequentially
                        break
                    done = item[0]
                    yield item
            finally:
                it.close()
            # The parallel path never reads through the stream (it reads the
            # file descriptor with pread), so the stream is still where it was.
            st = self.stats
            st.total_lines = st.total_bytes = st.kept_lines = st.truncated_lines = 0
            st.regex_anchors = 0
            st.mode = "full"
        if done:
            for item in self._run_sequential(full_below):
                if item[0] > done:
                    yield item
        else:
            yield from self._run_sequential(full_below)

    def _run_sequential(self, full_below: int) -> Iterator[tuple[int, str]]:
        st = self.stats
        # Enough of the stream to decide between full and selected mode.
        first = _read_head(self.stream, max(full_below, 0))
        st.total_bytes = len(first)
        if len(first) < full_below:
            yield from self._full(first)
            return
        st.mode = "selected"
        matcher = _get_matcher(self.matcher_key)
        st.regex_anchors = matcher.n_regex
        stream = self.stream

        def read(mv: memoryview) -> int:
            return _read_into(stream, mv, len(mv))

        events = _scan_events(matcher, read, first, self.max_line, stats=st)
        del first  # the scan loop owns it now (copied into its first buffer)
        try:
            for ev in events:
                if ev[0] is _BLOCK:
                    yield from self._block(ev[1], ev[2], ev[3], ev[4])
                else:
                    yield from self._finish_long(ev[1], ev[2], ev[3])
        finally:
            events.close()
        yield from self._flush()

    # ---------------------------------------------------------------- parallel

    def _run_parallel(self, plan: "_Plan") -> Iterator[tuple[int, str]]:
        """Scan the byte ranges of ``plan`` in worker processes and here, then
        read (with pread) only the lines to yield.  On any exception
        :meth:`run` starts again on the sequential path (which skips the lines
        already yielded)."""
        st = self.stats
        matcher = _get_matcher(self.matcher_key)  # compiled before forking: inherited
        before, after, ml = self.before, self.after, self.max_line
        ranges = plan.ranges

        def job(i: int, threaded: bool):
            s, first_end, limit, final = ranges[i]
            return _scan_range(matcher, plan.fd, plan.base, s, first_end, limit, final,
                               before, after, ml, threaded)

        kids: dict[int, tuple[int, int]] = {}  # range index -> (pid, read end of its pipe)
        results: list = [None] * len(ranges)
        try:
            for i in range(1, len(ranges)):
                kids[i] = _fork_call(job, i, False)
            results[0] = job(0, True)
            for i in list(kids):
                pid, fd = kids.pop(i)
                results[i] = _collect(pid, fd)
        finally:
            for pid, fd in kids.values():  # only after an error or an interrupt
                _abandon(pid, fd)
        for i, res in enumerate(results):  # each range ends where the next begins
            if i + 1 < len(ranges) and res[4] != ranges[i + 1][0]:
                raise RuntimeError("parallel scan: ranges do not join up")

        # Global line numbers.  A window is found from a line whose start is
        # known at most ``before`` (or ``tail``) lines below its first line:
        # the first anchor line of its run, or one of ``points`` (range
        # starts, streamed long lines, the last line), which also keep the
        # walk back from crossing a long line.
        n_total = sum(res[0] for res in results)
        head, tail = self.head, self.tail
        points: list[tuple[int, int]] = [(1, 0)]  # (line number, offset of its start)
        longs: dict[int, int] = {}
        cum = 0
        for i, (n_lines, _runs, long_list, last_start, _end) in enumerate(results):
            if i:
                points.append((cum + 1, ranges[i][0]))
            for j in range(0, len(long_list), 3):
                off, num, length = long_list[j], cum + long_list[j + 1] + 1, long_list[j + 2]
                longs[off] = length
                points.append((num, off))
                if num < n_total:
                    points.append((num + 1, off + length + 1))
            cum += n_lines
        points.append((n_total, results[-1][3]))
        points.sort()
        nums = [p[0] for p in points]

        def windows():  # (first line, last line, a known line >= first, its offset), sorted
            cum = 0
            for n_lines, runs, *_rest in results:
                for j in range(0, len(runs), 3):
                    f = cum + runs[j + 1] + 1
                    yield max(1, f - before), min(n_total, cum + runs[j + 2] + 1 + after), f, runs[j]
                cum += n_lines

        ends = []
        if head > 0:
            ends.append((1, min(head, n_total), 1, 0))
        if tail > 0:
            ends.append((max(1, n_total - tail + 1), n_total, points[-1][0], points[-1][1]))

        st.mode = "selected"
        st.regex_anchors = matcher.n_regex
        st.total_lines = n_total
        st.total_bytes = plan.size
        reader = _FileLines(plan.fd, plan.base, plan.size, ml, st, longs)

        def emit(a: int, b: int, known: int, off: int):
            j = bisect.bisect_left(nums, a)
            if nums[j] < known:
                known, off = points[j]
            return reader.lines(a, b, reader.back(off, known - a) if known > a else off)

        a = b = known = off = -1
        for wa, wb, wk, wo in heapq.merge(ends, windows()):
            if a > 0 and wa <= b + 1:  # touches the window being merged
                b = max(b, wb)
                continue
            if a > 0:
                yield from emit(a, b, known, off)
            a, b, known, off = wa, wb, wk, wo
        if a > 0:
            yield from emit(a, b, known, off)
        try:  # leave the stream at its end, as the sequential path does
            if self.stream.seekable():
                self.stream.seek(plan.base + plan.size)
        except (OSError, ValueError):
            pass

    # -------------------------------------------------------------- sequential

    def _finish_long(self, prefix: bytes, length: int, hit: bool):
        k = _cut_point(prefix, self.max_line) if len(prefix) > self.max_line else len(prefix)
        num = self.M + 1
        if length > k:
            self.cuts[num] = length - k
        buf = bytearray(prefix[:k] + _NL)
        yield from self._block(buf, 0, len(buf), [len(buf) - 1] if hit else [])

    def _block(self, ba, start: int, end: int, ends: list[int]):
        """Process the complete lines ba[start:end]; ``ends`` are the sorted
        offsets of the '\\n' of the lines an anchor (may) match."""
        before, after = self.before, self.after
        first = self.M + 1
        iv = self.iv
        count = ba.count
        # 1. windows around anchor lines (counting newlines in one pass)
        pos, line, prev = start, first, -1
        for e in ends:
            if e <= prev:
                continue
            line += count(_NL, pos, e)
            pos = prev = e
            a, b = line - before, line + after
            if iv and a <= iv[-1][1] + 1:
                if b > iv[-1][1]:
                    iv[-1][1] = b
                continue
            if a < 1:
                a = 1
            iv.append([a, b, _back_lines(ba, start, e, line - a) if a >= first else None])
        last = line - 1 + count(_NL, pos, end)
        self.stats.total_lines = last
        # 2. lines no longer needed for the tail or a later window
        final = last - self.keep
        if self.ring and final > self.M - len(self.ring):
            yield from self._emit_ring(final)
        if final >= first:
            yield from self._emit_block(ba, start, end, first, min(final, last))
        # 3. the last lines go to the ring
        k = last - max(final + 1, first) + 1
        if k > 0:
            span = 256 * k
            while True:
                g = end - 1 - span
                if g <= start:
                    lines = bytes(ba[start:end - 1]).split(_NL)
                    break
                lines = bytes(ba[g:end - 1]).split(_NL)
                if len(lines) > k:  # the first one may be partial
                    break
                span *= 4
            if len(lines) > k:
                del lines[:-k]
            ml = self.max_line
            if max(map(len, lines)) > ml:
                cuts = self.cuts
                for i, lb in enumerate(lines):
                    if len(lb) > ml:
                        c = _cut_point(lb, ml)
                        num = last - k + 1 + i
                        cuts[num] = cuts.get(num, 0) + len(lb) - c
                        lines[i] = lb[:c]
            self.ring.extend(lines)
        self.M = last
        # 4. forget finished windows; block offsets are only valid in this block
        if iv:
            j = 0
            while j < len(iv) and iv[j][1] <= final:
                j += 1
            if j:
                del iv[:j]
            for w in iv:
                w[2] = None
        if self.cuts:
            for c in [c for c in self.cuts if c <= final]:
                del self.cuts[c]

    def _emit_ring(self, final: int):
        """Drop the ring lines numbered <= final; yield those in a window."""
        ring, st, cuts, ml = self.ring, self.stats, self.cuts, self.max_line
        rf = self.M - len(ring) + 1  # number of ring[0]
        hi = min(final, self.M)
        if hi < rf:
            return
        for a, b, _off in self.iv:
            if b < rf:
                continue
            if a > hi:
                break
            for num in range(max(a, rf), min(b, hi) + 1):
                st.kept_lines += 1
                cut = cuts.pop(num, 0) if cuts else 0
                yield num, _decode(ring[num - rf], ml, cut, st)
        del ring[:hi - rf + 1]

    def _emit_block(self, ba, start: int, end: int, first: int, final: int):
        """Yield the lines first..final of the block that lie in a window."""
        st, cuts, ml = self.stats, self.cuts, self.max_line
        for a, b, off in self.iv:
            if b < first:
                continue
            if a > final:
                break
            if a < first or off is None:
                a, off = first, start
            n = min(b, final) - a + 1
            parts = _take_lines(ba, off, end, n)
            st.kept_lines += n
            if (cuts and any(num in cuts for num in range(a, a + n))) or max(
                map(len, parts)
            ) > ml:
                for num, lb in zip(range(a, a + n), parts):
                    yield num, _decode(lb, ml, cuts.pop(num, 0) if cuts else 0, st)
            else:
                # one decode for the whole run of lines: '\n' never belongs
                # to an invalid sequence, so this equals decoding line by line
                size = sum(map(len, parts)) + n - 1
                yield from zip(range(a, a + n), ba[off:off + size].decode("utf-8", "replace").split("\n"))

    def _flush(self):
        """End of stream: the tail and the windows still open."""
        n = self.M
        if self.tail > 0 and n > 0:
            t0 = max(1, n - self.tail + 1)
            joined = [w for w in self.iv if w[1] >= t0 - 1]
            self.iv = [w for w in self.iv if w[1] < t0 - 1]
            self.iv.append([min([t0] + [w[0] for w in joined]), n, None])
        yield from self._emit_ring(n)
        self.cuts.clear()


# --------------------------------------------------------------------------
# The reading and scanning loop, shared by the sequential path and the
# parallel workers
# --------------------------------------------------------------------------

_BLOCK, _LONG = "block", "long"


def _scan_events(matcher, read, first, ml: int, *, stats: SelectStats | None = None,
                 threaded: bool = True, off0: int = 0, final: bool = True,
                 out: dict | None = None):
    """Read a stream chunk by chunk and scan its lines; a generator of

    * ``(_BLOCK, ba, start, end, ends, base)``: the complete lines
      ``ba[start:end]`` (the last one ends with its '\\n'); ``ends`` are the
      sorted offsets in ``ba`` of the '\\n' of candidate anchor lines; byte
      ``ba[i]`` is byte ``base + i`` of the stream (``off0`` being the offset
      of ``first``);
    * ``(_LONG, prefix, length, hit, offset)``: a line too long to hold, which
      was scanned and counted while it streamed past: its first ``ml + 1``
      bytes, its length without the '\\n', whether an anchor (may) match it
      and the offset of its first byte.

    ``first`` is the data already read; ``read(mv)`` fills ``mv`` (all of it
    but at the end of the stream) and returns the number of bytes.  The
    blocks, and so the scan results, depend only on the stream's bytes and on
    where its reads end: the first after ``len(first)`` bytes, then every
    ``CHUNK_SIZE`` bytes.  That is what lets a worker of the parallel path
    reproduce the sequential scan of its byte range exactly.  With
    ``final=False`` the unfinished line at the end is left alone (it is where
    the next range begins; ``out["end"]`` gets its offset).  A block is only
    valid until the generator is resumed.
    """
    chunk = max(CHUNK_SIZE, 64)
    # An unfinished line this long is streamed (scanned, counted, cut)
    # instead of being held; it is also the room kept in front of each
    # buffer for the unfinished line carried over from the previous one.
    long_t = max(chunk // 2, 32)
    R = long_t
    n0 = len(first)
    size = R + max(chunk, n0) + 1
    bufs = [bytearray(size), bytearray(size)]
    mvs = [memoryview(b) for b in bufs]
    bufs[0][R:R + n0] = first
    del first

    def rd(i: int) -> int:
        return read(mvs[i][R:R + chunk])

    # With ``threaded`` a helper thread reads the next chunk into one buffer
    # (reads release the GIL) while the lines of the other are scanned.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crashlens-read") if threaded else None
    fut = pool.submit(rd, 1) if pool is not None else None
    cur, new = 0, n0
    start = R  # where the carried-over unfinished line begins
    end_off = off0 + n0  # stream offset of the end of the data in bufs[cur]
    long = None  # while a line too long to hold streams past
    long_prefix = b""
    long_len = long_off = 0
    try:
        while True:
            ba, mv = bufs[cur], mvs[cur]
            lo, fill = R, R + new  # the new data
            base = end_off - fill
            if long is not None:
                i = ba.find(_NL, lo, fill)
                stop = fill if i < 0 else i
                need = ml + 1 - len(long_prefix)
                if need > 0:
                    long_prefix += bytes(mv[lo:min(stop, lo + need)])
                long.feed(mv[lo:stop])
                long_len += stop - lo
                if i < 0:
                    start = fill
                else:
                    hit = long.finish()
                    long = None
                    yield (_LONG, long_prefix, long_len, hit, long_off)
                    start = lo = i + 1
            if long is None:
                nl = ba.rfind(_NL, lo, fill)
                if nl >= 0:
                    end = nl + 1
                    yield (_BLOCK, ba, start, end, matcher.scan(mv, start, end), base)
                    start = end
                if fill - start >= long_t:
                    long = matcher.long_line()
                    long.feed(mv[start:fill])
                    long_prefix = bytes(mv[start:min(fill, start + ml + 1)])
                    long_len = fill - start
                    long_off = base + start
                    start = fill
            if pool is not None:
                new = fut.result()
                fut = None
            else:
                new = rd(cur ^ 1)
            if not new:
                break
            if stats is not None:
                stats.total_bytes += new
            nxt = cur ^ 1
            rest = fill - start
            if rest:
                bufs[nxt][R - rest:R] = ba[start:fill]
            start = R - rest
            end_off += new
            if pool is not None:
                fut = pool.submit(rd, cur)
            cur = nxt
        # end of the stream (or of the range)
        if not final:
            if long is not None:
                raise RuntimeError("a range must not end inside a streamed line")
            if out is not None:
                out["end"] = base + start
        elif long is not None:
            hit = long.finish()
            long = None
            yield (_LONG, long_prefix, long_len, hit, long_off)
        elif fill > start:
            ba[fill] = 10  # the last line had no '\n'
            yield (_BLOCK, ba, start, fill + 1, matcher.scan(mv, start, fill + 1), base)
    finally:
        if long is not None:  # abandoned in the middle of a huge line
            long.finish()
        if fut is not None:
            try:
                fut.result()
            except BaseException:
                pass
        if pool is not None:
            pool.shutdown(wait=True)
        for m in mvs:
            m.release()


# --------------------------------------------------------------------------
# Parallel scan of a regular file
# --------------------------------------------------------------------------
#
# A regular file larger than ``full_below`` (and than two ranges) is split into
# up to min(CPUs, MAX_WORKERS) byte ranges of at least MIN_RANGE bytes.  Every
# range begins at a line start where the sequential path would also begin a
# block (the first line start after the end of one of its reads), so each
# worker, running the same loop over its range, sees exactly the blocks the
# sequential path sees and gets the same scan results.  Worker processes
# (fork; the compiled anchors are inherited) scan all ranges but the first,
# which the calling process scans; each returns its number of lines, its
# anchor lines merged into runs whose windows touch, and its streamed long
# lines.  The caller then derives global line numbers and reads with pread
# only the lines it yields.  Any failure before the first line is yielded
# means starting again on the sequential path; a failure later, starting
# again there and skipping the lines already yielded.

#: At most this many processes (the caller included) scan one file.
MAX_WORKERS = 8
#: Smallest byte range given to one process.
MIN_RANGE = 64 << 20
#: Largest piece read at once while reading the lines to yield; a longer line
#: is cut without being held whole.
_PIECE = 4 << 20

if hasattr(os, "preadv"):

    def _pread_into(fd: int, mv: memoryview, off: int) -> int:
        """Fill mv from file offset ``off``; fewer bytes only at the end of the file."""
        got, n = 0, len(mv)
        while got < n:
            k = os.preadv(fd, [mv[got:]], off + got)
            if k <= 0:
                break
            got += k
        return got

else:  # pragma: no cover - platforms without preadv

    def _pread_into(fd: int, mv: memoryview, off: int) -> int:
        got, n = 0, len(mv)
        while got < n:
            data = os.pread(fd, n - got, off + got)
            if not data:
                break
            mv[got:got + len(data)] = data
            got += len(data)
        return got


def _cpus() -> int:
    n = os.cpu_count() or 1
    try:
        n = min(n, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        pass
    return n


def _max_procs() -> int:
    """Processes to scan one file with; ``CRASHLENS_SELECT_PROCS`` overrides
    (1: always sequential)."""
    env = os.environ.get("CRASHLENS_SELECT_PROCS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return min(_cpus(), MAX_WORKERS)


def _guarded_file(stream):
    """The file under crashlens.inputs' ``InputStream(GuardedReader(file))``
    when nothing has been read through it yet; else None."""
    mod = sys.modules.get(__name__.rsplit(".", 2)[0] + ".inputs.streams")
    if mod is None or type(stream) is not getattr(mod, "InputStream", None):
        return None
    raw = stream.raw
    if type(raw) is not getattr(mod, "GuardedReader", None):
        return None
    if getattr(raw, "_done", True) or getattr(raw, "_delivered", 1) != 0:
        return None
    return getattr(raw, "_inner", None)


def _file_of(stream) -> tuple[int, int, int] | None:
    """(file descriptor, offset of the stream's position, file size) when
    ``stream`` plainly reads a regular file (``open(path, "rb")`` with or
    without buffering, or what crashlens.inputs opens for a file); else None."""
    obj = _guarded_file(stream) or stream
    if type(obj) is io.BufferedReader:
        if type(obj.raw) is not io.FileIO:
            return None
    elif type(obj) is not io.FileIO:
        return None
    try:
        if obj.closed:
            return None
        fd = obj.fileno()
        pos = obj.tell()
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or pos < 0:
        return None
    return fd, pos, st.st_size


class _Plan(NamedTuple):
    fd: int
    base: int  # file offset of the stream's position: where line 1 begins
    size: int  # bytes from there to the end of the file, when planned
    # (line start, end of its first read, end of its last read, last range?);
    # all offsets relative to base
    ranges: list


def _line_start_before(fd: int, base: int, pos: int, span: int) -> int | None:
    """The start of the line after the last '\\n' in [pos - span, pos), or None."""
    lo = max(0, pos - span)
    hi, step = pos, 1 << 16
    while hi > lo:
        g = max(lo, hi - step)
        data = os.pread(fd, hi - g, base + g)
        if len(data) != hi - g:
            return None
        i = data.rfind(_NL)
        if i >= 0:
            return g + i + 1
        hi, step = g, step * 4
    return None


def _plan_parallel(stream, full_below: int) -> _Plan | None:
    """How to split ``stream`` for a parallel scan, or None (sequential)."""
    # fork() only: the workers inherit the compiled anchors (loading them in
    # a fresh process costs 2-4 ms from the disk cache, a fresh interpreter
    # far more).  Not on macOS, where CPython deems fork() unsafe (system
    # libraries may start threads; a child could hang, not just fail).
    if not hasattr(os, "fork") or sys.platform == "darwin":
        return None
    procs = _max_procs()
    if procs < 2:
        return None
    src = _file_of(stream)
    if src is None:
        return None
    fd, base, st_size = src
    size = st_size - base
    if size < full_below:
        return None  # read in full
    n = min(procs, size // max(MIN_RANGE, 1))
    if n < 2:
        return None
    chunk = max(CHUNK_SIZE, 64)
    long_t = max(chunk // 2, 32)
    n0 = max(full_below, 0)  # the sequential path's first read
    # A range may begin after the end F of any read of the sequential path
    # (F = n0 + k * chunk), at the first line start before F, provided that
    # the line there is shorter than long_t (so that the sequential path does
    # not stream it).  Its worker then reads [start, F) first, as the carried
    # over line, and continues chunk by chunk from F.
    starts = [(0, n0)]
    k_min = 0 if n0 > 0 else 1
    for i in range(1, n):
        target = size * i // n
        k = max(k_min, -(-(target - n0) // chunk))
        s = None
        while n0 + k * chunk < size:
            s = _line_start_before(fd, base, n0 + k * chunk, long_t)
            if s is not None:
                break
            k += 1
        if s is None:
            break
        starts.append((s, n0 + k * chunk))
        k_min = k + 1
    if len(starts) < 2:
        return None
    ranges = []
    for i, (s, first_end) in enumerate(starts):
        last = i == len(starts) - 1
        ranges.append((s, first_end, size if last else starts[i + 1][1], last))
    return _Plan(fd, base, size, ranges)


def _scan_range(matcher, fd: int, fbase: int, s: int, first_end: int, limit: int, final: bool,
                before: int, after: int, ml: int, threaded: bool):
    """Scan the lines of one range (offsets relative to ``fbase``).

    Returns (number of lines, runs, long lines, start of the last line, end):
    ``runs`` holds triples (offset of the first anchor line's start, index of
    the first and of the last anchor line of the run), a run being anchor
    lines whose windows touch; ``long lines`` triples (offset, index, length)
    of the lines that were streamed; indexes count from 0 at the range start.
    """
    first = bytearray(first_end - s)
    with memoryview(first) as mv:
        if _pread_into(fd, mv, fbase + s) != len(first):
            raise OSError("file shrank during the scan")
    pos = first_end

    def read(mv: memoryview) -> int:
        nonlocal pos
        want = min(len(mv), limit - pos)
        if want <= 0:
            return 0
        got = _pread_into(fd, mv[:want], fbase + pos)
        if got != want:
            raise OSError("file shrank during the scan")
        pos += got
        return got

    out: dict = {}
    events = _scan_events(matcher, read, first, ml, threaded=threaded, off0=s, final=final, out=out)
    del first
    lines = 0
    runs = array.array("q")
    longs = array.array("q")
    last_start = s
    gap = before + after + 1  # windows of anchor lines this far apart touch
    r_off = r_first = r_last = -1  # the current run
    try:
        for ev in events:
            if ev[0] is _BLOCK:
                _k, ba, start, end, ends, base = ev
                count = ba.count
                pos_, line, prev = start, lines, -1
                for e in ends:
                    if e <= prev:
                        continue
                    line += count(_NL, pos_, e)
                    pos_ = prev = e
                    if r_first >= 0 and line - r_last <= gap:
                        r_last = line
                        continue
                    if r_first >= 0:
                        runs.extend((r_off, r_first, r_last))
                    i = ba.rfind(_NL, start, e)
                    r_off = base + (start if i < 0 else i + 1)
                    r_first = r_last = line
                lines = line + count(_NL, pos_, end)
                if final:
                    i = ba.rfind(_NL, start, end - 1)
                    last_start = base + (start if i < 0 else i + 1)
            else:
                _k, _prefix, length, hit, off = ev
                longs.extend((off, lines, length))
                if hit:
                    if r_first >= 0 and lines - r_last <= gap:
                        r_last = lines
                    else:
                        if r_first >= 0:
                            runs.extend((r_off, r_first, r_last))
                        r_off, r_first, r_last = off, lines, lines
                last_start = off
                lines += 1
    finally:
        events.close()
    if r_first >= 0:
        runs.extend((r_off, r_first, r_last))
    return lines, runs, longs, last_start, out.get("end", -1)


def _fork_call(fn, *args) -> tuple[int, int]:
    """Run fn(*args) in a forked child; (pid, read end of the pipe that
    brings back its pickled result)."""
    r, w = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python >= 3.12 warns about fork() in a multi-threaded process;
            # the child only scans, pickles and writes to its pipe.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except BaseException:
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # the child: never returns
        code = 1
        try:
            try:  # Ctrl-C: the parent cleans up; the child just dies
                signal.signal(signal.SIGINT, signal.SIG_DFL)
            except (ValueError, OSError):
                pass
            os.close(r)
            try:
                payload = pickle.dumps((True, fn(*args)), pickle.HIGHEST_PROTOCOL)
                code = 0
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                payload = pickle.dumps((False, f"{type(exc).__name__}: {exc}"))
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _abandon(pid: int, fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


def _collect(pid: int, fd: int):
    """The result of a _fork_call child (waits for it)."""
    try:
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
    except BaseException:
        _abandon(pid, fd)
        raise
    os.close(fd)
    _pid, status = os.waitpid(pid, 0)
    ok, value = pickle.loads(b"".join(chunks)) if chunks else (False, "no result")
    if not ok or status != 0:
        raise RuntimeError(f"parallel scan worker failed (status {status}): {value}")
    return value


class _FileLines:
    """Lines of the file read with pread, for the parallel path: a few MiB
    at a time; a line longer than _PIECE is cut without being held whole."""

    def __init__(self, fd: int, base: int, size: int, max_line: int, stats: SelectStats,
                 longs: dict[int, int]):
        self.fd, self.base, self.size = fd, base, size
        self.max_line = max_line
        self.stats = stats
        self.longs = longs  # offset -> length of the lines the scan streamed

    def _read(self, off: int, n: int) -> bytes:
        data = os.pread(self.fd, n, self.base + off)
        while len(data) < n:
            more = os.pread(self.fd, n - len(data), self.base + off + len(data))
            if not more:
                raise OSError("file shrank while its lines were read")
            data += more
        return data

    def back(self, off: int, k: int) -> int:
        """Offset of the line k >= 1 lines above the line that begins at off."""
        need = k + 1  # the '\n' at off - 1 ends the line just above
        hi, span = off, max(4096, need * 256)
        while hi > 0:
            lo = max(0, hi - span)
            data = self._read(lo, hi - lo)
            c = data.count(_NL)
            if c >= need:
                return lo + len(data.rsplit(_NL, need)[0]) + 1
            need -= c
            hi, span = lo, min(span * 4, _PIECE)
        if need == 1:
            return 0
        raise RuntimeError("parallel path: line offsets do not add up")

    def _long_text(self, off: int, length: int, head: bytes = b"") -> str:
        k = min(length, self.max_line + 1)
        prefix = head[:k] if len(head) >= k else self._read(off, k)
        return _decode(prefix, self.max_line, length - k, self.stats)

    def lines(self, a: int, b: int, off: int) -> Iterator[tuple[int, str]]:
        """Yield lines a..b; line a begins at ``off``."""
        st, ml, longs, size = self.stats, self.max_line, self.longs, self.size
        num, pos, want = a, off, 1 << 16
        while num <= b:
            rem = b - num + 1
            length = longs.get(pos) if longs else None
            if length is not None:
                st.kept_lines += 1
                yield num, self._long_text(pos, length)
                num, pos = num + 1, pos + length + 1
                continue
            w = min(max(want, rem * 256), _PIECE, size - pos)
            if w <= 0:
                raise RuntimeError("parallel path: fewer lines than counted")
            data = self._read(pos, w)
            eof = pos + w >= size
            parts = data.split(_NL, rem)
            if len(parts) > rem:
                del parts[rem:]
            else:
                tail = parts.pop()  # unfinished, or the last line without '\n'
                if eof and tail:
                    parts.append(tail)
            n = len(parts)
            if not n:
                if eof:
                    raise RuntimeError("parallel path: fewer lines than counted")
                if w < _PIECE:
                    want = w * 4
                    continue
                # a line longer than _PIECE: find its end, keep its start
                end = pos + w
                while end < size:
                    piece = self._read(end, min(_PIECE, size - end))
                    i = piece.find(_NL)
                    if i >= 0:
                        end += i
                        break
                    end += len(piece)
                st.kept_lines += 1
                yield num, self._long_text(pos, end - pos, data)
                num, pos = num + 1, end + 1
                continue
            st.kept_lines += n
            used = sum(map(len, parts)) + n - 1
            if max(map(len, parts)) > ml:
                for i, lb in enumerate(parts):
                    yield num + i, _decode(lb, ml, 0, st)
            else:
                # '\n' never belongs to an invalid sequence: one decode for all
                yield from zip(range(num, num + n), data[:used].decode("utf-8", "replace").split("\n"))
            num, pos = num + n, pos + used + 1
