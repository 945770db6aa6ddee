"""Reading a stream in chunks and finding the candidate anchor lines of each chunk: the loop
shared by the sequential path of text.select and the workers of its parallel scan
(text.parallel), and the decoding of the lines they yield.

Memory and speed
----------------
Two buffers of 16 MiB plus 8 MiB (room for an unfinished line carried over
from the previous read): a helper thread reads the next chunk into one while
the other is scanned (reads release the GIL).  Chunks end at line boundaries.
A line longer than 8 MiB is never held: its first ``max_line`` bytes are kept
while the rest streams past, scanned (hyperscan stream mode; the regex
fallback searches overlapping pieces) and counted.  The anchors are matched by
a ``patterns.AnchorMatcher``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .select import SelectStats

__all__ = ["CHUNK_SIZE", "BLOCK", "LONG", "scan_events", "read_into", "read_head", "cut_point", "decode_line"]

#: Bytes read per chunk.  Module-level so tests can shrink it.
CHUNK_SIZE = 16 << 20

NL = b"\n"


def cut_point(b, limit: int) -> int:
    """Cut position <= limit (len(b) > limit) that does not split a UTF-8
    character; ``limit`` itself when the bytes there are not UTF-8."""
    k = limit
    while k > limit - 3 and k > 0 and (b[k] & 0xC0) == 0x80:
        k -= 1
    if k > 0 and (b[k] & 0xC0) == 0x80:
        return limit
    return k


def decode_line(b, max_line: int, cut: int, stats: SelectStats) -> str:
    """Decode one line, cut at max_line bytes (``cut``: bytes already dropped)."""
    if len(b) > max_line:
        k = cut_point(b, max_line)
        cut += len(b) - k
        b = b[:k]
    if cut:
        stats.truncated_lines += 1
        return b.decode("utf-8", "replace") + f" …[cut {cut} bytes]"
    return b.decode("utf-8", "replace")


def read_into(stream, mv: memoryview, want: int) -> int:
    """Fill mv[:want] as far as the stream allows; 0 only at end of stream."""
    got = 0
    readinto = getattr(stream, "readinto", None)
    while got < want:
        if readinto is not None:
            n = readinto(mv[got:want])
        else:
            data = stream.read(want - got)
            n = len(data) if data else 0
            if n:
                mv[got:got + n] = data
        if not n:
            break
        got += n
    return got


def read_head(stream, limit: int) -> bytes | bytearray:
    """Up to ``limit`` bytes from the start of the stream (fewer at its end)."""
    pieces = []
    got = 0
    step = 64 << 10  # small first: a small input must not cost a chunk-sized buffer
    while got < limit:
        want = min(limit - got, step, CHUNK_SIZE)
        step = min(step * 4, CHUNK_SIZE)
        buf = bytearray(want)
        with memoryview(buf) as mv:
            n = read_into(stream, mv, want)
        if n < want:
            del buf[n:]
        pieces.append(buf)
        got += n
        if n < want:
            break
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


BLOCK, LONG = "block", "long"


def scan_events(matcher, read, first, ml: int, *, stats: SelectStats | None = None,
                threaded: bool = True, off0: int = 0, final: bool = True,
                out: dict | None = None):
    """Read a stream chunk by chunk and scan its lines; a generator of

    * ``(BLOCK, ba, start, end, ends, base)``: the complete lines
      ``ba[start:end]`` (the last one ends with its '\\n'); ``ends`` are the
      sorted offsets in ``ba`` of the '\\n' of candidate anchor lines; byte
      ``ba[i]`` is byte ``base + i`` of the stream (``off0`` being the offset
      of ``first``);
    * ``(LONG, prefix, length, hit, offset)``: a line too long to hold, which
      was scanned and counted while it streamed past: its first ``ml + 1``
      bytes, its length without the '\\n', whether an anchor (may) match it
      and the offset of its first byte.

    ``first`` is the data already read; ``read(mv)`` fills ``mv`` (all of it
    but at the end of the stream) and returns the number of bytes.  The
    blocks, and so the scan results, depend only on the stream's bytes and on
    where its reads end: the first after ``len(first)`` bytes, then every
    ``CHUNK_SIZE`` bytes.  That is what lets a worker of the parallel path
    reproduce the sequential scan of its byte range exactly.  With
    ``final=False`` the unfinished line at the end is left alone (it is where
    the next range begins; ``out["end"]`` gets its offset).  A block is only
    valid until the generator is resumed.
    """
    chunk = max(CHUNK_SIZE, 64)
    # An unfinished line this long is streamed (scanned, counted, cut)
    # instead of being held; it is also the room kept in front of each
    # buffer for the unfinished line carried over from the previous one.
    long_t = max(chunk // 2, 32)
    R = long_t
    n0 = len(first)
    size = R + max(chunk, n0) + 1
    bufs = [bytearray(size), bytearray(size)]
    mvs = [memoryview(b) for b in bufs]
    bufs[0][R:R + n0] = first
    del first

    def rd(i: int) -> int:
        return read(mvs[i][R:R + chunk])

    # With ``threaded`` a helper thread reads the next chunk into one buffer
    # (reads release the GIL) while the lines of the other are scanned.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crashlens-read") if threaded else None
    fut = pool.submit(rd, 1) if pool is not None else None
    cur, new = 0, n0
    start = R  # where the carried-over unfinished line begins
    end_off = off0 + n0  # stream offset of the end of the data in bufs[cur]
    long = None  # while a line too long to hold streams past
    long_prefix = b""
    long_len = long_off = 0
    try:
        while True:
            ba, mv = bufs[cur], mvs[cur]
            lo, fill = R, R + new  # the new data
            base = end_off - fill
            if long is not None:
                i = ba.find(NL, lo, fill)
                stop = fill if i < 0 else i
                need = ml + 1 - len(long_prefix)
                if need > 0:
                    long_prefix += bytes(mv[lo:min(stop, lo + need)])
                long.feed(mv[lo:stop])
                long_len += stop - lo
                if i < 0:
                    start = fill
                else:
                    hit = long.finish()
                    long = None
                    yield (LONG, long_prefix, long_len, hit, long_off)
                    start = lo = i + 1
            if long is None:
                nl = ba.rfind(NL, lo, fill)
                if nl >= 0:
                    end = nl + 1
                    yield (BLOCK, ba, start, end, matcher.scan(mv, start, end), base)
                    start = end
                if fill - start >= long_t:
                    long = matcher.long_line()
                    long.feed(mv[start:fill])
                    long_prefix = bytes(mv[start:min(fill, start + ml + 1)])
                    long_len = fill - start
                    long_off = base + start
                    start = fill
            if pool is not None:
                new = fut.result()
                fut = None
            else:
                new = rd(cur ^ 1)
            if not new:
                break
            if stats is not None:
                stats.total_bytes += new
            nxt = cur ^ 1
            rest = fill - start
            if rest:
                bufs[nxt][R - rest:R] = ba[start:fill]
            start = R - rest
            end_off += new
            if pool is not None:
                fut = pool.submit(rd, cur)
            cur = nxt
        # end of the stream (or of the range)
        if not final:
            if long is not None:
                raise RuntimeError("a range must not end inside a streamed line")
            if out is not None:
                out["end"] = base + start
        elif long is not None:
            hit = long.finish()
            long = None
            yield (LONG, long_prefix, long_len, hit, long_off)
        elif fill > start:
            ba[fill] = 10  # the last line had no '\n'
            yield (BLOCK, ba, start, fill + 1, matcher.scan(mv, start, fill + 1), base)
    finally:
        if long is not None:  # abandoned in the middle of a huge line
            long.finish()
        if fut is not None:
            try:
                fut.result()
            except BaseException:
                pass
        if pool is not None:
            pool.shutdown(wait=True)
        for m in mvs:
            m.release()
