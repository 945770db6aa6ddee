"""Analysis -> CI outputs: exit codes and --fail-on, GitHub (step summary, workflow commands,
step outputs), JUnit XML and GitLab Code Quality JSON. docs/ci.md shows each output.

    exit_code(analysis, fail_on) -> int          0 / 1 / 4 (docs/ci.md "Exit codes")
    parse_fail_on(values, known) -> frozenset    validated categories (CrashlensError: exit 2)
    github_commands(analysis, sig, workspace) -> list[str]    ::error / ::warning / ::notice lines
    step_summary(analysis, sig) -> str           the Markdown appended to $GITHUB_STEP_SUMMARY
    junit_xml(analysis, sig, ws=None) -> str     one testsuite "crashlens", one testcase per cause
    code_quality(analysis, sig, workspace) -> list[dict]   GitLab Code Quality issues
    emit(analysis, sig, ...)                     what `crashlens analyze --github/--junit/--codequality` does

Everything that leaves for a CI system (step summary, annotations, the grouped report, JUnit,
Code Quality) goes through report.redact's Redactor unless redaction is turned off.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence, TextIO

from .. import __version__
from ..errors import CrashlensError
from ..model import Analysis, Cause, Evidence, Frame
from ..signature import Signature
from .redact import Redactor, redacted
from .text import code_path_line, fmt_evidence, one_line

from ..errors import EXIT_FAIL_ON, EXIT_FOUND, EXIT_NOTHING, EXIT_USAGE  # noqa: F401 (the one table)
FAIL_ON_ANY = "any"

MAX_ANNOTATIONS = 10  # GitHub shows at most 10 errors and 10 warnings (and notices) per step
GROUP_AT = 40  # lines of report beyond which it goes into a collapsed ::group::


# --- exit codes -----------------------------------------------------------------------------------


class UsageError(CrashlensError):
    exit_code = EXIT_USAGE


def parse_fail_on(values: Iterable[str], known: Collection[str]) -> frozenset[str]:
    """--fail-on values (repeatable, each may be a comma or space separated list) -> categories.
    A category that is not `known` (the taxonomy) is a usage error (a typo must not disable a gate)."""
    cats = {c.strip() for v in values for c in v.replace(",", " ").split() if c.strip()}
    unknown = sorted(c for c in cats if c not in known and c != FAIL_ON_ANY)
    if unknown:
        raise UsageError(f"--fail-on: unknown categor{'y' if len(unknown) == 1 else 'ies'}: {', '.join(unknown)}",
                         help=f"Known categories: {', '.join(sorted(known))} (or `{FAIL_ON_ANY}`).")
    return frozenset(cats)


def exit_code(a: Analysis, fail_on: Collection[str] = ()) -> int:
    """0 a cause was found; 1 nothing was recognised. With --fail-on: 1 nothing recognised,
    4 the top cause's category is listed (or `any` is), 0 otherwise."""
    if not a.causes:
        return EXIT_NOTHING
    if fail_on and (FAIL_ON_ANY in fail_on or a.causes[0].category in fail_on):
        return EXIT_FAIL_ON
    return EXIT_FOUND


# --- paths inside the repository ------------------------------------------------------------------


def workspace(env: Mapping[str, str] | None = None) -> Path:
    """The repository checkout: $GITHUB_WORKSPACE, else GitLab's $CI_PROJECT_DIR, else the cwd."""
    env = os.environ if env is None else env
    return Path(env.get("GITHUB_WORKSPACE") or env.get("CI_PROJECT_DIR") or os.getcwd()).resolve()


def repo_path(source: str, ws: Path, *, map_suffix: bool = False) -> str | None:
    """source relative to the workspace (forward slashes) when it lies inside it, else None.
    Archive members (`a.zip!x.log`) and pseudo names (`<stdin>`) are never inside.
    map_suffix: a path from another machine (a traceback written in a container that mounted
    the repository at /app) is mapped onto the workspace by its longest existing suffix."""
    if not source or "!" in source or source.startswith("<"):
        return None
    p = Path(source)
    try:
        full = (p if p.is_absolute() else Path.cwd() / p).resolve()
    except (OSError, RuntimeError):
        return None
    try:
        return full.relative_to(ws).as_posix()
    except ValueError:
        pass
    if map_suffix and p.is_absolute():
        parts = p.parts[1:]
        for i in range(len(parts)):
            cand = ws.joinpath(*parts[i:])
            if cand.is_file():
                return Path(*parts[i:]).as_posix()
    return None


# --- GitHub workflow commands ---------------------------------------------------------------------


def escape_data(s: str) -> str:
    """A workflow command's message: %, CR and LF escaped (actions/toolkit escapeData)."""
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    """A workflow command's property value: also : and , (actions/toolkit escapeProperty)."""
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **props: Any) -> str:
    """`::command key=value,...::message` with every part escaped; None properties left out."""
    names = {"end_line": "endLine", "end_column": "endColumn"}
    ps = ",".join(f"{names.get(k, k)}={escape_property(str(v))}" for k, v in props.items() if v not in (None, ""))
    return f"::{command}{' ' + ps if ps else ''}::{escape_data(message)}"


def _innermost_user_frames(frames: Sequence[Frame]) -> list[Frame]:
    return [f for f in frames if f.kind == "user" and f.file and f.line]


def github_commands(a: Analysis, sig: Signature, ws: Path, scrub: Callable[[str], str] = lambda s: s) -> list[str]:
    """::error for the primary error (or the top cause), ::warning for the top cause's evidence and
    the failing call in the repository, ::notice for other causes' evidence and the code path."""
    out: list[str] = []
    top = a.causes[0] if a.causes else None
    primary = a.primary_error
    if top is not None:
        title = f"crashlens: {top.title}"
        msg = f"{top.category} (confidence {top.confidence:.2f})"
        if primary is not None:
            msg += f": {one_line(primary.text, 300)}"
        msg += f"\nsignature {sig.id}: {sig.text}"
        if top.remedies:
            msg += f"\nWhat to do: {top.remedies[0]}"
        where = primary.error_loc if primary is not None else (top.evidence[0].loc if top.evidence else None)
        f = repo_path(where.source, ws) if where is not None else None
        line = end = None
        if f is not None and where is not None:
            line = where.line or None
            end = where.end_line if where.end_line and where.end_line != where.line else None
        out.append(workflow_command("error", scrub(msg), file=f, line=line, end_line=end, title=scrub(title)))
    else:
        msg = "no known root cause was recognised"
        if primary is not None:
            msg += f"; last error: {one_line(primary.text, 300)}"
        out.append(workflow_command("notice", scrub(msg), title="crashlens: nothing recognised"))

    seen: set[tuple[str, int]] = set()
    if primary is not None:
        seen.add((primary.loc.source, primary.loc.line))
        seen.add((primary.error_loc.source, primary.error_loc.line))
    counts: Counter[str] = Counter()

    def add(level: str, e: Evidence, title: str) -> None:
        key = (e.loc.source, e.loc.line)
        if key in seen or counts[level] >= MAX_ANNOTATIONS or not e.loc.line:
            return
        f = repo_path(e.loc.source, ws)
        if f is None:
            return
        seen.add(key)
        counts[level] += 1
        end = e.loc.end_line if e.loc.end_line and e.loc.end_line != e.loc.line else None
        out.append(workflow_command(level, scrub(one_line(e.text, 300)), file=f, line=e.loc.line, end_line=end,
                                    title=scrub(title)))

    # the code path: user frames whose source is in the repository (the failing call is a warning)
    users = _innermost_user_frames(a.code_path)
    for i, fr in enumerate(reversed(users)):
        f = repo_path(fr.file, ws, map_suffix=True)
        level = "warning" if i == 0 else "notice"
        if f is None or counts[level] >= MAX_ANNOTATIONS or (fr.file, fr.line) in seen:
            continue
        seen.add((fr.file, fr.line or 0))
        counts[level] += 1
        what = f"{fr.function}: {fr.code}" if fr.code else fr.function
        title = "crashlens: failing call" if i == 0 else "crashlens: code path"
        out.append(workflow_command(level, scrub(one_line(what, 300)), file=f, line=fr.line, title=title))
    for i, c in enumerate(a.causes):
        level = "warning" if i == 0 else "notice"
        for e in c.evidence:
            add(level, e, f"crashlens: {'evidence' if i == 0 else f'#{i + 1} {c.category}'}")
    return out


def step_outputs(a: Analysis, sig: Signature, code: int) -> dict[str, str]:
    top = a.causes[0] if a.causes else None
    return {"signature": sig.id, "signature-text": sig.text, "category": top.category if top else "",
            "title": top.title if top else "", "confidence": f"{top.confidence:.2f}" if top else "",
            "exit-code": str(code)}


def _write_outputs(path: str, values: Mapping[str, str]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for k, v in values.items():
            v = " ".join(str(v).split())  # one line each: no heredoc delimiter needed
            fh.write(f"{k}={v}\n")


# --- Markdown step summary ------------------------------------------------------------------------


def _cell(text: str, width: int = 400) -> str:
    t = one_line(text, width).replace("|", "\\|").replace("`", "'")
    return f"`{t}`" if t else ""


def step_summary(a: Analysis, sig: Signature, full_report: str | None = None) -> str:
    """A short Markdown summary: the top cause, signature, primary error, code path, what to do,
    then the other causes and the full Markdown report folded in <details>."""
    out: list[str] = []
    top = a.causes[0] if a.causes else None
    if top is None:
        out += ["### crashlens: no known root cause recognised", ""]
    else:
        out += [f"### crashlens: {top.title}", ""]
    out += ["| | |", "|---|---|"]
    if top is not None:
        out.append(f"| **Cause** | `{top.category}` (confidence {top.confidence:.2f}), rule `{top.rule}` |")
    out.append(f"| **Signature** | `{sig.id}` {_cell(sig.text)} |")
    if a.primary_error is not None:
        out.append(f"| **Primary error** | `{a.primary_error.error_loc}` {_cell(a.primary_error.text)} |")
    if a.code_path:
        out.append(f"| **Code path** | {_cell(code_path_line(a.code_path))} |")
    if a.secondary_errors:
        s = a.secondary_errors[0]
        out.append(f"| **Secondary** | `{s.evidence.loc}` {_cell(s.evidence.text, 200)} — {one_line(s.reason, 200)} |")
    out.append("")
    if top is not None:
        out += [top.explanation, ""]
        if top.remedies:
            out += ["**What to do**", ""] + [f"- {r}" for r in top.remedies] + [""]
    others = a.causes[1:6]
    if others:
        out += ["<details><summary>Other candidate causes</summary>", ""]
        out += [f"- `{c.category}` {c.title} (confidence {c.confidence:.2f})" + (" — a consequence" if c.secondary else "")
                for c in others]
        out += ["", "</details>", ""]
    if full_report:
        out += ["<details><summary>Full report</summary>", "", full_report.strip(), "", "</details>", ""]
    return "\n".join(out)


# --- JUnit XML ------------------------------------------------------------------------------------

_XML_BAD = str.maketrans({c: None for c in list(range(0, 9)) + [11, 12] + list(range(14, 32))})


def _x(text: str) -> str:
    """Text that XML 1.0 can carry (control characters dropped)."""
    return str(text).translate(_XML_BAD)


def _evidence_block(c: Cause) -> str:
    return "\n".join(fmt_evidence(e, 400) for e in c.evidence)


def junit_xml(a: Analysis, sig: Signature, scrub: Callable[[str], str] = lambda s: s, ws: Path | None = None) -> str:
    """One <testsuite name="crashlens">, one <testcase> per cause (classname crashlens.<category>,
    name "<title> [<rule>]"); the top cause carries a <failure>, every case its evidence in
    <system-out>. Nothing recognised: one skipped testcase."""
    cases: list[ET.Element] = []
    failures = skipped = 0
    for i, c in enumerate(a.causes):
        tc = ET.Element("testcase", {"classname": f"crashlens.{c.category}", "name": _x(scrub(f"{c.title} [{c.rule}]")),
                                     "time": "0"})
        src = next((e.loc for e in c.evidence if e.loc.line), None)
        if src is not None:
            tc.set("file", _x(scrub((repo_path(src.source, ws) if ws is not None else None) or src.source)))
            tc.set("line", str(src.line))
        if i == 0:
            failures += 1
            msg = f"{c.category} (confidence {c.confidence:.2f})"
            if a.primary_error is not None:
                msg += f": {one_line(a.primary_error.text, 400)}"
            body = [c.explanation, ""]
            if a.primary_error is not None:
                body += [f"Primary error ({a.primary_error.loc}):", a.primary_error.text, ""]
            body += [f"Signature {sig.id}: {sig.text}", ""]
            if c.remedies:
                body += ["What to do:"] + [f"- {r}" for r in c.remedies]
            fail = ET.SubElement(tc, "failure", {"message": _x(scrub(msg)), "type": c.category})
            fail.text = _x(scrub("\n".join(body)))
        out_lines = [f"confidence {c.confidence:.2f}" + (" (judged a consequence)" if c.secondary else ""),
                     "", "Evidence:", _evidence_block(c), "", "Why this rank:"] + [f"- {r}" for r in c.reasoning]
        so = ET.SubElement(tc, "system-out")
        so.text = _x(scrub("\n".join(out_lines)))
        cases.append(tc)
    if not a.causes:
        skipped = 1
        tc = ET.Element("testcase", {"classname": "crashlens.unrecognised", "name": "no known root cause", "time": "0"})
        ET.SubElement(tc, "skipped", {"message": "crashlens recognised no known root cause in the inputs"})
        so = ET.SubElement(tc, "system-out")
        lines = [f"Signature {sig.id}: {sig.text}"]
        if a.primary_error is not None:
            lines += [f"Primary error ({a.primary_error.loc}): {a.primary_error.text}"]
        lines += [f"Note: {n}" for n in a.notes]
        so.text = _x(scrub("\n".join(lines)))
        cases.append(tc)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0", "skipped": str(skipped)}
    root = ET.Element("testsuites", {"name": "crashlens", **counts, "time": "0"})
    suite = ET.SubElement(root, "testsuite", {"name": "crashlens", **counts, "time": "0"})
    props = ET.SubElement(suite, "properties")
    for k, v in (("signature", sig.id), ("signature_text", sig.text), ("crashlens_version", __version__)):
        ET.SubElement(props, "property", {"name": k, "value": _x(scrub(v))})
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --- GitLab Code Quality --------------------------------------------------------------------------


def _severity(i: int, c: Cause) -> str:
    if i == 0:
        return "critical" if c.confidence >= 0.8 else "major"
    return "info" if c.secondary else "minor"


def _location(a: Analysis, c: Cause, i: int, ws: Path) -> dict[str, Any]:
    """The top cause points at the failing call when it is in the repository, else every cause
    at its first evidence line in the repository, else at its first evidence source as named."""
    if i == 0:
        for fr in reversed(_innermost_user_frames(a.code_path)):
            f = repo_path(fr.file, ws, map_suffix=True)
            if f is not None:
                return {"path": f, "lines": {"begin": fr.line}}
    for e in c.evidence:
        f = repo_path(e.loc.source, ws)
        if f is not None:
            return {"path": f, "lines": {"begin": max(e.loc.line, 1)}}
    e = c.evidence[0] if c.evidence else a.primary_error
    if e is None:
        return {"path": "crashlens", "lines": {"begin": 1}}
    return {"path": e.loc.source, "lines": {"begin": max(e.loc.line, 1)}}


def code_quality(a: Analysis, sig: Signature, ws: Path, scrub: Callable[[str], str] = lambda s: s) -> list[dict[str, Any]]:
    """GitLab Code Quality issues (a subset of the Code Climate spec): one per cause;
    fingerprint = sha256(signature id + rule) so the same crash keeps its issue across pipelines."""
    issues: list[dict[str, Any]] = []
    for i, c in enumerate(a.causes):
        desc = f"crashlens: {c.title} ({c.category}, confidence {c.confidence:.2f})"
        if i == 0 and a.primary_error is not None:
            desc += f": {one_line(a.primary_error.text, 300)}"
        body = "\n".join([c.explanation, "", "Evidence:", _evidence_block(c), "", "What to do:",
                          *[f"- {r}" for r in c.remedies]])
        issues.append({
            "type": "issue",
            "engine_name": "crashlens",
            "check_name": c.rule,
            "description": scrub(desc),
            "content": {"body": scrub(body)},
            "categories": ["Bug Risk"],
            "severity": _severity(i, c),
            "fingerprint": hashlib.sha256(f"{sig.id}:{c.rule}".encode()).hexdigest(),
            "location": _scrub_location(_location(a, c, i, ws), scrub),
        })
    return issues


# --- the CLI's entry ------------------------------------------------------------------------------


def report_text(a: Analysis, sig: Signature, fmt: str, top: int = 3, verbose: bool = False) -> str:
    """The normal report as a string: fmt is terminal, markdown or json."""
    if fmt == "json":
        from .json import render

        return render(a, sig)
    if fmt == "markdown":
        from .markdown import render as render_md

        return render_md(a, sig, top)
    from rich.console import Console

    from .terminal import render as render_term

    buf = io.StringIO()
    render_term(a, sig, Console(file=buf, width=120, force_terminal=False, color_system=None, soft_wrap=False), top, verbose)
    return buf.getvalue()


def _scrub_location(loc: dict[str, Any], scrub: Callable[[str], str]) -> dict[str, Any]:
    return {**loc, "path": scrub(str(loc["path"]))}


def _as_is(text: str) -> str:
    return text


def _footer(red: Redactor | None) -> str:
    """The step summary's word on redaction."""
    if red is None:
        return "redaction turned off"
    n = sum(red.counts.values())
    return f"{n} item(s) redacted" if n else "nothing needed redaction"


def _write(path: Path, text: str, what: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the {what} file {path}: {exc.strerror or exc}") from exc


def emit(a: Analysis, sig: Signature, *, github: bool = False, junit: Path | None = None, codequality: Path | None = None,
         fmt: str = "terminal", top: int = 3, verbose: bool = False, code: int = 0, redact: bool = True,
         env: Mapping[str, str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> None:
    """Write the CI files; with github, print the workflow commands and the (grouped) report to
    out, append the step summary to $GITHUB_STEP_SUMMARY and the step outputs to $GITHUB_OUTPUT."""
    env = os.environ if env is None else env
    out = out or sys.stdout
    err = err or sys.stderr
    ws = workspace(env)
    red = Redactor() if redact else None
    if red is not None:  # before anything is cut, wrapped or shortened (a token split by a wrap is not found again)
        a, sig, _ = redacted(a, sig, red)
    scrub: Callable[[str], str] = red if red is not None else _as_is
    if junit is not None:
        _write(junit, junit_xml(a, sig, scrub, ws), "JUnit")
    if codequality is not None:
        _write(codequality, json.dumps(code_quality(a, sig, ws, scrub), indent=2, ensure_ascii=False) + "\n",
               "Code Quality")
    if not github:
        return
    for line in github_commands(a, sig, ws, scrub):
        print(line, file=out)
    text = scrub(report_text(a, sig, fmt, top, verbose)).rstrip("\n")
    # the report repeats log lines: a line starting with `::` must not run as a workflow command
    token = secrets.token_hex(16)
    long = text.count("\n") + 1 > GROUP_AT
    if long:
        print(f"::group::crashlens report ({a.causes[0].category if a.causes else 'nothing recognised'})", file=out)
    print(f"::stop-commands::{token}", file=out)
    print(text, file=out)
    print(f"::{token}::", file=out)
    if long:
        print("::endgroup::", file=out)
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        summary = scrub(step_summary(a, sig, report_text(a, sig, "markdown", top, verbose)))
        summary += f"<sub>crashlens {__version__} · signature {sig.id} · {_footer(red)}</sub>\n"
        try:
            with open(summary_path, "a", encoding="utf-8") as fh:
                fh.write(summary + "\n")
        except OSError as exc:
            print(f"crashlens: could not append the step summary to {summary_path}: {exc.strerror or exc}", file=err)
    else:
        print("crashlens: GITHUB_STEP_SUMMARY is not set: no step summary written", file=err)
    if env.get("GITHUB_OUTPUT"):
        try:
            _write_outputs(env["GITHUB_OUTPUT"], {k: scrub(v) for k, v in step_outputs(a, sig, code).items()})
        except OSError as exc:
            print(f"crashlens: could not write step outputs to {env['GITHUB_OUTPUT']}: {exc.strerror or exc}", file=err)
