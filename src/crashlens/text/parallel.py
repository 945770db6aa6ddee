"""Parallel scan of a regular file, for text.select.

Scanning (hyperscan) and counting newlines (``bytearray.count``) hold the
GIL, so threads cannot share them.  A regular file (``open(path, "rb")``, or
what ``crashlens.inputs`` opens for a file) of at least ``full_below`` bytes
and at least two ranges of ``MIN_RANGE`` (64 MiB) is therefore split into up
to ``min(CPUs, MAX_WORKERS)`` byte ranges, scanned by forked worker processes
(which inherit the compiled anchors) and by the calling process.  Ranges begin
where the sequential loop begins a block (the first line start after the end
of one of its reads), so every process, running the same loop
(``chunks.scan_events``) over its range, sees exactly the blocks that loop
would see, and the output (lines, line numbers and ``SelectStats``) is
identical.  Each worker sends back its line count, its anchor lines grouped
into runs of touching windows and its streamed long lines; the caller then
derives global line numbers and reads with ``pread`` only the lines it yields
(a few MiB at a time; longer lines are cut without being held).  The stream
object itself is not read; at the end it is left at end of file.  Any failure
before the first line is yielded means starting again on the sequential path;
a failure later, starting again there and skipping the lines already yielded
(text.select does both).  The environment variable ``CRASHLENS_SELECT_PROCS``
caps the number of processes (``1``: always sequential).  On 2 CPUs this
roughly halves the time for a 1 GB log.
"""

from __future__ import annotations

import array
import bisect
import functools
import heapq
import io
import os
import pickle
import signal
import stat
import sys
import warnings
from typing import TYPE_CHECKING, Iterator, NamedTuple

from . import chunks
from .chunks import NL

if TYPE_CHECKING:
    from .select import SelectStats


#: At most this many processes (the caller included) scan one file.
MAX_WORKERS = 8
#: Smallest byte range given to one process.
MIN_RANGE = 64 << 20
#: Largest piece read at once while reading the lines to yield; a longer line
#: is cut without being held whole.
PIECE = 4 << 20

if hasattr(os, "preadv"):

    def _pread_into(fd: int, mv: memoryview, off: int) -> int:
        """Fill mv from file offset ``off``; fewer bytes only at the end of the file."""
        got, n = 0, len(mv)
        while got < n:
            k = os.preadv(fd, [mv[got:]], off + got)
            if k <= 0:
                break
            got += k
        return got

else:  # pragma: no cover - platforms without preadv

    def _pread_into(fd: int, mv: memoryview, off: int) -> int:
        got, n = 0, len(mv)
        while got < n:
            data = os.pread(fd, n - got, off + got)
            if not data:
                break
            mv[got:got + len(data)] = data
            got += len(data)
        return got


@functools.lru_cache(maxsize=1)
def _cpus() -> int:
    """CPUs this process may run on (asked once: a folder of 200k inputs asks for each)."""
    n = os.cpu_count() or 1
    try:
        n = min(n, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        pass
    return n


def _max_procs() -> int:
    """Processes to scan one file with; ``CRASHLENS_SELECT_PROCS`` overrides
    (1: always sequential)."""
    env = os.environ.get("CRASHLENS_SELECT_PROCS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return min(_cpus(), MAX_WORKERS)


def _guarded_file(stream):
    """The file under crashlens.inputs' ``InputStream(GuardedReader(file))``
    when nothing has been read through it yet; else None."""
    mod = sys.modules.get(__name__.rsplit(".", 2)[0] + ".inputs.streams")
    if mod is None or type(stream) is not getattr(mod, "InputStream", None):
        return None
    raw = stream.raw
    if type(raw) is not getattr(mod, "GuardedReader", None):
        return None
    if getattr(raw, "_done", True) or getattr(raw, "_delivered", 1) != 0:
        return None
    return getattr(raw, "_inner", None)


def _file_of(stream) -> tuple[int, int, int] | None:
    """(file descriptor, offset of the stream's position, file size) when
    ``stream`` plainly reads a regular file (``open(path, "rb")`` with or
    without buffering, or what crashlens.inputs opens for a file); else None."""
    obj = _guarded_file(stream) or stream
    if type(obj) is io.BufferedReader:
        if type(obj.raw) is not io.FileIO:
            return None
    elif type(obj) is not io.FileIO:
        return None
    try:
        if obj.closed:
            return None
        fd = obj.fileno()
        pos = obj.tell()
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or pos < 0:
        return None
    return fd, pos, st.st_size


class Plan(NamedTuple):
    fd: int
    base: int  # file offset of the stream's position: where line 1 begins
    size: int  # bytes from there to the end of the file, when planned
    # (line start, end of its first read, end of its last read, last range?);
    # all offsets relative to base
    ranges: list


def _line_start_before(fd: int, base: int, pos: int, span: int) -> int | None:
    """The start of the line after the last '\\n' in [pos - span, pos), or None."""
    lo = max(0, pos - span)
    hi, step = pos, 1 << 16
    while hi > lo:
        g = max(lo, hi - step)
        data = os.pread(fd, hi - g, base + g)
        if len(data) != hi - g:
            return None
        i = data.rfind(NL)
        if i >= 0:
            return g + i + 1
        hi, step = g, step * 4
    return None


def plan_ranges(stream, full_below: int) -> Plan | None:
    """How to split ``stream`` for a parallel scan, or None (sequential)."""
    # fork() only: the workers inherit the compiled anchors (loading them in
    # a fresh process costs 2-4 ms from the disk cache, a fresh interpreter
    # far more).  Not on macOS, where CPython deems fork() unsafe (system
    # libraries may start threads; a child could hang, not just fail).
    if not hasattr(os, "fork") or sys.platform == "darwin":
        return None
    procs = _max_procs()
    if procs < 2:
        return None
    src = _file_of(stream)
    if src is None:
        return None
    fd, base, st_size = src
    size = st_size - base
    if size < full_below:
        return None  # read in full
    n = min(procs, size // max(MIN_RANGE, 1))
    if n < 2:
        return None
    chunk = max(chunks.CHUNK_SIZE, 64)
    long_t = max(chunk // 2, 32)
    n0 = max(full_below, 0)  # the sequential path's first read
    # A range may begin after the end F of any read of the sequential path
    # (F = n0 + k * chunk), at the first line start before F, provided that
    # the line there is shorter than long_t (so that the sequential path does
    # not stream it).  Its worker then reads [start, F) first, as the carried
    # over line, and continues chunk by chunk from F.
    starts = [(0, n0)]
    k_min = 0 if n0 > 0 else 1
    for i in range(1, n):
        target = size * i // n
        k = max(k_min, -(-(target - n0) // chunk))
        s = None
        while n0 + k * chunk < size:
            s = _line_start_before(fd, base, n0 + k * chunk, long_t)
            if s is not None:
                break
            k += 1
        if s is None:
            break
        starts.append((s, n0 + k * chunk))
        k_min = k + 1
    if len(starts) < 2:
        return None
    ranges = []
    for i, (s, first_end) in enumerate(starts):
        last = i == len(starts) - 1
        ranges.append((s, first_end, size if last else starts[i + 1][1], last))
    return Plan(fd, base, size, ranges)


def scan_range(matcher, fd: int, fbase: int, s: int, first_end: int, limit: int, final: bool,
                before: int, after: int, ml: int, threaded: bool, quota: int | None = None):
    """Scan the lines of one range (offsets relative to ``fbase``).

    Returns (number of lines, runs, long lines, start of the last line, end):
    ``runs`` holds triples (offset of the first anchor line's start, index of
    the first and of the last anchor line of the run), a run being anchor
    lines whose windows touch; ``long lines`` triples (offset, index, length)
    of the lines that were streamed; indexes count from 0 at the range start.
    With ``quota``, hits are no longer looked for once the windows of this range cover
    that many lines (select_lines' ``max_kept``: later lines could only be dropped).
    """
    saturable = None
    if quota is not None:
        from .select import Saturable

        matcher = saturable = Saturable(matcher)
    first = bytearray(first_end - s)
    with memoryview(first) as mv:
        if _pread_into(fd, mv, fbase + s) != len(first):
            raise OSError("file shrank during the scan")
    pos = first_end

    def read(mv: memoryview) -> int:
        nonlocal pos
        want = min(len(mv), limit - pos)
        if want <= 0:
            return 0
        got = _pread_into(fd, mv[:want], fbase + pos)
        if got != want:
            raise OSError("file shrank during the scan")
        pos += got
        return got

    out: dict = {}
    events = chunks.scan_events(matcher, read, first, ml, threaded=threaded, off0=s, final=final, out=out)
    del first
    lines = 0
    runs = array.array("q")
    longs = array.array("q")
    last_start = s
    gap = before + after + 1  # windows of anchor lines this far apart touch
    r_off = r_first = r_last = -1  # the current run
    covered = 0  # lines of the windows of the runs closed so far
    try:
        for ev in events:
            if saturable is not None and saturable.on:
                now = covered + (r_last - r_first + 1 + before + after if r_first >= 0 else 0)
                saturable.on = now < quota  # type: ignore[operator]
            if ev[0] is chunks.BLOCK:
                _k, ba, start, end, ends, base = ev
                count = ba.count
                pos_, line, prev = start, lines, -1
                for e in ends:
                    if e <= prev:
                        continue
                    line += count(NL, pos_, e)
                    pos_ = prev = e
                    if r_first >= 0 and line - r_last <= gap:
                        r_last = line
                        continue
                    if r_first >= 0:
                        runs.extend((r_off, r_first, r_last))
                        covered += r_last - r_first + 1 + before + after
                    i = ba.rfind(NL, start, e)
                    r_off = base + (start if i < 0 else i + 1)
                    r_first = r_last = line
                lines = line + count(NL, pos_, end)
                if final:
                    i = ba.rfind(NL, start, end - 1)
                    last_start = base + (start if i < 0 else i + 1)
            else:
                _k, _prefix, length, hit, off = ev
                longs.extend((off, lines, length))
                if hit:
                    if r_first >= 0 and lines - r_last <= gap:
                        r_last = lines
                    else:
                        if r_first >= 0:
                            runs.extend((r_off, r_first, r_last))
                            covered += r_last - r_first + 1 + before + after
                        r_off, r_first, r_last = off, lines, lines
                last_start = off
                lines += 1
    finally:
        events.close()
    if r_first >= 0:
        runs.extend((r_off, r_first, r_last))
    return lines, runs, longs, last_start, out.get("end", -1)


def _fork_call(fn, *args) -> tuple[int, int]:
    """Run fn(*args) in a forked child; (pid, read end of the pipe that
    brings back its pickled result)."""
    r, w = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python >= 3.12 warns about fork() in a multi-threaded process;
            # the child only scans, pickles and writes to its pipe.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except BaseException:
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # the child: never returns
        code = 1
        try:
            try:  # Ctrl-C: the parent cleans up; the child just dies
                signal.signal(signal.SIGINT, signal.SIG_DFL)
            except (ValueError, OSError):
                pass
            os.close(r)
            try:
                payload = pickle.dumps((True, fn(*args)), pickle.HIGHEST_PROTOCOL)
                code = 0
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                payload = pickle.dumps((False, f"{type(exc).__name__}: {exc}"))
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _abandon(pid: int, fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


def _collect(pid: int, fd: int):
    """The result of a _fork_call child (waits for it)."""
    try:
        parts = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            parts.append(b)
    except BaseException:
        _abandon(pid, fd)
        raise
    os.close(fd)
    _pid, status = os.waitpid(pid, 0)
    ok, value = pickle.loads(b"".join(parts)) if parts else (False, "no result")
    if not ok or status != 0:
        raise RuntimeError(f"parallel scan worker failed (status {status}): {value}")
    return value


class FileLines:
    """Lines of the file read with pread, for the parallel path: a few MiB
    at a time; a line longer than PIECE is cut without being held whole."""

    def __init__(self, fd: int, base: int, size: int, max_line: int, stats: SelectStats,
                 longs: dict[int, int]):
        self.fd, self.base, self.size = fd, base, size
        self.max_line = max_line
        self.stats = stats
        self.longs = longs  # offset -> length of the lines the scan streamed

    def _read(self, off: int, n: int) -> bytes:
        data = os.pread(self.fd, n, self.base + off)
        while len(data) < n:
            more = os.pread(self.fd, n - len(data), self.base + off + len(data))
            if not more:
                raise OSError("file shrank while its lines were read")
            data += more
        return data

    def back(self, off: int, k: int) -> int:
        """Offset of the line k >= 1 lines above the line that begins at off."""
        need = k + 1  # the '\n' at off - 1 ends the line just above
        hi, span = off, max(4096, need * 256)
        while hi > 0:
            lo = max(0, hi - span)
            data = self._read(lo, hi - lo)
            c = data.count(NL)
            if c >= need:
                return lo + len(data.rsplit(NL, need)[0]) + 1
            need -= c
            hi, span = lo, min(span * 4, PIECE)
        if need == 1:
            return 0
        raise RuntimeError("parallel path: line offsets do not add up")

    def _long_text(self, off: int, length: int, head: bytes = b"") -> str:
        k = min(length, self.max_line + 1)
        prefix = head[:k] if len(head) >= k else self._read(off, k)
        return chunks.decode_line(prefix, self.max_line, length - k, self.stats)

    def lines(self, a: int, b: int, off: int) -> Iterator[tuple[int, str]]:
        """Yield lines a..b; line a begins at ``off``."""
        st, ml, longs, size = self.stats, self.max_line, self.longs, self.size
        num, pos, want = a, off, 1 << 16
        while num <= b:
            rem = b - num + 1
            length = longs.get(pos) if longs else None
            if length is not None:
                st.kept_lines += 1
                yield num, self._long_text(pos, length)
                num, pos = num + 1, pos + length + 1
                continue
            w = min(max(want, rem * 256), PIECE, size - pos)
            if w <= 0:
                raise RuntimeError("parallel path: fewer lines than counted")
            data = self._read(pos, w)
            eof = pos + w >= size
            parts = data.split(NL, rem)
            if len(parts) > rem:
                del parts[rem:]
            else:
                tail = parts.pop()  # unfinished, or the last line without '\n'
                if eof and tail:
                    parts.append(tail)
            n = len(parts)
            if not n:
                if eof:
                    raise RuntimeError("parallel path: fewer lines than counted")
                if w < PIECE:
                    want = w * 4
                    continue
                # a line longer than PIECE: find its end, keep its start
                end = pos + w
                while end < size:
                    piece = self._read(end, min(PIECE, size - end))
                    i = piece.find(NL)
                    if i >= 0:
                        end += i
                        break
                    end += len(piece)
                st.kept_lines += 1
                yield num, self._long_text(pos, end - pos, data)
                num, pos = num + 1, end + 1
                continue
            st.kept_lines += n
            used = sum(map(len, parts)) + n - 1
            if max(map(len, parts)) > ml:
                for i, lb in enumerate(parts):
                    yield num + i, chunks.decode_line(lb, ml, 0, st)
            else:
                # '\n' never belongs to an invalid sequence: one decode for all
                yield from zip(range(num, num + n), data[:used].decode("utf-8", "replace").split("\n"))
            num, pos = num + n, pos + used + 1


def select_ranges(plan: Plan, matcher, stream, before: int, after: int, head: int, tail: int,
                  ml: int, st: SelectStats, quota: int | None = None) -> Iterator[tuple[int, str]]:
    """Scan the byte ranges of ``plan`` in worker processes and here, then
    read (with pread) only the lines to yield (those select_lines would yield
    for these arguments).  ``matcher`` is compiled before forking: the workers
    inherit it.  On any exception the caller starts again on the sequential
    path (skipping the lines already yielded)."""
    ranges = plan.ranges

    def job(i: int, threaded: bool):
        s, first_end, limit, final = ranges[i]
        return scan_range(matcher, plan.fd, plan.base, s, first_end, limit, final,
                          before, after, ml, threaded, quota)

    kids: dict[int, tuple[int, int]] = {}  # range index -> (pid, read end of its pipe)
    results: list = [None] * len(ranges)
    try:
        for i in range(1, len(ranges)):
            kids[i] = _fork_call(job, i, False)
        results[0] = job(0, True)
        for i in list(kids):
            pid, fd = kids.pop(i)
            results[i] = _collect(pid, fd)
    finally:
        for pid, fd in kids.values():  # only after an error or an interrupt
            _abandon(pid, fd)
    for i, res in enumerate(results):  # each range ends where the next begins
        if i + 1 < len(ranges) and res[4] != ranges[i + 1][0]:
            raise RuntimeError("parallel scan: ranges do not join up")

    # Global line numbers.  A window is found from a line whose start is
    # known at most ``before`` (or ``tail``) lines below its first line:
    # the first anchor line of its run, or one of ``points`` (range
    # starts, streamed long lines, the last line), which also keep the
    # walk back from crossing a long line.
    n_total = sum(res[0] for res in results)
    points: list[tuple[int, int]] = [(1, 0)]  # (line number, offset of its start)
    longs: dict[int, int] = {}
    cum = 0
    for i, (n_lines, _runs, long_list, last_start, _end) in enumerate(results):
        if i:
            points.append((cum + 1, ranges[i][0]))
        for j in range(0, len(long_list), 3):
            off, num, length = long_list[j], cum + long_list[j + 1] + 1, long_list[j + 2]
            longs[off] = length
            points.append((num, off))
            if num < n_total:
                points.append((num + 1, off + length + 1))
        cum += n_lines
    points.append((n_total, results[-1][3]))
    points.sort()
    nums = [p[0] for p in points]

    def windows():  # (first line, last line, a known line >= first, its offset), sorted
        cum = 0
        for n_lines, runs, *_rest in results:
            for j in range(0, len(runs), 3):
                f = cum + runs[j + 1] + 1
                yield max(1, f - before), min(n_total, cum + runs[j + 2] + 1 + after), f, runs[j]
            cum += n_lines

    ends = []
    if head > 0:
        ends.append((1, min(head, n_total), 1, 0))
    if tail > 0:
        ends.append((max(1, n_total - tail + 1), n_total, points[-1][0], points[-1][1]))

    st.mode = "selected"
    st.regex_anchors = matcher.n_regex
    st.total_lines = n_total
    st.total_bytes = plan.size
    reader = FileLines(plan.fd, plan.base, plan.size, ml, st, longs)

    def emit(a: int, b: int, known: int, off: int):
        j = bisect.bisect_left(nums, a)
        if nums[j] < known:
            known, off = points[j]
        return reader.lines(a, b, reader.back(off, known - a) if known > a else off)

    t0 = max(1, n_total - tail + 1) if tail > 0 else n_total + 1
    emitted = 0

    def emit_capped(a: int, b: int, known: int, off: int):
        """emit, but with ``quota`` only its first lines before the tail (select_lines'
        max_kept: the later ones would be dropped)."""
        nonlocal emitted
        if quota is None:
            yield from emit(a, b, known, off)
            return
        hi = min(b, t0 - 1)
        if hi >= a and emitted < quota:
            hi = min(hi, a + quota - emitted - 1)
            emitted += hi - a + 1
            yield from emit(a, hi, known, off)
        lo = max(a, t0)
        if lo <= b:
            yield from (emit(lo, b, points[-1][0], points[-1][1]) if lo > a else emit(a, b, known, off))

    a = b = known = off = -1
    for wa, wb, wk, wo in heapq.merge(ends, windows()):
        if a > 0 and wa <= b + 1:  # touches the window being merged
            b = max(b, wb)
            continue
        if a > 0:
            yield from emit_capped(a, b, known, off)
        a, b, known, off = wa, wb, wk, wo
    if a > 0:
        yield from emit_capped(a, b, known, off)
    try:  # leave the stream at its end, as the sequential path does
        if stream.seekable():
            stream.seek(plan.base + plan.size)
    except (OSError, ValueError):
        pass
