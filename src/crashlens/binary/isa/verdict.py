"""Baseline or dispatched: the verdict per extension, and the facts it rests on (names, ISA
hints, references, CPU-feature guards). The rules and their reasons: see `verdicts`."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from typing import Any

import iced_x86

from ..elf import ElfError, ElfFile
from ..symbols import FunctionTable, relocation_slots
from .tables import LEVEL_NAMES, Tables

__all__ = ["Context", "verdicts"]

# Heuristic thresholds (see verdicts).
SHARE_VECTOR = 0.25     # of the functions that use any SIMD register
SHARE_SCALAR = 0.05     # of all functions
SPREAD_UNITS = 0.05     # of the plain translation units (STT_FILE) that use SIMD / have code
SPREAD_MIN_UNITS = 3
NEIGHBOUR_REACH = 16
GUARD_MAX_FUNCTIONS = 256
GUARD_WINDOW = 64 * 1024
GUARD_MAX_BYTES = 4 * 1024 * 1024


class Context:
    """Names, hints and references of the functions the verdicts look at."""

    def __init__(self, elf: ElfFile, ft: FunctionTable, t: Tables, cpuid_funcs: set[int]) -> None:
        self.elf, self.ft, self.t = elf, ft, t
        self.cpuid_funcs = cpuid_funcs
        self._names: dict[int, str | None] = {}
        self._hints: dict[int, tuple[int, str] | None] = {}
        self._refs: dict[int, set[int]] = {}
        self._decoded_bytes = 0
        self._feature: tuple[list[tuple[int, int]], dict[int, str]] | None = None
        self._plt_slots: dict[int, int | None] = {}
        self._resolver_refs: dict[int, set[int]] | None = None
        self._sides: dict[int, list] = {}
        self.units: dict[int, int] = {}                      # function -> translation unit
        self.unit_population: tuple[set[int], set[int]] = (set(), set())  # plain units: SIMD, any
        self.notes: list[str] = []

    def name(self, fidx: int) -> str | None:
        if fidx < 0:
            return None
        if fidx not in self._names:
            self._names[fidx] = self.ft.name(fidx)
        return self._names[fidx]

    def hint(self, fidx: int) -> tuple[int, str] | None:
        if fidx < 0:
            return None
        if fidx not in self._hints:
            h = self.t.hint(self.name(fidx))
            if h is None:
                fh = self.t.hint(self.ft.file(fidx))
                h = (fh[0], f"file {self.ft.file(fidx)}") if fh else None
            self._hints[fidx] = h
        return self._hints[fidx]

    def neighbour_hint(self, fidx: int, rank: int) -> str | None:
        """An ISA hint borrowed from the neighbours: an unhinted function whose nearest hinted
        neighbours on both sides (within NEIGHBOUR_REACH functions) carry a hint of at least
        `rank`, or whose immediate neighbour does, sits inside an ISA-specific object file (the
        linker keeps an object's functions together): MKL's static helpers such as
        xbsr_gnxn_row_mv_def_ker between mkl_sparse_*_avx512 functions."""
        if fidx < 0:
            return None
        sides = self._sides.get(fidx)
        if sides is None:
            sides = self._sides[fidx] = self._hinted_sides(fidx)
        good = [(d, h, k) for d, h, k in sides if h[0] >= rank]
        if len(good) == 2 or any(d == 1 for d, _h, _k in good):
            d, h, k = min(good)
            return f"near {self.name(k) or hex(self.ft.starts[k])} ({h[1]})"
        return None

    def _hinted_sides(self, fidx: int) -> list:
        sides = []
        for step in (-1, 1):
            k = fidx
            for d in range(1, NEIGHBOUR_REACH + 1):
                k += step
                if not 0 <= k < len(self.ft.starts):
                    break
                h = self.hint(k)
                if h is not None:
                    sides.append((d, h, k))
                    break
        return sides

    def hint_text(self, fidx: int) -> str | None:
        h = self.hint(fidx)
        return h[1] if h else None

    # -- references, for the guard rule -----------------------------------------------------------
    def refs(self, fidx: int) -> set[int]:
        """Addresses a function calls, jumps to, or takes RIP-relative (LEA/MOV) addresses of."""
        got = self._refs.get(fidx)
        if got is not None:
            return got
        lo, hi = self.ft.starts[fidx], self.ft.ends[fidx]
        sec = self.ft.section_at(lo)
        out: set[int] = set()
        if sec is not None:
            off = sec.offset + (lo - sec.addr)
            buf = self.elf.data[off:off + min(hi, sec.addr + sec.size) - lo]
            self._decoded_bytes += len(buf)
            for ins in iced_x86.Decoder(64, buf, ip=lo):
                target = ins.near_branch_target
                if target:
                    out.add(target)
                if ins.is_ip_rel_memory_operand:
                    out.add(ins.ip_rel_memory_address)
        self._refs[fidx] = out
        return out

    def feature_targets(self) -> tuple[list[tuple[int, int]], dict[int, str]]:
        """Address ranges of CPU-feature symbols defined here, and GOT slots of imported ones."""
        if self._feature is None:
            ranges = []
            for n in self.t.feature_symbols:
                for s in self.ft.symbols_named(n):
                    if s.defined and s.value:
                        ranges.append((s.value, s.value + max(s.size, 1)))
            try:
                slots = relocation_slots(self.elf, set(self.t.feature_symbols))
            except ElfError as exc:
                self.notes.append(f"relocations ignored: {exc}")
                slots = {}
            self._feature = (ranges, slots)
        return self._feature

    def _plt_slot(self, target: int) -> int | None:
        """The GOT slot a PLT stub jumps through (None when target is no stub)."""
        if target in self._plt_slots:
            return self._plt_slots[target]
        slot = None
        sec = self.ft.section_at(target)
        if sec is not None and sec.name.startswith(".plt"):
            off = sec.offset + (target - sec.addr)
            buf = self.elf.data[off:off + min(16, sec.addr + sec.size - target)]
            for ins in iced_x86.Decoder(64, buf, ip=target):
                if ins.is_ip_rel_memory_operand:
                    slot = ins.ip_rel_memory_address
                    break
        self._plt_slots[target] = slot
        return slot

    def is_guard(self, fidx: int) -> bool:
        """Does this function check CPU features (CPUID/XGETBV, __cpu_model, cpuinfo_isa...)?"""
        if fidx in self.cpuid_funcs:
            return True
        name = self.name(fidx) or ""
        if name.endswith(".resolver") or self.ft.starts[fidx] in self.ft.ifunc_resolvers:
            return True
        ranges, slots = self.feature_targets()
        for a in self.refs(fidx):
            if a in slots:
                return True
            for lo, hi in ranges:
                if lo <= a < hi:
                    return True
            s = self._plt_slot(a) if slots else None
            if s is not None and s in slots:
                return True
        return False

    def resolver_refs(self) -> dict[int, set[int]]:
        """Address -> the ifunc resolvers that reference it (GCC target_clones, glibc multiarch)."""
        if self._resolver_refs is None:
            self._resolver_refs = {}
            for addr in sorted(self.ft.ifunc_resolvers):
                k = self.ft.index_at(addr)
                if k is None:
                    continue
                for a in self.refs(k):
                    self._resolver_refs.setdefault(a, set()).add(k)
        return self._resolver_refs

    def referrers(self, fidx: int) -> set[int] | None:
        """Functions that reference this one's entry: any ifunc resolver, and any function within
        GUARD_WINDOW (None: decoding budget spent)."""
        lo, hi = self.ft.starts[fidx], self.ft.ends[fidx]
        sec = self.ft.section_at(lo)
        if sec is None:
            return set()
        from_resolvers = self.resolver_refs().get(lo, set())
        a = bisect_right(self.ft.starts, max(sec.addr, lo - GUARD_WINDOW))
        b = bisect_right(self.ft.starts, min(sec.addr + sec.size, hi + GUARD_WINDOW))
        out = set()
        for k in range(max(a - 1, 0), b):
            if k == fidx:
                continue
            if self._decoded_bytes > GUARD_MAX_BYTES:
                return None
            if lo in self.refs(k):
                out.add(k)
        return out | from_resolvers


def verdicts(ctx: Context, per_ext: dict[int, list], totals_fn: Counter, nfunc: int, nsimd: int,
              prop: dict[str, Any]) -> dict[int, tuple[str, str, str]]:
    """Baseline or dispatched, per extension: (verdict, rule, reason).

    "Baseline" means the code was compiled for the extension: it can run anywhere in the
    library, so a CPU without it crashes at load or first use. "Dispatched" means it sits in
    code chosen at run time after a CPU check. Rules, first match wins; each writes the reason
    shown to the user:

      needed    .note.gnu.property says ld.so needs x86-64-vN >= the extension's level: the
                file does not even load without it -> baseline. (Loader-enforced: certain.)
      marker    an extension counted in totals only (ENDBR64 in every function) -> baseline,
                and harmless: it never faults.
      hinted    every function using it carries an ISA hint of at least the extension's rank in
                its name or STT_FILE source file (at::native::AVX2::, *_avx512_*, foo.avx2.0,
                x.cpp.AVX512.cpp, MKL's *_Z0HAynn), or sits between such functions (see
                Context.neighbour_hint) -> dispatched. Nobody names a kernel "_avx2" unless
                a faster or safer one exists for other CPUs; the runtime picks among them.
      guarded   the unhinted functions using it (at most 256) are referenced (called, jumped to,
                or address-taken) only by functions that check CPU features (execute CPUID or
                XGETBV, read __cpu_model, cpuinfo_isa, _rtld_global_ro... directly, through the
                GOT or a PLT stub, or are ifunc resolvers), by functions that use the extension
                themselves or are hinted for it, or by wrappers that are themselves reached only
                so (two levels) -> dispatched. References are looked for in every ifunc resolver
                and in the functions within 64 KiB (a dispatcher sits in the same translation
                unit as its kernels). A function with no reference at all (exported, or only
                reached through a pointer table) does not count as guarded.
      share     (vector and scalar extensions only: system ones such as XGETBV, RDTSCP or
                XSAVEC are written on purpose, in CPU checks and context switches, and no -m flag
                spreads them) unhinted functions using it make up >= 25% of the functions that use any SIMD
                register (vector extensions) or >= 5% of all functions (scalar ones) -> baseline.
                A compiler allowed to use an extension uses it throughout: -mavx VEX-encodes
                every SSE operation of every function; kernels selected at run time are a few
                files among hundreds.
      spread    (needs .symtab with STT_FILE entries) unhinted functions using it come from at
                least 3 and >= 5% of the "plain" translation units that use SIMD registers (any
                code, for scalar extensions): source files compiled once whose names carry no
                ISA hint -> baseline. Kernels selected at run time come from sources compiled
                once per target (numpy's *.dispatch.c, MKL: the same file name several times in
                .symtab) or named for their ISA; a compiler flag for the whole build shows up in
                ordinary files. This catches what the function share misses: SSE4.1 is used
                opportunistically (pmulld, ptest, roundsd), in 19% of numpy 2.4's SIMD functions
                only, but in 28 of its plain source files, against 0 or 1 for its AVX kernels.
      level     another extension of the same or a higher x86-64 level is baseline by the rules
                needed, share or spread (not itself by level, and not a system one) -> baseline:
                the -march that allowed one allowed the other (and a CPU without it would lack
                the other one too). Only for extensions that belong to a level.
      confined  otherwise: a few unhinted functions, no guard seen -> dispatched, the weakest
                verdict; the reason says how many functions and that no guard was found.

    The order puts the certain rule first, then the ones that identify dispatch positively
    (names, CPU checks), before the statistical one; "confined" is what remains. Misjudged
    cases are possible both ways: a library built with only -mpopcnt (a few POPCNT in unhinted
    functions, no guard) is called dispatched; a kernel file compiled for AVX2 and called
    through function pointers without ISA names, in a small library where it is a quarter of
    the SIMD functions, is called baseline. The reason string always says which rule decided.
    """
    t = ctx.t
    out: dict[int, tuple[str, str, str]] = {}
    needed = prop.get("needed_level", 0)
    share_of: dict[int, tuple[int, int, float]] = {}
    for e, (_n, _nf, funcs) in per_ext.items():
        ext = t.exts[e]
        if ext.level and needed >= ext.level:
            out[e] = ("baseline", "needed",
                      f"the GNU property note says ld.so needs {LEVEL_NAMES[needed]}: "
                      f"the file does not load on a CPU without {ext.name}")
            continue
        if ext.totals_only:
            nf = sum(totals_fn[c] for c in t.totals_codes if e in t.code_exts[c])
            out[e] = ("baseline", "marker", f"compiler-inserted in {nf} functions; never faults")
            continue
        unhinted = []
        near = 0
        for lo, hi, fidx, _k in funcs:
            h = ctx.hint(fidx)
            if h is None or h[0] < ext.rank:
                if ctx.neighbour_hint(fidx, ext.rank) is not None:
                    near += 1
                else:
                    unhinted.append((lo, hi, fidx))
        if not unhinted:
            sample = ", ".join(sorted({ctx.hint(f[2])[1] for f in funcs if ctx.hint(f[2])})[:4])
            extra = f"; {near} more sit among such functions" if near else ""
            out[e] = ("dispatched", "hinted",
                      f"all {len(funcs)} functions using it are ISA-specific builds by name "
                      f"({sample}){extra}")
            continue
        guarded = _guard_rule(ctx, e, unhinted, funcs)
        if guarded is not None:
            out[e] = ("dispatched", "guarded", guarded)
            continue
        pop = nsimd if ext.kind == "vector" else nfunc
        frac = len(unhinted) / pop if pop else 1.0
        share_of[e] = (len(unhinted), pop, frac)
        if ext.kind == "system":
            continue  # XGETBV, RDTSCP, XSAVEC...: written on purpose, never spread by a -m flag
        limit = SHARE_VECTOR if ext.kind == "vector" else SHARE_SCALAR
        if frac >= limit:
            what = "functions that use SIMD registers" if ext.kind == "vector" else "functions"
            out[e] = ("baseline", "share",
                      f"used in {len(unhinted)} of {pop} {what} ({frac:.0%}) without any ISA hint: "
                      f"compiled for it throughout")
            continue
        plain = ctx.unit_population[0 if ext.kind == "vector" else 1]
        used_in = {ctx.units.get(f[2], -1) for f in unhinted} & plain
        if plain and len(used_in) >= SPREAD_MIN_UNITS and len(used_in) / len(plain) >= SPREAD_UNITS:
            what = "that use SIMD registers" if ext.kind == "vector" else "with code"
            sample = ", ".join(sorted(ctx.ft.symtab.name(u) for u in used_in)[:3])
            out[e] = ("baseline", "spread",
                      f"used in {len(used_in)} of the {len(plain)} source files {what} that were compiled "
                      f"once and carry no ISA name ({len(used_in) / len(plain):.0%}; {sample}...): "
                      f"ordinary code, compiled for it")
    # level propagation (from what the compiler emits on its own), then the rest
    base_levels = [t.exts[e].level for e, v in out.items()
                   if v[0] == "baseline" and t.exts[e].level and v[1] in ("needed", "share", "spread")
                   and t.exts[e].kind != "system"]
    top = max(base_levels, default=0)
    for e in per_ext:
        if e in out:
            continue
        ext = t.exts[e]
        n_unhinted, pop, frac = share_of.get(e, (0, 0, 0.0))
        if ext.level and top >= ext.level:
            out[e] = ("baseline", "level",
                      f"{LEVEL_NAMES[top]} extensions are baseline here, and {ext.name} is used in "
                      f"{n_unhinted} functions without any ISA hint")
        else:
            out[e] = ("dispatched", "confined",
                      f"confined to {n_unhinted} functions without an ISA hint ({frac:.1%} of {pop}); "
                      f"no CPU-feature guard was found for them, so this verdict is the weakest")
    return out


def _guard_rule(ctx: Context, e: int, unhinted: list[tuple[int, int, int]], funcs: list) -> str | None:
    """The 'guarded' rule: a reason string when it applies, else None."""
    if len(unhinted) > GUARD_MAX_FUNCTIONS or any(f[2] < 0 for f in unhinted):
        return None
    ext = ctx.t.exts[e]
    users = {f[2] for f in funcs if f[2] >= 0}
    guards: set[int] = set()
    memo: dict[int, bool] = {}

    def acceptable(c: int, depth: int) -> bool:
        """c may call into the extension's code: it checks CPU features, uses the extension
        itself, is an ISA-specific build by name, or is itself only reached from such callers
        (a wrapper such as __memcpy_chk_avx512 that an ifunc resolver selects)."""
        if c in users:
            return True
        h = ctx.hint(c)
        if h is not None and h[0] >= ext.rank:
            return True
        if ctx.is_guard(c):
            guards.add(c)
            return True
        if depth <= 0:
            return False
        if c in memo:
            return memo[c]
        memo[c] = False  # cycles do not vouch for themselves
        callers = ctx.referrers(c)
        ok = bool(callers) and all(acceptable(x, depth - 1) for x in callers)
        memo[c] = ok
        return ok

    for _lo, _hi, fidx in unhinted:
        callers = ctx.referrers(fidx)
        if not callers:
            return None  # unknown, or only reached from outside this file / through pointers
        for c in callers:
            if c != fidx and not acceptable(c, 2):
                return None
    if not guards:
        return None
    names = ", ".join(sorted(ctx.name(g) or f"sub_{ctx.ft.starts[g]:x}" for g in guards)[:3])
    return (f"the {len(unhinted)} functions using it without an ISA hint are only reached from "
            f"CPU-feature checks ({names})")
