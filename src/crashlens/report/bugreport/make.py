"""`crashlens report`: an analysis (and its signature) -> the bug report the CLI prints.

    make_report(analysis, signature, ReportOptions(...)) -> ReportResult(text, messages)

The built-in Markdown report, a Markdown template or a GitHub issue form; the body, or a
prefilled URL. Redaction (report/redact.py) runs on everything that leaves: the analysis before
the context is composed, then the rendered Markdown, each form field and the title; a closing
line says how many items were redacted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ...model import Analysis
from ...signature import Signature
from .. import redact as redaction
from .context import context
from .envblock import environment_blocks
from .issueforms import IssueForm, fill_form, form_body, unprefillable
from .templates import BUILTIN, TemplateError, builtin_dir, render_markdown
from .urls import CUT_FIRST, URL_LIMIT, issue_url

@dataclass
class ReportOptions:
    template: Path | None = None
    url: str | None = None
    url_limit: int = URL_LIMIT
    redact: bool = True
    emails: bool = False
    home_users: bool = False
    hostnames: bool | Sequence[str] = False
    extra: Sequence[str] = ()
    title: str | None = None


@dataclass
class ReportResult:
    text: str  # what goes to stdout or -o
    messages: list[str] = field(default_factory=list)  # for stderr


def _front_matter(source: str) -> tuple[dict[str, Any], str]:
    """A Markdown issue template's YAML front matter (name/about/title/labels) and the rest."""
    m = re.match(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", source, re.S)
    if not m:
        return {}, source
    import yaml

    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return {}, source
    return (meta if isinstance(meta, dict) else {}), source[m.end():]


def _is_form(path: Path) -> bool:
    """A .yml/.yaml template is a GitHub issue form (IssueForm.load says so when it is not one)."""
    return path.suffix.lower() in (".yml", ".yaml")


def _without_local_paths(ctx: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The context with the inputs' paths shortened to what tells them apart (`run.log`, not
    `/home/me/ci/artifacts/run.log`): where the logs lay on this machine means nothing in an issue."""
    if not names:
        return ctx
    dirs = [os.path.dirname(n.split("!", 1)[0]) for n in names]
    try:
        common = os.path.commonpath(dirs) if all(dirs) else ""
    except ValueError:
        common = ""
    short = {n: (n[len(common):].lstrip("/") if common else os.path.basename(n) if len(names) == 1 else n)
             for n in names}
    pairs = sorted(((n, s) for n, s in short.items() if s and s != n), key=lambda p: -len(p[0]))
    if not pairs:
        return ctx

    def fix(v: Any) -> Any:
        if isinstance(v, str):
            for n, s in pairs:
                if n in v:
                    v = v.replace(n, s)
            return v
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fix(x) for x in v]
        return v

    return {k: fix(v) for k, v in ctx.items()}


def _footer(red: "redaction.Redactor | None") -> str | None:
    """The redaction line for the report itself: only when something was redacted (that the
    markers are deliberate); "redacted no items" is crashlens talking, not part of a report."""
    if red is None or not sum(red.counts.values()):
        return None
    return red.summary()


def make_report(a: Analysis, sig: Signature, opts: ReportOptions) -> ReportResult:
    red = redaction.Redactor(emails=opts.emails, home_users=opts.home_users, hostnames=opts.hostnames,
                             extra=opts.extra) if opts.redact else None
    # the analysis is redacted first (templates cut long strings, and a secret cut short is no
    # longer recognised), then everything that is printed
    if red is not None:
        a, sig, _ = redaction.redacted(a, sig, red)
    ctx = context(a, sig, red)
    if opts.title:
        ctx["title"] = opts.title
    scrub = red if red is not None else (lambda text: text)

    source = None
    if opts.template is not None:
        try:
            source = opts.template.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"template {opts.template}: could not be read: {exc}") from None

    if opts.template is not None and source is not None and _is_form(opts.template):
        form = IssueForm.load(opts.template)
        # a form's fields get no local paths of the inputs and no crashlens notes
        fctx = _without_local_paths({**ctx, "notes": [], "env_dump": environment_blocks(a)},
                                    [str(x) for x in ctx.get("sources") or []])
        fields = fill_form(form, fctx)
        for f in fields:
            if f.value and f.type in ("textarea", "input"):
                f.value = scrub(f.value)
        title = scrub(form.title + ctx["title"])
        footer = _footer(red)
        if footer:  # the last filled free-text field carries the redaction line
            last = next((f for f in reversed(fields) if f.type == "textarea" and not f.render and f.value.strip()), None)
            if last is not None:
                last.value = last.value.rstrip("\n") + f"\n\n{footer}"
        said = [red.summary()] if red is not None else []
        if opts.url:
            keep = [ctx["primary"]["text"][:200]] if ctx.get("primary") else []
            blind = unprefillable(fields)
            if blind:  # GitHub fills form fields by id only: open a blank issue with the body instead
                body = form_body(fields)
                params = [("title", title), ("body", body)]
                if form.labels:
                    params.append(("labels", ",".join(form.labels)))
                url, notes = issue_url(opts.url, params, {"body": "markdown"}, opts.url_limit, keep,
                                       always=[footer] if footer else [])
                warn = (f"warning: {form.name}: {len(blind)} field(s) have no `id` ({', '.join(blind)}), and GitHub "
                        "prefills form fields by id only; the URL opens a blank issue with the title and the form's "
                        "body instead (give the fields ids to prefill the form itself)")
                return ReportResult(url + "\n", [warn, *notes, *said])
            params = [("template", form.name), ("title", title)]
            params += [(f.id, f.value) for f in fields
                       if f.id and f.type in ("textarea", "input", "dropdown") and f.value and f.value != f.default]
            long = {f.id: "log" if f.render else "markdown" for f in fields if f.id and f.type == "textarea" and f.value}
            weights = {f.id: CUT_FIRST.get(f.filled_from or "", 1.0) for f in fields if f.id}
            url, notes = issue_url(opts.url, params, long, opts.url_limit, keep, weights, [footer] if footer else [])
            return ReportResult(url + "\n", notes + said)
        body = form_body(fields)
        if footer and not any(footer in f.value for f in fields):
            body += f"\n{footer}\n"
        return ReportResult(body, [])

    # a Markdown template (the built-in one unless --template)
    if source is None:
        name = BUILTIN
        source = (builtin_dir() / BUILTIN).read_text(encoding="utf-8")
        meta: dict[str, Any] = {}
    else:
        name = str(opts.template)
        meta, source = _front_matter(source)
    text = scrub(render_markdown(source, name, ctx))
    title = scrub(str(meta.get("title") or "") + ctx["title"])
    footer = red.summary() if red is not None else None
    text = text.rstrip("\n") + "\n"
    if footer:
        text += f"\n{footer}\n"
    if opts.url:
        params = [("title", title), ("body", text)]
        labels = meta.get("labels")
        if labels:
            params.append(("labels", labels if isinstance(labels, str) else ",".join(map(str, labels))))
        keep = [ctx["primary"]["text"][:200]] if ctx.get("primary") else []
        url, notes = issue_url(opts.url, params, {"body": "markdown"}, opts.url_limit, keep,
                               always=[footer] if footer else [])
        return ReportResult(url + "\n", notes + ([footer] if footer else []))
    return ReportResult(text, [])
