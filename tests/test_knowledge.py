"""Knowledge tables live once, as data (crashlens.knowledge): per-category notes, abort frames."""

from __future__ import annotations

import string

from crashlens import knowledge
from crashlens.engine.rules import load_rules, taxonomy


def test_async_cuda_categories_agree_with_the_rules():
    """data/categories.yaml names the async-CUDA categories; the rules flag `async_cuda` on the
    rules of exactly those categories (not every rule of them: an Xid record is no sync point)."""
    flagged = {r.category for r in load_rules().rules if r.async_cuda}
    assert flagged == set(knowledge.async_cuda_categories())
    assert knowledge.async_cuda_categories() == {"device-side-assert", "gpu-illegal-instruction",
                                                 "gpu-illegal-memory-access"}


def test_category_notes_are_keyed_by_taxonomy_ids():
    known = set(taxonomy())
    doc = knowledge.data("categories.yaml")
    assert set(doc["categories"]) <= known
    for cat in doc["categories"]:
        assert set(doc["categories"][cat]) <= {"async_cuda", "testing"}, cat


def test_a_category_without_notes_has_none():
    notes = knowledge.category_notes("no-such-category")
    assert notes.async_cuda is False and notes.testing == ()


def test_testing_steps_use_only_the_documented_fields():
    steps = list(knowledge.async_cuda_testing())
    for cat in knowledge.data("categories.yaml")["categories"]:
        steps += knowledge.category_notes(cat).testing
    assert steps
    for s in steps:
        fields = {f for _, f, _, _ in string.Formatter().parse(s) if f is not None}
        assert fields <= {"cmd", "sm", "at"}, s
        s.format(cmd="python train.py", sm="sm_90", at="")


def test_abort_frames_come_from_the_data_file():
    frames = knowledge.abort_frames()
    assert "abort" in frames.functions and "__assert_fail" in frames.functions
    assert "libc.so*" in frames.runtime_modules
    from crashlens.signature import native_frames

    frames_in = [{"function": "raise", "module": "/lib/libc.so.6"}, {"function": "abort", "module": "/lib/libc.so.6"},
                 {"function": "check_config", "module": "/opt/app/bin/app"}]
    assert native_frames(frames_in) == ["app!check_config"]


def test_environment_table_is_data_bound_to_named_functions():
    """data/environment.yaml holds the environment rules; parsers/environment.py only binds the
    converter and key-function names they use (every name known, every pattern compiles)."""
    from crashlens.parsers import environment

    rows = knowledge.environment_rules()
    assert len(rows) >= 50 and all("${" not in r.pattern for r in rows)
    assert any(r.hints is None for r in rows) and any(r.key.endswith("()") for r in rows)
    table = environment._table()
    assert len(table.rules) == len(rows)
    assert {r.convert for r in rows} <= set(environment._CONVERTERS)


def test_a_malformed_environment_rule_is_named(monkeypatch):
    import pytest

    def fake(name):
        return {"fragments": {"V": r"(?P<v>\d+)"}, "rules": [{"pattern": "x ${W}", "key": "k"}]}

    monkeypatch.setattr(knowledge, "data", fake)
    with pytest.raises(ValueError, match="rule 1: unknown fragment"):
        knowledge.environment_rules.__wrapped__()
    monkeypatch.setattr(knowledge, "data", lambda name: {"rules": [{"pattern": "x", "key": "k", "hint": "x"}]})
    with pytest.raises(ValueError, match="rule 1"):
        knowledge.environment_rules.__wrapped__()
