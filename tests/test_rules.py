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


def test_a_line_condition_can_read_the_lines_record(tmp_path: Path):
    """`facts: {role: …, level: …}` on a line condition tests what the structure stage said of
    the line: here a rule that must not fire on a frame's source line or a warning."""
    import shutil

    from crashlens.engine.rules import default_rules_dir
    from crashlens.pipeline import text_analyzer

    rules = tmp_path / "rules"
    shutil.copytree(default_rules_dir(), rules)
    (rules / "zz-test.yaml").write_text(
        "rules:\n"
        "  - id: shard-unreadable\n"
        "    category: file-or-permission-error\n"
        "    title: A shard could not be read\n"
        "    weight: 0.8\n"
        "    match:\n"
        "      - {pattern: 'shard \\S+ is unreadable', facts: {role: ['', error, message], level: ['', error]}}\n"
        "    explain: A shard could not be read.\n"
        "    remedies: [Check the shard.]\n"
        "    examples:\n"
        "      - fires: 'ERROR shard 3 is unreadable'\n")
    run = text_analyzer(rules)
    assert [c.rule for c in run("2026-11-28 03:00:01,000 ERROR shard 3 is unreadable\n").causes][:1] \
        == ["shard-unreadable"]
    in_code = ('Traceback (most recent call last):\n  File "/home/u/etl.py", line 9, in <module>\n'
               '    raise SystemExit("shard 3 is unreadable")\nSystemExit: 2\n')
    as_warning = "/home/u/etl.py:4: UserWarning: shard 3 is unreadable\n  warnings.warn(msg)\n"
    for text in (in_code, as_warning):
        assert "shard-unreadable" not in [r for c in run(text).causes for r in (c.rule, *c.other_rules)]
