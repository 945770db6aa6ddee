"""The structure stage: one text input's normalised lines -> LogStructure.

    read_structure(lines) -> LogStructure      records, blocks, streams of one input

Between `text/` (lines) and `parsers/` (evidence): it reads a log as an expert does before
reading any message — which lines are records of their own and at which level (`records`),
which spans are tracebacks, faulthandler dumps, native stacks, launcher summaries, progress bars
and warnings (`tracebacks`, `blocks`), and which process each line belongs to (`streams`). The
parsers turn blocks into evidence; the engine reads a line's record (its level, its role in a
block) instead of re-finding it with patterns of its own.
"""

from __future__ import annotations

import bisect
from typing import Sequence

from ..model import Block, BlockKind, Line, LogStructure, Loc, Record, Role, Stream
from .blocks import LauncherSummaries, NativeStacks, Progress, Warnings
from .records import record_of
from .tracebacks import TracebackGrammar, _Unit

__all__ = ["read_structure"]


def read_structure(lines: Sequence[Line]) -> LogStructure:
    """The structure of one input's lines (in order; a sampled huge log has gaps, which no
    block spans)."""
    lines = tuple(lines)
    source = lines[0].loc.source if lines else ""
    records = [record_of(ln) for ln in lines]
    roles: dict[int, Role] = {}
    grammars: dict[str, TracebackGrammar] = {}
    others = (NativeStacks(roles), LauncherSummaries(roles), Progress(roles), Warnings(roles))
    previous = 0
    for i, (line, rec) in enumerate(zip(lines, records)):
        if previous and line.loc.line not in (previous, previous + 1):
            for g in grammars.values():
                g.gap()
        previous = line.loc.line
        g = grammars.get(line.stream)
        if g is None:
            g = grammars[line.stream] = TracebackGrammar(line.stream, roles)
        g.feed(i, line, rec)
        for o in others:
            o.feed(i, line, rec)
    blocks: list[tuple[Block, list[int]]] = []
    for g in grammars.values():
        g.finish()
        blocks.extend((_block(source, u), u.members) for u in g.units)
    for o in others:
        o.finish()
        blocks.extend((b, []) for b in o.blocks)
    blocks.sort(key=lambda bm: (bm[0].loc.line, _ORDER[bm[0].kind]))
    block_of: dict[int, int] = {}
    nums = [ln.loc.line for ln in lines]
    for bi, (b, members) in enumerate(blocks):
        for i in members or _span(nums, lines, b):
            block_of.setdefault(i, bi)
    kinds = [b.kind for b, _m in blocks]
    recs = tuple(Record(r.stream, r.time, r.level or _block_level(kinds, block_of.get(i, -1)), r.logger, r.starts,
                        roles.get(i, Role.NONE), block_of.get(i, -1))
                 for i, r in enumerate(records))
    return LogStructure(source, lines, recs, tuple(b for b, _m in blocks), _streams(lines, [b for b, _ in blocks]))


_ORDER = {k: n for n, k in enumerate(BlockKind)}


def _block_level(kinds: list[BlockKind], block: int) -> str:
    """The level a line without one of its own takes from its block: a warning's source line."""
    return "warning" if block >= 0 and kinds[block] == BlockKind.WARNING else ""


def _block(source: str, u: _Unit) -> Block:
    kind = BlockKind.FAULTHANDLER if u.style == "faulthandler" else BlockKind.TRACEBACK
    facts: dict[str, object] = {"type": u.type, "message": tuple(u.message), "exc_line": u.exc_line, "link": u.link,
                                "style": u.style}
    if u.process:
        facts["process"] = u.process
    if u.thread:
        facts["thread"] = u.thread
    if u.cut:
        facts["cut"] = True
    return Block(kind, Loc(source, u.first, u.last), stream=u.stream, frames=tuple(u.frames), native=tuple(u.native),
                 facts=facts)


def _span(nums: list[int], lines: tuple[Line, ...], b: Block) -> list[int]:
    """Indices of the lines of a block that does not list them one by one: its span, its stream."""
    lo = bisect.bisect_left(nums, b.loc.line)
    hi = bisect.bisect_right(nums, b.loc.end_line or b.loc.line)
    return [i for i in range(lo, hi) if lines[i].stream == b.stream or not b.stream]


def _streams(lines: tuple[Line, ...], blocks: list[Block]) -> tuple[Stream, ...]:
    seen: dict[str, list[int]] = {}
    for ln in lines:
        s = seen.get(ln.stream)
        if s is None:
            seen[ln.stream] = [ln.loc.line, ln.loc.line, 1]
        else:
            s[1], s[2] = ln.loc.line, s[2] + 1
    out = [Stream(k, "main" if not k else "rank" if k.startswith("rank") else "worker", a, b, c)
           for k, (a, b, c) in seen.items()]
    for b in blocks:   # a child process's traceback (multiprocessing's "Process SpawnProcess-2:")
        name = b.facts.get("process") if b.kind == BlockKind.TRACEBACK else None
        if name:
            out.append(Stream(str(name), "process", b.loc.line, b.loc.end_line or b.loc.line,
                              (b.loc.end_line or b.loc.line) - b.loc.line + 1))
    return tuple(out)
