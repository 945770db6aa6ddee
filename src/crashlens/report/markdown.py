"""Analysis -> Markdown (for issues, PR comments, CI summaries).

Text from the inputs or the rules is escaped (md_text) or put in code spans: GitHub would take
`<module>` for an HTML tag and `**batch` for emphasis."""

from __future__ import annotations

from ..model import Analysis
from ..signature import Signature
from .bugreport.markup import code
from .text import code_path_line, fmt_evidence, md_text
from .redact import redacted


def shareable(a: Analysis, sig: Signature, top: int = 3, redact_on: bool = True) -> str:
    """`analyze --markdown`: the report rendered from the redacted analysis (redacted before
    anything is cut), with a closing line that counts the items redacted."""
    if not redact_on:
        return render(a, sig, top)
    a, sig, red = redacted(a, sig)
    text = red(render(a, sig, top))
    return text.rstrip("\n") + "\n\n" + red.summary()


def render(a: Analysis, sig: Signature, top: int = 3) -> str:
    out: list[str] = ["# crashlens analysis", ""]
    if not a.causes:
        out += ["No known root cause was recognised in the inputs.", ""]
    else:
        c = a.causes[0]
        out += [f"**Most likely cause:** {md_text(c.title)} — `{c.category}` (confidence {c.confidence:.2f})", ""]
    sig_text = sig.text.replace("`", "'")
    out += [f"**Signature:** `{sig.id}` — `{sig_text}`", ""]
    if a.primary_error is not None:
        out += ["## Primary error", "", f"`{a.primary_error.error_loc}`", "", "```", a.primary_error.text, "```", ""]
    if a.code_path:
        out += ["## Code path", "", code(code_path_line(a.code_path)), ""]
    for i, c in enumerate(a.causes[:top], 1):
        out += [f"## {i}. {md_text(c.title)}", "", f"- category: `{c.category}`, rule `{c.rule}`, "
                f"confidence **{c.confidence:.2f}**" + (" (judged a consequence)" if c.secondary else ""), "",
                md_text(c.explanation), "", "**Evidence**", ""]
        out += [f"- {code(fmt_evidence(e))}" for e in c.evidence[:8]]
        out += ["", "**Why this rank**", ""] + [f"- {md_text(r)}" for r in c.reasoning]
        out += ["", "**What to do**", ""] + [f"- {md_text(r)}" for r in c.remedies] + [""]
    if a.secondary_errors:
        out += ["## Secondary errors", ""]
        out += [f"- {code(s.evidence.loc)} {code(s.evidence.text[:160])} — {md_text(s.reason)}"
                for s in a.secondary_errors] + [""]
    if a.environment:
        out += ["## Environment", ""]
        out += [f"- {k}: {md_text(v)}" for k, v in a.environment.items() if k != "cpu_flags"] + [""]
    if a.notes:
        out += ["## Notes", ""] + [f"- {md_text(n)}" for n in a.notes] + [""]
    return "\n".join(out)
