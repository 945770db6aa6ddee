"""Analysis -> the stable JSON contract (docs/json-schema.md, data/analysis.schema.json).

The one place the analysis JSON is built: from the model's types (CrashReport, Backtrace, Frame,
LibraryFacts), addresses written in hex."""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from ..model import Analysis, Backtrace, Cause, CrashReport, Evidence, Frame, LibraryFacts
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


def _hex(v: int | None) -> str | None:
    return hex(v) if v is not None else None


def native_frame_json(f: Frame) -> dict[str, Any]:
    """One frame of a core's backtrace[]."""
    out: dict[str, Any] = {"index": f.index, "pc": _hex(f.pc), "module": f.module or None,
                           "function": f.function or None, "offset": _hex(f.module_offset),
                           "function_offset": _hex(f.function_offset), "file": f.file or None, "line": f.line,
                           "trust": f.trust}
    if f.inlined:
        out["inlined"] = [{"function": i.function, "file": i.file, "line": i.line} for i in f.inlined]
    if f.signal_frame:
        out["signal_frame"] = True
    if f.build_id:
        out["build_id"] = f.build_id
    return out


def backtrace_json(bt: Backtrace | None) -> list[dict[str, Any]]:
    """The analysis JSON's backtrace[]."""
    return [native_frame_json(f) for f in bt.frames] if bt is not None else []


def crash_json(c: CrashReport) -> dict[str, Any]:
    """The `crash` object: the crash site, plus how each part was found."""
    out: dict[str, Any] = {
        "signal": c.signal, "signo": c.signo, "si_code": c.si_code,
        "fault_address": _hex(c.fault_address), "pc": _hex(c.pc), "sp": _hex(c.sp),
        "module": c.module, "module_base": _hex(c.module_base), "offset": _hex(c.offset),
        "module_address": _hex(c.module_address), "function": c.function,
        "function_offset": _hex(c.function_offset), "instruction": c.instruction, "mnemonic": c.mnemonic,
        "required_isa": list(c.required_isa), "cpu_supports": c.cpu_supports, "reason": c.reason,
        "thread": c.thread, "thread_reason": c.thread_reason, "method": c.method, "method_reason": c.method_reason,
        "raised_signal": c.raised_signal, "raised_pc": _hex(c.raised_pc), "sender_pid": c.sender_pid,
        "build_id": c.build_id, "build_id_match": c.build_id_match, "xcr0": _hex(c.xcr0),
        "xcr0_components": list(c.xcr0_components) if c.xcr0_components is not None else None,
        "registers": {k: hex(v) for k, v in c.registers.items()},
        "signal_frame": dict(c.signal_frame) if c.signal_frame is not None else None,
        "notes": list(c.notes),
    }
    if c.culprit is not None:
        out["culprit_module"] = c.culprit.module or None
        out["culprit_function"] = c.culprit.function or None
    out.update(source=c.source, command=c.command, args=c.args)
    if c.python_frames is not None:
        out["python_frames"] = [{"file": f.file, "line": f.line, "function": f.function, "kind": f.kind}
                                for f in c.python_frames]
    return out


def threads_json(c: CrashReport) -> list[dict[str, Any]]:
    return [{"index": t.index, "tid": t.tid, "pc": _hex(t.pc), "crashed": t.crashed} for t in c.threads]


def modules_json(c: CrashReport) -> list[dict[str, Any]]:
    return [{"path": m.path, "base": hex(m.base), "build_id": m.build_id, "found_at": m.found_at,
             "mismatch": m.mismatch} for m in c.modules]


def library_json(f: LibraryFacts) -> dict[str, Any]:
    def names(v: tuple[str, ...] | None) -> list[str]:
        return list(v or ())

    return {"path": f.path, "build_id": f.build_id, "soname": f.soname,
            "cuda": {"sass": names(f.sass), "ptx": names(f.ptx), "compatible": f.cuda_compatible,
                     "reason": f.cuda_reason, "device": f.device} if f.has_cuda else None,
            "isa": {"level": f.isa_level, "baseline_level": f.isa_baseline_level,
                    "baseline": names(f.isa_baseline), "dispatched": names(f.isa_dispatched),
                    "missing_baseline": names(f.isa_missing_baseline) if f.cpu_ok is not None else None}
            if f.isa_level is not None else None,
            "errors": list(f.errors)}


def crash_from_outcomes(a: Analysis) -> dict[str, Any] | None:
    """What the log says about how the process ended, until a core says more."""
    for c in a.causes:
        for e in c.evidence:
            if e.kind == "outcome" and e.facts.get("signal"):
                return {"signal": e.facts["signal"], "exit_code": e.facts.get("exit_code"),
                        "core_dumped": bool(e.facts.get("core_dumped")), "source": f"{e.loc}"}
    return None


def _primary_json(e: Evidence) -> dict[str, Any]:
    """source, line (where the error is stated: an exception's own line, not the span of its
    traceback), end_line (a multi-line record's last line), text, and rank (the rank whose
    error it is, where the log tells)."""
    out = {k: v for k, v in evidence_json(e).items() if k in ("source", "line", "end_line", "text")}
    at = e.error_loc
    if at is not e.loc:      # an exception: its own line, not its traceback's span
        out["line"] = at.line
        out.pop("end_line", None)
    if e.rank is not None:
        out["rank"] = e.rank
    return out


def to_dict(a: Analysis, sig: Signature) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "tool": {"name": "crashlens", "version": __version__},
        "inputs": [{"name": i.name, "kind": i.kind, "size": i.size} for i in a.inputs],
        "causes": [cause_json(c) for c in a.causes],
        "signature": sig.as_json(),
        "primary_error": _primary_json(a.primary_error) if a.primary_error else None,
        "secondary_errors": [{**{k: v for k, v in evidence_json(s.evidence).items() if k in ("source", "line", "text")},
                              "reason": s.reason} for s in a.secondary_errors],
        "code_path": [frame_json(f) for f in a.code_path],
        "crash": crash_json(a.crash) if a.crash else crash_from_outcomes(a),
        "threads": threads_json(a.crash) if a.crash else [],
        "modules": modules_json(a.crash) if a.crash else [],
        "backtrace": backtrace_json(a.crash.backtrace) if a.crash else [],
        "gpu_crash": dict(a.gpu_crash) if a.gpu_crash else None,
        "libraries": [library_json(f) for f in a.libraries],
        "environment": dict(a.environment),
        "exceptions": [{"source": e.loc.source, "line": e.loc.line, "end_line": e.loc.end_line or None,
                        "type": e.facts.get("type"), "message": e.facts.get("message"),
                        "secondary": bool(e.facts.get("secondary")), "link": e.facts.get("link") or None,
                        "frames": [frame_json(f) for f in e.frames]} for e in a.exceptions],
        "notes": list(a.notes),
    }


def render(a: Analysis, sig: Signature) -> str:
    return json.dumps(to_dict(a, sig), indent=2, ensure_ascii=False, default=str)
