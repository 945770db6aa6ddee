"""Score the analyzer on a corpus folder: cases/<name>/case.yaml + the inputs it lists.

top-1: the first cause's category is the case's category or one of its also_acceptable;
top-3: the case's category is among the first three causes; per-category recall (top-1);
misses: what was predicted instead, with the case name, so that rules can be generalised.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..analyze import Options, analyze_paths


def load_cases(corpus: Path) -> list[tuple[Path, dict[str, Any]]]:
    root = corpus / "cases" if (corpus / "cases").is_dir() else corpus
    cases = []
    for case_file in sorted(root.glob("*/case.yaml")):
        cases.append((case_file.parent, yaml.safe_load(case_file.read_text(encoding="utf-8"))))
    return cases


def evaluate_corpus(corpus: Path, rules_dir: Path | None = None) -> dict[str, Any]:
    rows = []
    for folder, case in load_cases(corpus):
        inputs = [str(folder / name) for name in case.get("inputs") or ["input.log"]]
        a = analyze_paths(inputs, Options(rules_dir=rules_dir))
        predicted = [c.category for c in a.causes]
        truth = case["category"]
        accepted = {truth, *(case.get("also_acceptable") or [])}
        rows.append({
            "case": folder.name,
            "category": truth,
            "predicted": predicted[:3],
            "top1": bool(predicted) and predicted[0] in accepted,
            "top3": truth in predicted[:3] or (bool(predicted) and predicted[0] in accepted),
            "rule": a.causes[0].rule if a.causes else None,
        })
    n = len(rows) or 1
    per_cat: dict[str, list[int]] = {}
    for r in rows:
        hit = per_cat.setdefault(r["category"], [0, 0])
        hit[0] += int(r["top1"])
        hit[1] += 1
    return {
        "cases": len(rows),
        "top1": sum(r["top1"] for r in rows) / n,
        "top3": sum(r["top3"] for r in rows) / n,
        "recall": {c: v[0] / v[1] for c, v in sorted(per_cat.items())},
        "misses": [r for r in rows if not r["top1"]],
        "top3_misses": [r for r in rows if not r["top3"]],
        "rows": rows,
    }


def render_scores(s: dict[str, Any]) -> str:
    out = [f"cases: {s['cases']}", f"top-1: {s['top1']:.3f}", f"top-3: {s['top3']:.3f}", "", "per-category recall (top-1):"]
    for c, v in s["recall"].items():
        out.append(f"  {c:32} {v:.2f}")
    if s["misses"]:
        out += ["", "misses (top-1):"]
        for r in s["misses"]:
            out.append(f"  {r['case']}: expected {r['category']}, got {r['predicted'] or 'nothing'}")
    return "\n".join(out)
