"""The rule base: YAML files in rules/, validated against data/rule.schema.json.

A rule names one taxonomy category and says which evidence triggers it (`match`, any one),
which evidence must also be present (`requires`, all), which trigger lines do not count
(`unless`), which evidence strengthens it (`support`), and of which other causes it is
usually only a consequence (`consequence_of`). Its `explain` template is filled from the
named captures of the patterns that matched. `examples` are positive (`fires`) and negative
(`not`) texts that `crashlens rules test` and the test suite run through the whole pipeline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import regex as re
import yaml

from ..errors import RuleError


@dataclass(frozen=True)
class Condition:
    pattern: re.Pattern[str] | None
    source: str  # the pattern text, or a description of the fact test
    kinds: tuple[str, ...] = ("line",)
    facts: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    weight: float = 0.0  # for support conditions

    def test_facts(self, facts: Mapping[str, Any]) -> bool:
        for key, allowed in self.facts.items():
            if facts.get(key) not in allowed:
                return False
        return True


@dataclass(frozen=True)
class Example:
    text: str
    fires: bool


@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    title: str
    weight: float
    match: tuple[Condition, ...]
    requires: tuple[Condition, ...]
    unless: tuple[Condition, ...]
    support: tuple[Condition, ...]
    consequence_of: tuple[str, ...]  # category ids, or ("*",) for any other cause
    async_cuda: bool
    explain: str
    remedies: tuple[str, ...]
    references: tuple[str, ...]
    examples: tuple[Example, ...]
    file: str


@dataclass(frozen=True)
class RuleBase:
    rules: tuple[Rule, ...]
    categories: Mapping[str, Mapping[str, str]]  # taxonomy: id -> {title, layer, what}

    def by_id(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)


def default_rules_dir() -> Path:
    """rules/ inside the installed package (wheel), else the repository's top-level rules/."""
    packaged = resources.files("crashlens") / "rules"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "rules"


def _data(name: str) -> str:
    return (resources.files("crashlens") / "data" / name).read_text(encoding="utf-8")


@cache
def taxonomy() -> dict[str, dict[str, str]]:
    doc = yaml.safe_load(_data("taxonomy.yaml"))
    return {c["id"]: {k: v for k, v in c.items() if k != "id"} for c in doc["categories"]}


@cache
def rule_schema() -> dict[str, Any]:
    return json.loads(_data("rule.schema.json"))


def _condition(spec: Any, where: str, *, support: bool = False) -> Condition:
    if isinstance(spec, str):
        spec = {"pattern": spec}
    pattern = None
    src = spec.get("pattern", "")
    if src:
        try:
            pattern = re.compile(src, re.V0)
        except re.error as exc:
            raise RuleError(f"{where}: bad pattern {src!r}: {exc}") from None
    kinds = spec.get("kind", "line")
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    facts = {}
    for k, v in (spec.get("facts") or {}).items():
        facts[k] = tuple(v) if isinstance(v, list) else (v,)
    if not src:
        src = ", ".join(f"{k}={'|'.join(map(str, v))}" for k, v in facts.items()) or "any"
        src = f"{'/'.join(kinds)}: {src}"
    weight = float(spec.get("weight", 0.05 if support else 0.0))
    return Condition(pattern, src, kinds, facts, weight)


def _rule(doc: Mapping[str, Any], file: str, cats: Mapping[str, Any]) -> Rule:
    rid = doc["id"]
    where = f"{file}: rule {rid}"
    if doc["category"] not in cats:
        raise RuleError(f"{where}: category {doc['category']!r} is not in the taxonomy")
    examples = []
    for ex in doc.get("examples", []):
        if "fires" in ex:
            examples.append(Example(ex["fires"], True))
        if "not" in ex:
            examples.append(Example(ex["not"], False))
    cons = doc.get("consequence_of", [])
    if cons == "any":
        cons = ["*"]
    for c in cons:
        if c != "*" and c not in cats:
            raise RuleError(f"{where}: consequence_of names unknown category {c!r}")
    return Rule(
        id=rid,
        category=doc["category"],
        title=doc["title"],
        weight=float(doc.get("weight", 0.7)),
        match=tuple(_condition(c, where) for c in doc["match"]),
        requires=tuple(_condition(c, where) for c in doc.get("requires", [])),
        unless=tuple(_condition(c, where) for c in doc.get("unless", [])),
        support=tuple(_condition(c, where, support=True) for c in doc.get("support", [])),
        consequence_of=tuple(cons),
        async_cuda=bool(doc.get("async_cuda", False)),
        explain=doc.get("explain", doc["title"]).strip(),
        remedies=tuple(doc.get("remedies", [])),
        references=tuple(doc.get("references", [])),
        examples=tuple(examples),
        file=file,
    )


def validate_documents(rules_dir: Path) -> list[str]:
    """Schema and consistency problems of every rule file, as one-line messages."""
    import jsonschema

    problems: list[str] = []
    schema = rule_schema()
    validator = jsonschema.Draft202012Validator(schema)
    seen: dict[str, str] = {}
    cats = taxonomy()
    for path in sorted(rules_dir.glob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            problems.append(f"{path.name}: not valid YAML: {str(exc).splitlines()[0]}")
            continue
        for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            loc = "/".join(map(str, err.absolute_path))
            problems.append(f"{path.name}: {loc or '(top)'}: {err.message}")
        if not isinstance(doc, dict):
            continue
        for i, r in enumerate(doc.get("rules") or []):
            if not isinstance(r, dict) or "id" not in r:
                continue
            if r["id"] in seen:
                problems.append(f"{path.name}: rule {r['id']} is also defined in {seen[r['id']]}")
            seen[r["id"]] = path.name
            try:
                _rule(r, path.name, cats)
            except (RuleError, KeyError, TypeError, ValueError) as exc:
                problems.append(str(exc))
    covered = set()
    for path in sorted(rules_dir.glob("*.yaml")):
        try:
            for r in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("rules", []):
                covered.add(r.get("category"))
        except Exception:  # already reported above
            pass
    for cat in cats:
        if cat not in covered:
            problems.append(f"taxonomy category {cat} has no rule")
    return problems


@cache
def load_rules(rules_dir: Path | None = None) -> RuleBase:
    rules_dir = rules_dir or default_rules_dir()
    if not rules_dir.is_dir():
        raise RuleError(f"rule directory {rules_dir} does not exist")
    problems = validate_documents(rules_dir)
    if problems:
        raise RuleError("invalid rule base:\n  " + "\n  ".join(problems[:20]))
    return _load_valid(rules_dir)


@cache
def _load_valid(rules_dir: Path) -> RuleBase:
    cats = taxonomy()
    rules: list[Rule] = []
    for path in sorted(rules_dir.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for r in doc.get("rules", []):
            rules.append(_rule(r, path.name, cats))
    return RuleBase(tuple(rules), cats)
