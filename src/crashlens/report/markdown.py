"""Analysis -> Markdown (for issues, PR comments, CI summaries)."""

from __future__ import annotations

from ..model import Analysis
from ..signature import Signature
from .text import code_path_line, fmt_evidence


def render(a: Analysis, sig: Signature, top: int = 3) -> str:
    out: list[str] = ["# crashlens analysis", ""]
    if not a.causes:
        out += ["No known root cause was recognised in the inputs.", ""]
    else:
        c = a.causes[0]
        out += [f"**Most likely cause:** {c.title} — `{c.category}` (confidence {c.confidence:.2f})", ""]
    sig_text = sig.text.replace("`", "'")
    out += [f"**Signature:** `{sig.id}` — `{sig_text}`", ""]
    if a.primary_error is not None:
        out += ["## Primary error", "", f"`{a.primary_error.loc}`", "", "```", a.primary_error.text, "```", ""]
    if a.code_path:
        out += ["## Code path", "", code_path_line(a.code_path), ""]
    for i, c in enumerate(a.causes[:top], 1):
        out += [f"## {i}. {c.title}", "", f"- category: `{c.category}`, rule `{c.rule}`, confidence **{c.confidence:.2f}**"
                + (" (judged a consequence)" if c.secondary else ""), "", c.explanation, "", "**Evidence**", ""]
        out += [f"- `{fmt_evidence(e)}`" for e in c.evidence[:8]]
        out += ["", "**Why this rank**", ""] + [f"- {r}" for r in c.reasoning]
        out += ["", "**What to do**", ""] + [f"- {r}" for r in c.remedies] + [""]
    if a.secondary_errors:
        out += ["## Secondary errors", ""]
        out += [f"- `{s.evidence.loc}` {s.evidence.text[:160]} — {s.reason}" for s in a.secondary_errors] + [""]
    if a.environment:
        out += ["## Environment", ""]
        out += [f"- {k}: {v}" for k, v in a.environment.items() if k != "cpu_flags"] + [""]
    if a.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in a.notes] + [""]
    return "\n".join(out)
