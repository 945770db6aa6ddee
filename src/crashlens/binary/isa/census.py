"""`isa_census`: the census of a whole file (see the package docstring): chunks, the sweep,
the merge, the first addresses, then the verdicts; read from and written to the cache."""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from collections import Counter

import iced_x86

from ..elf import ElfFile
from ..readers import build_id
from ..symbols import FunctionTable, function_table, strict
from .cache import cache_get, cache_key, cache_put, from_cache
from .elfcode import check_x86_64, exec_sections, file_offset, gnu_property, open_elf
from .results import ExtensionUse, FunctionUse, IsaCensus
from .sweep import child_cpu, default_jobs, sweep
from .tables import Tables, tables
from .verdict import Context, verdicts

__all__ = ["isa_census"]


@strict
def isa_census(elf: ElfFile | str | os.PathLike[str], *, cache: bool = True, jobs: int | None = None,
               first: int = 16) -> IsaCensus:
    """The ISA census of an x86-64 ELF file (see the package docstring).

    cache: read/write the on-disk cache (keyed by build-id); jobs: worker processes (default:
    the CPUs this process may use); first: how many first addresses to keep per extension."""
    t0 = time.perf_counter()
    f, owned = open_elf(elf)
    try:
        check_x86_64(f)
        bid = build_id(f)
        key = cache_key(f, bid, first)
        if cache:
            hit = cache_get(key)
            if hit is not None:
                return from_cache(hit, f.path, time.perf_counter() - t0)
        census = _census(f, bid, jobs or default_jobs(), first, t0)
        if cache:
            cache_put(key, census)
        return census
    finally:
        if owned:
            f.close()


def _census(elf: ElfFile, bid: str | None, jobs: int, first_n: int, t0: float) -> IsaCensus:
    t = tables()
    notes: list[str] = []
    timings: dict[str, float] = {}
    mark = time.perf_counter()
    ft = function_table(elf)
    notes.extend(ft.notes)
    # chunks: address ranges of about equal size, cut at function starts (an instruction
    # boundary); the workers split them into functions and gaps themselves
    secs = exec_sections(elf)
    for sec in secs:
        elf.section_data(sec)  # bounds: raises ElfError for a section past the end of the file
    text_bytes = sum(sec.size for sec in secs)
    if not secs:
        notes.append("no executable sections")
    jobs = max(1, min(jobs, 64))
    target = max(1 << 20, text_bytes // (jobs * 16) + 1) if jobs > 1 else max(1, text_bytes)
    chunks: list[tuple[int, int, int]] = []  # (start, end, file offset - address)
    for sec in secs:
        lo, end = sec.addr, sec.addr + sec.size
        while lo < end:
            cut = min(lo + target, end)
            if cut < end:
                k = bisect_right(ft.starts, cut) - 1
                if k >= 0 and ft.starts[k] > lo:
                    cut = ft.starts[k]
                else:  # no function starts in (lo, cut]: go on to the next one that does
                    j = bisect_right(ft.starts, lo)
                    cut = ft.starts[j] if j < len(ft.starts) and ft.starts[j] < end else end
            chunks.append((lo, cut, sec.offset - sec.addr))
            lo = cut
    if text_bytes < (4 << 20):
        jobs = 1
    now = time.perf_counter()
    timings["functions"], mark = now - mark, now
    cpu0 = child_cpu()
    # merge as the chunks come in (the parent is idle otherwise); chunks cover increasing
    # addresses, so their hits are put back in chunk order at the end
    ninstr = nfunc = nsimd = 0
    totals: Counter = Counter()
    totals_fn: Counter = Counter()
    by_chunk: dict[int, list] = {}
    cpuid_funcs: set[int] = set()
    ctx = Context(elf, ft, t, cpuid_funcs)
    names, hints = ctx._names, ctx._hints
    units: dict[int, int] = {}
    simd_units: set[int] = set()
    code_units: set[int] = set()
    for i, r in sweep(elf.data, ft, chunks, jobs):
        ninstr += r["instructions"]
        nfunc += r["functions"]
        nsimd += r["simd"]
        totals.update(r["totals"])
        totals_fn.update(r["totals_fn"])
        by_chunk[i] = r["hits"]
        simd_units |= r["simd_units"]
        code_units |= r["code_units"]
        for lo, _hi, fidx, _per, guard, name, hint, unit in r["hits"]:
            if fidx >= 0:
                names[fidx] = name
                hints[fidx] = hint
                units[fidx] = unit
            if guard:
                cpuid_funcs.add(fidx if fidx >= 0 else -lo - 1)
    now = time.perf_counter()
    timings["sweep"], mark = now - mark, now
    if jobs > 1:
        timings["sweep_worker_cpu"] = child_cpu() - cpu0

    per_ext: dict[int, list] = {}  # ext -> [instructions, faulting, [(lo, hi, fidx, n)]]
    undecodable = 0
    for i in sorted(by_chunk):
        for lo, hi, fidx, per, _guard, _name, _hint, _unit in by_chunk[i]:
            for e, (n, nf) in per.items():
                slot = per_ext.get(e)
                if slot is None:
                    slot = per_ext[e] = [0, 0, []]
                slot[0] += n
                slot[1] += nf
                slot[2].append((lo, hi, fidx, n))
    if t.INVALID in per_ext:
        undecodable = per_ext[t.INVALID][0]
    for c, n in totals.items():
        for e in t.code_exts[c]:
            slot = per_ext.setdefault(e, [0, 0, []])
            slot[0] += n
            slot[1] += n if t.faulting[c] else 0
    first = _first_addresses(elf, t, per_ext, first_n)
    undecodable_at = tuple(first.pop(t.INVALID, ()))
    per_ext.pop(t.INVALID, None)
    uses: dict[int, ExtensionUse] = {}
    prop = gnu_property(elf)
    now = time.perf_counter()
    timings["merge"], mark = now - mark, now
    ctx.units = units
    ctx.unit_population = (_plain_units(ft, t, simd_units), _plain_units(ft, t, code_units))
    verdict_of = verdicts(ctx, per_ext, totals_fn, nfunc, nsimd, prop)
    now = time.perf_counter()
    timings["verdicts"], mark = now - mark, now
    for e, (n, nfault, funcs) in per_ext.items():
        ext = t.exts[e]
        ends = ft.ends
        fu = tuple(FunctionUse(lo, ends[fidx] if fidx >= 0 else hi, ctx.name(fidx), k, ctx.hint_text(fidx))
                   for lo, hi, fidx, k in funcs)
        nf = len(funcs) if not ext.totals_only else sum(totals_fn[c] for c in t.totals_codes if e in t.code_exts[c])
        verdict, rule, reason = verdict_of[e]
        uses[e] = ExtensionUse(ext.name, ext.level, ext.cpuinfo, n, nfault, nf,
                               tuple(first.get(e, ())), fu, verdict, rule, reason, ext.note)
    order = sorted(uses, key=lambda e: (t.exts[e].level or 9, t.exts[e].rank, t.exts[e].name))
    extensions = {t.exts[e].name: uses[e] for e in order}
    level = max([u.level or 1 for u in extensions.values() if u.faulting] + [1])
    # the lists hold what can raise SIGILL: ENDBR64 everywhere, or only TZCNT/LZCNT, never can
    base = tuple(n for n, u in extensions.items() if u.verdict == "baseline" and u.faulting)
    disp = tuple(n for n, u in extensions.items() if u.verdict == "dispatched" and u.faulting)
    base_level = max([u.level or 1 for u in extensions.values() if u.verdict == "baseline" and u.faulting] + [1])
    return IsaCensus(elf.path, bid, text_bytes, ninstr, nfunc, nsimd, extensions, level, base_level, base, disp,
                     undecodable, undecodable_at, prop, ft.sources,
                     time.perf_counter() - t0, jobs, False, tuple(notes + ctx.notes),
                     {**timings, "results": time.perf_counter() - mark})


def _plain_units(ft: FunctionTable, t: Tables, units: set[int]) -> set[int]:
    """The translation units (STT_FILE entries) that were compiled once and carry no ISA hint
    in their name: ordinary code, as opposed to a source compiled per ISA target."""
    if ft.symtab is None or not units:
        return set()
    counts = ft.symtab.file_counts
    out = set()
    for u in units:
        name = ft.symtab.name(u)
        # an empty name is ld's catch-all for hidden globals turned local: not one source file
        if name and counts.get(name, 0) == 1 and t.hint(name) is None:
            out.add(u)
    return out


def _first_addresses(elf: ElfFile, t: Tables, per_ext: dict[int, list], first_n: int) -> dict[int, list[int]]:
    """The first `first_n` addresses of each extension: the per-function counts say which
    functions (the earliest ones) hold them, and only those are decoded again, in Python."""
    need: dict[tuple[int, int], set[int]] = {}
    for e, (_n, _nf, funcs) in per_ext.items():
        total = 0
        for lo, hi, _fidx, n in funcs:
            need.setdefault((lo, hi), set()).add(e)
            total += n
            if total >= first_n:
                break
    out: dict[int, list[int]] = {}
    code_exts = t.code_exts
    for (lo, hi), want in sorted(need.items()):
        off = file_offset(elf, lo, hi - lo)
        if off is None:
            continue
        for ins in iced_x86.Decoder(64, elf.data[off:off + (hi - lo)], ip=lo):
            es = code_exts[ins.code]
            if es:
                for e in es:
                    if e in want:
                        lst = out.setdefault(e, [])
                        lst.append(ins.ip)
                        if len(lst) >= first_n:
                            want.discard(e)
                if not want:
                    break
    return out
