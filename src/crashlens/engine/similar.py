"""The similarity fallback: for an error that no rule explains, the nearest known error.

The reference set is the rules' own inline examples (every `fires` example, labelled with its
rule's category) and data/similar_cases.yaml (the error lines of the project's labelled fixture
corpora, written by bench/similarity.py). Texts are reduced to word tokens (numbers, hex,
paths and quoted values become placeholders) and compared by TF-IDF cosine similarity. A
proposal is a Cause marked "by similarity, low confidence" that names the example it resembles;
it is always ranked below every rule-backed cause.

bench/similarity.py evaluates it leave-one-source-out (each fixture corpus held out in turn).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Iterable, Sequence

import regex as re

from ..knowledge import data
from ..model import Cause, Evidence
from .rules import RuleBase

MIN_SIMILARITY = 0.42  # below this, nothing is proposed
MAX_QUERIES = 64  # distinct error texts compared, the last ones of the input
# How often a proposal was right, leave-one-source-out over 404 cases (bench/similarity.py,
# 2026-11-26): similarity 0.42-0.6 -> 0.39 (44 cases), >= 0.6 -> 0.80 (255 cases).
CONFIDENCE_BANDS = ((0.6, 0.75), (MIN_SIMILARITY, 0.4))

_ERRORISH = re.compile(
    r"(?i)\b(?:error|errno|fatal|failed|failure|exception|abort(?:ed)?|killed|cannot|can't|unable|"
    r"not found|no such|denied|refused|timed? ?out|invalid|illegal|segmentation|core dumped|traceback|"
    r"mismatch|unsupported|insufficient|exceeded|corrupt)")
_NOISE = (
    (re.compile(r"0x[0-9a-fA-F]+"), " HEX "),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?"), " PATH "),
    (re.compile(r"'[^']{0,200}'|\"[^\"]{0,200}\""), " QUOTED "),
    (re.compile(r"\d+(?:\.\d+)*"), " NUM "),
)
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def tokens(text: str) -> list[str]:
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    out: list[str] = []
    words = _TOKEN.findall(text)
    for w in words:
        low = w.lower()
        out.append(low)
        parts = _CAMEL.split(w)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts if len(p) > 2)
    lows = [w.lower() for w in words]
    out.extend(f"{a}_{b}" for a, b in zip(lows, lows[1:]))
    return out


def error_lines(texts: Iterable[str], limit: int = 6) -> list[str]:
    """The last few lines that look like an error: what a user would search for."""
    found = [t.strip() for t in texts if 8 <= len(t.strip()) <= 2000 and _ERRORISH.search(t)]
    found = [t for t in found if not t.startswith(("File \"", "Traceback"))]
    return found[-limit:]


@dataclass(frozen=True)
class Reference:
    text: str
    category: str
    source: str  # "rule <id>" or the fixture case it came from


class SimilarityIndex:
    def __init__(self, refs: Sequence[Reference]) -> None:
        self.refs = list(refs)
        docs = [Counter(tokens(r.text)) for r in self.refs]
        df: Counter[str] = Counter()
        for d in docs:
            df.update(d.keys())
        n = len(docs) or 1
        self.idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        self.vectors = [self._vector(d) for d in docs]

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        v = {t: (1 + math.log(c)) * self.idf.get(t, 0.0) for t, c in counts.items() if t in self.idf}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {t: x / norm for t, x in v.items()}

    def nearest(self, text: str) -> tuple[float, Reference | None]:
        q = self._vector(Counter(tokens(text)))
        best, best_ref = 0.0, None
        for ref, v in zip(self.refs, self.vectors):
            if len(v) < len(q):
                s = sum(x * q.get(t, 0.0) for t, x in v.items())
            else:
                s = sum(x * v.get(t, 0.0) for t, x in q.items())
            if s > best:
                best, best_ref = s, ref
        return best, best_ref

    def propose(self, queries: Sequence[str]) -> tuple[float, Reference | None, str]:
        best: tuple[float, Reference | None, str] = (0.0, None, "")
        for q in queries:
            s, ref = self.nearest(q)
            if s > best[0]:
                best = (s, ref, q)
        return best


def rule_references(rules: RuleBase) -> list[Reference]:
    out = []
    for r in rules.rules:
        for ex in r.examples:
            if ex.fires and ex.text.strip():
                lines = error_lines(ex.text.splitlines()) or [ex.text.strip()[:400]]
                out.append(Reference(" ".join(lines)[:600], r.category, f"rule {r.id}"))
    return out


@cache
def fixture_references() -> tuple[Reference, ...]:
    try:
        doc = data("similar_cases.yaml")
    except FileNotFoundError:
        return ()
    return tuple(Reference(c["text"], c["category"], c["source"]) for c in doc.get("cases") or [])


def _overlaps(a: Evidence, b: Evidence) -> bool:
    if a.loc.source != b.loc.source:
        return False
    return a.loc.line <= (b.loc.end_line or b.loc.line) and b.loc.line <= (a.loc.end_line or a.loc.line)


@lru_cache(maxsize=2)  # keyed on the rule base itself (hashed by identity), not on a reusable id()
def index_for(rules: RuleBase) -> SimilarityIndex:
    return SimilarityIndex([*rule_references(rules), *fixture_references()])


def propose(causes: Sequence[Cause], lines: Sequence[Evidence], items: Sequence[Evidence],
            rules: RuleBase) -> list[Cause]:
    """causes, plus (last) a category proposed by similarity for an error no rule explains."""
    explained = [e for c in causes for e in c.evidence]
    queries: list[Evidence] = []
    for e in items:
        if e.kind == "exception" and e.facts.get("root"):
            queries.append(e)
    if not queries:
        texts = error_lines(e.text for e in lines if not e.facts.get("joined"))
        queries = [e for e in lines if e.text.strip() in texts and not e.facts.get("joined")][-6:]
    queries = [q for q in queries if not any(_overlaps(q, e) for e in explained)]
    # the same error repeated (every rank, every step) is one query; the last ones are enough
    distinct: dict[str, Evidence] = {}
    for q in queries:
        distinct.setdefault(q.text[:2000], q)
    queries = list(distinct.values())[-MAX_QUERIES:]
    if not queries:
        return list(causes)
    idx = index_for(rules)
    score, ref, text = idx.propose([q.text[:2000] for q in queries])
    if ref is None or score < MIN_SIMILARITY:
        return list(causes)
    if any(c.category == ref.category for c in causes):
        return list(causes)
    ev = next(q for q in queries if q.text[:2000] == text)
    title = rules.categories.get(ref.category, {}).get("title", ref.category)
    conf = next(c for lo, c in CONFIDENCE_BANDS if score >= lo)
    if causes:  # listed last, so never shown as surer than a rule-backed cause above it
        conf = min(conf, max(0.01, min(c.confidence for c in causes) - 0.01))
    cause = Cause(
        category=ref.category,
        rule="similarity",
        title=f"{title} (by similarity, low confidence)",
        confidence=conf,
        explanation=(f"No rule recognises this error, but it resembles a known {ref.category} error "
                     f"({ref.source}: \"{ref.text if len(ref.text) <= 160 else ref.text[:159] + '…'}\"). "
                     f"This is a guess from wording alone."),
        remedies=("Treat this as a lead, not a diagnosis: compare the error with the example named above.",),
        references=(),
        evidence=(ev,),
        reasoning=(f"TF-IDF cosine similarity {score:.2f} to {ref.source} (threshold {MIN_SIMILARITY}); "
                   f"confidence {conf:.2f}: how often proposals this similar were right when their source "
                   f"was held out",
                   "ranked below every rule-backed cause"),
        secondary=False,
    )
    return [*causes, cause]
