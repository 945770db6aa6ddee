#!/usr/bin/env python3
"""Hostile inputs (issue 10, section 1): every case must end within the targets.

    python bench/hostile.py                    # every case, a Markdown table on stdout
    python bench/hostile.py -k zip -k fifo     # cases whose name contains one of the words
    python bench/hostile.py --list

Each case writes its input under a fresh folder of --workdir (default: a temporary folder
under /tmp, removed at the end), runs one crashlens command with TMPDIR set to an empty
folder of its own, and reports: exit code, wall seconds, peak RSS of all the command's
processes together (sampled every 20 ms from /proc: the sum over the process tree, so
forked scan workers count), the output lines, and the files left in TMPDIR. A case that
runs past --timeout or over --max-rss is killed (its row says so).

Targets: <= 500 MB peak RSS of all crashlens processes, <= 30 s, exit 0/1/2 (never 3),
nothing left in TMPDIR.
"""

from __future__ import annotations

import argparse
import bz2
import io
import json
import os
import pickle
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MiB = 1 << 20
GiB = 1 << 30
CRASHLENS = os.path.join(os.path.dirname(sys.executable), "crashlens")

# --------------------------------------------------------------------------- measuring


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss_kib(root: int) -> int:
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss_kib(pid)
        todo += _children(pid)
    return total


@dataclass
class Result:
    rc: int | None
    seconds: float
    peak_mb: float
    out_lines: int
    left: list[str]
    killed: str = ""
    tail: str = ""
    cpu: float = 0.0  # user + system seconds of the command and the processes it waited for


def run(cmd: list[str], tmpdir: str, timeout: float, max_rss_mb: float, stdin: int | None = None) -> Result:
    env = dict(os.environ, TMPDIR=tmpdir, NO_COLOR="1", COLUMNS="100")
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True,
                            stdin=stdin if stdin is not None else subprocess.DEVNULL)
    peak, killed, cpu, rc = 0, "", 0.0, None
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = rc = os.waitstatus_to_exitcode(status)
                cpu = usage.ru_utime + usage.ru_stime
                break
            time.sleep(0.02)
            rss = tree_rss_kib(proc.pid)
            peak = max(peak, rss)
            elapsed = time.perf_counter() - t0
            if elapsed > timeout or rss > max_rss_mb * 1024:
                killed = f"killed at {elapsed:.0f} s" if elapsed > timeout else f"killed over {max_rss_mb:.0f} MB"
                os.killpg(proc.pid, signal.SIGKILL)
                _pid, _status, usage = os.wait4(proc.pid, 0)
                proc.returncode, cpu = -9, usage.ru_utime + usage.ru_stime
                break
    finally:
        seconds = time.perf_counter() - t0
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stray workers, or this runner interrupted
        except OSError:
            pass
    out.seek(0)
    err.seek(0)
    stdout = out.read()
    stderr = err.read().decode("utf-8", "replace")
    left = []
    for base, _dirs, files in os.walk(tmpdir):
        left += [os.path.join(base, f) for f in files]
    lines = stdout.count(b"\n") + stderr.count("\n")
    return Result(None if killed else rc, seconds, peak / 1024, lines, left, killed,
                  (stderr.strip().splitlines() or [""])[-1][:160], cpu)


# --------------------------------------------------------------------------- inputs

LOG_LINES = [
    b"2024-05-01 12:00:%02d INFO step %d loss 0.4321 lr 3e-4 grad_norm 1.02 tok/s 51234\n",
    b"[rank3]: 2024-05-01 12:00:%02d WARNING dataloader worker %d slow\n",
]


def log_text(size: int) -> bytes:
    """Training-log-like text of about `size` bytes (repetitive: compresses well)."""
    pieces, have, i = [], 0, 0
    while have < size:
        line = LOG_LINES[i % 2] % (i % 60, i)
        pieces.append(line)
        have += len(line)
        i += 1
    return b"".join(pieces)[:size]


def write_repeated(path: Path, block: bytes, size: int) -> None:
    with open(path, "wb") as f:
        left = size
        while left > 0:
            piece = block[:left]
            f.write(piece)
            left -= len(piece)


def make_empty_lines(d: Path) -> list[str]:
    p = d / "empty.log"
    write_repeated(p, b"\n" * MiB, 8 * MiB - 1)
    return ["analyze", str(p)]


def make_one_char_lines(d: Path) -> list[str]:
    p = d / "chars.log"
    write_repeated(p, b"x\n" * (MiB // 2), 8 * MiB - 2)
    return ["analyze", str(p)]


def make_tracebacks(d: Path) -> list[str]:
    p = d / "tracebacks.log"
    with open(p, "wb") as f:
        for start in range(0, 1_000_000, 50_000):
            f.write("".join(
                f'Traceback (most recent call last):\n  File "/w/mod{i}.py", line {i % 997 + 1}, in fn{i}\n'
                f"ValueError: bad value {i}\n" for i in range(start, start + 50_000)).encode())
    return ["analyze", str(p)]


def _cuda_log(d: Path) -> Path:
    p = d / "cuda.log"
    if not p.exists():
        block = b"".join(b"RuntimeError: CUDA error: an illegal memory access was encountered (%07d)\n" % i
                         for i in range(100_000))
        write_repeated(p, block, 262 * MiB)
    return p


def make_cuda_analyze(d: Path) -> list[str]:
    return ["analyze", str(_cuda_log(d))]


def make_cuda_report(d: Path) -> list[str]:
    return ["report", str(_cuda_log(d))]


def make_zip_overlap(d: Path) -> list[str]:
    """One 200 MiB deflated member; 2000 central-directory entries all point at it."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("m0000.log", "w", force_zip64=True) as w:
            block = log_text(8 * MiB)
            for _ in range(25):
                w.write(block)
    data = buf.getvalue()
    end = data.rindex(b"PK\x05\x06")
    (cd_size, cd_offset) = struct.unpack_from("<II", data, end + 12)
    cd = data[cd_offset:cd_offset + cd_size]
    entries = [cd.replace(b"m0000.log", b"m%04d.log" % i) for i in range(2000)]
    body = data[:cd_offset] + b"".join(entries)
    eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 2000, 2000, len(body) - cd_offset, cd_offset, 0)
    p = d / "overlap.zip"
    p.write_bytes(body + eocd)
    return ["analyze", str(p)]


def make_bz2(d: Path) -> list[str]:
    """10 GiB of log text as concatenated bz2 streams."""
    piece = bz2.compress(log_text(64 * MiB), 9)
    p = d / "huge.log.bz2"
    with open(p, "wb") as f:
        for _ in range(160):
            f.write(piece)
    return ["analyze", str(p)]


def make_zst_core(d: Path) -> list[str]:
    """An ELF core header followed by 12 GiB of non-zero bytes, zstd-compressed."""
    import zstandard

    header = bytearray(64)
    header[:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<HHI", header, 16, 4, 62, 1)  # ET_CORE, x86-64
    struct.pack_into("<H", header, 52, 64)  # e_ehsize
    pattern = (bytes(range(1, 256)) * 4200)[:1 << 20]
    cctx = zstandard.ZstdCompressor(level=1)
    frame = cctx.compress(pattern * 256)  # 256 MiB
    p = d / "core.zst"
    with open(p, "wb") as f:
        f.write(cctx.compress(bytes(header) + pattern * 255 + pattern[:-64]))
        for _ in range(47):
            f.write(frame)
    return ["analyze", str(p)]


def make_fifo(d: Path) -> list[str]:
    p = d / "fifo"
    os.mkfifo(p)
    return ["analyze", str(p)]


def _bundle(d: Path) -> Path:
    b = d / "bundle"
    if b.exists():
        return b
    b.mkdir()
    (b / "run.log").write_text("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
                               "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    os.symlink("/dev/zero", b / "zero.log")
    os.mkfifo(b / "pipe.log")
    os.symlink(b / "pipe.log", b / "pipe-link.log")
    os.symlink("/proc/self/environ", b / "env.log")
    os.symlink("/etc/passwd", b / "passwd.log")
    return b


def make_bundle_analyze(d: Path) -> list[str]:
    return ["analyze", "--json", str(_bundle(d))]


def make_bundle_triage(d: Path) -> list[str]:
    b = _bundle(d)
    return ["triage", "--db", str(d / "t.db"), str(b)]


def _small_files(d: Path, n: int) -> list[str]:
    f = d / f"files{n}"
    f.mkdir()
    for i in range(n):
        with open(f / f"f{i:06d}.log", "wb") as out:
            out.write(b"step %d loss 0.5\n" % i)
    return ["analyze", str(f)]


def make_files_200k(d: Path) -> list[str]:
    return _small_files(d, 200_000)


def make_files_20k(d: Path) -> list[str]:
    return _small_files(d, 20_000)


def make_zip_100k(d: Path) -> list[str]:
    p = d / "many.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        for i in range(100_000):
            z.writestr(f"f{i:06d}.log", b"step %d loss 0.5\n" % i)
    return ["analyze", str(p)]


def fatbin_elf(uncompressed: int) -> bytes:
    """A minimal ELF with one .nv_fatbin section holding one zstd SASS image that declares
    `uncompressed` bytes (zeros), padded with a skippable frame to pass the ratio check."""
    import zstandard

    frame = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(bytes(uncompressed))
    pad_len = max(0, uncompressed // 1000 - len(frame))
    payload = frame + struct.pack("<II", 0x184D2A50, pad_len) + bytes(pad_len)
    payload += bytes(-len(payload) % 8)
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x0101, 64, len(payload), len(frame) + 8 + pad_len, 0, 8, 1, 80,
                        0, 0, 0x1 | 0x4 | 0x10 | 0x8000, 0, uncompressed)
    fat = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry) + len(payload)) + entry + payload
    shstr = b"\0.nv_fatbin\0.shstrtab\0"
    off_fat = 64
    off_str = off_fat + len(fat)
    off_sh = (off_str + len(shstr) + 7) & ~7
    sh = bytes(64)
    sh += struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, off_fat, len(fat), 0, 0, 8, 0)
    sh += struct.pack("<IIQQQQIIQQ", 12, 3, 0, 0, off_str, len(shstr), 0, 0, 1, 0)
    ehdr = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, off_sh, 0, 64, 0, 0,
                                                            64, 3, 2)
    body = ehdr + fat + shstr
    return body + bytes(off_sh - len(body)) + sh


def make_image_1g(d: Path) -> list[str]:
    p = d / "libbomb.so"
    p.write_bytes(fatbin_elf(GiB))
    return ["inspect", "--image", "0", str(p)]


def _template_case(src: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        log = d / "small.log"
        log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
        t = d / f"t{abs(hash(src)) % 10**8}.md"
        t.write_text(src)
        return ["report", "--template", str(t), str(log)]
    return make


TEMPLATES = {
    "template-str-mul": "{{ 'A' * 10**10 }}\n",
    "template-nested-range": "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}\n",
    "template-range-1e9": "{% for i in range(10**9) %}x{% endfor %}\n",
    "template-recursive-macro": "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}\n",
}


def make_nest_42(d: Path) -> list[str]:
    """A 42.zip-style nest: 16 zips of 16 zips ... 5 levels; leaves of 4 MiB of zeros."""
    leaf = io.BytesIO()
    with zipfile.ZipFile(leaf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("0.dat", bytes(4 * MiB))
    level = leaf.getvalue()
    for depth in range(5):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for i in range(16):
                z.writestr(f"{'abcde'[depth]}{i:x}.zip", level)
        level = buf.getvalue()
    p = d / "42.zip"
    p.write_bytes(level)
    return ["analyze", str(p)]


def make_notebook_60m(d: Path) -> list[str]:
    """A notebook just under the reader's limit (64 MiB): 20,000 cells of stream output."""
    p = d / "big.ipynb"
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": ["x = 1\n"],
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["step 1 loss 0.5\n" * 180]}]}
    p.write_text(json.dumps({"cells": [cell] * 20000, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return ["analyze", str(p)]


def make_notebook_deep(d: Path) -> list[str]:
    """A .ipynb of 200,000 nested lists: the JSON parser's recursion limit, not a crash."""
    p = d / "deep.ipynb"
    p.write_text('{"cells": ' + "[" * 200000 + "]" * 200000 + "}")
    return ["analyze", str(p)]


def make_error_file_16m(d: Path) -> list[str]:
    """A torchelastic error file at the reader's limit: a 16 MiB traceback of one frame repeated."""
    p = d / "attempt_0" / "1" / "error.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    frame = '  File "/home/u/train.py", line 9, in step\n    loss = model(x)\n'
    stack = "Traceback (most recent call last):\n" + frame * (16 * MiB // len(frame)) + "KeyError: 1\n"
    p.write_text(json.dumps({"message": {"message": "KeyError: 1", "extraInfo": {"py_callstack": stack,
                                                                                 "timestamp": "1"}}}))
    return ["analyze", str(d / "attempt_0")]


def make_pickle_reducer(d: Path) -> list[str]:
    """Flight Recorder dumps that are hostile pickles: one whose reducer would run a shell command
    (a marker file must not appear), one at the reader's size limit, one repeating a shared list."""
    marker = d / "RAN"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (d / "nccl_trace_rank_0").write_bytes(pickle.dumps({"version": "2.10", "entries": [Evil()]}))
    (d / "nccl_trace_rank_1").write_bytes(b"\x80\x04" + b"\x00" * (64 * MiB - 2))
    node: list = [0]
    for _ in range(60):
        node = [node, node]
    entry = {"collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "state": "scheduled",
             "input_sizes": node, "frames": node}
    (d / "nccl_trace_rank_2").write_bytes(pickle.dumps({"version": "2.10", "entries": [entry] * 1_000_000}))
    return ["analyze", str(d)]


def make_run_records_16m(d: Path) -> list[str]:
    """A crashlens run bundle whose manifest is 16 MiB of nested lists and whose samples are
    16 MiB of rows without a single number where one is expected."""
    (d / "manifest.json").write_text('{"schema": "crashlens.bundle/1", "exit": ' + "[" * 100000 + "]" * 100000
                                     + ', "pad": "' + "x" * (16 * MiB - 300000) + '"}')
    row = json.dumps({"t": "x", "mem": {"MemTotal": "a"}, "cgroup": {"max": None}, "fs": {"cwd": "b"}, "gpus": "c"})
    (d / "samples.jsonl").write_text((row + "\n") * (16 * MiB // (len(row) + 1)))
    (d / "console.log").write_text("step 1\nKilled\n")
    return ["analyze", str(d)]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "empty-lines-8M": make_empty_lines,
    "one-char-lines-8M": make_one_char_lines,
    "tracebacks-1M-110M": make_tracebacks,
    "cuda-every-line-262M analyze": make_cuda_analyze,
    "cuda-every-line-262M report": make_cuda_report,
    "zip-2000-overlapping-200M": make_zip_overlap,
    "bz2-10G-log": make_bz2,
    "zst-core-12G": make_zst_core,
    "fifo-no-writer": make_fifo,
    "bundle-devzero-fifo-proc analyze": make_bundle_analyze,
    "bundle-devzero-fifo-proc triage": make_bundle_triage,
    "folder-200k-files": make_files_200k,
    "folder-20k-files": make_files_20k,
    "zip-100k-entries": make_zip_100k,
    "inspect-image-1G": make_image_1g,
    **{name: _template_case(src) for name, src in TEMPLATES.items()},
    "nest-42-zip": make_nest_42,
    "notebook-60M": make_notebook_60m,
    "notebook-deep-nesting": make_notebook_deep,
    "elastic-error-file-16M": make_error_file_16m,
    "flight-recorder-hostile-pickles": make_pickle_reducer,
    "run-bundle-records-16M": make_run_records_16m,
}


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # kill the case's processes on the way out
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-k", action="append", default=[], help="run the cases whose name contains this")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--max-rss", type=float, default=3000.0, help="MB; a case above it is killed")
    ap.add_argument("--workdir", help="keep inputs here (reused between runs)")
    args = ap.parse_args()
    names = [n for n in CASES if not args.k or any(k in n for k in args.k)]
    if args.list:
        print("\n".join(names))
        return 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="crashlens-hostile-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    print("| case | exit | wall s | CPU s | peak RSS MB | output lines (stdout+stderr) | left in TMPDIR | note |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |", flush=True)
    failed = 0
    try:
        for name in names:
            d = work / name.replace(" ", "_")
            d.mkdir(exist_ok=True)
            saved = d / ".cmd.json"
            if saved.exists():  # --workdir: inputs made by an earlier run
                cmd = json.loads(saved.read_text())
            else:
                cmd = CASES[name](d)
                saved.write_text(json.dumps(cmd))
            tmp = tempfile.mkdtemp(prefix="tmp-", dir=work)
            r = run([CRASHLENS, *cmd], tmp, args.timeout, args.max_rss)
            ok = r.rc in (0, 1, 2) and r.seconds <= 30 and r.peak_mb <= 500 and not r.left
            failed += not ok
            note = r.killed or ("" if ok else r.tail)
            print(f"| {name} | {r.rc if r.rc is not None else '-'} | {r.seconds:.1f} | {r.cpu:.1f} | {r.peak_mb:.0f} | "
                  f"{r.out_lines} | {len(r.left)} | {'' if ok else 'FAIL '}{note} |", flush=True)
            shutil.rmtree(tmp, ignore_errors=True)
            if not args.workdir:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
