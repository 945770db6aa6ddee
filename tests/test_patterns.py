"""Tests for crashlens.patterns: the translation of rule patterns to Hyperscan, the
databases and their culprits, and the two scanners (AnchorMatcher for line selection,
LineScanner for rule evaluation)."""

from __future__ import annotations

import pytest
import regex

from crashlens.patterns import AnchorMatcher, LineScanner, Untranslatable, hsdb, translate

from .test_select import ANCHORS  # the same realistic anchor set

HAVE_HS = hsdb.available()



def test_translate_rejects_regex_only_syntax():
    assert translate("Xid") == "\\x58\\x69\\x64"
    for p in (r"\p{Lu}RROR", "(?|a|b)", "(?:error){e<=1}"):
        with pytest.raises(Untranslatable):
            translate(p)


@pytest.mark.skipif(not HAVE_HS, reason="hyperscan not installed")
def test_culprits_are_left_out_of_a_database():
    exprs = [b"abc", b"(unclosed", b"def"]
    db, refused = hsdb.database_without_culprits(exprs, [4, 7, 9], hsdb.PREFILTER)
    assert refused == [7]
    hits = []
    db.scan(b"xx def abc", match_event_handler=lambda i, _f, _t, _fl, _c: hits.append(i))
    assert sorted(set(hits)) == [4, 9]
    assert hsdb.database_without_culprits([], [], hsdb.PREFILTER) == (None, [])


LINES = ["RuntimeError: CUDA error: out of memory", "step 1 ok", "Xid 79", "NoXid", "\u212aILLED",
         "CAFÉ error", "rank 3 failed", ""]
PATTERNS = [r"CUDA error: (?P<msg>.+)", r"\bXid\b", r"(?i)killed", r"\p{Lu}\p{Lu}FÉ", r"^rank \d+ failed$",
            r"step \d+ ok\nXid"]


@pytest.mark.parametrize("engine", ["hyperscan", "regex"])
def test_line_scanner_candidates_cover_every_match(engine, monkeypatch):
    if engine == "hyperscan" and not HAVE_HS:
        pytest.skip("hyperscan not installed")
    if engine == "regex":
        monkeypatch.setattr(hsdb, "hs", None)
    pats = [regex.compile(p) for p in PATTERNS]
    sc = LineScanner(pats)
    hits = sc.scan(LINES)
    for pid, p in enumerate(pats):
        exact = {i for i, t in enumerate(LINES) if p.search(t)}
        assert exact <= hits.get(pid, set()), p.pattern
    if engine == "hyperscan":
        assert sc.db is not None and sc.fallback == [3]  # \p{Lu}: regex-only syntax
    else:
        assert sc.db is None
    # a pattern over a line break: a candidate on the line where the match ends (hyperscan)
    # or on every line it spans (regex); the caller confirms on single lines
    assert hits[5] == ({2} if engine == "hyperscan" else {1, 2})
    assert LineScanner(pats).scan([]) == {}


@pytest.mark.skipif(not HAVE_HS, reason="hyperscan not installed")
def test_translation_is_exact_for_common_anchors():
    """Literal-ish anchors are not widened: no extra windows on ASCII logs."""
    m = AnchorMatcher(ANCHORS)
    assert m.engine == "hyperscan" and not m.fallback
    lines = [b"NoXid", b"XidX", b"Xid 1", b"xid", b"CUDA", b"cuda", b"ERROR", b"Error"]
    assert _scan_lines(m, lines) == [b"Xid 1", b"CUDA", b"Error"]
    m = AnchorMatcher([r"(?i)\bout of memory\b", r"(?i)kill", r"^\S+ failed$"])
    lines = [b"CUDA Out Of Memory.", b"without of memory", b"KILL", b"\xe2\x84\xaaill", b"ki",
             b"rank0 failed", b"rank0 failed later", b"a b failed"]
    assert _scan_lines(m, lines) == [b"CUDA Out Of Memory.", b"KILL", b"\xe2\x84\xaaill", b"rank0 failed"]


def _scan_lines(m, lines):
    data = b"\n".join(lines) + b"\n"
    buf = bytearray(data)
    ends = set(m.scan(memoryview(buf), 0, len(buf)))
    offs = [i for i, c in enumerate(data) if c == 10]
    return [lines[i] for i, o in enumerate(offs) if o in ends]


# --------------------------------------------------------------------------
# property: the scan never misses a line that regex.search matches
# --------------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ATOMS = [
    "a", "k", "s", "i", "K", "S", "I", "é", "É", "\u212a", "\u017f", "\u0130", "x", "1",
    "٣", " ", ":", ".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", "[abk]", "[^a]", "[a-z]",
    "[^a-z]", r"[\d\s]", "[é-ë]", "[^é]", r"\x1c", "\ufffd", r"\t", "\r", "(a)\\1",
]
_ANCH = [r"\b", r"\B", "^", "$", r"\A", r"\Z", "(?=a)", "(?!a)", "(?<=a)", "(?<!a)"]
_QUANT = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "*?", "{0,2}"]


@st.composite
def patterns(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 9))
        if kind < 6 or depth >= 2:
            atom = draw(st.sampled_from(_ATOMS)) + draw(st.sampled_from(_QUANT))
        elif kind == 6:
            atom = draw(st.sampled_from(_ANCH))
        elif kind == 7:
            atom = "(" + draw(patterns(depth + 1)) + ")" + draw(st.sampled_from(_QUANT))
        elif kind == 8:
            atom = "(?:" + draw(patterns(depth + 1)) + "|" + draw(patterns(depth + 1)) + ")"
        else:
            atom = "(?i:" + draw(patterns(depth + 1)) + ")"
        parts.append(atom)
    p = "".join(parts)
    if depth == 0 and draw(st.booleans()):
        p = "(?i)" + p
    return p


_CHARS = [
    "a", "k", "s", "i", "K", "S", "I", "é", "É", "\u212a", "\u017f", "\u0130", "\u0131", "x",
    "1", "٣", " ", ":", "\x1c", "\r", "\t", "\u0301", "\ufffd", "█", "\xa0", "A",
]
_BAD = [b"\xff", b"\xc3", b"\xe2\x96", b"\x80"]
line_bytes = st.lists(
    st.one_of(st.sampled_from(_CHARS).map(lambda c: c.encode()), st.sampled_from(_BAD)),
    max_size=8,
).map(b"".join)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(pattern=patterns(), lines=st.lists(line_bytes, min_size=1, max_size=12))
def test_scan_never_under_matches(pattern, lines):
    try:
        compiled = regex.compile(pattern)
    except regex.error:
        return
    m = AnchorMatcher([pattern])
    data = b"\n".join(lines) + b"\n"
    buf = bytearray(data)
    ends = set(m.scan(memoryview(buf), 0, len(buf)))
    off = 0
    for line in lines:
        off += len(line)
        if compiled.search(line.decode("utf-8", "replace")):
            assert off in ends, (pattern, line, m.hs and m.hs.groups)
        off += 1
