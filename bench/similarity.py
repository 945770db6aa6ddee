"""The similarity fallback's reference data and its leave-one-source-out evaluation.

    python bench/similarity.py build     # write src/crashlens/data/similar_cases.yaml from fixtures/
    python bench/similarity.py evaluate  # each source held out in turn (+ ../shared/corpus, never indexed)

Sources: the rules' inline examples (always indexed) and each labelled fixture corpus of this
project. When a corpus is evaluated, its own cases are left out of the index, so the figure
says how the fallback does on wording it has never seen. The shared corpus is only ever a
held-out source: its logs are not ours to copy into the project.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from crashlens.engine import similar  # noqa: E402
from crashlens.engine.rules import load_rules  # noqa: E402
from crashlens.evaluation.corpus import load_cases  # noqa: E402
from crashlens.text.normalize import normalize  # noqa: E402

FIXTURES = sorted(p for p in (ROOT / "fixtures").glob("corpus*") if p.is_dir()) + [ROOT / "fixtures" / "gpu-runs"] \
    + sorted(p for p in (ROOT / "fixtures").glob("real-r*") if (p / "cases").is_dir())
SHARED = ROOT.parent / "shared" / "corpus"


def case_lines(folder: Path, case: dict) -> list[str]:
    out: list[str] = []
    for name in case.get("inputs") or ["input.log"]:
        p = folder / name
        try:
            raw = p.read_bytes()[: 4 << 20].decode("utf-8", "replace")
        except OSError:
            continue
        out += [normalize(t, name, i).text for i, t in enumerate(raw.splitlines(), 1)]
    return out


def references_of(corpus: Path) -> list[similar.Reference]:
    refs = []
    for folder, case in load_cases(corpus):
        text = case.get("primary_error_line") or " ".join(similar.error_lines(case_lines(folder, case), 2))
        if text:
            refs.append(similar.Reference(str(text)[:600], case["category"], f"fixtures/{corpus.name}/{folder.name}"))
    return refs


def build() -> None:
    refs = [r for c in FIXTURES for r in references_of(c)]
    out = ROOT / "src" / "crashlens" / "data" / "similar_cases.yaml"
    doc = {"cases": [{"text": r.text, "category": r.category, "source": r.source} for r in refs]}
    out.write_text("# Written by bench/similarity.py build: the error line of each labelled fixture case.\n"
                   + yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=200), encoding="utf-8")
    print(f"{len(refs)} references -> {out.relative_to(ROOT)}")


def evaluate() -> None:
    rules = load_rules()
    rule_refs = similar.rule_references(rules)
    by_source = {c: references_of(c) for c in FIXTURES}
    print(f"{'held out':12} {'cases':>5} {'proposed':>8} {'right':>6} {'precision':>9}   at threshold {similar.MIN_SIMILARITY}")
    total = [0, 0, 0]
    for held in [*FIXTURES, SHARED]:
        if not held.is_dir():
            continue
        idx = similar.SimilarityIndex([*rule_refs, *(r for c, rs in by_source.items() if c != held for r in rs)])
        n = proposed = right = 0
        for folder, case in load_cases(held):
            n += 1
            score, ref, _ = idx.propose(similar.error_lines(case_lines(folder, case)))
            if ref is None or score < similar.MIN_SIMILARITY:
                continue
            proposed += 1
            right += ref.category in {case["category"], *(case.get("also_acceptable") or [])}
        total = [total[0] + n, total[1] + proposed, total[2] + right]
        print(f"{held.name:12} {n:5} {proposed:8} {right:6} {right / max(proposed, 1):9.2f}")
    print(f"{'all':12} {total[0]:5} {total[1]:8} {total[2]:6} {total[2] / max(total[1], 1):9.2f}")


if __name__ == "__main__":
    {"build": build, "evaluate": evaluate}[sys.argv[1] if len(sys.argv) > 1 else "evaluate"]()
