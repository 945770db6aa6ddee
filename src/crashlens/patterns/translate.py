"""Rule patterns (``regex`` syntax) rewritten as byte-level Hyperscan prefilter expressions.

:func:`translate` parses a pattern with Python's own regular-expression parser and rewrites it
into a byte-level expression that matches a superset of what the original matches with
``regex.search`` on the UTF-8 decoded line: non-ASCII characters, ``\\w``/``\\d``/``\\s``, case
folding, ``.`` and negated classes are widened to cover every byte sequence that could decode
to a matching character; look-arounds, back-references and ``\\B`` are dropped (that only
widens); ``\\b`` is kept next to a character that is surely an ASCII word character (there the
byte-level test cannot miss) and dropped elsewhere.  A repeat ``X{m,}`` that begins or ends
the pattern becomes ``X{m}``: whether a line holds a match does not change, and Hyperscan scans
much faster without such loose edges.

Patterns that Python's parser does not read exactly as ``regex`` does (``regex``-only syntax
such as ``\\p{L}``, ``(?|...)``, fuzzy matching, POSIX classes) raise :class:`Untranslatable`;
their users search them with ``regex`` instead.  Hyperscan confirms nothing: every hit of a
translation is a candidate that the exact pattern (or the caller's contract) settles.
"""

from __future__ import annotations

import re
import warnings

try:  # Python >= 3.11
    from re import _constants as _sre_c  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

__all__ = ["Untranslatable", "translate"]


class Untranslatable(Exception):
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
    raise Untranslatable(f"category {cat}")


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
                    raise Untranslatable(f"class item {iop}")
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
                raise Untranslatable(f"class item {iop}")
        s.discard(10)
        return s, nonascii
    raise Untranslatable(f"op {op}")


def _byte_class(codes) -> str:
    codes = sorted(set(codes))
    if not codes:
        raise Untranslatable("empty class")
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


def _ic_literal(code: int) -> str:
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
    raise Untranslatable(f"op {op}")


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
            raise Untranslatable("literal '{' (regex-only syntax?)")
        i += 1


def translate(pattern: str) -> str:
    """Byte-level pattern that matches (at least) every line that ``pattern``
    matches with ``regex.search`` on the UTF-8 decoded line.

    Raises ``Untranslatable`` when Python's parser does not understand the
    pattern exactly as the ``regex`` module would.
    """
    _check_braces(pattern)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tree = _sre_parse.parse(pattern, 0)
    except Exception as exc:  # re.error, FutureWarning, DeprecationWarning
        raise Untranslatable(str(exc)) from None
    ic = bool(tree.state.flags & _IGNORECASE)
    return _tr(tree, ic, lead=True, trail=True)
