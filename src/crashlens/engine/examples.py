"""Run the rules' inline examples through the whole pipeline (normalise, parse, match)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..analyze import Options, analyze_text
from .rules import load_rules


@dataclass(frozen=True)
class ExampleResult:
    rule: str
    expect: bool
    text: str
    fired: bool

    @property
    def ok(self) -> bool:
        return self.fired == self.expect


def fired_rules(text: str, rules_dir: Path | None = None, evidence: tuple = ()) -> set[str]:
    from ..model import Evidence, Loc

    extra = [Evidence(e["kind"], e.get("text", ""), Loc("example"), facts=dict(e.get("facts") or {}))
             for e in evidence]
    a = analyze_text(text, "example.log", Options(rules_dir=rules_dir), extra)
    out: set[str] = set()
    for c in a.causes:
        out.add(c.rule)
        out.update(c.other_rules)
    return out


def run_examples(rules_dir: Path | None = None, only: str | None = None) -> list[ExampleResult]:
    rb = load_rules(rules_dir)
    results = []
    for rule in rb.rules:
        if only and only not in rule.id:
            continue
        for ex in rule.examples:
            fired = rule.id in fired_rules(ex.text, rules_dir, ex.evidence)
            results.append(ExampleResult(rule.id, ex.fires, ex.text, fired))
    return results
