"""Python tracebacks and native stacks in logs -> exception Evidence with frames.

Handles: plain tracebacks (with 3.11 caret lines), chained ones ("The above exception was the
direct cause…", "During handling of the above exception…"), pasted fragments that start at a
`File` line, faulthandler dumps ("Fatal Python error: …" / "Current thread …"), IPython's
`---->` style (old and new), rich boxed tracebacks, loguru's annotated ones, c10 C++ stacks
("Exception raised from … frame #N: …"), gdb/lldb backtraces, and output interleaved by
several ranks (each Line.stream is parsed on its own).

Each exception's facts: type, message, chain (id of the chain it belongs to), chain_pos,
link ("cause" | "context" | "" for how it relates to the exception before it), secondary
(True when raised while handling another exception), secondary_reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any, Iterable

import regex as re

from ..knowledge import data
from ..model import Evidence, Frame, FrameKind, Line, Loc
from ..pathkinds import frame_kind

TB_HEADER = re.compile(r"Traceback \(most recent call last\):?\s*$")
PY_FRAME = re.compile(r'^\s*(?:>\s*)?File "(?P<file>[^"]+)", line (?P<line>\d+)(?:,? in (?P<func>.+?))?\s*$')
CHAIN_CAUSE = re.compile(r"^The above exception was the direct cause of the following exception:")
CHAIN_CONTEXT = re.compile(r"^During handling of the above exception, another exception occurred:")
EXC_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Timeout|Abort(?:ed)?))"
    r"(?::\s?(?P<msg>.*))?$"
)
# any "Name: message" line directly after frames counts, even with an unusual type name
EXC_LINE_LOOSE = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::\s?(?P<msg>.*))?$")
CARET = re.compile(r"^\s*[\^~]+\s*$")
FAULTHANDLER = re.compile(r"^Fatal Python error: (?P<msg>.+)$")
FH_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):")
FH_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
IPY_HEADER = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)")
IPY_FRAME_OLD = re.compile(r"^(?P<file>(?:~|/|<ipython-input|[A-Za-z]:\\)\S*?(?:\.py|>))\s+in\s+(?P<func>[\w<>.]+)\s*\(")
IPY_FRAME_NEW = re.compile(r"^(?:File (?P<file>.+?):(?P<line>\d+),? in (?P<func>.+)|Cell In\s*\[(?P<cell>\d+)\], line (?P<cline>\d+)(?:, in (?P<cfunc>.+))?)")
IPY_ARROW = re.compile(r"^-+>\s*(?P<line>\d+)\s(?P<code>.*)$")
RICH_TOP = re.compile(r"^[╭┌]─+ Traceback \(most recent call last\)")
RICH_BOTTOM = re.compile(r"^[╰└]─+")
RICH_FRAME = re.compile(r"^(?P<file>\S.*?):(?P<line>\d+) in (?P<func>\S+)\s*$")
RICH_CODE = re.compile(r"^❱\s*(?P<line>\d+)\s*│\s?(?P<code>.*)$")
CPP_HEADER = re.compile(r"^Exception raised from (?P<func>.+?) at (?P<file>.+?):(?P<line>\d+) \(most recent call first\):")
CPP_FRAME = re.compile(
    r"^frame #(?P<n>\d+): (?P<func>.*?)(?: \+ (?P<off>0x[0-9a-f]+))?(?: \((?P<addr>0x[0-9a-f]+) in (?P<module>[^)]+)\))?\s*$"
)
GDB_FRAME = re.compile(
    r"^#(?P<n>\d+)\s+(?:(?P<addr>0x[0-9a-f]+) in )?(?P<func>[^\s(]+(?:\s*\(.*?\))?)"
    r"(?: (?:from|at) (?P<where>\S+))?"
)
LLDB_FRAME = re.compile(r"^\s*(?:\*\s*)?frame #(?P<n>\d+): (?P<addr>0x[0-9a-f]+) (?P<module>[^`\s]+)`(?P<func>.+?)(?: \+ (?P<off>\d+))?(?: at (?P<where>\S+))?$")
TORCHRUN_ROOT = re.compile(r"Root Cause \(first observed failure\):")
# A line that starts a record of its own, so an exception's message cannot continue onto it: a
# progress-bar frame (tqdm, Keras), a glog/c10 record ("E1128 03:21:18.107 …", "[W …cpp:104]"),
# a logging record ("ERROR:torch…", "WARNING: …", "INFO | …"), what a shell or launcher prints
# after a process ended ("exit status 1", "Error in sys.excepthook:", "+ cmd", srun/slurmstepd).
NEW_RECORD = re.compile(
    r"^(?:[^|]{0,120}?\d{1,3}%\||\s*\d+/\d+ \[[=>.]+\]|[IWEF]\d{4} \d\d:\d\d:\d\d|\[[IWEF][\s\d][^\]]{0,60}:\d+\]"
    r"|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)(?::[\w.]|:\s|\s*[|\]-]|\s+\S+:\d+)"
    r"|exit status -?\d+|Error in sys\.excepthook|\+ \S|srun: |slurmstepd: )")
_TIMED_PREFIX = re.compile(r"\d:\d\d|\d\.\d{3}")
TORCHRUN_KV = re.compile(r"^\s*(?P<k>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<v>.*)$")

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


@dataclass
class _Exc:
    type: str
    message: list[str]
    first: int  # line of the header (or first frame)
    last: int
    exc_line: int
    frames: list[Frame]
    source: str
    stream: str
    link: str = ""
    native: list[Frame] = field(default_factory=list)


class _StreamParser:
    """State machine over the lines of one stream (one source, one rank)."""

    def __init__(self, source: str, stream: str) -> None:
        self.source = source
        self.stream = stream
        self.done: list[_Exc] = []
        self.state = "idle"
        self.frames: list[Frame] = []
        self.start = 0
        self.pending_link = ""
        self.cur: _Exc | None = None  # exception whose message may continue
        self.ipy_func: tuple[str, str] | None = None

    # -- helpers ---------------------------------------------------------------------
    def _finish_exception(self, etype: str, msg: str, line: Line) -> None:
        exc = _Exc(
            type=etype,
            message=[msg] if msg else [],
            first=self.start or line.loc.line,
            last=line.loc.line,
            exc_line=line.loc.line,
            frames=self.frames,
            source=self.source,
            stream=self.stream,
            link=self.pending_link,
        )
        self.done.append(exc)
        self.cur = exc
        self.frames = []
        self.pending_link = ""
        self.state = "message"

    def _cut_traceback(self) -> None:
        """Frames that no exception line closed: kept as an exception of unknown type (facts
        cut=True), so that the code path and the user's frame are not lost with it."""
        if not self.frames or not any(f.kind in (FrameKind.USER, FrameKind.LIBRARY) for f in self.frames):
            return
        last = self.frames[-1].loc.line if self.frames[-1].loc else self.start
        exc = _Exc(type="", message=[], first=self.start or last, last=last, exc_line=last,
                   frames=self.frames, source=self.source, stream=self.stream, link=self.pending_link)
        self.done.append(exc)
        self.cur = None
        self.frames = []
        self.pending_link = ""

    def _py_frame(self, m: re.Match[str], line: Line) -> None:
        path = m.group("file")
        self.frames.append(
            Frame(kind=frame_kind(path), function=(m.group("func") or "").strip(), file=path,
                  line=int(m.group("line")), loc=line.loc)
        )

    def _set_code(self, code: str) -> None:
        if self.frames and not self.frames[-1].code:
            f = self.frames[-1]
            self.frames[-1] = Frame(f.kind, f.function, f.file, f.line, code.strip(), f.module, f.loc)

    # -- main step ---------------------------------------------------------------------
    def feed(self, line: Line) -> None:
        n = line.loc.line
        raw = line.text
        text = raw.strip()

        if self.state == "rich":
            body = raw.strip().strip("│┃").strip()
            if RICH_BOTTOM.match(text):
                self.state = "frames"  # the exception line follows the box
                return
            m = RICH_FRAME.match(body)
            if m:
                path = m.group("file")
                self.frames.append(Frame(frame_kind(path), m.group("func"), path, int(m.group("line")), loc=line.loc))
                return
            m = RICH_CODE.match(body)
            if m:
                self._set_code(m.group("code"))
            return

        if self.state == "fh":
            m = FH_FRAME.match(raw)
            if m:
                self._py_frame(m, line)
                self.cur.last = n  # type: ignore[union-attr]
                return
            if text == "<no Python frame>":   # a thread running no Python code
                return
            if FH_THREAD.match(text) or not text:
                if FH_THREAD.match(text) and self.cur is not None and not self.cur.frames:
                    pass
                if self.cur is not None and not self.cur.frames and self.frames:
                    self.cur.frames = list(reversed(self.frames))  # faulthandler lists innermost first
                self.frames = []
                if not text:
                    return
                if text.startswith("Thread"):
                    self.state = "fh_other"
                return
            if self.cur is not None and not self.cur.frames and self.frames:
                self.cur.frames = list(reversed(self.frames))
            self.frames = []
            self.state = "idle"

        if self.state == "fh_other":
            if text.startswith("Current thread") and FH_THREAD.match(text):
                self.state = "fh"          # the crashing thread's frames follow, after the others'
                self.frames = []
                return
            if FH_FRAME.match(raw) or FH_THREAD.match(text) or not text or text == "<no Python frame>":
                return
            self.state = "idle"

        if CHAIN_CAUSE.match(text):
            self.pending_link = "cause"
            self.state = "idle"
            return
        if CHAIN_CONTEXT.match(text):
            self.pending_link = "context"
            self.state = "idle"
            return

        if RICH_TOP.match(text) or (TB_HEADER.search(text) and not IPY_HEADER.match(text)):
            if self.state == "frames":
                self._cut_traceback()
            self.state = "rich" if RICH_TOP.match(text) else "frames"
            self.frames = []
            self.start = n
            self.cur = None
            return

        m = IPY_HEADER.match(text)
        if m:
            self.state = "ipy"
            self.frames = []
            self.start = n
            self.cur = None
            self.ipy_type = m.group("type")
            return

        m = FAULTHANDLER.match(text)
        if m:
            self.start = n
            self.frames = []
            self._finish_exception("Fatal Python error", m.group("msg"), line)
            self.state = "fh"
            return
        if self.cur is not None and self.cur.type == "Fatal Python error" and FH_THREAD.match(text):
            self.state = "fh"
            return

        m = CPP_HEADER.match(text)
        if m:
            if self.cur is not None and n - self.cur.last <= 3:
                self.state = "cpp"
                self.cur.last = n
            return
        if self.state == "cpp":
            m = CPP_FRAME.match(text)
            if m and self.cur is not None:
                self.cur.native.append(self._native(m, line))
                self.cur.last = n
                return
            self.state = "idle"

        if self.state == "ipy":
            m = IPY_ARROW.match(text)
            if m and self.frames:
                f = self.frames[-1]
                self.frames[-1] = Frame(f.kind, f.function, f.file, int(m.group("line")), m.group("code").strip(), f.module, f.loc)
                return
            m = IPY_FRAME_NEW.match(text) or IPY_FRAME_OLD.match(text)
            if m:
                gd = m.groupdict()
                path = gd.get("file") or f"Cell In[{gd.get('cell')}]"
                ln = gd.get("line") or gd.get("cline")
                self.frames.append(Frame(frame_kind(path), (gd.get("func") or gd.get("cfunc") or "<module>").strip(), path,
                                         int(ln) if ln else None, loc=line.loc))
                return
            m = EXC_LINE_LOOSE.match(text)
            if m and m.group("type") == getattr(self, "ipy_type", None) and m.group("msg") is not None:
                self._finish_exception(m.group("type"), m.group("msg") or "", line)
                return
            return  # code context lines, blank lines

        m = PY_FRAME.match(raw)
        if m:
            if self.state not in ("frames",):
                self.state = "frames"
                self.frames = []
                self.start = n
                self.cur = None
            self._py_frame(m, line)
            return

        if self.state == "frames":
            if not text or CARET.match(raw):
                return
            if raw.startswith((" ", "\t")) and self.frames:
                if not self.frames[-1].code:
                    self._set_code(text)
                    return
                if text.startswith(("└", "│", "├")):  # loguru variable annotations
                    return
            m = EXC_LINE.match(text) or EXC_LINE_LOOSE.match(text)
            if m and (m.group("msg") is not None or "." in m.group("type") or EXC_LINE.match(text)):
                self._finish_exception(m.group("type"), m.group("msg") or "", line)
                return
            if text.startswith(("└", "│", "├", "...")):
                return
            if raw.startswith((" ", "\t")):
                return
            self._cut_traceback()
            self.state = "idle"
            self.frames = []

        if self.state == "message" and self.cur is not None:
            # a message continues on following lines until a blank line or a new record
            if text and n == self.cur.last + 1 and len(self.cur.message) < 40 and not TB_HEADER.search(text) \
                    and not PY_FRAME.match(raw) and not EXC_LINE.match(text) and not NEW_RECORD.match(text) \
                    and not _TIMED_PREFIX.search(line.prefix):
                self.cur.message.append(text)
                self.cur.last = n
                return
            if not text and self.cur.message == []:
                return
            self.state = "idle"

        # an exception line outside any traceback (pasted alone, or printed by a logger)
        m = EXC_LINE.match(text)
        if m and m.group("msg") is not None and not m.group("type").endswith("Warning"):
            self.start = n
            self.frames = []
            self._finish_exception(m.group("type"), m.group("msg") or "", line)
            self.start = 0

    def gap(self) -> None:
        """Lines were skipped (a huge log is sampled): a traceback cannot span the gap."""
        if self.state in ("frames", "ipy", "rich", "fh", "cpp"):
            self.finish()

    def finish(self) -> None:
        """End of input: a faulthandler dump ends without a closing line; a traceback may end
        before its exception line (a paste or a log cut there)."""
        if self.state == "fh" and self.cur is not None and not self.cur.frames and self.frames:
            self.cur.frames = list(reversed(self.frames))
        if self.state == "frames":
            self._cut_traceback()
        self.frames = []
        self.state = "idle"

    def _native(self, m: re.Match[str], line: Line) -> Frame:
        gd = m.groupdict()
        func = (gd.get("func") or "").strip()
        if func == "<unknown function>":
            func = ""
        module = gd.get("module") or ""
        return Frame(FrameKind.NATIVE, func, "", None, "", module, line.loc)


def parse_tracebacks(lines: Iterable[Line]) -> list[Evidence]:
    """All exceptions found in the lines of one source, in order of appearance."""
    parsers: dict[str, _StreamParser] = {}
    native_stacks: list[Evidence] = []
    stack: list[Frame] = []
    stack_start: Loc | None = None
    torchrun: list[Evidence] = []
    tr_block: dict[str, str] | None = None
    tr_loc: Loc | None = None
    previous = 0
    for line in lines:
        if previous and line.loc.line != previous + 1:
            for q in parsers.values():
                q.gap()
        previous = line.loc.line
        p = parsers.get(line.stream)
        if p is None:
            p = parsers[line.stream] = _StreamParser(line.loc.source, line.stream)
        p.feed(line)

        text = line.text.strip()
        # gdb / lldb backtraces
        m = LLDB_FRAME.match(text) or (GDB_FRAME.match(text) if text.startswith("#") else None)
        if m:
            gd = m.groupdict()
            stack.append(Frame(FrameKind.NATIVE, (gd.get("func") or "").strip(), gd.get("where") or "", None, "",
                               gd.get("module") or gd.get("where") or "", line.loc))
            stack_start = stack_start or line.loc
        elif stack and text and not text.startswith(("from ", "at ")) and not line.text.startswith(" "):
            native_stacks.append(_stack_evidence(stack, stack_start, line))
            stack, stack_start = [], None
        # torchrun failure summaries
        if TORCHRUN_ROOT.search(text):
            tr_block, tr_loc = {"root_cause": "1"}, line.loc
            continue
        if tr_block is not None:
            kv = TORCHRUN_KV.match(line.text)
            if kv:
                tr_block[kv.group("k")] = kv.group("v").strip()
                if kv.group("k") == "traceback":
                    torchrun.append(_torchrun_evidence(tr_block, tr_loc, line))
                    tr_block = None
            elif text.startswith("====="):
                torchrun.append(_torchrun_evidence(tr_block, tr_loc, line))
                tr_block = None
    if stack:
        native_stacks.append(_stack_evidence(stack, stack_start, None))

    out: list[Evidence] = []
    for p in parsers.values():
        p.finish()
        out.extend(_chain(p.done))
    out.extend(native_stacks)
    out.extend(torchrun)
    out.sort(key=lambda e: e.loc.line)
    return out


def _stack_evidence(stack: list[Frame], start: Loc | None, end: Line | None) -> Evidence:
    assert start is not None
    last = stack[-1].loc.line if stack[-1].loc else start.line
    top = stack[0]
    return Evidence("stack", f"native backtrace, innermost: {top.function or '?'}"
                    + (f" in {top.module}" if top.module else ""),
                    Loc(start.source, start.line, last),
                    facts={"frames": len(stack), "innermost_function": top.function, "innermost_module": top.module},
                    frames=tuple(reversed(stack)))


def _torchrun_evidence(block: dict[str, str], loc: Loc | None, line: Line) -> Evidence:
    assert loc is not None
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
    return Evidence("child-failure", text, Loc(loc.source, loc.line, line.loc.line), facts=facts)


def _chain(excs: list[_Exc]) -> list[Evidence]:
    """Link chained exceptions and mark those raised while handling another as secondary."""
    out: list[Evidence] = []
    chain_id = 0
    pos = 0
    prev: _Exc | None = None
    for e in excs:
        if e.link and prev is not None:
            pos += 1
        else:
            chain_id += 1
            pos = 0
        message = " ".join(e.message).strip()
        facts = {
            "type": e.type,
            "message": message,
            "chain": f"{e.source}#{e.stream}#{chain_id}",
            "chain_pos": pos,
            "link": e.link if pos else "",
            "stream": e.stream,
            "secondary": False,
            "secondary_reason": "",
            "exc_line": e.exc_line,
            "headline": f"{e.type}: {e.message[0]}" if e.message else e.type,
        }
        if e.link == "context" and prev is not None:
            facts["secondary"] = True
            facts["secondary_reason"] = (
                f"raised while handling {prev.type} (line {prev.exc_line}); the handler failed, "
                f"the earlier exception is the primary error"
            )
        frames = tuple(e.frames) + tuple(reversed(e.native))
        where, frame = raised_in(frames)
        facts["raised_in"] = where
        if frame is not None:
            facts["frame"] = f"{frame.function or '?'} ({frame.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{frame.line})"
        user = next((f for f in reversed(frames) if f.kind == FrameKind.USER), None)
        if user is not None and user is not frame:
            facts["user_frame"] = f"{user.function or '?'} ({user.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{user.line})"
        hint = exception_hint(e.type)
        if hint:
            facts["hint"] = hint
        facts["wrapper"] = _wrapper_of(e.type, message)
        # the evidence reads as the exception's own line, the headline (the report's, the
        # signature's); the message's further lines stay in facts["message"]
        text = facts["headline"]
        if not e.type:
            facts["cut"] = True
            facts["headline"] = text = "a traceback without its exception line (the log or paste ends there)"
        out.append(Evidence("exception", text, Loc(e.source, e.first, e.last), facts=facts, frames=frames))
        prev = e
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
