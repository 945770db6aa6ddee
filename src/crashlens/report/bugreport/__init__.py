"""Bug reports pre-filled from an analysis (`crashlens report`, docs/report.md).

The CLI runs the analysis and computes the signature; this package only makes the report:

    make.py         make_report(a, sig, ReportOptions(...)) -> ReportResult   what the CLI prints
    context.py      context(a, sig, redactor)      the template context: the JSON dict plus helpers
    environment.py  environment_summary(env)       display strings for the Environment section
    commandline.py  find_command(a, primary)       the command line that ran the job, from the inputs
    templates.py    render_markdown(source, name, ctx), section(name, ctx)   sandboxed, strict Jinja2
    issueforms.py   IssueForm.load(path), fill_form(form, ctx), form_body(fields)   GitHub issue forms
    urls.py         validate_repo(url), issue_url(repo, ...)   a prefilled /issues/new URL within a limit
    markup.py       loc, fence, code                Markdown pieces (also template filters)

Per-category testing steps and the async-CUDA categories are data (data/categories.yaml, read
through crashlens.knowledge); redaction is report/redact.py.
"""

from .make import ReportOptions, ReportResult, make_report
from .templates import TemplateError
from .urls import URL_LIMIT, validate_repo

__all__ = ["ReportOptions", "ReportResult", "TemplateError", "URL_LIMIT", "make_report", "validate_repo"]
