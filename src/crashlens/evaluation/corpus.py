"""Score the analyzer on a corpus folder: cases/<name>/case.yaml + the inputs it lists.

top-1: the first cause's category is the case's category or one of its also_acceptable;
top-3: the case's category is among the first three causes; per-category recall (top-1);
misses: what was predicted instead, with the case name, so that rules can be generalised.

Where a case gives them, also the reading of the run: `primary_error_line` (the line of the input
the primary error was read from, compared whole), `user_frame` (path:line of the deepest frame of
the user's code on the code path) and `failing_rank` (the rank whose error is primary); per
`family` the top-1; and the calibration of the first cause's confidence (expected calibration
error, and how often causes stated with confidence >= 0.8 are right).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from ..model import Analysis
from ..pipeline import Options, analyze_paths

_RANK_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s?|\[\d+,\d+\]<std(?:out|err)>:\s?)")


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
        row = score_row(folder.name, case, [c.category for c in a.causes],
                        a.causes[0].confidence if a.causes else 0.0, a.causes[0].rule if a.causes else None)
        row.update(score_reading(case, a))
        rows.append(row)
    return summarise(rows)


def score_row(name: str, case: Mapping[str, Any], predicted: list[str], confidence: float,
              rule: str | None) -> dict[str, Any]:
    truth = case["category"]
    accepted = {truth, *(case.get("also_acceptable") or [])}
    return {
        "case": name,
        "category": truth,
        "family": case.get("family") or "plain",
        "predicted": predicted[:3],
        "main": bool(predicted) and predicted[0] == truth,
        "top1": bool(predicted) and predicted[0] in accepted,
        "top3": truth in predicted[:3] or (bool(predicted) and predicted[0] in accepted),
        "confidence": confidence,
        "rule": rule,
    }


def score_reading(case: Mapping[str, Any], a: Analysis) -> dict[str, Any]:
    """The reading of the run against the case's primary_error_line, user_frame and failing_rank
    (each None where the case does not give it): what was found and whether it is right."""
    out: dict[str, Any] = {}
    want = case.get("primary_error_line")
    if want:
        # right when the primary error was read from the line that holds the case's error text,
        # and the text it shows is that line's error and nothing of the lines around it (a
        # progress bar, a launcher's status, the next record glued on)
        pe = a.primary_error
        at = (pe.facts.get("exc_line") or pe.loc.line) if pe else 0
        # an exception's lines are its exception line and its message's continuation lines
        to = max(at, pe.loc.end_line or at) if pe is not None and pe.kind == "exception" else at
        lines = _lines_at(pe.loc.source, at, to) if pe else []
        shown = pe.text.split("\n", 1)[0] if pe else ""
        out["primary_line"] = shown if pe else None
        out["primary_line_ok"] = (any(_bare(str(want)) in _bare(ln) for ln in lines)
                                  and bool(_bare(shown)) and _shows(shown, str(want), pe))
    want = case.get("user_frame")
    if want:
        users = [f for f in a.code_path if str(f.kind) == "user" and f.file and f.line]
        got = f"{users[-1].file}:{users[-1].line}" if users else None
        out["user_frame"] = got
        out["user_frame_ok"] = got is not None and _same_frame(got, str(want))
    want = case.get("failing_rank")
    if want is not None:
        got = _rank_of(a)
        out["failing_rank"] = got
        out["failing_rank_ok"] = got == int(want)
    return out


def _same_frame(got: str, want: str) -> bool:
    """path:line against a case's `path:line [function]`, the path as the case gives it: a full
    path, a relative one or a base name (the line and the path's tail must agree)."""
    m = re.match(r"(?P<path>.+?):(?P<line>\d+)(?:\s.*)?$", want)   # a path may hold spaces ("My Drive")
    wpath, wline = (m.group("path"), m.group("line")) if m else (want, "")
    gpath, _, gline = got.rpartition(":")
    if gline != wline:
        return False
    gpath, wpath = gpath.replace("\\", "/"), wpath.replace("\\", "/").removeprefix("./")
    return gpath == wpath or gpath.endswith("/" + wpath) or wpath.endswith("/" + gpath.rsplit("/", 1)[-1]) and (
        "/" not in gpath)


def _lines_at(source: str, first: int, last: int) -> list[str]:
    """Lines first..last of a file, lines ending at \n only as crashlens numbers them; of a line
    overdrawn with \r, what a terminal would finally show (the last segment)."""
    out: list[str] = []
    if not first:
        return out
    try:
        with open(source, "rb") as fh:
            for n, raw in enumerate(fh, start=1):
                if n > last:
                    break
                if n >= first:
                    text = raw.decode("utf-8", "replace").rstrip("\r\n")
                    out.append(text.rsplit("\r", 1)[-1] if text.strip("\r") else text)
    except OSError:
        return []
    return out


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def _bare(line: str) -> str:
    """A line compared without its rank tag, colour codes and white space."""
    return "".join(_RANK_PREFIX.sub("", _ANSI.sub("", line).strip()).split())


def _shows(shown: str, want: str, pe) -> bool:
    """The text shown is the case's line, or part of it (a prefix such as a timestamp removed),
    or the line with the exception's type before it (`RuntimeError:` printed on its own line)."""
    s, w = _bare(shown), _bare(want)
    if s in w:
        return True
    etype = str(pe.facts.get("type") or "") if pe.kind == "exception" else ""
    return bool(etype) and s.startswith(_bare(etype) + ":") and s[len(_bare(etype)) + 1:] in w


def _rank_of(a: Analysis) -> int | None:
    return a.primary_error.rank if a.primary_error is not None else None


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
    reading = {}
    for key in ("primary_line", "user_frame", "failing_rank"):
        given = [r for r in rows if f"{key}_ok" in r]
        if given:
            reading[key] = {"cases": len(given), "right": sum(r[f"{key}_ok"] for r in given) / len(given)}
    families: dict[str, list[int]] = {}
    for r in rows:
        fam = families.setdefault(r.get("family") or "plain", [0, 0])
        fam[0] += int(r["top1"])
        fam[1] += 1
    stated = [r for r in rows if r["predicted"]]
    ece = sum(b["cases"] * abs(b["accuracy"] - b["mean_confidence"]) for b in buckets) / (len(stated) or 1)
    sure = [r for r in stated if r["confidence"] >= 0.8]
    return {
        "cases": len(rows),
        "top1": sum(r["top1"] for r in rows) / n,
        "top1_main": sum(r["main"] for r in rows) / n,
        "top3": sum(r["top3"] for r in rows) / n,
        "no_cause": sum(1 for r in rows if not r["predicted"]),
        "recall": {c: v[0] / v[1] for c, v in sorted(per_cat.items())},
        "families": {f: {"cases": v[1], "top1": v[0] / v[1]} for f, v in sorted(families.items())},
        "reading": reading,
        "confusion": [{"expected": e, "got": g, "cases": k}
                      for (e, g), k in sorted(confusion.items(), key=lambda x: (-x[1], x[0]))],
        "confidence_buckets": buckets,
        "calibration": {"ece": ece, "confident_cases": len(sure),
                        "confident_right": (sum(r["top1"] for r in sure) / len(sure)) if sure else None},
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
    if s.get("families") and set(s["families"]) != {"plain"}:
        out += ["", "top-1 per family:"]
        for f, v in s["families"].items():
            out.append(f"  {f:16} {v['top1']:.2f}  ({v['cases']} cases)")
    if s.get("reading"):
        out += ["", "reading of the run (cases that give it):"]
        names = {"primary_line": "primary error line", "user_frame": "user frame", "failing_rank": "failing rank"}
        for k, v in s["reading"].items():
            out.append(f"  {names[k]:20} {v['right']:.2f}  ({v['cases']} cases)")
    if s.get("calibration") and s["calibration"]["confident_cases"]:
        c = s["calibration"]
        out += ["", f"calibration: ECE {c['ece']:.3f}; confidence >= 0.8: {c['confident_cases']} cases, "
                    f"right {c['confident_right']:.2f}"]
    if s["confusion"]:
        out += ["", "confusion (expected -> ranked first):"]
        for c in s["confusion"]:
            out.append(f"  {c['expected']} -> {c['got']}: {c['cases']}")
    if s["misses"]:
        out += ["", "misses (top-1):"]
        for r in s["misses"]:
            out.append(f"  {r['case']}: expected {r['category']}, got {r['predicted'] or 'nothing'}")
    wrong = [r for r in s["rows"] if any(r.get(f"{k}_ok") is False for k in ("primary_line", "user_frame", "failing_rank"))]
    if wrong:
        out += ["", "misread runs (primary line / user frame / rank):"]
        for r in wrong:
            bits = []
            if r.get("primary_line_ok") is False:
                bits.append(f"primary line {str(r['primary_line'])[:80]!r}")
            if r.get("user_frame_ok") is False:
                bits.append(f"user frame {r['user_frame']}")
            if r.get("failing_rank_ok") is False:
                bits.append(f"rank {r['failing_rank']}")
            out.append(f"  {r['case']}: " + "; ".join(bits))
    return "\n".join(out)
