"""Prefilled new-issue URLs within a length limit (docs/report.md "Prefilled URLs").

    validate_repo(url) -> the repository's web address (CrashlensError when it is not one)
    issue_url(repo, params, shrinkable, limit, ...) -> (url, notes about what was cut)
    shorten(text, max_chars, keep) / shorten_markdown(...)   cut from the middle, with a marker
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence
from urllib.parse import quote, urlencode

from ...errors import CrashlensError

URL_LIMIT = 8000  # characters of a whole prefilled URL (GitHub answers 414 beyond roughly 8 KB)

_MARKER = re.compile(r"… \[(\d+) lines? cut by crashlens to fit the URL\] …|…")


def shorten(text: str, max_chars: int, keep: Sequence[str] = (), head_share: float = 1 / 3) -> str:
    """Cut lines from the middle of text until it fits max_chars: the first and last lines (a
    head_share of the budget for the head; the end of a log says most), the lines that contain
    any of `keep` (the primary error) and code fences stay, and a marker line says how many
    lines were cut."""
    if len(text) <= max_chars:
        return text
    lines = text.split("\n")
    forced = {i for i, ln in enumerate(lines) if ln.lstrip().startswith("```")}
    for k in keep:  # the first line with each kept text (the primary error, the redaction line)
        forced |= {next((i for i, ln in enumerate(lines) if k and k in ln), -1)} - {-1}
    marker = "… [{n} line{s} cut by crashlens to fit the URL] …"
    budget = max_chars - sum(len(lines[i]) + 1 for i in forced) - len(marker) - 8
    if budget < 0 or len(lines) <= 2:  # even the kept lines are too long: cut characters from the middle
        if max_chars < 40:
            return text[:max(0, max_chars)]
        half = (max_chars - 40) // 2
        return text[:half] + f" … [{len(text) - 2 * half} characters cut] … " + text[len(text) - half:]
    head_budget = int(budget * head_share)
    hi, ti, used = 0, len(lines) - 1, 0
    while hi <= ti:  # the head first, to its share of the budget
        cost = 0 if hi in forced else len(lines[hi]) + 1
        if used + cost > head_budget:
            room = head_budget - used - 2
            if room >= 80 and hi not in forced:  # a long line (an explanation): keep its start
                lines[hi] = lines[hi][:room] + "…"
                used += room + 2
                hi += 1
            break
        used += cost
        hi += 1
    while ti >= hi:  # then the tail, with what is left
        cost = 0 if ti in forced else len(lines[ti]) + 1
        if used + cost > budget:
            break
        used += cost
        ti -= 1
    if hi > ti:
        return text
    cut = [i for i in range(hi, ti + 1) if i not in forced]
    n_cut = 0  # lines cut now, and the lines that earlier cuts' markers stand for
    for i in cut:
        m = _MARKER.fullmatch(lines[i])
        n_cut += int(m.group(1)) if m and m.group(1) else 0 if m else 1
    out = lines[:hi]
    marked, prev = False, hi - 1
    for i in sorted(forced & set(range(hi, ti + 1))) + [ti + 1]:
        if i - prev > 1:
            out.append(marker.format(n=n_cut, s="s" if n_cut != 1 else "") if not marked else "…")
            marked = True
        if i <= ti:
            out.append(lines[i])
        prev = i
    return "\n".join(out + lines[ti + 1:])


def shorten_markdown(text: str, max_chars: int, keep: Sequence[str] = (), always: Sequence[str] = ()) -> str:
    """shorten() unit by unit, the largest unit first, until the text fits: units are the
    `##`/`###` sections (cut from their end: what comes first matters most) and fenced code
    blocks (logs: cut from the middle, keeping the start, the end and the primary error).
    Lines with a text of `always` (the redaction line) stay everywhere."""
    if len(text) <= max_chars:
        return text
    units: list[list[Any]] = []  # [text, is_code]
    cur: list[str] = []
    in_fence = False

    def flush(is_code: bool) -> None:
        if cur:
            units.append(["\n".join(cur), is_code])
            cur.clear()

    for ln in text.split("\n"):
        if ln.lstrip().startswith("```"):
            if not in_fence:
                flush(False)
                cur.append(ln)
                in_fence = True
                continue
            cur.append(ln)
            flush(True)
            in_fence = False
            continue
        if not in_fence and re.match(r"#{2,3} ", ln):
            flush(False)
        cur.append(ln)
    flush(in_fence)
    for _ in range(200):
        total = sum(len(u[0]) + 1 for u in units) - 1
        if total <= max_chars:
            break
        i = max(range(len(units)), key=lambda j: len(units[j][0]))
        body, is_code = units[i]
        target = max(len(body) - (total - max_chars) - 8, int(len(body) * 0.6))
        new = shorten(body, target, [*keep, *always] if is_code else always, head_share=1 / 3 if is_code else 0.75)
        if len(new) >= len(body):
            return shorten("\n".join(u[0] for u in units), max_chars, always)
        units[i][0] = new
    return "\n".join(u[0] for u in units)


# which form fields give way first when a URL is too long (weight > 1: sooner)
CUT_FIRST = {"context": 3.0, "solution": 2.0, "testing": 2.0, "environment": 1.5, "root_cause": 1.0, "errors": 1.0,
              "logs_plain": 1.0, "steps": 0.7, "command_plain": 0.5, "expected": 0.7, "actual": 0.7, "summary": 0.5}


def validate_repo(url: str) -> str:
    m = re.fullmatch(r"(https?://[^/\s?#]+/[^/\s?#]+/[^/\s?#]+?)(?:\.git)?/?", url.strip())
    if not m:
        raise CrashlensError(f"--url {url!r} is not a repository URL",
                             "Pass the repository's web address, e.g. https://github.com/OWNER/REPO.")
    return m.group(1)


def issue_url(repo: str, params: list[tuple[str, str]], shrinkable: Mapping[str, str], limit: int = URL_LIMIT,
              keep: Sequence[str] = (), weights: Mapping[str, float] | None = None,
              always: Sequence[str] = ()) -> tuple[str, list[str]]:
    """`REPO/issues/new?...` within `limit` characters: the longest shrinkable fields are cut
    until it fits (shrinkable: field -> "log", cut from the middle keeping its end, or
    "markdown", cut section by section); a field's weight (default 1) makes it cut sooner.
    Returns (url, notes about what was cut)."""
    base = validate_repo(repo) + "/issues/new?"
    values = dict(params)
    order = [k for k, _ in params]
    notes: list[str] = []

    def build() -> str:
        return base + urlencode([(k, values[k]) for k in order if values.get(k) is not None], quote_via=quote)

    url = build()
    cut: set[str] = set()
    for _ in range(200):
        if len(url) <= limit:
            break
        cands = [k for k in shrinkable if values.get(k)]
        if not cands:
            break
        k = max(cands, key=lambda k: len(quote(values[k], safe="")) * (weights or {}).get(k, 1.0))
        enc = len(quote(values[k], safe=""))
        over = len(url) - limit
        if enc <= 120:  # nothing sensible left to cut from: drop the field
            values[k] = None  # type: ignore[assignment]
            notes.append(f"{k}: left out to fit the URL")
        else:
            ratio = max(0.6, (enc - over - 60) / enc)  # at most 40% per step: the cut spreads over fields
            target = max(60, int(len(values[k]) * ratio))
            new = shorten(values[k], target, [*keep, *always]) if shrinkable[k] == "log" else \
                shorten_markdown(values[k], target, keep, always)
            if len(new) >= len(values[k]):
                new = values[k][: int(len(values[k]) * 0.8)]
            values[k] = new
            cut.add(k)
        url = build()
    for k in sorted(cut):
        if values.get(k) is not None:
            notes.append(f"{k}: shortened to fit the URL")
    if len(url) > limit:
        notes.append(f"the URL is {len(url)} characters, over the limit of {limit}")
    return url, notes
