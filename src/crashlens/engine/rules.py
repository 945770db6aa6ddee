"""The rule base: YAML files in rules/, validated against data/rule.schema.json.

A rule names one taxonomy category and says which evidence triggers it (`match`, any one),
which evidence must also be present (`requires`, all), which must not be there at all
(`absent`, none: the evidence that would explain the trigger otherwise), which trigger lines do not count
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
from ..knowledge import data

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 5x faster


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader


class LazyRegex:
    """A `regex` pattern compiled on first use. Compiling the whole rule base costs ~0.1 s
    while a typical log needs a handful of patterns (hyperscan says which); a rule base that
    passed validation on this machine is known to compile."""

    __slots__ = ("pattern", "_compiled")

    def __init__(self, pattern: str, compiled: "re.Pattern[str] | None" = None) -> None:
        self.pattern = pattern
        self._compiled = compiled

    @property
    def compiled(self) -> "re.Pattern[str]":
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, re.V0)
        return self._compiled

    @property
    def flags(self) -> int:
        return self.compiled.flags

    def search(self, text: str, *args: Any) -> "re.Match[str] | None":
        return self.compiled.search(text, *args)

    def finditer(self, text: str, *args: Any):
        return self.compiled.finditer(text, *args)

    def __repr__(self) -> str:
        return f"LazyRegex({self.pattern!r})"


@dataclass(frozen=True)
class Condition:
    pattern: LazyRegex | None
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
    evidence: tuple[Mapping[str, Any], ...] = ()  # structured evidence beside the text


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
    from_warnings: bool  # meant to fire on warning-level lines: no severity discount
    explain: str
    remedies: tuple[str, ...]
    references: tuple[str, ...]
    examples: tuple[Example, ...]
    file: str
    fallback: bool = False  # fires only on evidence that no other (non-fallback) rule explains
    absent: tuple[Condition, ...] = ()  # NONE may be found anywhere in the inputs


@dataclass(frozen=True, eq=False)  # compared and hashed by identity (caches key on it)
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


@cache
def taxonomy() -> dict[str, dict[str, str]]:
    doc = data("taxonomy.yaml")
    return {c["id"]: {k: v for k, v in c.items() if k != "id"} for c in doc["categories"]}


def rule_schema() -> dict[str, Any]:
    return data("rule.schema.json")


def _condition(spec: Any, where: str, *, support: bool = False, compile_now: bool = True) -> Condition:
    if isinstance(spec, str):
        spec = {"pattern": spec}
    pattern = None
    src = spec.get("pattern", "")
    if src:
        if compile_now:
            try:
                pattern = LazyRegex(src, re.compile(src, re.V0))
            except re.error as exc:
                raise RuleError(f"{where}: bad pattern {src!r}: {exc}") from None
        else:
            pattern = LazyRegex(src)
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


def _rule(doc: Mapping[str, Any], file: str, cats: Mapping[str, Any], compile_now: bool = True) -> Rule:
    rid = doc["id"]
    where = f"{file}: rule {rid}"
    if doc["category"] not in cats:
        raise RuleError(f"{where}: category {doc['category']!r} is not in the taxonomy")
    examples = []
    for ex in doc.get("examples", []):
        extra = tuple(ex.get("evidence") or ())
        if "fires" in ex:
            examples.append(Example(ex["fires"], True, extra))
        if "not" in ex:
            examples.append(Example(ex["not"], False, extra))
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
        match=tuple(_condition(c, where, compile_now=compile_now) for c in doc["match"]),
        requires=tuple(_condition(c, where, compile_now=compile_now) for c in doc.get("requires", [])),
        unless=tuple(_condition(c, where, compile_now=compile_now) for c in doc.get("unless", [])),
        absent=tuple(_condition(c, where, compile_now=compile_now) for c in doc.get("absent", [])),
        support=tuple(_condition(c, where, support=True, compile_now=compile_now) for c in doc.get("support", [])),
        consequence_of=tuple(cons),
        async_cuda=bool(doc.get("async_cuda", False)),
        from_warnings=bool(doc.get("from_warnings", False)),
        fallback=bool(doc.get("fallback", False)),
        explain=doc.get("explain", doc["title"]).strip(),
        remedies=tuple(doc.get("remedies", [])),
        references=tuple(doc.get("references", [])),
        examples=tuple(examples),
        file=file,
    )


def _validated_marker(texts: dict[str, str]) -> Path:
    """A file in the user cache whose existence says: this exact rule base passed the schema."""
    import hashlib

    from ..patterns.hscache import cache_dir

    h = hashlib.sha256(json.dumps(rule_schema(), sort_keys=True).encode())
    for name in sorted(texts):
        h.update(name.encode() + b"\0" + texts[name].encode() + b"\0")
    return cache_dir() / f"rules-valid-{h.hexdigest()[:32]}"


def _read(rules_dir: Path, *, force_schema: bool = False) -> tuple[list[Rule], list[str]]:
    """Every rule of the directory, and every problem found: schema errors, unknown
    categories, bad patterns, duplicate ids, taxonomy categories without a rule.

    The JSON-schema check (and importing jsonschema, 0.1 s) is skipped when this exact rule
    base already passed it on this machine; everything else is checked every time."""
    problems: list[str] = []
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    cats = taxonomy()
    texts: dict[str, str] = {}
    for path in sorted(rules_dir.glob("*.yaml")):
        try:
            texts[path.name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path.name}: not readable: {exc}")
    marker = _validated_marker(texts)
    validator = None
    if force_schema or not marker.exists():
        import jsonschema

        validator = jsonschema.Draft202012Validator(rule_schema())
    for name, text in texts.items():
        path = rules_dir / name
        try:
            doc = _yaml(text)
        except yaml.YAMLError as exc:
            problems.append(f"{path.name}: not readable YAML: {str(exc).splitlines()[0]}")
            continue
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)) if validator else []
        for err in errors:
            loc = "/".join(map(str, err.absolute_path))
            problems.append(f"{path.name}: {loc or '(top)'}: {err.message}")
        if errors or not isinstance(doc, dict):
            continue
        for r in doc.get("rules") or []:
            if r["id"] in seen:
                problems.append(f"{path.name}: rule {r['id']} is also defined in {seen[r['id']]}")
            seen[r["id"]] = path.name
            try:
                rules.append(_rule(r, path.name, cats, compile_now=validator is not None))
            except (RuleError, KeyError, TypeError, ValueError) as exc:
                problems.append(str(exc))
    covered = {r.category for r in rules}
    problems += [f"taxonomy category {c} has no rule" for c in cats if c not in covered]
    if validator is not None and not problems:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:
            pass  # a read-only cache only costs the check next time
    return rules, problems


def validate_documents(rules_dir: Path) -> list[str]:
    """Schema and consistency problems of every rule file, as one-line messages."""
    return _read(rules_dir, force_schema=True)[1]


@cache
def load_rules(rules_dir: Path | None = None) -> RuleBase:
    rules_dir = rules_dir or default_rules_dir()
    if not rules_dir.is_dir():
        raise RuleError(f"rule directory {rules_dir} does not exist")
    rules, problems = _read(rules_dir)
    if problems:
        raise RuleError("invalid rule base: " + "; ".join(problems[:5])
                        + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
    return RuleBase(tuple(rules), taxonomy())
