"""The grammar of printed stacks: Python tracebacks as CPython's `traceback` module prints them
(chains, caret lines, notes), IPython's (old `---->` and new `Cell In[N]` styles), rich's boxed
ones, loguru's annotated ones, faulthandler dumps (every thread; the current one's frames
kept), c10 C++ stacks under an exception (`Exception raised from … frame #N: …`), pasted
fragments that start at a `File` line; each stream of an interleaved log on its own.

    TracebackGrammar(roles)            .feed(index, line, record) / .gap() / .finish()
    .units                             one _Unit per exception, in the order they ended

It gives spans and roles, not meaning: which exception is the root, which one a wrapper, what a
type usually means is `parsers/tracebacks`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import regex as re

from ..model import Frame, FrameKind, Line, Record, Role
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
# libstdc++'s report of an uncaught C++ exception: the type, then its what() on the next line
CPP_TERMINATE = re.compile(r"^terminate called after throwing an instance of '(?P<type>[^']+)'")
CPP_WHAT = re.compile(r"^\s*what\(\):\s+(?P<msg>.*)$")
# who printed the traceback that follows: multiprocessing's "Process SpawnProcess-2:", threading's
# "Exception in thread Thread-1 (worker):"
PROCESS_HEADER = re.compile(r"^Process (?P<name>[\w.-]+):$")
THREAD_HEADER = re.compile(r"^Exception in thread (?P<name>.+?):$")


@dataclass
class _Unit:
    """One exception being read: its lines, frames and message."""

    type: str
    message: list[str]
    first: int            # line number of the header (or first frame)
    last: int
    exc_line: int
    frames: list[Frame]
    stream: str
    members: list[int]    # indices of its lines
    link: str = ""
    style: str = "python"
    native: list[Frame] = field(default_factory=list)
    process: str = ""
    thread: str = ""
    cut: bool = False     # the log or paste ends before the exception line


class TracebackGrammar:
    """State machine over the lines of one stream. `roles[i]` is set for every line it takes."""

    def __init__(self, stream: str, roles: dict[int, Role]) -> None:
        self.stream = stream
        self.roles = roles
        self.units: list[_Unit] = []
        self.state = "idle"
        self.frames: list[Frame] = []
        self.members: list[int] = []
        self.start = 0
        self.pending_link = ""
        self.pending_link_at: list[int] = []
        self.cur: _Unit | None = None  # exception whose message may continue
        self.ipy_type = ""
        self.style = "python"
        self.process = ("", "", 0)      # (process, thread, line index) of a header just seen
        self.raise_line: tuple[int, int] | None = None   # a `raise …` line outside a traceback

    # -- helpers ---------------------------------------------------------------------
    def _take(self, i: int, role: Role) -> None:
        self.roles[i] = role
        self.members.append(i)

    def _begin(self, i: int, n: int, style: str) -> None:
        self.frames, self.members = [], []
        self.start, self.cur, self.style = n, None, style

    def _finish_exception(self, etype: str, msg: str, i: int, line: Line) -> None:
        self._take(i, Role.ERROR)
        proc, thread, at = self.process
        near = bool(self.members) and 0 <= self.members[0] - at <= 2
        unit = _Unit(type=etype, message=[msg] if msg else [], first=self.start or line.loc.line, last=line.loc.line,
                     exc_line=line.loc.line, frames=self.frames, stream=self.stream,
                     members=self.pending_link_at + self.members, link=self.pending_link, style=self.style,
                     process=proc if near else "", thread=thread if near else "")
        self.units.append(unit)
        self.cur = unit
        self.frames, self.members, self.pending_link, self.pending_link_at = [], [], "", []
        self.state = "message"

    def _cut_traceback(self, etype: str = "") -> None:
        """Frames that no exception line closed: kept as an exception of unknown type (or of the
        type IPython's header named), so that the code path and the user's frame are not lost."""
        if not self.frames or not any(f.kind in (FrameKind.USER, FrameKind.LIBRARY) for f in self.frames):
            return
        last = self.frames[-1].loc.line if self.frames[-1].loc else self.start
        self.units.append(_Unit(type=etype, message=[], first=self.start or last, last=last, exc_line=last,
                                frames=self.frames, stream=self.stream, members=self.pending_link_at + self.members,
                                link=self.pending_link, style=self.style, cut=True))
        self.cur = None
        self.frames, self.members, self.pending_link, self.pending_link_at = [], [], "", []

    def _py_frame(self, m: re.Match[str], i: int, line: Line) -> None:
        path = m.group("file")
        self.frames.append(Frame(kind=frame_kind(path), function=(m.group("func") or "").strip(), file=path,
                                 line=int(m.group("line")), loc=line.loc))
        self._take(i, Role.FRAME)

    def _set_code(self, code: str) -> None:
        if self.frames and not self.frames[-1].code:
            f = self.frames[-1]
            self.frames[-1] = Frame(f.kind, f.function, f.file, f.line, code.strip(), f.module, f.loc)

    def _continue_unit(self, i: int, n: int, role: Role) -> None:
        assert self.cur is not None
        self.cur.last = n
        self.cur.members.append(i)
        self.roles[i] = role

    # -- main step ---------------------------------------------------------------------
    def feed(self, i: int, line: Line, record: Record) -> None:
        n = line.loc.line
        raw = line.text
        text = raw.strip()

        if self.state == "rich":
            body = raw.strip().strip("│┃").strip()
            if RICH_BOTTOM.match(text):
                self._take(i, Role.HEADER)
                self.state = "frames"  # the exception line follows the box
                return
            m = RICH_FRAME.match(body)
            if m:
                path = m.group("file")
                self.frames.append(Frame(frame_kind(path), m.group("func"), path, int(m.group("line")), loc=line.loc))
                self._take(i, Role.FRAME)
                return
            m = RICH_CODE.match(body)
            if m:
                self._set_code(m.group("code"))
            self._take(i, Role.CODE)
            return

        if self.state == "fh":
            m = FH_FRAME.match(raw)
            if m:
                path = m.group("file")
                self.frames.append(Frame(kind=frame_kind(path), function=m.group("func"), file=path,
                                         line=int(m.group("line")), loc=line.loc))
                self._continue_unit(i, n, Role.FRAME)
                return
            if text == "<no Python frame>":   # a thread running no Python code
                self._continue_unit(i, n, Role.FRAME)
                return
            if FH_THREAD.match(text) or not text:
                if self.cur is not None and not self.cur.frames and self.frames:
                    self.cur.frames = list(reversed(self.frames))  # faulthandler lists innermost first
                self.frames = []
                if not text:
                    return
                self._continue_unit(i, n, Role.HEADER)
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
                self._continue_unit(i, n, Role.HEADER)
                return
            if FH_FRAME.match(raw) or FH_THREAD.match(text) or text == "<no Python frame>":
                self._continue_unit(i, n, Role.HEADER if FH_THREAD.match(text) else Role.FRAME)
                return
            if not text:
                return
            self.state = "idle"

        if self.state == "terminate":
            m = CPP_WHAT.match(raw)
            if m:   # the exception is the type and its what(): one block, its error line the what() line
                self.style = "c++"
                self._finish_exception(self.ipy_type, m.group("msg").strip(), i, line)
                self.state = "idle"   # what() is one line; the shell's "Aborted" follows
                return
            self.state = "idle"
            self.members = []
        m = CPP_TERMINATE.match(text)
        if m and self.state in ("idle", "message"):
            self._begin(i, n, "c++")
            self._take(i, Role.HEADER)
            self.ipy_type = m.group("type")
            self.state = "terminate"
            return

        m = PROCESS_HEADER.match(text) or THREAD_HEADER.match(text)
        if m and self.state in ("idle", "message"):
            self.process = (m.group("name"), "", i) if text.startswith("Process") else ("", m.group("name"), i)
            self.roles[i] = Role.HEADER
            self.state = "idle"
            return

        if CHAIN_CAUSE.match(text) or CHAIN_CONTEXT.match(text):
            self.pending_link = "cause" if CHAIN_CAUSE.match(text) else "context"
            self.pending_link_at = [i]
            self.roles[i] = Role.LINK
            self.state = "idle"
            return

        if RICH_TOP.match(text) or (TB_HEADER.search(text) and not IPY_HEADER.match(text)):
            if self.state == "frames":
                self._cut_traceback()
            self.state = "rich" if RICH_TOP.match(text) else "frames"
            self._begin(i, n, "rich" if self.state == "rich" else "python")
            self._take(i, Role.HEADER)
            return

        m = IPY_HEADER.match(text)
        if m:
            self.state = "ipy"
            self._begin(i, n, "ipython")
            self._take(i, Role.HEADER)
            self.ipy_type = m.group("type")
            return

        m = FAULTHANDLER.match(text)
        if m:
            self._begin(i, n, "faulthandler")
            self._finish_exception("Fatal Python error", m.group("msg"), i, line)
            self.state = "fh"
            return
        if self.cur is not None and self.cur.type == "Fatal Python error" and FH_THREAD.match(text):
            self._continue_unit(i, n, Role.HEADER)
            self.state = "fh"
            return

        m = CPP_HEADER.match(text)
        if m:
            if self.cur is not None and n - self.cur.last <= 3:
                self.state = "cpp"
                self._continue_unit(i, n, Role.HEADER)
            return
        if self.state == "cpp":
            m = CPP_FRAME.match(text)
            if m and self.cur is not None:
                gd = m.groupdict()
                func = (gd.get("func") or "").strip()
                self.cur.native.append(Frame(FrameKind.NATIVE, "" if func == "<unknown function>" else func, "", None, "",
                                             gd.get("module") or "", line.loc))
                self._continue_unit(i, n, Role.FRAME)
                return
            self.state = "idle"

        if self.state == "ipy":
            m = IPY_ARROW.match(text)
            if m and self.frames:
                f = self.frames[-1]
                self.frames[-1] = Frame(f.kind, f.function, f.file, int(m.group("line")), m.group("code").strip(), f.module, f.loc)
                self._take(i, Role.CODE)
                return
            m = IPY_FRAME_NEW.match(text) or IPY_FRAME_OLD.match(text)
            if m:
                gd = m.groupdict()
                path = gd.get("file") or f"Cell In[{gd.get('cell')}]"
                ln = gd.get("line") or gd.get("cline")
                self.frames.append(Frame(frame_kind(path), (gd.get("func") or gd.get("cfunc") or "<module>").strip(), path,
                                         int(ln) if ln else None, loc=line.loc))
                self._take(i, Role.FRAME)
                return
            m = EXC_LINE_LOOSE.match(text)
            if m and m.group("type") == self.ipy_type and m.group("msg") is not None:
                self._finish_exception(m.group("type"), m.group("msg") or "", i, line)
                return
            if text:
                self._take(i, Role.CODE)
            return  # code context lines, blank lines

        m = PY_FRAME.match(raw)
        if m:
            if self.state != "frames":
                self.state = "frames"
                self._begin(i, n, "python")
            self._py_frame(m, i, line)
            return

        if self.state == "frames":
            if not text:
                return
            if CARET.match(raw):
                self._take(i, Role.CODE)
                return
            if raw.startswith((" ", "\t")) and self.frames:
                if not self.frames[-1].code:
                    self._set_code(text)
                    self._take(i, Role.CODE)
                    return
                if text.startswith(("└", "│", "├")):  # loguru variable annotations
                    self._take(i, Role.CODE)
                    return
            m = EXC_LINE.match(text) or EXC_LINE_LOOSE.match(text)
            if m and (m.group("msg") is not None or "." in m.group("type") or EXC_LINE.match(text)):
                self._finish_exception(m.group("type"), m.group("msg") or "", i, line)
                return
            if text.startswith(("└", "│", "├", "...")) or raw.startswith((" ", "\t")):
                self._take(i, Role.CODE)
                return
            if self.frames and not self.frames[-1].code and self.frames[-1].loc is not None \
                    and self.frames[-1].loc.line == n - 1:
                # a paste that lost its indentation: the line under a frame is its source line
                self._set_code(text)
                self._take(i, Role.CODE)
                return
            self._cut_traceback()
            self.state = "idle"
            self.frames = []

        if self.state == "message" and self.cur is not None:
            # a message continues on following lines until a blank line or a new record
            if text and n == self.cur.last + 1 and len(self.cur.message) < 40 and not TB_HEADER.search(text) \
                    and not PY_FRAME.match(raw) and not EXC_LINE.match(text) and not record.starts:
                self.cur.message.append(text)
                self._continue_unit(i, n, Role.MESSAGE)
                return
            if not text and self.cur.message == []:
                return
            self.state = "idle"

        # an exception line outside any traceback (pasted alone, or printed by a logger), with
        # the `raise …` source line a paste kept above it
        m = EXC_LINE.match(text)
        if m and m.group("msg") is not None and not m.group("type").endswith("Warning"):
            raised = self.raise_line
            self._begin(i, n, "line")
            if raised is not None and raised[1] == n - 1:
                self._take(raised[0], Role.CODE)
                self.start = raised[1]
            self._finish_exception(m.group("type"), m.group("msg") or "", i, line)
            self.start = 0
        self.raise_line = (i, n) if text.startswith("raise ") else None

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
        elif self.state == "ipy":
            self._cut_traceback(self.ipy_type)   # IPython's header names the type
        self.frames = []
        self.state = "idle"
