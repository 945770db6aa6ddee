"""The sweep: decoding every executable byte, chunk by chunk, in forked worker processes.

`sweep(data, ft, chunks, jobs)` yields (chunk index, aggregate) as chunks finish. A chunk is an
address range cut at function starts; each worker splits it into functions and the gaps between
them (`_pieces`), decodes each piece in C (`list(map(attrgetter("code"), Decoder(...)))`), and
returns per-function extension counts, CPU-check hits, names and ISA hints: only the aggregates
cross the process boundary.
"""

from __future__ import annotations

import os
from collections import Counter
from operator import attrgetter
from typing import Any, Iterator

import iced_x86

from ..symbols import FunctionTable
from .tables import tables

__all__ = ["sweep", "child_cpu", "default_jobs"]

SMALL_GAP = 64          # a gap this small after a function is alignment padding: decoded with it


_WORK: dict[str, Any] = {}


def _pieces(ft: FunctionTable, lo: int, hi: int, delta: int) -> list[tuple[int, int, int, int]]:
    """(start, end, function index or -1, file offset) covering [lo, hi): the functions and the
    gaps between them; a gap of alignment padding is decoded with the function before it."""
    pieces: list[tuple[int, int, int, int]] = []
    for a, b, k in ft.partition(lo, hi):
        if k < 0 and b - a <= SMALL_GAP and pieces and pieces[-1][1] == a and pieces[-1][2] >= 0:
            pa, _pb, pk, poff = pieces[-1]
            pieces[-1] = (pa, b, pk, poff)
        else:
            pieces.append((a, b, k, a + delta))
    return pieces


def _scan(chunk: tuple[int, int, int]) -> dict[str, Any]:
    """Decode one chunk (start, end, file offset - address); aggregate what matters."""
    pieces = _pieces(_WORK["ft"], *chunk)
    t = tables()
    data = _WORK["data"]
    code_exts = t.code_exts
    hit_codes = t.hit_codes
    simd_codes = t.simd_codes
    totals_codes = t.totals_codes
    Decoder = iced_x86.Decoder
    get_code = attrgetter("code")
    ft = _WORK.get("ft")
    faulting = t.faulting
    cpuid_codes = t.cpuid_codes
    cpuid_ext = t.CPUID
    hits: list[tuple] = []
    has_units = ft is not None and ft.symtab is not None
    simd_units: set[int] = set()
    code_units: set[int] = set()
    totals: Counter = Counter()
    totals_fn: Counter = Counter()
    ninstr = nfunc = nsimd = 0
    for lo, hi, fidx, off in pieces:
        buf = data[off:off + (hi - lo)]
        codes = list(map(get_code, Decoder(64, buf, ip=lo)))
        ninstr += len(codes)
        cs = set(codes)
        unit = -1
        if fidx >= 0 and codes:
            nfunc += 1
            unit = ft.unit(fidx) if has_units else -1
            if unit >= 0:
                code_units.add(unit)
            if not cs.isdisjoint(simd_codes):
                nsimd += 1
                if unit >= 0:
                    simd_units.add(unit)
        for c in totals_codes:
            if c in cs:
                totals[c] += codes.count(c)
                totals_fn[c] += 1
        if cs.isdisjoint(hit_codes):
            continue
        per: dict[int, list[int]] = {}  # extension -> [instructions, faulting]
        guard = False
        for c, n in Counter(codes).items():
            es = code_exts[c]
            if not es or c not in hit_codes:
                continue
            if c in cpuid_codes:
                guard = True
            f = n if faulting[c] else 0
            for e in es:
                slot = per.get(e)
                if slot is None:
                    per[e] = [n, f]
                else:
                    slot[0] += n
                    slot[1] += f
        per.pop(cpuid_ext, None)
        name = hint = None
        if fidx >= 0 and ft is not None:  # names and hints here: in parallel, not in the parent
            name = ft.name(fidx)
            hint = t.hint(name)
            if hint is None:
                src = ft.file(fidx)
                fh = t.hint(src)
                hint = (fh[0], f"file {src}") if fh else None
        hits.append((lo, hi, fidx, per, guard, name, hint, unit))
    return {"hits": hits, "simd_units": simd_units, "code_units": code_units, "totals": dict(totals), "totals_fn": dict(totals_fn),
            "instructions": ninstr, "functions": nfunc, "simd": nsimd}


def _scan_chunk(i: int) -> tuple[int, dict[str, Any]]:
    return i, _scan(_WORK["chunks"][i])


def sweep(data: Any, ft: FunctionTable, chunks: list[tuple[int, int, int]],
         jobs: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(chunk index, result) as chunks finish: forked workers when jobs > 1, else in order here."""
    _WORK.update(data=data, ft=ft, chunks=chunks)
    try:
        if jobs > 1 and len(chunks) > 1 and hasattr(os, "fork"):
            import multiprocessing
            tables()  # build before forking, once
            ctx = multiprocessing.get_context("fork")
            try:
                pool = ctx.Pool(jobs)
            except (OSError, ImportError, AssertionError, ValueError):
                pool = None  # no fork here (sandbox, limits, a daemon process): do it here
            if pool is not None:
                with pool:
                    yield from pool.imap_unordered(_scan_chunk, range(len(chunks)))
                return
        for i in range(len(chunks)):
            yield _scan_chunk(i)
    finally:
        _WORK.clear()


def child_cpu() -> float:
    try:
        import resource
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    except (ImportError, OSError):
        return 0.0


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
