"""The bundle's copy of what the job printed: `console.log` and, beside it, `console.times`.

    Console(folder, max_bytes).feed(stream, data, t) / .close() -> dict

`console.log` holds the bytes as the terminal got them, whole lines at a time (lines of stdout
and stderr never cut into each other); `console.times` has one row per line of the log: the
seconds since the start at which its first byte arrived, and its stream (tty, stdout, stderr),
so the timing stays beside the text and never inside it. A line still open when the job ends is
written as it is. Carriage-return redraws of a progress bar are kept up to 64 KiB per line, then
only the last redraw (what the terminal shows). Past `max_bytes` the log keeps its head, and the
last 8 MiB go to `console.tail.log`.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

MAX_OPEN_LINE = 64 << 10
TAIL_BYTES = 8 << 20
MAX_REDACT = 256 << 20   # a log up to this size is redacted when the job ends (about 9 µs a line)


class Console:
    def __init__(self, folder: Path, max_bytes: int = 512 << 20) -> None:
        self.log = open(folder / "console.log", "wb")
        self.times = open(folder / "console.times", "w", encoding="ascii")
        self.folder = folder
        self.max_bytes = max_bytes
        self.written = 0
        self.lines = 0
        self.dropped = 0
        self.open: dict[str, tuple[float, bytearray]] = {}
        self.tail: deque[bytes] = deque()
        self.tail_size = 0

    def feed(self, stream: str, data: bytes, t: float) -> None:
        start, buf = self.open.get(stream, (t, bytearray()))
        buf += data
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            self._line(stream, start, bytes(buf[:nl + 1]))
            del buf[:nl + 1]
            start = t
        if len(buf) > MAX_OPEN_LINE:      # a bar redrawn in place for a long time: keep the last redraw
            cr = buf.rfind(b"\r", 0, len(buf) - 1)
            if cr > 0:
                del buf[:cr]
            if len(buf) > MAX_OPEN_LINE:
                self._line(stream, start, bytes(buf) + b"\n")
                buf = bytearray()
                start = t
        if buf:
            self.open[stream] = (start, buf)
        else:
            self.open.pop(stream, None)

    def _line(self, stream: str, t: float, line: bytes) -> None:
        if self.written + len(line) <= self.max_bytes:
            self.log.write(line)
            self.times.write(f"{t:.3f} {stream}\n")
            self.written += len(line)
            self.lines += 1
            return
        self.dropped += 1
        self.tail.append(line)
        self.tail_size += len(line)
        while self.tail_size > TAIL_BYTES and self.tail:
            self.tail_size -= len(self.tail.popleft())

    def close(self) -> dict[str, object]:
        for stream, (t, buf) in list(self.open.items()):
            self._line(stream, t, bytes(buf) + (b"" if buf.endswith(b"\n") else b"\n"))
        self.open.clear()
        self.log.close()
        self.times.close()
        out: dict[str, object] = {"lines": self.lines, "bytes": self.written}
        if self.dropped:
            (self.folder / "console.tail.log").write_bytes(b"".join(self.tail))
            out.update(dropped_lines=self.dropped, tail="console.tail.log")
        try:
            out.update(self._redact())
        except (OSError, ValueError) as exc:     # the bundle keeps the log as written
            out.update(redacted=False, redaction_note=f"not redacted: {exc}")
        return out

    def _redact(self) -> dict[str, object]:
        """Secrets the job printed (tokens, keys, credentials in URLs…) replaced in the bundle's
        copy, line for line, before the bundle is shared: the terminal saw them, the bundle does not
        keep them. The line count stays, so console.times still matches."""
        from ..redaction import Redactor

        if self.written > MAX_REDACT:
            return {"redacted": False, "redaction_note": f"over {MAX_REDACT >> 20} MiB: not redacted"}
        red = Redactor()
        names = ["console.log", "console.tail.log"] if self.dropped else ["console.log"]
        for name in names:
            src = self.folder / name
            tmp = self.folder / (name + ".tmp")
            with open(src, "rb") as f, open(tmp, "wb") as g:
                for raw in f:
                    text = raw.decode("utf-8", "surrogateescape")
                    body, nl = (text[:-1], "\n") if text.endswith("\n") else (text, "")
                    g.write((red(body) + nl).encode("utf-8", "surrogateescape"))
            tmp.replace(src)
        counts = red.counts
        return {"redacted": True, "redacted_items": counts} if counts else {"redacted": True}
