"""A census against a CPU: what the file uses that a CPU (its /proc/cpuinfo flags) lacks."""

from __future__ import annotations

from typing import Any, Iterable

from .results import IsaCensus
from .tables import LEVEL_NAMES, tables

__all__ = ["missing_for_cpu"]


def _cpu_level(flags: set[str]) -> int:
    t = tables()
    level = 1
    for lvl in (2, 3, 4):
        need = [e for e in t.exts if e.level == lvl]
        if all(set(e.cpuinfo) & flags for e in need if e.cpuinfo):
            level = lvl
        else:
            break
    return level


def missing_for_cpu(census: IsaCensus, cpu_flags: Iterable[str]) -> dict[str, Any]:
    """What the file uses that a CPU lacks, judged by its /proc/cpuinfo flags.

    Returns {"cpu_level": 2, "cpu_level_name": "x86-64-v2",
             "baseline":     {ext: "will crash at load/first use"},        # the code was built for it
             "dispatched":   {ext: "fine if the dispatcher checks CPUID"}, # selected at run time
             "non_faulting": {ext: why no SIGILL (TZCNT runs as BSF...)},
             "unknown":      {ext: why the flags cannot tell},
             "details":      {ext: {flags, instructions, functions, verdict, rule, reason,
                                    first_address, consequence}},
             "ok": no baseline extension is missing and ld.so would load it,
             "notes": [...]}"""
    flags = {f.strip().lower() for f in cpu_flags if f and f.strip()}
    level = _cpu_level(flags)
    out: dict[str, Any] = {"cpu_level": level, "cpu_level_name": LEVEL_NAMES.get(level, ""), "baseline": {},
                           "dispatched": {}, "non_faulting": {}, "unknown": {}, "details": {}, "ok": True,
                           "notes": []}
    t = tables()
    for name, use in census.extensions.items():
        if not use.cpuinfo:
            if use.faulting:
                out["unknown"][name] = "Linux does not show this feature in /proc/cpuinfo"
            continue
        if set(use.cpuinfo) & flags:
            continue
        if not use.faulting:
            why = sorted({t.non_faulting_why[c] for c in t.non_faulting_why
                          if name in {t.exts[e].name for e in t.code_exts[c]}})
            consequence = "no SIGILL: " + ("; ".join(why) or "these instructions do not fault")
            out["non_faulting"][name] = consequence
        elif use.verdict == "baseline":
            consequence = "will crash at load/first use"
            out["baseline"][name] = consequence
        else:
            consequence = "fine if the dispatcher checks CPUID"
            out["dispatched"][name] = consequence
        out["details"][name] = {
            "flags": list(use.cpuinfo), "instructions": use.instructions, "faulting": use.faulting,
            "functions": use.function_count, "verdict": use.verdict, "rule": use.rule, "reason": use.reason,
            "first_address": hex(use.first_addresses[0]) if use.first_addresses else None,
            "consequence": consequence}
    out["ok"] = not out["baseline"]
    needed = census.gnu_property.get("needed_level", 0)
    if needed > level:
        out["ok"] = False
        out["notes"].append(f"ld.so refuses to load it: \"CPU ISA level is lower than required\" "
                            f"(needs {LEVEL_NAMES[needed]}, the CPU is {LEVEL_NAMES.get(level, level)})")
    if any(n.startswith("AMX") for n in census.extensions) and "amx_tile" in flags:
        out["notes"].append("AMX also needs per-process permission (arch_prctl ARCH_REQ_XCOMP_PERM, "
                            "XFEATURE_XTILEDATA); without it AMX instructions raise SIGILL")
    return out
