"""Blocks that are not Python exceptions: gdb/lldb backtraces, torchrun's failure table,
progress bars, `warnings` module reports.

    NativeStacks, LauncherSummaries, Progress, Warnings   .feed(index, line, record) / .finish()
    each has .blocks (list[Block]) and sets roles[index] for the lines it takes
"""

from __future__ import annotations

import regex as re

from ..model import Block, BlockKind, Frame, FrameKind, Line, Loc, Record, Role
from ..pathkinds import frame_kind
from .records import BAR

GDB_FRAME = re.compile(
    r"^#(?P<n>\d+)\s+(?:(?P<addr>0x[0-9a-f]+) in )?(?P<func>[^\s(]+(?:\s*\(.*?\))?)"
    r"(?: (?:from|at) (?P<where>\S+))?"
)
LLDB_FRAME = re.compile(r"^\s*(?:\*\s*)?frame #(?P<n>\d+): (?P<addr>0x[0-9a-f]+) (?P<module>[^`\s]+)`(?P<func>.+?)(?: \+ (?P<off>\d+))?(?: at (?P<where>\S+))?$")
TORCHRUN_ROOT = re.compile(r"Root Cause \(first observed failure\):")
TORCHRUN_KV = re.compile(r"^\s*(?P<k>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<v>.*)$")
WARNING_LINE = re.compile(r"^(?P<file>\S.*?):(?P<line>\d+): (?P<type>[A-Z]\w*Warning): (?P<msg>.*)$")


class NativeStacks:
    """gdb `#N 0x… in f () from lib` and lldb `frame #N: 0x… lib`f + 12` backtraces."""

    def __init__(self, roles: dict[int, Role]) -> None:
        self.roles = roles
        self.blocks: list[Block] = []
        self.stack: list[Frame] = []
        self.start: Loc | None = None

    def feed(self, i: int, line: Line, record: Record) -> None:
        text = line.text.strip()
        m = LLDB_FRAME.match(text) or (GDB_FRAME.match(text) if text.startswith("#") else None)
        if m:
            gd = m.groupdict()
            self.stack.append(Frame(FrameKind.NATIVE, (gd.get("func") or "").strip(), gd.get("where") or "", None, "",
                                    gd.get("module") or gd.get("where") or "", line.loc))
            self.start = self.start or line.loc
            self.roles.setdefault(i, Role.FRAME)
        elif self.stack and text and not text.startswith(("from ", "at ")) and not line.text.startswith(" "):
            self.finish()

    def finish(self) -> None:
        if not self.stack:
            return
        assert self.start is not None
        last = self.stack[-1].loc
        self.blocks.append(Block(BlockKind.NATIVE_STACK, Loc(self.start.source, self.start.line, last.line if last else 0),
                                 frames=tuple(reversed(self.stack))))
        self.stack, self.start = [], None


class LauncherSummaries:
    """torchrun's `Root Cause (first observed failure):` table: its key: value fields."""

    def __init__(self, roles: dict[int, Role]) -> None:
        self.roles = roles
        self.blocks: list[Block] = []
        self.fields: dict[str, str] | None = None
        self.start: Loc | None = None
        self.stream = ""

    def feed(self, i: int, line: Line, record: Record) -> None:
        text = line.text.strip()
        if TORCHRUN_ROOT.search(text):
            self.fields, self.start, self.stream = {"root_cause": "1"}, line.loc, line.stream
            self.roles[i] = Role.HEADER
            return
        if self.fields is None:
            return
        kv = TORCHRUN_KV.match(line.text)
        if kv:
            self.fields[kv.group("k")] = kv.group("v").strip()
            self.roles[i] = Role.FIELD
            if kv.group("k") == "traceback":
                self._close(line)
        elif text.startswith("====="):
            self._close(line)

    def _close(self, line: Line) -> None:
        assert self.start is not None and self.fields is not None
        self.blocks.append(Block(BlockKind.LAUNCHER_SUMMARY, Loc(self.start.source, self.start.line, line.loc.line),
                                 stream=self.stream, facts={"launcher": "torchrun", **self.fields}))
        self.fields = None

    def finish(self) -> None:
        self.fields = None


class Progress:
    """Runs of progress-bar frames of one stream."""

    def __init__(self, roles: dict[int, Role]) -> None:
        self.roles = roles
        self.blocks: list[Block] = []
        self.open: dict[str, tuple[Loc, Loc, int]] = {}   # stream -> (first, last, frames)

    def feed(self, i: int, line: Line, record: Record) -> None:
        if not BAR.match(line.text.lstrip()):
            if line.text.strip():
                self._close(line.stream)
            return
        self.roles.setdefault(i, Role.BAR)
        first, _last, count = self.open.get(line.stream, (line.loc, line.loc, 0))
        self.open[line.stream] = (first, line.loc, count + 1)

    def _close(self, stream: str) -> None:
        got = self.open.pop(stream, None)
        if got:
            first, last, count = got
            self.blocks.append(Block(BlockKind.PROGRESS, Loc(first.source, first.line, last.line), stream=stream,
                                     facts={"frames": count}))

    def finish(self) -> None:
        for stream in list(self.open):
            self._close(stream)


class Warnings:
    """`warnings` module reports: `path:N: XWarning: message` and the indented source line."""

    def __init__(self, roles: dict[int, Role]) -> None:
        self.roles = roles
        self.blocks: list[Block] = []
        self.last: tuple[int, Line, re.Match[str]] | None = None

    def feed(self, i: int, line: Line, record: Record) -> None:
        prev, self.last = self.last, None
        if prev is not None:
            pi, pline, pm = prev
            code = line.loc.line == pline.loc.line + 1 and line.text[:1] in (" ", "\t") and line.text.strip()
            self._block(pi, pline, pm, line if code else None)
            if code:
                self.roles.setdefault(i, Role.CODE)
                return
        m = WARNING_LINE.match(line.text)
        if m:
            self.roles.setdefault(i, Role.WARNING)
            self.last = (i, line, m)

    def _block(self, i: int, line: Line, m: re.Match[str], code: Line | None) -> None:
        self.blocks.append(Block(BlockKind.WARNING, Loc(line.loc.source, line.loc.line, code.loc.line if code else 0),
                                 stream=line.stream,
                                 frames=(Frame(frame_kind(m.group("file")), "", m.group("file"),
                                               int(m.group("line")), code.text.strip() if code else "", loc=line.loc),),
                                 facts={"type": m.group("type"), "message": m.group("msg")}))

    def finish(self) -> None:
        if self.last is not None:
            self._block(*self.last, None)
            self.last = None
