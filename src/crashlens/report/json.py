"""Analysis -> the stable JSON contract (docs/json-schema.md, data/analysis.schema.json)."""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from ..model import Analysis, Cause, Evidence, Frame
from ..signature import Signature

SCHEMA = "crashlens.analysis/1"


def evidence_json(e: Evidence) -> dict[str, Any]:
    out: dict[str, Any] = {"source": e.loc.source, "line": e.loc.line or None, "text": e.text, "kind": e.kind}
    if e.loc.end_line and e.loc.end_line != e.loc.line:
        out["end_line"] = e.loc.end_line
    facts = {k: v for k, v in e.facts.items() if k not in ("stream", "joined") and _plain(v)}
    if facts and e.kind != "line":
        out["facts"] = facts
    return out


def _plain(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool, type(None), list, dict))


def frame_json(f: Frame) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": f.kind, "file": f.file or None, "line": f.line, "function": f.function or None,
                           "code": f.code or None}
    if f.module:
        out["module"] = f.module
    return out


def cause_json(c: Cause) -> dict[str, Any]:
    return {
        "category": c.category,
        "rule": c.rule,
        "title": c.title,
        "confidence": c.confidence,
        "evidence": [evidence_json(e) for e in c.evidence],
        "explanation": c.explanation,
        "remedies": list(c.remedies),
        "references": list(c.references),
        "reasoning": list(c.reasoning),
        "secondary": c.secondary,
        "other_rules": list(c.other_rules),
    }


def _library(r: Any) -> dict[str, Any]:
    from ..inspect import library_facts

    f = library_facts(r)
    return {"path": r.path, "build_id": f.get("build_id"), "soname": f.get("soname"),
            "cuda": {"sass": (f.get("sass") or "").split(), "ptx": (f.get("ptx") or "").split(),
                     "compatible": f.get("cuda_compatible"), "reason": f.get("cuda_reason"),
                     "device": f.get("device")} if "sass" in f or "cuda_compatible" in f else None,
            "isa": {"level": f.get("isa_level"), "baseline_level": f.get("isa_baseline_level"),
                    "baseline": (f.get("isa_baseline") or "").split(),
                    "dispatched": (f.get("isa_dispatched") or "").split(),
                    "missing_baseline": (f.get("isa_missing_baseline") or "").split() if "cpu_ok" in f else None}
            if "isa_level" in f else None,
            "errors": list(r.errors)}


def crash_from_outcomes(a: Analysis) -> dict[str, Any] | None:
    """What the log says about how the process ended, until a core says more."""
    for c in a.causes:
        for e in c.evidence:
            if e.kind == "outcome" and e.facts.get("signal"):
                return {"signal": e.facts["signal"], "exit_code": e.facts.get("exit_code"),
                        "core_dumped": bool(e.facts.get("core_dumped")), "source": f"{e.loc}"}
    return None


def to_dict(a: Analysis, sig: Signature) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "tool": {"name": "crashlens", "version": __version__},
        "inputs": [{"name": i.name, "kind": i.kind, "size": i.size} for i in a.inputs],
        "causes": [cause_json(c) for c in a.causes],
        "signature": sig.as_json(),
        "primary_error": {k: v for k, v in evidence_json(a.primary_error).items() if k in ("source", "line", "end_line", "text")}
        if a.primary_error else None,
        "secondary_errors": [{**{k: v for k, v in evidence_json(s.evidence).items() if k in ("source", "line", "text")},
                              "reason": s.reason} for s in a.secondary_errors],
        "code_path": [frame_json(f) for f in a.code_path],
        "crash": ({k: v for k, v in a.crash.items() if k not in ("threads_list", "modules_list", "backtrace_list")}
                  if a.crash else crash_from_outcomes(a)),
        "threads": list(a.crash.get("threads_list") or []) if a.crash else [],
        "modules": list(a.crash.get("modules_list") or []) if a.crash else [],
        "backtrace": list(a.crash.get("backtrace_list") or []) if a.crash else [],
        "libraries": [_library(r) for r in a.libraries],
        "environment": dict(a.environment),
        "exceptions": [{"source": e.loc.source, "line": e.loc.line, "end_line": e.loc.end_line or None,
                        "type": e.facts.get("type"), "message": e.facts.get("message"),
                        "secondary": bool(e.facts.get("secondary")), "link": e.facts.get("link") or None,
                        "frames": [frame_json(f) for f in e.frames]} for e in a.exceptions],
        "notes": list(a.notes),
    }


def render(a: Analysis, sig: Signature) -> str:
    return json.dumps(to_dict(a, sig), indent=2, ensure_ascii=False, default=str)
