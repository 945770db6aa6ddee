"""Score the analyzer on a corpus folder: cases/<name>/case.yaml + the inputs it lists.

top-1: the first cause's category is the case's category or one of its also_acceptable;
top-3: the case's category is among the first three causes; per-category recall (top-1);
misses: what was predicted instead, with the case name, so that rules can be generalised.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from ..pipeline import Options, analyze_paths


def load_cases(corpus: Path) -> list[tuple[Path, dict[str, Any]]]:
    root = corpus / "cases" if (corpus / "cases").is_dir() else corpus
    cases = []
    for case_file in sorted(root.glob("*/case.yaml")):
        cases.append((case_file.parent, yaml.safe_load(case_file.read_text(encoding="utf-8"))))
    return cases


BUCKETS = ((0.0, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01))


def evaluate_corpus(corpus: Path, rules_dir: Path | None = None) -> dict[str, Any]:
    rows = []
    for folder, case in load_cases(corpus):
        inputs = [str(folder / name) for name in case.get("inputs") or ["input.log"]]
        a = analyze_paths(inputs, Options(rules_dir=rules_dir))
        rows.append(score_row(folder.name, case, [c.category for c in a.causes],
                              a.causes[0].confidence if a.causes else 0.0,
                              a.causes[0].rule if a.causes else None))
    return summarise(rows)


def score_row(name: str, case: Mapping[str, Any], predicted: list[str], confidence: float,
              rule: str | None) -> dict[str, Any]:
    truth = case["category"]
    accepted = {truth, *(case.get("also_acceptable") or [])}
    return {
        "case": name,
        "category": truth,
        "predicted": predicted[:3],
        "main": bool(predicted) and predicted[0] == truth,
        "top1": bool(predicted) and predicted[0] in accepted,
        "top3": truth in predicted[:3] or (bool(predicted) and predicted[0] in accepted),
        "confidence": confidence,
        "rule": rule,
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Scores of a list of score_row()s: main-label and accepted top-1, top-3, cases with no
    cause, per-category recall, the confusion list and accuracy per confidence bucket."""
    n = len(rows) or 1
    per_cat: dict[str, list[int]] = {}
    for r in rows:
        hit = per_cat.setdefault(r["category"], [0, 0])
        hit[0] += int(r["top1"])
        hit[1] += 1
    confusion: dict[tuple[str, str], int] = {}
    for r in rows:
        if not r["top1"]:
            key = (r["category"], r["predicted"][0] if r["predicted"] else "(nothing)")
            confusion[key] = confusion.get(key, 0) + 1
    buckets = []
    for lo, hi in BUCKETS:
        inside = [r for r in rows if r["predicted"] and lo <= r["confidence"] < hi]
        if inside:
            buckets.append({"from": lo, "to": min(hi, 1.0), "cases": len(inside),
                            "accuracy": sum(r["top1"] for r in inside) / len(inside),
                            "mean_confidence": sum(r["confidence"] for r in inside) / len(inside)})
    return {
        "cases": len(rows),
        "top1": sum(r["top1"] for r in rows) / n,
        "top1_main": sum(r["main"] for r in rows) / n,
        "top3": sum(r["top3"] for r in rows) / n,
        "no_cause": sum(1 for r in rows if not r["predicted"]),
        "recall": {c: v[0] / v[1] for c, v in sorted(per_cat.items())},
        "confusion": [{"expected": e, "got": g, "cases": k}
                      for (e, g), k in sorted(confusion.items(), key=lambda x: (-x[1], x[0]))],
        "confidence_buckets": buckets,
        "misses": [r for r in rows if not r["top1"]],
        "top3_misses": [r for r in rows if not r["top3"]],
        "rows": rows,
    }


def render_scores(s: dict[str, Any]) -> str:
    out = [f"cases: {s['cases']}",
           f"top-1: {s['top1']:.3f}  (accepted alternatives count; main label only: {s['top1_main']:.3f})",
           f"top-3: {s['top3']:.3f}",
           f"no cause: {s['no_cause']} of {s['cases']}",
           "", "per-category recall (top-1):"]
    for c, v in s["recall"].items():
        out.append(f"  {c:32} {v:.2f}")
    if s["confidence_buckets"]:
        out += ["", "confidence of the first cause vs how often it is right:"]
        for b in s["confidence_buckets"]:
            out.append(f"  {b['from']:.1f}-{b['to']:.1f}: {b['cases']:4} cases, right {b['accuracy']:.2f} "
                       f"(mean confidence {b['mean_confidence']:.2f})")
    if s["confusion"]:
        out += ["", "confusion (expected -> ranked first):"]
        for c in s["confusion"]:
            out.append(f"  {c['expected']} -> {c['got']}: {c['cases']}")
    if s["misses"]:
        out += ["", "misses (top-1):"]
        for r in s["misses"]:
            out.append(f"  {r['case']}: expected {r['category']}, got {r['predicted'] or 'nothing'}")
    return "\n".join(out)
