"""Streaming line selection with bounded memory for very large logs.

:func:`select_lines` reads a binary stream once, in large chunks, and yields
``(line_number, text)`` for the lines worth looking at.  A small stream (fewer
than ``full_below`` bytes) is yielded whole.  A large one is reduced to the
first ``head`` lines, the last ``tail`` lines and a window of ``before`` /
``after`` lines around every line that matches one of the anchor patterns.

Anchors are regular expressions in the syntax of the ``regex`` module.  The
contract is *per line*: a line is an anchor line when ``regex.search(p, line)``
finds a match for some anchor ``p`` on the decoded line.  The scan may report
more lines than that (extra windows are harmless), but never fewer.  Which
lines may match is decided by ``patterns.AnchorMatcher`` (hyperscan prefilter,
``regex`` fallback; ``SelectStats.engine``).

The modules of this stage: this one (windows, the ring of the last lines,
the sequential path), ``text.chunks`` (the reading and scanning loop, shared
with the parallel workers) and ``text.parallel`` (a regular file scanned by
several processes).  Newlines are counted once per chunk
(``bytearray.count``) and line numbers of anchor lines are derived in the
same pass.  The last ``max(tail, before)`` lines are kept in a ring (each cut
to ``max_line`` bytes) until they can no longer be part of the tail or of a
later window.  Work in Python is proportional to the number of anchor lines
and selected lines, not to the size of the stream.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Sequence

from ..patterns import hsdb
from ..patterns.blocks import AnchorMatcher, check_anchors
from . import chunks, parallel
from .chunks import NL, cut_point, decode_line

__all__ = ["SelectStats", "select_lines"]


@dataclass
class SelectStats:
    """Counters filled in while :func:`select_lines` runs (final once exhausted)."""

    total_lines: int = 0
    total_bytes: int = 0
    kept_lines: int = 0
    truncated_lines: int = 0  # yielded lines that were cut at max_line
    mode: str = "full"  # "full" (every line) or "selected"
    engine: str = ""  # "hyperscan" or "regex"
    regex_anchors: int = 0  # anchors that had to be run with the regex module
    dropped_lines: int = 0  # selected lines dropped by max_kept (between the first ones and the tail)


def select_lines(
    stream: BinaryIO,
    anchors: Sequence[str],
    *,
    full_below: int = 8 << 20,
    before: int = 150,
    after: int = 60,
    head: int = 300,
    tail: int = 3000,
    max_line: int = 65536,
    full_lines: int | None = None,
    max_kept: int | None = None,
    stats: SelectStats | None = None,
) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for the lines of ``stream`` worth keeping.

    Line numbers are 1-based and are those of the original stream; lines come
    in ascending order, each at most once, decoded as UTF-8 (errors replaced)
    and without their ``\\n`` (a ``\\r`` stays).  A stream of fewer than
    ``full_below`` bytes is yielded whole (``stats.mode == "full"``).
    Otherwise (``"selected"``) only the first ``head`` lines, the last
    ``tail`` lines and the window ``[n - before, n + after]`` around every line
    ``n`` that an anchor matches are yielded.  A line longer than ``max_line``
    bytes is cut there and gets the suffix ``" …[cut N bytes]"``.

    Two bounds for dense input (the cost of a line is paid per line, however short):
    ``full_lines``: a small stream of more lines than this is selected like a large
    one, not yielded whole (8 MiB of empty lines are 8 million lines).
    ``max_kept``: at most this many lines are yielded: the first ``max_kept - tail``
    selected lines and the last ``tail`` ones (when every line is an anchor line, the
    windows cover the whole stream); ``stats.dropped_lines`` counts the rest.

    Invalid anchors raise ``ValueError`` when this function is called.  The
    stream is read lazily by the returned iterator, in 16 MiB chunks (a large
    regular file: by several processes at once, see "Parallel scan"); the
    anchors are compiled for the scan only when the stream turns out to be
    large, and the compiled set is cached (per thread) for later calls with
    the same anchors.  ``stats`` is updated as lines are produced and is final
    once the iterator is exhausted.
    """
    for name, v in (("before", before), ("after", after), ("head", head), ("tail", tail)):
        if v < 0:
            raise ValueError(f"{name} must be >= 0")
    if max_line < 1:
        raise ValueError("max_line must be >= 1")
    if stats is None:
        stats = SelectStats()
    anchors = check_anchors(anchors)
    use_hs = hsdb.available()
    stats.engine = "hyperscan" if use_hs else "regex"
    sel = _Selector(stream, (anchors, use_hs), before, after, head, tail, max_line, stats)
    sel.full_lines = full_lines
    if max_kept is not None:
        sel.quota = max(max_kept - tail, 1)
    lines = sel.run(full_below)
    if max_kept is not None:
        return _cap(lines, max(max_kept, tail, 1), tail, stats)
    return lines


def _cap(lines: Iterator[tuple[int, str]], max_kept: int, tail: int, stats: SelectStats
         ) -> Iterator[tuple[int, str]]:
    """The first max_kept - tail lines, then (at the end) the last tail lines."""
    from collections import deque

    first = max_kept - tail
    try:
        for i, item in enumerate(lines):
            if i < first:
                yield item
                continue
            ring: deque = deque([item], maxlen=tail) if tail else deque(maxlen=0)
            n = 1
            for item in lines:
                ring.append(item)
                n += 1
            stats.dropped_lines = n - len(ring)
            stats.kept_lines -= stats.dropped_lines
            yield from ring
            return
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()


_cache = threading.local()


class Saturable:
    """A matcher that stops reporting anchor lines once switched off (``on = False``): when
    the windows already cover the lines ``max_kept`` allows, later hits could only be
    dropped, and scanning for them costs a callback per hit."""

    def __init__(self, matcher: AnchorMatcher) -> None:
        self.matcher = matcher
        self.n_regex = matcher.n_regex
        self.on = True

    def scan(self, mv: memoryview, start: int, end: int) -> list[int]:
        return self.matcher.scan(mv, start, end) if self.on else []

    def long_line(self):
        return self.matcher.long_line() if self.on else _NoHit()


class _NoHit:
    def feed(self, piece) -> None:
        pass

    def finish(self) -> bool:
        return False


def _get_matcher(key: tuple[tuple[str, ...], bool]) -> AnchorMatcher:
    """Compiled anchors, cached per thread (hyperscan scratch space is not
    shared between threads); compiling a few hundred anchors takes ~0.1 s."""
    lru = getattr(_cache, "lru", None)
    if lru is None:
        lru = _cache.lru = OrderedDict()
    m = lru.get(key)
    if m is None:
        m = lru[key] = AnchorMatcher(key[0], key[1], checked=True)
        while len(lru) > 4:
            lru.popitem(last=False)
    else:
        lru.move_to_end(key)
    return m


class _Selector:
    def __init__(self, stream, matcher_key, before, after, head, tail, max_line, stats):
        self.stream = stream
        self.matcher_key = matcher_key
        self.before = before
        self.after = after
        self.head = head
        self.tail = tail
        self.max_line = max_line
        self.stats = stats
        self.full_lines: int | None = None
        self.quota: int | None = None  # window lines after which hits are no longer looked for
        self.saturable: Saturable | None = None
        self.covered = head  # lines the windows cover so far
        self.keep = max(before, tail)  # lines the ring must hold
        self.M = 0  # number of complete lines processed
        self.ring: list[bytes] = []  # lines M-len(ring)+1 .. M, each cut to max_line
        self.cuts: dict[int, int] = {}  # line number -> bytes already cut off
        # Windows [a, b, off], sorted, disjoint and not adjacent; ``off`` is
        # the offset of line a in the block being processed when a lies there.
        self.iv: list[list] = [[1, head, None]] if head > 0 else []

    def _full(self, data: bytes) -> Iterator[tuple[int, str]]:
        st = self.stats
        st.mode = "full"
        lines = data.split(NL)
        if lines[-1] == b"":
            lines.pop()
        st.total_lines = len(lines)
        ml = self.max_line
        for i, line in enumerate(lines, 1):
            st.kept_lines += 1
            yield i, decode_line(line, ml, 0, st)

    def run(self, full_below: int) -> Iterator[tuple[int, str]]:
        done = 0  # line number of the last line the parallel path yielded
        try:
            plan = parallel.plan_ranges(self.stream, full_below)
        except Exception:  # noqa: BLE001 - any doubt: the sequential path
            plan = None
        if plan is not None:
            it = self._run_parallel(plan)
            try:
                while True:
                    try:
                        item = next(it)
                    except StopIteration:
                        return
                    except Exception:  # noqa: BLE001 - start again sequentially
                        break
                    done = item[0]
                    yield item
            finally:
                it.close()
            # The parallel path never reads through the stream (it reads the
            # file descriptor with pread), so the stream is still where it was.
            st = self.stats
            st.total_lines = st.total_bytes = st.kept_lines = st.truncated_lines = 0
            st.regex_anchors = 0
            st.mode = "full"
        if done:
            for item in self._run_sequential(full_below):
                if item[0] > done:
                    yield item
        else:
            yield from self._run_sequential(full_below)

    def _run_sequential(self, full_below: int) -> Iterator[tuple[int, str]]:
        st = self.stats
        # Enough of the stream to decide between full and selected mode.
        first = chunks.read_head(self.stream, max(full_below, 0))
        st.total_bytes = len(first)
        if len(first) < full_below and (self.full_lines is None or first.count(NL) <= self.full_lines):
            yield from self._full(first)
            return
        st.mode = "selected"
        matcher = _get_matcher(self.matcher_key)
        st.regex_anchors = matcher.n_regex
        if self.quota is not None:
            matcher = self.saturable = Saturable(matcher)  # type: ignore[assignment]
        stream = self.stream

        def read(mv: memoryview) -> int:
            return chunks.read_into(stream, mv, len(mv))

        events = chunks.scan_events(matcher, read, first, self.max_line, stats=st)
        del first  # the scan loop owns it now (copied into its first buffer)
        try:
            for ev in events:
                if ev[0] is chunks.BLOCK:
                    yield from self._block(ev[1], ev[2], ev[3], ev[4])
                else:
                    yield from self._finish_long(ev[1], ev[2], ev[3])
        finally:
            events.close()
        yield from self._flush()

    # ---------------------------------------------------------------- parallel

    def _run_parallel(self, plan: parallel.Plan) -> Iterator[tuple[int, str]]:
        matcher = _get_matcher(self.matcher_key)  # compiled before forking: inherited
        yield from parallel.select_ranges(plan, matcher, self.stream, self.before, self.after, self.head,
                                          self.tail, self.max_line, self.stats, self.quota)

    # -------------------------------------------------------------- sequential

    def _finish_long(self, prefix: bytes, length: int, hit: bool):
        k = cut_point(prefix, self.max_line) if len(prefix) > self.max_line else len(prefix)
        num = self.M + 1
        if length > k:
            self.cuts[num] = length - k
        buf = bytearray(prefix[:k] + NL)
        yield from self._block(buf, 0, len(buf), [len(buf) - 1] if hit else [])

    def _block(self, ba, start: int, end: int, ends: list[int]):
        """Process the complete lines ba[start:end]; ``ends`` are the sorted
        offsets of the '\\n' of the lines an anchor (may) match."""
        before, after = self.before, self.after
        first = self.M + 1
        iv = self.iv
        count = ba.count
        # 1. windows around anchor lines (counting newlines in one pass)
        pos, line, prev = start, first, -1
        covered = self.covered
        for e in ends:
            if e <= prev:
                continue
            line += count(NL, pos, e)
            pos = prev = e
            a, b = line - before, line + after
            if iv and a <= iv[-1][1] + 1:
                if b > iv[-1][1]:
                    covered += b - iv[-1][1]
                    iv[-1][1] = b
                continue
            if a < 1:
                a = 1
            covered += b - a + 1
            iv.append([a, b, _back_lines(ba, start, e, line - a) if a >= first else None])
        self.covered = covered
        if self.saturable is not None and covered >= self.quota:  # type: ignore[operator]
            self.saturable.on = False
        last = line - 1 + count(NL, pos, end)
        self.stats.total_lines = last
        # 2. lines no longer needed for the tail or a later window
        final = last - self.keep
        if self.ring and final > self.M - len(self.ring):
            yield from self._emit_ring(final)
        if final >= first:
            yield from self._emit_block(ba, start, end, first, min(final, last))
        # 3. the last lines go to the ring
        k = last - max(final + 1, first) + 1
        if k > 0:
            span = 256 * k
            while True:
                g = end - 1 - span
                if g <= start:
                    lines = bytes(ba[start:end - 1]).split(NL)
                    break
                lines = bytes(ba[g:end - 1]).split(NL)
                if len(lines) > k:  # the first one may be partial
                    break
                span *= 4
            if len(lines) > k:
                del lines[:-k]
            ml = self.max_line
            if max(map(len, lines)) > ml:
                cuts = self.cuts
                for i, lb in enumerate(lines):
                    if len(lb) > ml:
                        c = cut_point(lb, ml)
                        num = last - k + 1 + i
                        cuts[num] = cuts.get(num, 0) + len(lb) - c
                        lines[i] = lb[:c]
            self.ring.extend(lines)
        self.M = last
        # 4. forget finished windows; block offsets are only valid in this block
        if iv:
            j = 0
            while j < len(iv) and iv[j][1] <= final:
                j += 1
            if j:
                del iv[:j]
            for w in iv:
                w[2] = None
        if self.cuts:
            for c in [c for c in self.cuts if c <= final]:
                del self.cuts[c]

    def _emit_ring(self, final: int):
        """Drop the ring lines numbered <= final; yield those in a window."""
        ring, st, cuts, ml = self.ring, self.stats, self.cuts, self.max_line
        rf = self.M - len(ring) + 1  # number of ring[0]
        hi = min(final, self.M)
        if hi < rf:
            return
        for a, b, _off in self.iv:
            if b < rf:
                continue
            if a > hi:
                break
            for num in range(max(a, rf), min(b, hi) + 1):
                st.kept_lines += 1
                cut = cuts.pop(num, 0) if cuts else 0
                yield num, decode_line(ring[num - rf], ml, cut, st)
        del ring[:hi - rf + 1]

    def _emit_block(self, ba, start: int, end: int, first: int, final: int):
        """Yield the lines first..final of the block that lie in a window."""
        st, cuts, ml = self.stats, self.cuts, self.max_line
        for a, b, off in self.iv:
            if b < first:
                continue
            if a > final:
                break
            if a < first or off is None:
                a, off = first, start
            n = min(b, final) - a + 1
            parts = _take_lines(ba, off, end, n)
            st.kept_lines += n
            if (cuts and any(num in cuts for num in range(a, a + n))) or max(
                map(len, parts)
            ) > ml:
                for num, lb in zip(range(a, a + n), parts):
                    yield num, decode_line(lb, ml, cuts.pop(num, 0) if cuts else 0, st)
            else:
                # one decode for the whole run of lines: '\n' never belongs
                # to an invalid sequence, so this equals decoding line by line
                size = sum(map(len, parts)) + n - 1
                yield from zip(range(a, a + n), ba[off:off + size].decode("utf-8", "replace").split("\n"))

    def _flush(self):
        """End of stream: the tail and the windows still open."""
        n = self.M
        if self.tail > 0 and n > 0:
            t0 = max(1, n - self.tail + 1)
            joined = [w for w in self.iv if w[1] >= t0 - 1]
            self.iv = [w for w in self.iv if w[1] < t0 - 1]
            self.iv.append([min([t0] + [w[0] for w in joined]), n, None])
        yield from self._emit_ring(n)
        self.cuts.clear()


def _back_lines(ba, start: int, e: int, k: int) -> int:
    """Offset where the line k lines above the one ending at e begins
    (``start`` if the block begins first)."""
    span = (k + 1) * 256
    while True:
        g = max(start, e - span)
        if ba.count(NL, g, e) > k:
            return g + len(ba[g:e].rsplit(NL, k + 1)[0]) + 1
        if g == start:
            return start
        span *= 4


def _take_lines(ba, off: int, end: int, n: int) -> list:
    """The n lines that begin at ``off`` (each without its '\\n')."""
    span = max(n * 256, 4096)
    while True:
        stop = min(end, off + span)
        parts = ba[off:stop].split(NL, n)
        if len(parts) > n or stop == end:
            del parts[n:]
            return parts
        span *= 4
