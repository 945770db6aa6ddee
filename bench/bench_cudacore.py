#!/usr/bin/env python3
"""GPU core dump reading time on the real complete dumps of fixtures/gpu-cores/complete (H100,
driver 580.159, CUDA 13.0): the lightweight dumps (15.5 and 17.8 MB: 14-16 MB of global memory
sections) and the memory-less one (0.33 MB), plus the 17.8 MB one padded to 100 MB (memory bytes
between the tables and the section table, never read), to show the time does not grow with the
dump's memory.

    python bench/bench_cudacore.py [--repeat N]

Per dump: xz decompression (the fixtures are compressed; a job's dump usually is not), the
tables alone (`read_gpu_core(locate=False)`), tables + cubin line table + instruction words
(`CRASHLENS_NO_NVDISASM=1`), the same with nvdisasm's text (one `nvdisasm -b SM90` run on the
three instructions around the pcs), and the whole verdict: `crashlens analyze` of the raw file
(mapped) and of the .xz (decompressed in memory). Best of N runs, seconds.

cuda-gdb is not measured here: it exists only on the device host (the dumps were made there).
The one figure on record is fixtures/gpu-cores/README.md's: cuda-gdb 13.0 took 0.21-0.28 s to
*fail* on the truncated dumps (an internal assertion); no timing of cuda-gdb on the complete
dumps was recorded with them (their *.cuda-gdb.txt hold its answers only).

Figures on the 2-core shared development machine (load average ~2-5), 2026-11-26, best of 2
(in-process, after the first call; seconds):

    dump                 MB      xz -d   tables  +lines  +nvdisasm  analyze raw  analyze .xz
    nr_trap              0.33    0.003   0.003   0.003   0.81       0.009        0.019
    lw_trap              15.5    0.070   0.002   0.002   0.76       0.007        0.137
    lw_misaligned        17.8    0.145   0.037   0.021   0.75       0.025        0.125
    lw_misaligned+pad    104.9   -       0.014   0.015   -          0.030        -

The whole command, `crashlens analyze --json` on lw_misaligned (a fresh process: interpreter,
imports, rule base): 0.74 s on the raw file, 0.93 s on the .xz, with nvdisasm 1.03 / 1.72 s.
nvdisasm's share (~0.5 s CPU, more wall time on a loaded machine) is its own start-up, the same
for the 3 instructions decoded as for a whole module; CRASHLENS_NO_NVDISASM=1 leaves the raw
instruction words only. Rerun to replace these with this machine's.
"""
from __future__ import annotations

import argparse
import lzma
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FX = ROOT / "fixtures" / "gpu-cores" / "complete"


def best(fn, n: int) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def padded(data: bytes, size: int) -> bytes:
    """The dump with zero bytes before its section header table (e_shoff moved): `size` bytes,
    the same tables."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    pad = max(0, size - len(data))
    out = bytearray(data[:shoff]) + bytes(pad) + data[shoff:]
    struct.pack_into("<Q", out, 0x28, shoff + pad)
    return bytes(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from crashlens.pipeline import analyze_paths
    from crashlens.binary.cubin_lines import nvdisasm_path
    from crashlens.binary.cudacore import read_gpu_core

    tmp = Path(tempfile.mkdtemp())
    rows = []
    cases = [("nr_trap", None), ("lw_trap", None), ("lw_misaligned", None), ("lw_misaligned", 100 << 20)]
    for name, pad in cases:
        xz = (FX / f"{name}.nvcudmp.xz").read_bytes()
        t_xz = best(lambda: lzma.decompress(xz), args.repeat)
        data = lzma.decompress(xz)
        if pad:
            data = padded(data, pad)
        raw = tmp / (f"{name}{'_pad' if pad else ''}.nvcudmp")
        raw.write_bytes(data)
        os.environ["CRASHLENS_NO_NVDISASM"] = "1"
        read_gpu_core(data)  # c++filt and the YAML tables once
        t_tab = best(lambda: read_gpu_core(data, locate=False), args.repeat)
        t_loc = best(lambda: read_gpu_core(data), args.repeat)
        t_an = best(lambda: analyze_paths([str(raw)]), args.repeat)
        t_anxz = best(lambda: analyze_paths([str(FX / f"{name}.nvcudmp.xz")]), args.repeat) if not pad else None
        t_dis = None
        if nvdisasm_path() and not pad:
            del os.environ["CRASHLENS_NO_NVDISASM"]
            from crashlens.binary import cubin_lines
            def fresh():
                cubin_lines._nvdisasm_raw.cache_clear()
                read_gpu_core(data)
            t_dis = best(fresh, args.repeat)
        core = read_gpu_core(data, locate=False)
        f = core.first_fault
        rows.append((name + ("+pad" if pad else ""), len(data) / 1e6, None if pad else t_xz, t_tab, t_loc, t_dis,
                     t_an, t_anxz, f.exception if f else "-"))
    print(f"{'dump':20} {'MB':>6} {'xz -d':>7} {'tables':>7} {'+lines':>7} {'+nvdis':>7} {'analyze':>8} {'an .xz':>7}  focus")
    for r in rows:
        cell = lambda v: f"{v:7.3f}" if v is not None else f"{'-':>7}"
        print(f"{r[0]:20} {r[1]:6.2f} {cell(r[2])} {cell(r[3])} {cell(r[4])} {cell(r[5])} {r[6]:8.3f} {cell(r[7])}  {r[8]}")
    print("cuda-gdb: not measurable here (device host only); fixtures/gpu-cores/README.md records 0.21-0.28 s "
          "for cuda-gdb 13.0 failing on the truncated dumps, nothing for the complete ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
