"""Advice that fits the evidence: a cause's remedies without the ones the run already followed
(CUDA_LAUNCH_BLOCKING=1 set, anomaly mode on, compute-sanitizer run) and without the ones for a
situation the inputs do not show (num_workers=0 for an error that no DataLoader worker raised).
Which is which is data: data/advice.yaml. Each remedy left out is said in the cause's reasoning.

    fit_remedies(causes, lines) -> causes
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any, Sequence

import regex as re

from ..knowledge import data
from ..model import Cause, Line

__all__ = ["fit_remedies"]


@cache
def _table() -> tuple[tuple[re.Pattern[str], re.Pattern[str] | None, re.Pattern[str] | None], ...]:
    rows: list[Any] = data("advice.yaml")["remedies"]
    return tuple((re.compile(r["remedy"]), re.compile(r["tried"], re.M) if r.get("tried") else None,
                  re.compile(r["needs"], re.M) if r.get("needs") else None) for r in rows)


def fit_remedies(causes: Sequence[Cause], lines: Sequence[Line]) -> list[Cause]:
    table = _table()
    seen: dict[int, bool] = {}

    def found(i: int, pattern: re.Pattern[str]) -> bool:
        if i not in seen:
            seen[i] = any(pattern.search(ln.text) or (ln.prefix and pattern.search(ln.prefix)) for ln in lines)
        return seen[i]

    out = []
    for c in causes:
        kept, dropped = [], []
        for r in c.remedies:
            why = ""
            for i, (remedy, tried, needs) in enumerate(table):
                if not remedy.search(r):
                    continue
                if tried is not None and found(2 * i, tried):
                    why = "the run already did it"
                elif needs is not None and not found(2 * i + 1, needs):
                    why = "the inputs do not show the situation it is for"
                if why:
                    break
            (dropped if why else kept).append((r, why))
        if dropped and kept:
            notes = "; ".join(f"“{r[:60]}{'…' if len(r) > 60 else ''}” ({why})" for r, why in dropped)
            c = replace(c, remedies=tuple(r for r, _ in kept),
                        reasoning=(*c.reasoning, f"advice left out: {notes}"))
        out.append(c)
    return out
