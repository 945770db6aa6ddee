"""Analysis -> a readable terminal report (rich)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..model import Analysis
from ..signature import Signature
from .text import code_path_line, fmt_evidence


def render(a: Analysis, sig: Signature, console: Console, top: int = 3, verbose: bool = False) -> None:
    if not a.causes:
        console.print("[bold yellow]No known root cause was recognised.[/]")
    for i, c in enumerate(a.causes[: (len(a.causes) if verbose else top)], 1):
        colour = "red" if i == 1 else "yellow"
        head = Text.assemble((f"#{i} ", "bold"), (c.title, f"bold {colour}"), "  ",
                             (f"{c.category}", "cyan"), "  ", (f"confidence {c.confidence:.2f}", "bold"))
        if c.secondary:
            head.append("  (consequence)", style="dim")
        body: list = [Text(c.explanation)]
        ev = Table.grid(padding=(0, 1))
        for e in c.evidence[:6]:
            ev.add_row(Text("•", style="dim"), Text(fmt_evidence(e, 160)))
        body += [Text("\nEvidence", style="bold"), ev]
        if verbose or i == 1:
            body += [Text("\nWhy this rank", style="bold")] + [Text(f"  {r}", style="dim") for r in c.reasoning]
            body += [Text("\nWhat to do", style="bold")] + [Text(f"  → {r}") for r in c.remedies]
        console.print(Panel(Group(*body), title=head, title_align="left", border_style=colour))
    if a.primary_error is not None:
        console.print(Text.assemble(("Primary error  ", "bold"), (str(a.primary_error.loc), "cyan"), "  ",
                                    a.primary_error.text[:300]))
    if a.code_path:
        console.print(Text.assemble(("Code path      ", "bold"), code_path_line(a.code_path)))
    console.print(Text.assemble(("Signature      ", "bold"), (sig.id, "cyan"), "  ", (sig.text, "dim")))
    for s in a.secondary_errors[:5]:
        console.print(Text.assemble(("Secondary      ", "bold dim"), (str(s.evidence.loc), "cyan"), "  ",
                                    s.evidence.text[:120], (f"  — {s.reason}", "dim")))
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
            console.print(Text.assemble(("Environment    ", "bold"), escape("; ".join(bits))))
    for n in a.notes:
        console.print(Text.assemble(("Note           ", "bold dim"), (n, "dim")))
