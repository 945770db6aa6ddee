"""The template context of a bug report: every key of the analysis JSON (docs/json-schema.md) plus
the helpers the built-in report uses (docs/report.md "The context").

    context(analysis, signature, redactor=None) -> dict

With a Redactor the analysis is redacted before anything is composed or cut from it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping, Sequence

from ... import knowledge
from ...model import Analysis
from ...redaction import strings_in
from ...signature import Signature
from .. import redact as redaction
from ..json import to_dict
from ..text import code_path_line, one_line
from .commandline import find_command
from .environment import environment_summary
from .markup import code, loc


def _read_ranges(a: Analysis, wanted: Mapping[str, Sequence[tuple[int, int]]]) -> dict[tuple[str, int, int], list[str]]:
    """The original lines (ANSI and overdraws cleaned) of the given 1-based ranges per input."""
    from ...text.normalize import clean

    out: dict[tuple[str, int, int], list[str]] = {}
    for inp in a.inputs:
        ranges = wanted.get(inp.name)
        if not ranges or inp.kind != "text":
            continue
        last = max(e for _, e in ranges)
        got: dict[int, str] = {}
        try:
            with inp.open() as f:
                for n, raw in enumerate(f, 1):
                    if n > last:
                        break
                    if any(s <= n <= e for s, e in ranges):
                        got[n] = clean(raw.decode("utf-8", "replace"))[:2000]
        except OSError:
            continue
        for s, e in ranges:
            out[(inp.name, s, e)] = [got[i] for i in range(s, e + 1) if i in got]
    return out


def _cut_middle(lines: list[str], keep: int, marker: str = "… [{n} lines cut] …") -> list[str]:
    if len(lines) <= keep:
        return lines
    head = keep // 3
    tail = keep - head
    return [*lines[:head], marker.format(n=len(lines) - keep), *lines[-tail:]]


def _actual(d: Mapping[str, Any], primary: Mapping[str, Any] | None) -> str:
    bits = []
    if primary:
        bits.append(f"The job stopped with {code(one_line(primary['text'], 200))} ({code(primary['where'])}).")
    crash = d.get("crash") or {}
    if crash.get("signal"):
        what = f"The process died of {crash['signal']}"
        if crash.get("function") or crash.get("module"):
            where = crash.get("function") or crash.get("pc") or "?"
            if crash.get("module"):
                where += f" in {os.path.basename(str(crash['module']))}"
            what += f" at {where}"
        if crash.get("instruction"):
            what += f" executing {code(crash['instruction'])}"
        if crash.get("exit_code") is not None and not crash.get("function"):
            what += f" (exit code {crash['exit_code']})"
        if crash.get("core_dumped"):
            what += ", core dumped"
        bits.append(what + ".")
    if not bits:
        bits.append("The job failed; crashlens found no error line it could single out (see the logs below).")
    n = len(d.get("secondary_errors") or [])
    if n:
        bits.append(f"{n} later error{'s' if n > 1 else ''} {'are' if n > 1 else 'is'} a consequence of it "
                    "(see the error messages).")
    return " ".join(bits)


def _expected(command: Mapping[str, Any] | None, frames: Sequence[Mapping[str, Any]]) -> str:
    users = [f for f in frames if f.get("kind") == "user"]
    step = ""
    if users:
        f = users[-1]
        where = f"{os.path.basename(str(f.get('file') or '?'))}:{f.get('line')}"
        step = f" The call at {code(where)}" + (f" ({code(one_line(f['code'], 80))})" if f.get("code") else "") + \
            " completes without error."
    if command:
        return f"{code(command['text'])} runs to completion (exit status 0).{step}"
    return f"The job runs to completion (exit status 0).{step}"


def _testing(d: Mapping[str, Any], command: Mapping[str, Any] | None, env: Mapping[str, Any],
             frames: Sequence[Mapping[str, Any]]) -> list[str]:
    cmd = command["text"] if command else "<command>"
    users = [f for f in frames if f.get("kind") == "user"]
    at = ""
    if users:
        at = f" (today it surfaces at `{os.path.basename(str(users[-1].get('file') or '?'))}:{users[-1].get('line')}`)"
    sm = env.get("sm") or "sm_XX"
    out: list[str] = []
    cats = [c["category"] for c in d.get("causes") or [] if not c.get("secondary")][:2]
    seen: set[str] = set()
    for cat in cats:
        notes = knowledge.category_notes(cat)
        for line in (knowledge.async_cuda_testing() if notes.async_cuda else ()) + notes.testing:
            s = line.format(cmd=cmd, at=at, sm=sm)
            if s not in seen:
                seen.add(s)
                out.append(s)
    top = (d.get("causes") or [None])[0]
    if top:
        out.append(f"After the fix, rerun `{cmd}`; `crashlens analyze` on the new logs no longer reports "
                   f"`{top['category']}`.")
    else:
        out.append(f"After the fix, rerun `{cmd}` and check that it runs to completion.")
    return out


def _title(d: Mapping[str, Any], primary: Mapping[str, Any] | None, env: Mapping[str, Any]) -> str:
    top = (d.get("causes") or [None])[0]
    if primary:
        head = one_line(primary["text"].splitlines()[0] if primary["text"] else "", 110)
    elif top:
        head = top["title"]
    else:
        head = "Crash: no known cause recognised"
    where = env.get("gpu_name") or env.get("cpu_model")
    return head + (f" ({where})" if where and where not in head else "")


def _summary(d: Mapping[str, Any], primary: Mapping[str, Any] | None, env: Mapping[str, Any]) -> str:
    bits = []
    if primary:
        bits.append(f"The job crashed with {code(one_line(primary['text'], 200))} at {code(primary['where'])}.")
    top = (d.get("causes") or [None])[0]
    if top:
        bits.append(f"Most likely cause (crashlens): **{top['title']}** (`{top['category']}`, confidence "
                    f"{top['confidence']:.2f}).")
    else:
        bits.append("crashlens recognised no known cause in the logs.")
    run = [x for x in (env.get("framework"), f"CUDA {env['cuda_runtime']}" if env.get("cuda_runtime") else None,
                       env.get("gpu")) if x]
    if run:
        bits.append("Ran on " + ", ".join(run) + ".")
    return " ".join(bits)


def context(a: Analysis, sig: Signature, red: "redaction.Redactor | None" = None) -> dict[str, Any]:
    """The template context: every key of the analysis JSON (docs/json-schema.md) plus helpers.
    With a Redactor, the analysis is redacted before anything is composed or cut from it."""
    d = to_dict(a, sig)
    scrub = red if red is not None else (lambda text: text)
    if red is not None:
        red.learn_inputs(a.inputs)  # host names in prefixes the analysis strips, contexts far from their secret
        for s in strings_in(d):
            red.learn(s)
        d = red.deep(d)
    primary = None
    if d.get("primary_error"):
        p = dict(d["primary_error"])
        p["where"] = loc(p)
        p["exception"] = None
        for e in d.get("exceptions") or []:
            if e.get("source") == p["source"] and e.get("line") and p.get("line") and \
                    e["line"] <= p["line"] <= (e.get("end_line") or e["line"]):
                p["exception"] = e
        primary = p
    # the original lines of the primary error (its whole traceback) and of the secondaries
    wanted: dict[str, list[tuple[int, int]]] = {}
    if primary and primary.get("line"):
        exc = primary["exception"]
        s, e = (exc["line"], exc.get("end_line") or exc["line"]) if exc else \
            (primary["line"], primary.get("end_line") or primary["line"])
        wanted.setdefault(primary["source"], []).append((s, e))
    lines = _read_ranges(a, wanted) if wanted else {}
    if primary:
        got = next(iter(lines.values()), None) if lines else None
        # redacted whole, then cut: a private key cut in two is no longer recognised
        primary["excerpt"] = "\n".join(_cut_middle(scrub("\n".join(got)).split("\n"), 60)) if got else primary["text"]
    env = environment_summary(d.get("environment") or {})
    frames = d.get("code_path") or []
    cpl = code_path_line([replace(f, function=scrub(f.function), file=scrub(f.file), code=scrub(f.code),
                                  module=scrub(f.module)) for f in a.code_path]) if frames else None
    command = find_command(a, primary)
    if command is not None:
        command = {**command, "text": scrub(command["text"])}
    secondaries = [{**s, "where": loc(s)} for s in d.get("secondary_errors") or []]
    users = [f for f in frames if f.get("kind") == "user"]
    user_frame = {**users[-1], "where": f"{os.path.basename(str(users[-1].get('file') or '?'))}:{users[-1].get('line')}"} \
        if users else None
    ctx = dict(d)
    ctx.update({
        "analysis": d,
        "version": d.get("tool", {}).get("version"),
        "primary": primary,
        "top": (d.get("causes") or [None])[0],
        "main_causes": [c for c in d.get("causes") or [] if not c.get("secondary")],
        "secondaries": secondaries,
        "env": env,
        "code_path_line": cpl,
        "user_frame": user_frame,
        "command": command,
        "title": _title(d, primary, env),
        "summary": _summary(d, primary, env),
        "expected": _expected(command, frames),
        "actual": _actual(d, primary),
        "testing": _testing(d, command, env, frames),
        "async_gpu_error": any(knowledge.category_notes(c["category"]).async_cuda
                               for c in d.get("causes") or [] if not c.get("secondary")),
        "sources": [i["name"] for i in d.get("inputs") or []],
    })
    return ctx


