"""Tests for crashlens.text.select: streaming line selection."""

from __future__ import annotations

import dataclasses
import io
import os
import random
import sys
import threading
from pathlib import Path

import pytest
import regex

try:
    import crashlens.text.select as sel
except ImportError:  # running from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import crashlens.text.select as sel

import crashlens.text.chunks as chunks
import crashlens.text.parallel as parscan
from crashlens.patterns import hsdb
from crashlens.text.select import SelectStats, select_lines

HAVE_HS = hsdb.available()


# --------------------------------------------------------------------------
# reference implementation: the obvious one, everything in memory
# --------------------------------------------------------------------------


def _cut_point(b: bytes, limit: int) -> int:
    k = limit
    while k > limit - 3 and k > 0 and (b[k] & 0xC0) == 0x80:
        k -= 1
    if k > 0 and (b[k] & 0xC0) == 0x80:
        return limit
    return k


def _text(b: bytes, max_line: int) -> str:
    if len(b) > max_line:
        k = _cut_point(b, max_line)
        return b[:k].decode("utf-8", "replace") + f" …[cut {len(b) - k} bytes]"
    return b.decode("utf-8", "replace")


def reference(
    data: bytes,
    anchors,
    *,
    full_below=8 << 20,
    before=150,
    after=60,
    head=300,
    tail=3000,
    max_line=65536,
):
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    n = len(lines)
    if len(data) < full_below:
        keep = range(1, n + 1)
    else:
        pats = [regex.compile(a) for a in anchors]
        keep = set(range(1, min(head, n) + 1))
        if tail:
            keep.update(range(max(1, n - tail + 1), n + 1))
        for i, line in enumerate(lines, 1):
            text = line.decode("utf-8", "replace")
            if any(p.search(text) for p in pats):
                keep.update(range(max(1, i - before), min(n, i + after) + 1))
        keep = sorted(keep)
    return [(i, _text(lines[i - 1], max_line)) for i in keep]


def run(data: bytes, anchors, **kw):
    stats = SelectStats()
    out = list(select_lines(io.BytesIO(data), anchors, stats=stats, **kw))
    return out, stats


@pytest.fixture
def small_chunks(monkeypatch):
    """Read in 4 KiB chunks so that small inputs cross many chunk boundaries."""
    monkeypatch.setattr(chunks, "CHUNK_SIZE", 4096)
    return 4096


@pytest.fixture(params=["hyperscan", "regex"])
def engine(request, monkeypatch):
    if request.param == "hyperscan":
        if not HAVE_HS:
            pytest.skip("hyperscan not installed")
    else:
        monkeypatch.setattr(hsdb, "hs", None)
    return request.param


# --------------------------------------------------------------------------
# a realistic log of a few MB
# --------------------------------------------------------------------------

ANCHORS = [
    "Traceback",
    "Error",
    "error:",
    "CUDA",
    "NCCL WARN",
    "Killed",
    "Segmentation fault",
    "out of memory",
    r"\bXid\b",
    "core dumped",
    "FAILED",
]


def make_log(seed: int, n_lines: int) -> bytes:
    rng = random.Random(seed)
    specials = [
        "[rank3]: Traceback (most recent call last):",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "node1:123:456 [0] NCCL WARN Cuda failure 'out of memory'",
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        "/bin/bash: line 1: 4242 Killed                  python train.py",
        "Segmentation fault (core dumped)",
        "error: something broke",
        "train.py FAILED",
    ]
    out = []
    for i in range(n_lines):
        r = rng.random()
        if r < 0.002:
            out.append(rng.choice(specials))
        elif r < 0.05:
            bar = "█" * rng.randint(0, 10)
            out.append("\r".join(f"Epoch 1: {k:3d}%|{bar:10s}| {k}/100" for k in range(5)))
        elif r < 0.06:
            out.append("x" * rng.randint(200, 3000))
        elif r < 0.065:
            out.append("")
        else:
            out.append(
                f"\x1b[32m2024-05-15 10:{i % 60:02d}:{i % 60:02d},123\x1b[0m [rank{i % 8}]: "
                f"step {i} loss {rng.random():.4f} lr 3e-4 tok/s {rng.randint(1, 10**6)}"
            )
    return ("\n".join(out) + "\n").encode()


@pytest.fixture(scope="module")
def big_log() -> bytes:
    return make_log(7, 60_000)  # ~4 MB


def test_selected_mode_matches_reference(big_log, engine):
    kw = dict(full_below=1 << 20, before=40, after=15, head=100, tail=500)
    got, stats = run(big_log, ANCHORS, **kw)
    assert stats.mode == "selected"
    assert stats.engine == engine
    assert got == reference(big_log, ANCHORS, **kw)
    assert stats.total_lines == big_log.count(b"\n")
    assert stats.total_bytes == len(big_log)
    assert stats.kept_lines == len(got)
    assert 0 < len(got) < stats.total_lines


def test_selected_mode_small_chunks_matches_reference(big_log, small_chunks, engine):
    kw = dict(full_below=10_000, before=7, after=3, head=20, tail=30, max_line=1000)
    got, stats = run(big_log, ANCHORS, **kw)
    assert got == reference(big_log, ANCHORS, **kw)
    assert stats.truncated_lines == sum(1 for _, t in got if t.endswith(" bytes]"))
    assert stats.truncated_lines > 0


def test_default_parameters_match_reference(big_log):
    got, stats = run(big_log, ANCHORS, full_below=0)
    assert got == reference(big_log, ANCHORS, full_below=0)


def test_line_numbers_ascending_and_unique(big_log, small_chunks):
    got, _ = run(big_log, ANCHORS, full_below=0, before=50, after=50, head=10, tail=10)
    nums = [n for n, _ in got]
    assert nums == sorted(set(nums))
    assert nums[0] == 1 and nums[-1] == big_log.count(b"\n")


@pytest.mark.parametrize("chunk", [64, 100, 4096])
def test_matches_across_chunk_boundaries(monkeypatch, chunk, engine):
    """Anchor words straddling every read boundary are all found."""
    monkeypatch.setattr(chunks, "CHUNK_SIZE", chunk)
    full_below = 1000
    word = b"CUDA error"
    # reads start at full_below + k * chunk; put the word across each start
    buf = bytearray(b"." * (full_below + chunk * 40))
    for k in range(1, 40, 3):
        boundary = full_below + k * chunk
        for j in range(-12, 12):
            buf[boundary + j] = 46
        buf[boundary - 5:boundary + 5] = word
    for k in range(2, 40, 3):  # and a line break right at some boundaries
        boundary = full_below + k * chunk
        buf[boundary - 1] = 10
    pos = 0
    while True:  # break the dots into lines of ~37 bytes
        pos = buf.find(b".", pos + 37)
        if pos < 0:
            break
        buf[pos] = 10
    data = bytes(buf) + b"\n"
    kw = dict(full_below=full_below, before=1, after=1, head=0, tail=0)
    got, _ = run(data, [r"CUDA error"], **kw)
    exp = reference(data, [r"CUDA error"], **kw)
    assert got == exp
    assert sum(1 for _, t in got if "CUDA error" in t) == len(range(1, 40, 3))


def test_full_mode_small_stream():
    data = b"a\r\nb\n\nError \xff\xfe c\n"
    got, stats = run(data, ["zzz"])
    assert stats.mode == "full"
    assert got == [(1, "a\r"), (2, "b"), (3, ""), (4, "Error \ufffd\ufffd c")]
    assert stats.total_lines == 4 and stats.kept_lines == 4 and stats.total_bytes == len(data)


def test_full_below_boundary():
    data = b"x\n" * 50
    assert run(data, [], full_below=len(data) + 1)[1].mode == "full"
    got, stats = run(data, [], full_below=len(data), head=2, tail=3)
    assert stats.mode == "selected"
    assert [n for n, _ in got] == [1, 2, 48, 49, 50]


@pytest.mark.parametrize("full_below", [0, 1 << 20])
def test_empty_stream(full_below, engine):
    got, stats = run(b"", ANCHORS, full_below=full_below)
    assert got == []
    assert stats.total_lines == 0 and stats.total_bytes == 0 and stats.kept_lines == 0


@pytest.mark.parametrize("full_below", [0, 5, 1 << 20])
def test_no_trailing_newline(full_below, small_chunks, engine):
    data = b"first\nsecond\nthird Error here"
    kw = dict(full_below=full_below, before=0, after=0, head=1, tail=0)
    got, stats = run(data, ["Error"], **kw)
    assert got == reference(data, ["Error"], **kw)
    assert got[-1] == (3, "third Error here")
    assert stats.total_lines == 3


def test_single_newline_and_blank_lines():
    assert run(b"\n", [], full_below=0, head=5)[0] == [(1, "")]
    assert run(b"\n\n\n", [], full_below=0, head=0, tail=2)[0] == [(2, ""), (3, "")]


def test_crlf_content(small_chunks, engine):
    lines = [f"step {i} ok" for i in range(3000)]
    lines[1500] = "RuntimeError: CUDA error: an illegal memory access was encountered"
    lines[2200] = "NCCL WARN timeout"
    data = ("\r\n".join(lines) + "\r\n").encode()
    kw = dict(full_below=0, before=2, after=1, head=1, tail=1)
    anchors = ["CUDA error", "WARN timeout$", r"timeout\r$"]
    got, _ = run(data, anchors, **kw)
    assert got == reference(data, anchors, **kw)
    # the \r stays; "$" does not match before it (as with regex.search)
    assert got == [
        (1, "step 0 ok\r"),
        (1499, "step 1498 ok\r"),
        (1500, "step 1499 ok\r"),
        (1501, lines[1500] + "\r"),
        (1502, "step 1501 ok\r"),
        (2199, "step 2198 ok\r"),
        (2200, "step 2199 ok\r"),
        (2201, "NCCL WARN timeout\r"),
        (2202, "step 2201 ok\r"),
        (3000, "step 2999 ok\r"),
    ]


def test_carriage_return_overdraws_kept_inside_line():
    data = b"a\rb\rc\nd\n"
    assert run(data, [], full_below=0, head=10)[0] == [(1, "a\rb\rc"), (2, "d")]


def test_windows_merge_and_clip(engine):
    lines = [f"l{i}" for i in range(1, 101)]
    for n in (3, 10, 12, 99):
        lines[n - 1] = f"Error {n}"
    data = ("\n".join(lines) + "\n").encode()
    got, stats = run(data, ["Error"], full_below=0, before=5, after=2, head=0, tail=0)
    assert [n for n, _ in got] == list(range(1, 15)) + list(range(94, 101))
    assert stats.kept_lines == 21


def test_head_tail_only_without_anchors(small_chunks):
    data = b"".join(b"line %d\n" % i for i in range(1, 10001))
    got, stats = run(data, [], full_below=0, head=3, tail=2)
    assert got == [(1, "line 1"), (2, "line 2"), (3, "line 3"), (9999, "line 9999"), (10000, "line 10000")]
    assert stats.total_lines == 10000


def test_tail_larger_than_stream():
    data = b"a\nb\nc\n"
    assert [n for n, _ in run(data, [], full_below=0, head=0, tail=10)[0]] == [1, 2, 3]


def test_long_lines_cut_at_utf8_boundary():
    line = "é" * 100  # 200 bytes
    data = (line + "\nshort\n").encode()
    got, stats = run(data, [], full_below=0, head=5, max_line=51)
    assert got[0] == (1, "é" * 25 + " …[cut 150 bytes]")
    assert got[1] == (2, "short")
    assert stats.truncated_lines == 1


def test_invalid_utf8_decoded_with_replacement(engine):
    data = b"ok\nbad \xc3\x28 Error \xff\n" * 3
    got, _ = run(data, ["Error"], full_below=0, before=0, after=0, head=0, tail=0)
    assert got == [(n, "bad \ufffd( Error \ufffd") for n in (2, 4, 6)]


def test_long_line_in_the_middle(small_chunks, engine):
    """Lines longer than a chunk are streamed; the numbering stays right."""
    long1 = b"y" * 50_000 + b" CUDA error " + b"y" * 50_000
    long2 = b"z" * 30_000
    data = b"a\nb\n" + long1 + b"\nc\nd\n" + long2 + b"\ne\nError\nf\n"
    kw = dict(full_below=0, before=1, after=1, head=0, tail=0, max_line=100)
    got, stats = run(data, ["CUDA error", "^Error$"], **kw)
    assert got == reference(data, ["CUDA error", "^Error$"], **kw)
    assert [n for n, _ in got] == [2, 3, 4, 7, 8, 9]
    assert got[1][1] == "y" * 100 + f" …[cut {len(long1) - 100} bytes]"
    assert stats.total_lines == 9 and stats.truncated_lines == 1


def test_long_line_anchor_across_pieces(small_chunks, engine):
    # the anchor straddles two reads of a line much longer than a chunk
    body = bytearray(b"q" * 40_000)
    body[4096 * 5 - 4:4096 * 5 + 6] = b"CUDA error"
    data = b"x\n" + bytes(body) + b"\ny\n"
    got, _ = run(data, ["CUDA error"], full_below=0, before=0, after=0, head=0, tail=0, max_line=10)
    assert got == [(2, "q" * 10 + f" …[cut {40_000 - 10} bytes]")]


@pytest.mark.parametrize("trailing_newline", [True, False])
def test_giant_single_line_file(tmp_path, trailing_newline):
    """A 50 MB file that is one line: streamed, cut, found, and quick."""
    size = 50 << 20
    path = tmp_path / "one-line.log"
    block = b"0123456789abcdef" * 65536  # 1 MiB
    with open(path, "wb") as f:
        for i in range(50):
            if i == 31:
                f.write(block[:-40] + b" RuntimeError: CUDA error: bad" + block[-10:])
            else:
                f.write(block)
        if trailing_newline:
            f.write(b"\n")
    stats = SelectStats()
    with open(path, "rb") as f:
        got = list(
            select_lines(f, ["CUDA error", "never there"], stats=stats, head=0, tail=0, max_line=1000)
        )
    assert got == [(1, "0123456789abcdef" * 62 + "01234567" + f" …[cut {size - 1000} bytes]")]
    assert stats.mode == "selected"
    assert stats.total_lines == 1 and stats.truncated_lines == 1
    assert stats.total_bytes == size + trailing_newline
    # and without an anchor in it the line is not selected
    with open(path, "rb") as f:
        assert list(select_lines(f, ["never there"], head=0, tail=0)) == []


def test_read_only_stream_without_readinto(big_log):
    class ReadOnly:
        def __init__(self, data):
            self.bio = io.BytesIO(data)

        def read(self, n=-1):
            return self.bio.read(min(n, 777))  # short reads too

    kw = dict(full_below=5000, before=3, after=3, head=5, tail=5)
    got = list(select_lines(ReadOnly(big_log), ANCHORS, **kw))
    assert got == reference(big_log, ANCHORS, **kw)


def test_early_close_of_iterator(big_log, small_chunks):
    it = select_lines(io.BytesIO(big_log), ANCHORS, full_below=0)
    assert next(it)[0] == 1
    it.close()  # must not hang or raise


def test_small_stream_does_not_compile_anchors(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("compiled although the stream is read in full")

    monkeypatch.setattr(sel, "AnchorMatcher", boom)
    monkeypatch.setattr(sel, "_cache", type(sel._cache)())
    assert run(b"a\nError\n", ["Error"])[0] == [(1, "a"), (2, "Error")]


def test_compiled_anchors_are_cached():
    key = (("Error", "CUDA"), HAVE_HS)
    assert sel._get_matcher(key) is sel._get_matcher(key)
    assert sel._get_matcher(key) is not sel._get_matcher((("Error",), HAVE_HS))


def test_invalid_arguments():
    with pytest.raises(ValueError):
        select_lines(io.BytesIO(b""), ["(unclosed"])
    with pytest.raises(ValueError):
        select_lines(io.BytesIO(b""), [], before=-1)
    with pytest.raises(ValueError):
        select_lines(io.BytesIO(b""), [], max_line=0)
    with pytest.raises(TypeError):
        select_lines(io.BytesIO(b""), [b"bytes"])


# --------------------------------------------------------------------------
# parallel scan of regular files
# --------------------------------------------------------------------------

needs_fork = pytest.mark.skipif(
    not hasattr(os, "fork") or sys.platform == "darwin", reason="no parallel scan on this platform"
)


@pytest.fixture
def parallel(monkeypatch):
    """Small reads, ranges and pieces, 4 processes whatever the CPU count; records
    the plans made and the ranges scanned in this process."""
    monkeypatch.setattr(chunks, "CHUNK_SIZE", 4096)  # long_t = 2048
    monkeypatch.setattr(parscan, "MIN_RANGE", 64 << 10)
    monkeypatch.setattr(parscan, "PIECE", 8192)
    monkeypatch.setenv("CRASHLENS_SELECT_PROCS", "4")
    seen = {"plans": [], "scanned": [], "sequential": 0}
    plan, scan, seq = parscan.plan_ranges, parscan.scan_range, sel._Selector._run_sequential

    def spy_plan(stream, full_below):
        p = plan(stream, full_below)
        seen["plans"].append(p)
        return p

    def spy_scan(*args):
        seen["scanned"].append(args[3])  # the range start (forked workers are not seen)
        return scan(*args)

    def spy_seq(self, full_below):
        seen["sequential"] += 1
        return seq(self, full_below)

    monkeypatch.setattr(parscan, "plan_ranges", spy_plan)
    monkeypatch.setattr(parscan, "scan_range", spy_scan)
    monkeypatch.setattr(sel._Selector, "_run_sequential", spy_seq)
    return seen


def _both(seen: dict, path: Path, anchors, **kw):
    """(parallel result, sequential result) as (lines, stats dict) pairs; the
    parallel path must not have fallen back to the sequential one."""
    data = path.read_bytes()
    st_p, st_s = SelectStats(), SelectStats()
    calls = seen["sequential"]
    with open(path, "rb") as f:
        par = list(select_lines(f, anchors, stats=st_p, **kw))
    assert seen["sequential"] == calls, "the parallel path fell back to the sequential one"
    seq = list(select_lines(io.BytesIO(data), anchors, stats=st_s, **kw))
    return (par, dataclasses.asdict(st_p)), (seq, dataclasses.asdict(st_s))


def _long_lines_log(seed: int, n_lines: int, crlf: bool, trailing_newline: bool) -> bytes:
    """make_log's mix plus lines around and far above long_t (2048 with 4 KiB
    chunks), some with anchors beyond max_line, and lines longer than _PIECE."""
    rng = random.Random(seed)
    lines = make_log(seed, n_lines).decode().split("\n")[:-1]
    for _ in range(n_lines // 150):
        i = rng.randrange(len(lines))
        n = rng.choice([1500, 2047, 2048, 2500, 4000, 6100, 6200, 9000, 20_000, 70_000])
        body = "".join(rng.choice("ab █é") for _ in range(min(n, 300))) * (n // min(n, 300) + 1)
        if rng.random() < 0.4:
            k = rng.randrange(n - 12)
            body = body[:k] + " CUDA error " + body[k + 12:]
        lines[i] = body[:n]
    sep = "\r\n" if crlf else "\n"
    text = sep.join(lines) + (sep if trailing_newline else "")
    return text.encode()


@pytest.mark.slow
@needs_fork
@pytest.mark.parametrize(
    "seed,crlf,trailing_newline",
    [(1, False, True), (2, True, True), (3, False, False), (4, True, False)],
)
def test_parallel_matches_sequential(tmp_path, parallel, engine, seed, crlf, trailing_newline):
    data = _long_lines_log(seed, 25_000, crlf, trailing_newline)
    path = tmp_path / "a.log"
    path.write_bytes(data)
    kw = dict(full_below=5000, before=9, after=4, head=25, tail=40, max_line=700)
    par, seq = _both(parallel, path, ANCHORS, **kw)
    assert par == seq
    plan = parallel["plans"][-2]  # the last one was made for the BytesIO: None
    assert plan is not None and len(plan.ranges) == 4
    assert parallel["scanned"] == [0]  # this process scanned the first range
    assert par[1]["truncated_lines"] > 0 and par[1]["mode"] == "selected"
    assert par[1]["total_bytes"] == len(data)
    assert par[1]["total_lines"] == data.count(b"\n") + (not trailing_newline)
    if engine == "hyperscan":
        assert par[0] == reference(data, ANCHORS, **kw)


@needs_fork
@pytest.mark.parametrize("full_below", [0, 5000, 200_000])
def test_parallel_hits_and_long_lines_at_range_boundaries(tmp_path, parallel, full_below):
    """Anchor lines, long lines and streamed lines right at the start and end of
    every range, and anchor lines just outside the windows of each other."""
    lines = [f"step {i} loss 0.{i % 97:02d}" for i in range(60_000)]
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "b.log"
    path.write_bytes(data)
    with open(path, "rb") as f:
        plan = parscan.plan_ranges(f, full_below)
    assert plan is not None and len(plan.ranges) == 4
    starts = [r[0] for r in plan.ranges[1:]]
    offs = [0]
    for line in lines:
        offs.append(offs[-1] + len(line) + 1)
    index = {o: i for i, o in enumerate(offs)}
    buf = bytearray(data)

    def put(i: int, text: bytes) -> None:  # rewrite line i in place, same length
        a, b = offs[i], offs[i + 1] - 1
        buf[a:b] = (text * (b - a))[:b - a] if len(text) < b - a else text[:b - a]

    for s in starts:
        i = index[s]  # first line of a range
        put(i, b"Error at range start")
        put(i - 1, b"CUDA error at range end")
        put(i + 25, b"Traceback, one line too far for the window")
    path.write_bytes(buf)
    kw = dict(full_below=full_below, before=10, after=14, head=3, tail=3)
    par, seq = _both(parallel, path, ANCHORS, **kw)
    assert par == seq
    assert par[0] == reference(bytes(buf), ANCHORS, **kw)
    nums = {n for n, _ in par[0]}
    for s in starts:
        assert index[s] + 1 in nums and index[s] in nums and index[s] + 26 in nums

    # a line that the sequential path streams ends each range; one that it
    # does not stream begins the next
    new = bytearray()
    pos = 0
    for s in starts:
        new += data[pos:s - 8001] + b"\n" + b"y" * 3000 + b" Killed " + b"y" * 4991 + b"\n"
        new += b"z" * 2040 + b" FAILED \n"
        pos = s + 2049
    new += data[pos:]
    path.write_bytes(new)
    with open(path, "rb") as f:
        plan2 = parscan.plan_ranges(f, full_below)
    assert [r[0] for r in plan2.ranges] == [r[0] for r in plan.ranges]
    par, seq = _both(parallel, path, ANCHORS, max_line=100, **kw)
    assert par == seq
    assert par[1]["truncated_lines"] >= 2 * len(starts)


@needs_fork
def test_parallel_reproduces_the_sequential_blocks(tmp_path, parallel, monkeypatch):
    r"""The regex fallback searches whole blocks: r"error\s+boom" also finds
    'error' at the end of one line with 'boom' at the start of the next, but
    only inside one block.  The workers see the same blocks, so the same hits."""
    monkeypatch.setattr(hsdb, "hs", None)
    rng = random.Random(3)
    lines = []
    for i in range(40_000):
        r = rng.random()
        lines.append("disk error" if r < 0.02 else "boom here" if r < 0.3 else f"step {i} ok")
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "x.log"
    path.write_bytes(data)
    anchors = [r"error\s+boom"]
    kw = dict(full_below=3000, before=0, after=0, head=0, tail=0)
    par, seq = _both(parallel, path, anchors, **kw)
    assert par == seq
    assert len(par[0]) > 100  # per line, nothing would match
    assert reference(data, anchors, **kw) == []


@needs_fork
def test_parallel_skips_a_range_boundary_inside_a_long_line(tmp_path, parallel):
    # Lines of 30 KB (always streamed) cover the places where ranges would begin.
    unit = b"".join(b"step %d ok\n" % i for i in range(5000))
    data = bytearray(unit * 12)
    for q in (1, 2, 3):
        mid = len(data) * q // 4
        a = data.rfind(b"\n", 0, mid - 15_000) + 1
        b = data.find(b"\n", mid + 15_000)
        data[a:b] = b"w" * 10 + b" Segmentation fault " + b"w" * (b - a - 30)
    path = tmp_path / "c.log"
    path.write_bytes(bytes(data))
    kw = dict(full_below=0, before=2, after=2, head=1, tail=1, max_line=64)
    par, seq = _both(parallel, path, ANCHORS, **kw)
    assert par == seq
    assert parallel["plans"][0] is not None and len(parallel["plans"][0].ranges) == 4
    assert par[1]["truncated_lines"] == 3


@needs_fork
def test_parallel_from_the_current_position_and_through_inputs(tmp_path, parallel):
    from crashlens.inputs.archives import FileSource

    data = make_log(11, 30_000)
    path = tmp_path / "d.log"
    path.write_bytes(data)
    kw = dict(full_below=1000, before=5, after=5, head=7, tail=7)
    with open(path, "rb") as f:
        f.read(12_345)  # buffered further than that
        got = list(select_lines(f, ANCHORS, **kw))
        assert f.tell() == len(data)
    assert parallel["sequential"] == 0
    assert got == run(data[12_345:], ANCHORS, **kw)[0]
    assert parallel["plans"][0] is not None and parallel["plans"][0].base == 12_345
    # what crashlens.inputs opens for a file (InputStream(GuardedReader(file)))
    stream = FileSource(str(path)).open()
    st = SelectStats()
    calls = parallel["sequential"]
    got = list(select_lines(stream, ANCHORS, stats=st, **kw))
    assert parallel["sequential"] == calls
    assert stream.error is None
    stream.close()
    assert parallel["plans"][-1] is not None
    assert got == run(data, ANCHORS, **kw)[0]
    assert st.total_bytes == len(data)


@needs_fork
def test_non_seekable_streams_use_the_sequential_path(tmp_path, parallel, monkeypatch):
    data = make_log(5, 30_000)
    kw = dict(full_below=1000, before=3, after=3, head=5, tail=5)
    exp = reference(data, ANCHORS, **kw)
    assert run(data, ANCHORS, **kw)[0] == exp  # io.BytesIO
    r, w = os.pipe()

    def write():
        with open(w, "wb") as out:
            out.write(data)

    t = threading.Thread(target=write)
    t.start()
    with open(r, "rb") as f:
        got = list(select_lines(f, ANCHORS, **kw))
    t.join()
    assert got == exp
    assert parallel["plans"] == [None, None] and parallel["scanned"] == []
    # and one process only: sequential too
    path = tmp_path / "e.log"
    path.write_bytes(data)
    monkeypatch.setenv("CRASHLENS_SELECT_PROCS", "1")
    with open(path, "rb") as f:
        assert list(select_lines(f, ANCHORS, **kw)) == exp
    assert parallel["plans"][-1] is None


@needs_fork
def test_parallel_failures_fall_back_to_the_sequential_path(tmp_path, parallel, monkeypatch):
    data = make_log(6, 30_000)
    path = tmp_path / "f.log"
    path.write_bytes(data)
    kw = dict(full_below=1000, before=20, after=20, head=5, tail=300)
    exp, exp_stats = run(data, ANCHORS, **kw)
    scan = parscan.scan_range

    def failing_worker(*args):
        if args[3] > 0:  # a forked worker
            raise OSError("disk on fire")
        return scan(*args)

    monkeypatch.setattr(parscan, "scan_range", failing_worker)
    st = SelectStats()
    with open(path, "rb") as f:
        assert list(select_lines(f, ANCHORS, stats=st, **kw)) == exp
    assert st == exp_stats
    monkeypatch.setattr(parscan, "scan_range", scan)

    # a failure after some lines were yielded: the rest comes from the sequential path
    lines = parscan.FileLines.lines

    def failing_lines(self, a, b, off):
        for i, item in enumerate(lines(self, a, b, off)):
            if item[0] > 40:
                raise OSError("gone")
            yield item

    monkeypatch.setattr(parscan.FileLines, "lines", failing_lines)
    st = SelectStats()
    with open(path, "rb") as f:
        assert list(select_lines(f, ANCHORS, stats=st, **kw)) == exp
    assert st == exp_stats
    assert parallel["plans"][0] is None and len(parallel["plans"]) == 3 and all(parallel["plans"][1:])


@needs_fork
def test_parallel_early_close(tmp_path, parallel):
    path = tmp_path / "g.log"
    path.write_bytes(make_log(8, 30_000))
    with open(path, "rb") as f:
        it = select_lines(f, ANCHORS, full_below=0)
        assert next(it)[0] == 1
        it.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # every worker was waited for


# --------------------------------------------------------------------------
# anchor syntax
# --------------------------------------------------------------------------

SYNTAX_LINES = [
    "Out Of Memory while allocating",
    "rank 12 timed out",
    "CUDA error: device-side assert triggered",
    "Xid 79 reported",
    "NoXid here",
    "exit code 137",
    "exitcode -9",
    "worker pid=4242 died",
    "café error",
    "ℹ️ info",
    "\x1b[31mERROR\x1b[0m boom",
    "ok line",
    "TRACEBACK in caps",
    "loss is nan",
    "loss is inf",
    "banana",
]

SYNTAX_ANCHORS = [
    "(?i)out of memory",
    r"(?<=rank )\d+ timed out",
    r"CUDA error: (?P<msg>.+)",
    r"\bXid\b",
    r"exit ?code:? -?(?:9|137)\b",
    r"pid=(?P<pid>\d+) died$",
    r"caf\w error",
    r"^(?!ok).*\bboom\b",
    r"(?i:traceback)",
    r"\bnan\b|\binf\b",
    r"\p{Lu}RROR",  # regex-only syntax: runs on the regex fallback
    r"(?:\w)\1?zz",  # bogus back reference: invalid
]


def test_anchor_syntax(engine):
    anchors = SYNTAX_ANCHORS[:-1]
    lines = SYNTAX_LINES * 3 + ["filler"] * 20
    data = ("\n".join(lines) + "\n").encode()
    kw = dict(full_below=0, before=0, after=0, head=0, tail=0)
    got, stats = run(data, anchors, **kw)
    exp = reference(data, anchors, **kw)
    assert {t for _, t in got} >= {t for _, t in exp}
    # every listed line except 'NoXid here', 'ok line', 'banana', 'ℹ️ info' matches
    assert {t for _, t in exp} == set(SYNTAX_LINES) - {"NoXid here", "ok line", "banana", "ℹ️ info"}
    if engine == "hyperscan":
        assert stats.regex_anchors == 1  # only \p{Lu}
    else:
        assert stats.regex_anchors == len(anchors)
    with pytest.raises(ValueError):
        select_lines(io.BytesIO(data), SYNTAX_ANCHORS)
