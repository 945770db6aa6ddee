"""The rule base: schema, taxonomy coverage, and every rule's own examples."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crashlens.pipeline import text_analyzer
from crashlens.engine.examples import fired_rules
from crashlens.engine.rules import default_rules_dir, load_rules, taxonomy, validate_documents
from crashlens.errors import RuleError

from .conftest import SHARED

RULES = load_rules()


def test_rule_base_is_valid_and_covers_taxonomy():
    assert validate_documents(default_rules_dir()) == []
    assert {r.category for r in RULES.rules} == set(taxonomy())


def test_packaged_taxonomy_matches_shared():
    shared = SHARED / "taxonomy.yaml"
    if not shared.exists():
        pytest.skip("shared/taxonomy.yaml not present")
    ids = [c["id"] for c in yaml.safe_load(shared.read_text())["categories"]]
    assert ids == list(taxonomy())


@pytest.mark.parametrize(
    "rule,example",
    [(r, ex) for r in RULES.rules for ex in r.examples],
    ids=lambda v: v.id if hasattr(v, "category") else ("fires" if v.fires else "not"),
)
def test_rule_example(rule, example):
    fired = rule.id in fired_rules(example.text, text_analyzer(), evidence=example.evidence)
    assert fired == example.fires, f"{rule.id}: expected {'firing' if example.fires else 'no firing'} on {example.text!r}"


def test_invalid_rule_file_is_reported(tmp_path: Path):
    (tmp_path / "bad.yaml").write_text(
        "rules:\n  - id: Bad_ID\n    category: not-a-category\n    title: t\n    match: ['(unclosed']\n")
    problems = validate_documents(tmp_path)
    text = "\n".join(problems)
    assert "Bad_ID" in text or "does not match" in text
    assert any("required" in p for p in problems)  # explain/remedies/examples missing
    with pytest.raises(RuleError):
        load_rules(tmp_path)
