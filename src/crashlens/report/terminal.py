"""Analysis -> a readable terminal report (rich).

Fits 80 columns (pipes and CI logs): a cause's category and confidence stay in the panel's
title, the cause's own title moves into the panel when the whole line would not fit, and
wrapped lines keep their indent (labels and bullets sit in a column of their own)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..model import Analysis
from ..signature import Signature
from .text import code_path_line, fmt_evidence


_LABEL = 15  # "Primary error  " and the other labels below the panels


def _head(i: int, c, colour: str, width: int) -> tuple[Text, bool]:
    """The panel title, and whether the cause's title fits in it (else it opens the panel)."""
    tail = Text.assemble((f"{c.category}", "cyan"), "  ", (f"confidence {c.confidence:.2f}", "bold"))
    if c.secondary:
        tail.append("  (consequence)", style="dim")
    full = Text.assemble((f"#{i} ", "bold"), (c.title, f"bold {colour}"), "  ", tail)
    if full.cell_len <= width - 6:  # borders, corners and the spaces around the title
        return full, True
    short = Text.assemble((f"#{i} ", "bold"), tail)
    if short.cell_len > width - 6:  # a very long category: cut the category, never the confidence
        short = Text.assemble((f"#{i} ", "bold"), (f"confidence {c.confidence:.2f}", "bold"))
    return short, False


def _bullets(rows, mark: str, style: str = "") -> Table:
    """Rows under a bullet column: a wrapped row stays indented under its own text."""
    t = Table.grid(padding=(0, 1))
    t.add_column(width=max(1, len(mark)), no_wrap=True)
    t.add_column(overflow="fold")
    for r in rows:
        t.add_row(Text(mark, style="dim" if mark == "•" else ""), r if isinstance(r, Text) else Text(str(r), style=style))
    return t


def _labelled(label: str, value: Text, style: str = "bold") -> Table:
    """`Label          value` with the value wrapped in its own column."""
    t = Table.grid()
    t.add_column(width=_LABEL, no_wrap=True)
    t.add_column(overflow="fold")
    t.add_row(Text(label, style=style), value)
    return t


def render(a: Analysis, sig: Signature, console: Console, top: int = 3, verbose: bool = False) -> None:
    if not a.causes:
        console.print("[bold yellow]No known root cause was recognised.[/]")
    for i, c in enumerate(a.causes[: (len(a.causes) if verbose else top)], 1):
        colour = "red" if i == 1 else "yellow"
        head, title_fits = _head(i, c, colour, console.width)
        body: list = [] if title_fits else [Text(c.title, style=f"bold {colour}")]
        body.append(Text(c.explanation))
        body += [Text("\nEvidence", style="bold"), _bullets([Text(fmt_evidence(e, 160)) for e in c.evidence[:6]], "•")]
        if verbose or i == 1:
            body += [Text("\nWhy this rank", style="bold"), _bullets(c.reasoning, " ", "dim")]
            body += [Text("\nWhat to do", style="bold"), _bullets(c.remedies, "→")]
        console.print(Panel(Group(*body), title=head, title_align="left", border_style=colour))
    if a.primary_error is not None:
        console.print(_labelled("Primary error", Text.assemble((str(a.primary_error.error_loc), "cyan"), "  ",
                                                               a.primary_error.text[:300])))
    if a.code_path:
        console.print(_labelled("Code path", Text(code_path_line(a.code_path))))
    console.print(_labelled("Signature", Text.assemble((sig.id, "cyan"), "  ", (sig.text, "dim"))))
    for s in a.secondary_errors[:5]:
        console.print(_labelled("Secondary", Text.assemble((str(s.evidence.loc), "cyan"), "  ", s.evidence.text[:120],
                                                           (f"  — {s.reason}", "dim")), "bold dim"))
    env = a.environment
    if env:
        bits = []
        for k in ("framework", "cuda_runtime", "cuda_driver", "driver_version", "cudnn"):
            if env.get(k):
                v = env[k]
                bits.append(f"{k}={', '.join(f'{n} {x}' for n, x in v.items()) if isinstance(v, dict) else v}")
        for g in env.get("gpus", [])[:2]:
            bits.append(f"gpu={g.get('name')}" + (f" ({g['sm']})" if g.get("sm") else ""))
        if bits:
            console.print(_labelled("Environment", Text("; ".join(bits))))
    for n in a.notes:
        console.print(_labelled("Note", Text(n, style="dim"), "bold dim"))
