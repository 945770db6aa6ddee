"""Run the rules' inline examples through the whole pipeline (normalise, parse, match).

The pipeline is passed in (`analyze.text_analyzer(rules_dir)`): the engine does not import
the module that wires it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..model import Analysis, Evidence, Loc
from .rules import load_rules

TextAnalyzer = Callable[[str, Sequence[Evidence]], Analysis]  # (log text, extra evidence) -> Analysis


@dataclass(frozen=True)
class ExampleResult:
    rule: str
    expect: bool
    text: str
    fired: bool

    @property
    def ok(self) -> bool:
        return self.fired == self.expect


def fired_rules(text: str, analyze: TextAnalyzer, evidence: tuple = ()) -> set[str]:
    extra = [Evidence(e["kind"], e.get("text", ""), Loc("example"), facts=dict(e.get("facts") or {}))
             for e in evidence]
    a = analyze(text, extra)
    out: set[str] = set()
    for c in a.causes:
        out.add(c.rule)
        out.update(c.other_rules)
    return out


def run_examples(analyze: TextAnalyzer, rules_dir: Path | None = None, only: str | None = None) -> list[ExampleResult]:
    rb = load_rules(rules_dir)
    results = []
    for rule in rb.rules:
        if only and only not in rule.id:
            continue
        for ex in rule.examples:
            fired = rule.id in fired_rules(ex.text, analyze, ex.evidence)
            results.append(ExampleResult(rule.id, ex.fires, ex.text, fired))
    return results
