"""Evaluate the rule base over the evidence: which rules fire, on which evidence, with what.

Line patterns are searched in every normalised line, and also across the break of lines
that continue one another (a terminal-wrapped message, an indented continuation of a log
record): such a match is reported with a Loc spanning both lines. Structured evidence
(exceptions, dmesg records, outcomes…) is tested on its kind, its facts and its text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Iterable, Sequence

import regex as re

from ..model import Evidence, Line, LogStructure, Loc, Match, Record, Role
from ..patterns import LineScanner
from .rules import Condition, Rule, RuleBase

#: Evidence kept per condition of a rule (the first ones); the rest is only counted
#: (Firing.more), so a log in which every line is a hit costs no more than one with 50.
MAX_MATCHES = 50


@dataclass(frozen=True)
class Firing:
    rule: Rule
    triggers: tuple[Match, ...]
    supports: tuple[Match, ...]
    captures: dict[str, str]
    more: int = 0  # triggers and supports found beyond MAX_MATCHES per condition, not kept
    requirements: tuple[Match, ...] = ()  # what satisfied the rule's `requires` (shown as evidence too)


@dataclass
class EvidenceSet:
    """All evidence of one analysis: line evidence (with joined pairs) and structured items."""

    lines: list[Evidence]
    items: list[Evidence]
    _by_kind: dict[str, list[tuple[int, Evidence]]] | None = None
    _indexed: int = 0

    def of_kinds(self, kinds: Iterable[str]) -> list[Evidence]:
        """The structured items of these kinds, in their order."""
        if self._by_kind is None or self._indexed != len(self.items):
            self._by_kind, self._indexed = {}, len(self.items)
            for i, e in enumerate(self.items):
                self._by_kind.setdefault(e.kind, []).append((i, e))
        parts = [self._by_kind[k] for k in set(kinds) if k in self._by_kind]
        if len(parts) == 1:
            return [e for _i, e in parts[0]]
        return [e for _i, e in sorted((p for part in parts for p in part), key=lambda p: p[0])]

    @classmethod
    def build(cls, structures: Sequence[LogStructure], items: Iterable[Evidence]) -> "EvidenceSet":
        """Line evidence from each input's structure: a line's facts hold its stream, its level
        and its role in a block where it has them; two lines of one record (a message wrapped
        onto an indented or lower-case line) are also matched joined."""
        out: list[Evidence] = []
        for st in structures:
            prev: Line | None = None
            prev_rec: Record | None = None
            for ln, rec in zip(st.lines, st.records):
                facts: dict[str, object] = {}
                if ln.stream:
                    facts["stream"] = ln.stream
                if rec.level:
                    facts["level"] = rec.level
                if rec.role:
                    facts["role"] = str(rec.role)
                out.append(Evidence("line", ln.text, ln.loc, facts=facts))
                if prev is not None and prev_rec is not None and _continues(prev, ln, prev_rec, rec):
                    head, tail = prev.text.rstrip(), ln.text.strip()
                    # a hard wrap at a fixed width (a terminal, a mail client) splits words: join
                    # a long line that ends mid-word without a space
                    glue = "" if len(head) >= 70 and head[-1:].isalnum() and tail[:1].isalnum() and \
                        len(prev.text) == len(head) else " "
                    joined = head + glue + tail
                    jf: dict[str, object] = {"joined": True}
                    if prev_rec.level:
                        jf["level"] = prev_rec.level
                    out.append(Evidence("line", joined, Loc(prev.loc.source, prev.loc.line, ln.loc.line), facts=jf))
                prev, prev_rec = ln, rec
        return cls(out, list(items))


def _continues(prev: Line, cur: Line, prev_rec: Record, rec: Record) -> bool:
    if cur.loc.line != prev.loc.line + 1 or prev.stream != cur.stream:
        return False
    if not prev.text.strip() or not cur.text.strip():
        return False
    if Role.FRAME in (prev_rec.role, rec.role):
        return False
    return cur.text[:1] in (" ", "\t") or cur.text[:1].islower()


@cache
def _scanner(rules: RuleBase) -> tuple[LineScanner, dict[int, tuple[Rule, str, int]]]:
    """One scanner for every line pattern of the rule base; index -> (rule, part, cond)."""
    patterns: list[re.Pattern[str]] = []
    where: dict[int, tuple[Rule, str, int]] = {}
    for rule in rules.rules:
        for part in ("match", "requires", "support", "unless", "absent"):
            for ci, cond in enumerate(getattr(rule, part)):
                if cond.pattern is not None and "line" in cond.kinds:
                    where[len(patterns)] = (rule, part, ci)
                    patterns.append(cond.pattern)
    return LineScanner(patterns), where


def _line_hits(rules: RuleBase, ev: EvidenceSet, more: dict[tuple[str, str, int], int]
               ) -> dict[tuple[str, str, int], list[tuple[Evidence, dict[str, str]]]]:
    """Confirmed line matches per (rule, part, condition): the first MAX_MATCHES; the number of
    candidate lines not confirmed after them goes into `more`."""
    scanner, where = _scanner(rules)
    texts = [e.text for e in ev.lines]
    raw = scanner.scan(texts)
    out: dict[tuple[str, str, int], list[tuple[Evidence, dict[str, str]]]] = {}
    for pid, idxs in raw.items():
        rule, part, ci = where[pid]
        pattern = scanner.patterns[pid]
        cond = getattr(rule, part)[ci]
        found: list[tuple[Evidence, dict[str, str]]] = []
        single_lines: set[tuple[str, int]] = set()
        ordered = sorted(idxs)
        for n, i in enumerate(ordered):
            if len(found) >= MAX_MATCHES:
                more[(rule.id, part, ci)] = len(ordered) - n
                break
            e = ev.lines[i]
            m = pattern.search(e.text)
            if m is None:
                continue
            if cond.facts and not cond.test_facts({"role": "", "level": "", **e.facts}):
                continue   # a line condition on the line's record: its role in a block, its level
            if e.facts.get("joined"):
                # a joined pair counts only where neither line matched alone
                # (both lines come earlier in ev.lines, so they were confirmed already)
                if (e.loc.source, e.loc.line) in single_lines or (e.loc.source, e.loc.end_line) in single_lines:
                    continue
            else:
                single_lines.add((e.loc.source, e.loc.line))
            found.append((e, _caps(m)))
        if found:
            out[(rule.id, part, ci)] = found
    return out


def _structured(cond: Condition, ev: EvidenceSet, more: list[int]) -> list[tuple[Evidence, dict[str, str]]]:
    """Structured evidence that satisfies a condition (the first MAX_MATCHES; more[0] counts
    the rest); its captures are its plain facts (so explanations can say {xid},
    {suspect_ranks}…) plus the pattern's named groups."""
    out = []
    for e in ev.of_kinds(cond.kinds):
        if not cond.test_facts(e.facts):
            continue
        if len(out) >= MAX_MATCHES:
            if cond.pattern is None or cond.pattern.search(e.text) is not None:
                more[0] += 1
            continue
        caps = {k: str(v) for k, v in e.facts.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
        if cond.pattern is not None:
            m = cond.pattern.search(e.text)
            if m is None:
                continue
            caps.update(_caps(m))
        out.append((e, caps))
    return out


def _holds(rule: Rule, part: str, ci: int, cond: Condition, hits, ev: EvidenceSet, more: list[int] | None = None):
    found = list(hits.get((rule.id, part, ci), [])) if "line" in cond.kinds and cond.pattern is not None else []
    if set(cond.kinds) - {"line"} or cond.pattern is None:
        found += _structured(cond, ev, more if more is not None else [0])
    return found


def evaluate(rules: RuleBase, ev: EvidenceSet) -> list[Firing]:
    line_more: dict[tuple[str, str, int], int] = {}
    hits = _line_hits(rules, ev, line_more)
    firings: list[Firing] = []
    for rule in rules.rules:
        triggers: list[Match] = []
        more = [0]
        for ci, cond in enumerate(rule.match):
            more[0] += line_more.get((rule.id, "match", ci), 0)
            for e, caps in _holds(rule, "match", ci, cond, hits, ev, more):
                if any(_condition_on(u, e) for u in rule.unless):
                    continue
                triggers.append(Match(rule.id, e, caps, "trigger", ci))
        if not triggers:
            continue
        required = [_holds(rule, "requires", ci, c, hits, ev) for ci, c in enumerate(rule.requires)]
        if any(not r for r in required):
            continue
        if any(_holds(rule, "absent", ci, c, hits, ev) for ci, c in enumerate(rule.absent)):
            continue
        supports: list[Match] = []
        for ci, cond in enumerate(rule.support):
            more[0] += line_more.get((rule.id, "support", ci), 0)
            for e, caps in _holds(rule, "support", ci, cond, hits, ev, more):
                supports.append(Match(rule.id, e, caps, "support", ci))
        triggers.sort(key=lambda t: (t.condition, t.evidence.loc))
        supports.sort(key=lambda t: (t.condition, t.evidence.loc))
        captures: dict[str, str] = {}
        for t in (*triggers, *supports):
            for k, v in t.captures.items():
                if v and k not in captures:
                    captures[k] = v
        requirements = tuple(Match(rule.id, e, caps, "requires", ci) for ci, got in enumerate(required)
                             for e, caps in got[:3])
        firings.append(Firing(rule, tuple(triggers), tuple(supports), captures, more[0], requirements))
    return firings


def _condition_on(cond: Condition, e: Evidence) -> bool:
    if e.kind not in cond.kinds and not (e.kind == "line" and "line" in cond.kinds):
        return False
    if not cond.test_facts(e.facts):
        return False
    return cond.pattern is None or cond.pattern.search(e.text) is not None


def _caps(m: re.Match[str] | None) -> dict[str, str]:
    if m is None:
        return {}
    return {k: v for k, v in m.groupdict().items() if v}
