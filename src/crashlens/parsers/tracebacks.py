"""Tracebacks and stacks of a log's structure -> exception, stack and child-failure Evidence.

The grammar (where a traceback starts and ends, its frames, its exception line and message,
how chained exceptions are linked) is the structure stage's (`structure/tracebacks`); this
module gives the blocks their meaning: chains, the root of each chain, exceptions raised while
handling another (secondary), wrappers that only re-raise another process's error, where an
exception was raised (user code, a framework, a library) and what its type usually means
(`data/exceptions.yaml`).

Each exception's facts: type, message, headline, chain (id of the chain it belongs to),
chain_pos, link ("cause" | "context" | "" for how it relates to the exception before it),
secondary (True when raised while handling another exception), secondary_reason, exc_line,
root, wrapper, raised_in, frame, user_frame, hint; process/thread when multiprocessing or
threading said whose traceback it is; cut when the traceback ends before its exception line.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Iterable

import regex as re

from ..knowledge import data
from ..model import Block, BlockKind, Evidence, Frame, FrameKind, Line, LogStructure, Loc
from ..structure import read_structure

@cache
def _knowledge() -> dict[str, Any]:
    """data/exceptions.yaml: framework packages, re-raising wrappers, what a type usually means."""
    doc = data("exceptions.yaml")
    fw = "|".join(re.escape(p) for p in doc["frameworks"])
    wrappers = [(re.compile(w["type"] + r"$"), re.compile(w["message"]) if w.get("message") else None)
                for w in doc["wrappers"]]
    return {"framework": re.compile(rf"(?:^|[/\\])(?:{fw})[/\\]"), "wrappers": wrappers, "hints": doc["hints"]}


def raised_in(frames: Iterable[Frame]) -> tuple[str, Frame | None]:
    """Where an exception was raised: ("user" | "framework" | "library" | "unknown", the frame).
    The raising frame is the innermost Python frame; when it is not the user's, the user's
    innermost frame is still the one to read first, so it is returned for "framework"/"library"."""
    py = [f for f in frames if f.kind in (FrameKind.USER, FrameKind.LIBRARY)]
    if not py:
        return "unknown", None
    inner = py[-1]
    if inner.kind == FrameKind.USER:
        return "user", inner
    where = "framework" if _knowledge()["framework"].search(inner.file) else "library"
    return where, inner


def _wrapper_of(etype: str, message: str) -> bool:
    for t, m in _knowledge()["wrappers"]:
        if t.match(etype) and (m is None or m.search(message)):
            return True
    return False


def exception_hint(etype: str) -> str:
    return str(_knowledge()["hints"].get(etype.rsplit(".", 1)[-1], ""))


def parse_tracebacks(structure: LogStructure | Iterable[Line]) -> list[Evidence]:
    """All exceptions, native stacks and launcher root causes of one input, in order of
    appearance (lines are read into their structure first)."""
    if not isinstance(structure, LogStructure):
        structure = read_structure(list(structure))
    per_stream: dict[str, list[Block]] = {}
    for b in structure.of_kind(BlockKind.TRACEBACK, BlockKind.FAULTHANDLER):
        per_stream.setdefault(b.stream, []).append(b)
    out: list[Evidence] = []
    for blocks in per_stream.values():
        blocks.sort(key=lambda b: b.facts["exc_line"])
        out.extend(_chain(structure.source, blocks))
    out.extend(_stack_evidence(b) for b in structure.of_kind(BlockKind.NATIVE_STACK))
    out.extend(_torchrun_evidence(b) for b in structure.of_kind(BlockKind.LAUNCHER_SUMMARY))
    out.sort(key=lambda e: e.loc.line)
    return out


def _stack_evidence(b: Block) -> Evidence:
    top = b.frames[0]
    return Evidence("stack", f"native backtrace, innermost: {top.function or '?'}"
                    + (f" in {top.module}" if top.module else ""), b.loc,
                    facts={"frames": len(b.frames), "innermost_function": top.function, "innermost_module": top.module},
                    frames=tuple(reversed(b.frames)))


def _torchrun_evidence(b: Block) -> Evidence:
    block = b.facts
    facts: dict[str, object] = {"root_cause": True}
    rank = re.match(r"(\d+)", block.get("rank", ""))
    if rank:
        facts["rank"] = int(rank.group(1))
    code = re.match(r"(-?\d+)", block.get("exitcode", ""))
    if code:
        c = int(code.group(1))
        facts["exit_code"] = c
        if c < 0:
            from signal import Signals
            try:
                facts["signal"] = Signals(-c).name
            except ValueError:
                facts["signal"] = f"signal {-c}"
    if block.get("host"):
        facts["host"] = block["host"]
    text = "torchrun root cause: rank {} exitcode {}".format(facts.get("rank", "?"), block.get("exitcode", "?"))
    return Evidence("child-failure", text, b.loc, facts=facts)


def _chain(source: str, blocks: list[Block]) -> list[Evidence]:
    """Link chained exceptions and mark those raised while handling another as secondary."""
    out: list[Evidence] = []
    chain_id = 0
    pos = 0
    prev: Block | None = None
    for b in blocks:
        etype, lines, link = b.facts["type"], b.facts["message"], b.facts["link"]
        if link and prev is not None:
            pos += 1
        else:
            chain_id += 1
            pos = 0
        message = " ".join(lines).strip()
        facts = {
            "type": etype,
            "message": message,
            "chain": f"{source}#{b.stream}#{chain_id}",
            "chain_pos": pos,
            "link": link if pos else "",
            "stream": b.stream,
            "secondary": False,
            "secondary_reason": "",
            "exc_line": b.facts["exc_line"],
            "headline": f"{etype}: {lines[0]}" if lines else etype,
        }
        for k in ("process", "thread"):
            if b.facts.get(k):
                facts[k] = b.facts[k]
        if b.facts.get("style") == "c++":
            facts["language"] = "c++"   # libstdc++'s "terminate called after throwing an instance of"
        if link == "context" and prev is not None:
            facts["secondary"] = True
            facts["secondary_reason"] = (
                f"raised while handling {prev.facts['type']} (line {prev.facts['exc_line']}); the handler failed, "
                f"the earlier exception is the primary error"
            )
        frames = tuple(b.frames) + tuple(reversed(b.native))
        where, frame = raised_in(frames)
        facts["raised_in"] = where
        if frame is not None:
            facts["frame"] = f"{frame.function or '?'} ({frame.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{frame.line})"
        user = next((f for f in reversed(frames) if f.kind == FrameKind.USER), None)
        if user is not None and user is not frame:
            facts["user_frame"] = f"{user.function or '?'} ({user.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{user.line})"
        hint = exception_hint(etype)
        if hint:
            facts["hint"] = hint
        facts["wrapper"] = _wrapper_of(etype, message)
        # the evidence reads as the exception's own line, the headline (the report's, the
        # signature's); the message's further lines stay in facts["message"]
        text = facts["headline"]
        if b.facts.get("cut"):
            facts["cut"] = True
            facts["headline"] = text = (f"{etype} (the log or paste ends before its message)" if etype else
                                        "a traceback without its exception line (the log or paste ends there)")
        out.append(Evidence("exception", text, b.loc, facts=facts, frames=frames))
        prev = b
    return _mark_roots(out)


def _mark_roots(excs: list[Evidence]) -> list[Evidence]:
    """facts["root"]: the exception to show as the error of its chain — the first of a chain
    of causes, never one raised while handling another, never a wrapper that only re-raises an
    error from another process (the original, printed after or before it, is the root)."""
    from dataclasses import replace

    roots: set[int] = set()
    candidates: set[str] = set()  # chains that already have an exception that could be the root
    for i, e in enumerate(excs):
        f = e.facts
        if f["secondary"] or f["wrapper"]:
            continue
        if f["chain_pos"] == 0 or f["chain"] not in candidates:
            roots.add(i)
        candidates.add(f["chain"])
    if not roots:  # only wrappers (a CalledProcessError alone): the last one is all there is
        cands = [i for i, e in enumerate(excs) if not e.facts["secondary"]]
        if cands:
            roots.add(cands[-1])
    out = []
    for i, e in enumerate(excs):
        facts = dict(e.facts)
        facts["root"] = i in roots
        if i in roots and i > 0 and excs[i - 1].facts["wrapper"]:
            facts["reraised_by"] = excs[i - 1].facts["headline"]
        out.append(replace(e, facts=facts))
    return out
