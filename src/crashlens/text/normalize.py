"""Turn a raw log line into a normalised Line that still points at its origin.

Removes what decorates a line without changing its meaning: ANSI escapes, carriage-return
overdraws of progress bars (tqdm, rich), UTF-8-read-as-cp1252 mojibake, journald's #012
escapes, and prefixes (timestamps, syslog headers, dmesg clocks, rank tags of launchers).
The prefixes are kept in Line.prefix; a rank tag also becomes Line.stream so that output
interleaved by several ranks can be pulled apart again.
"""

from __future__ import annotations

import regex as re

from ..model import Line, Loc

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# a progress-bar frame: tqdm "45%|####  | 9/20 [00:01<00:02, 4.1it/s]", rich bars, bare percentages
_PROGRESS = re.compile(r"(?:\d{1,3}%\|)|(?:\|\s*\d+/\d+\s*\[)|(?:[━█▉▊▋▌▍▎▏#]{4,})|(?:\d+(?:\.\d+)?\s*(?:it|s/it|examples|ex|B|kB|MB|GB|MiB|GiB)/s\b)")
# a tqdm bar at the head of a line with other output glued after it (stderr written after a bar
# frame without a newline): "train:  2%|██▋   | 1/46 [00:01<01:10,  1.56s/it, loss=0.9]ERROR: …"
_BAR_HEAD = re.compile(r"^[^|\n]{0,120}?\d{1,3}%\|[^|]{0,400}\|\s*[\d.,]+[kMGT]?/[\d.,?]+[kMGT]?\s*\[[^\]]{0,400}\]")
# characters that betray UTF-8 bytes decoded as cp1252/latin-1
_MOJIBAKE_HINT = re.compile(r"[ÂÃâð][\x80-\xbf\u0152-\u203a€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ¡-¿]")

# Prefixes that stand before the message; tried repeatedly (a rank tag can follow a timestamp).
_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # GitHub Actions / ISO-8601 with T and Z: "2024-05-01T12:00:00.1234567Z "
    ("time", re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s+(?:stdout|stderr)\s+[FP])?:?\s+")),
    # "[2025-11-12 12:09:01,006]", "2026-11-26 01:28:14,271 ", "2023-09-25 04:31:46.366898: "
    ("time", re.compile(r"^\[?\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?:?\s+")),
    # "[05/23/2021 18:30:06]"
    ("time", re.compile(r"^\[\d\d/\d\d/\d{4} \d\d:\d\d:\d\d\]")),
    # dmesg clock "[   77.690605] "
    ("clock", re.compile(r"^\[\s*\d+\.\d+\]\s?")),
    # syslog / journalctl: "Jun 30 11:07:05 gpu-0 kernel: ", "Aug 26 14:08:07 host systemd[1]: "
    ("syslog", re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ (?P<tag>[\w.@/-]+)(?:\[\d+\])?: ")),
    # launcher rank tags: "[rank3]:", "[default0]:", "[1,0]<stderr>:", "rank2: "
    ("rank", re.compile(r"^\[(?:rank|default)(?P<rank>\d+)\]:\s?")),
    ("rank", re.compile(r"^\[\d+,(?P<rank>\d+)\]<std(?:out|err)>:\s?")),
    ("rank", re.compile(r"^rank(?P<rank>\d+):\s")),
    # Ray workers: "(RayTrainWorker pid=1234, ip=10.0.0.1) "
    ("rank", re.compile(r"^\((?P<worker>\w+) pid=(?P<pid>\d+)(?:, ip=[\d.]+)?\)\s")),
    # a clock alone: "16:25:20-605249 ", "12:00:01.123 "
    ("time", re.compile(r"^\d\d:\d\d:\d\d[.,-]\d+\s+")),
    # Markdown quote of a pasted log
    ("quote", re.compile(r"^>(?!>)\s?")),
    # pytest's failure report marks the exception's lines with "E   "
    ("pytest", re.compile(r"^E {3}(?=\S)")),
    # Markdown list bullet before a pasted error line: "- RuntimeError: …", "* `OSError: …`"
    ("bullet", re.compile(r"^(?:[*•]|-(?=\s+[`*_]*[A-Z]))\s+(?=\S)")),
)

# Paste artefacts of issue threads and chats, removed after the prefixes (the line keeps its
# number): a code-fence line, inline code or emphasis around the whole message, HTML entities
# (a log copied from a web page), fullwidth ASCII forms (an IME's "（" for "(").
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
_WRAPPED = re.compile(r"^(?P<m>`{1,3}|\*\*|\*)(?=\S)(?P<t>.+?)(?<=\S)(?P=m)(?P<rest>\s*)$")
_BOLD = re.compile(r"\*\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*\*")
_ENTITY = re.compile(r"&(?:#\d{1,6}|#x[0-9a-fA-F]{1,6}|lt|gt|amp|quot|apos|nbsp);")
_FULLWIDTH = re.compile(r"[\uff01-\uff5e]")


def depaste(text: str) -> str:
    """Remove Markdown and web-page decoration that a pasted log picked up."""
    if "`" in text or "~~~" in text:
        if _FENCE.match(text):
            return ""
        text = text.replace("```", "")
    m = _WRAPPED.match(text)
    if m:
        text = m.group("t")
    if "**" in text:
        text = _BOLD.sub(r"\1", text)
    if "&" in text and _ENTITY.search(text):
        import html

        text = html.unescape(text).replace("\xa0", " ")
    if not text.isascii() and _FULLWIDTH.search(text):
        text = _FULLWIDTH.sub(lambda c: chr(ord(c.group(0)) - 0xFEE0), text)
    return text


def _strip_progress(text: str) -> str:
    """Keep what a terminal would finally show, plus any overdrawn segment that was not a
    progress-bar frame (an error printed and then overdrawn must not vanish)."""
    segments = [s for s in text.split("\r") if s.strip()]
    if not segments:
        return ""
    kept = [s for s in segments[:-1] if not _PROGRESS.search(s)]
    kept.append(segments[-1])
    return " ".join(kept)


def _split_bar_head(text: str) -> tuple[str, str]:
    """(progress-bar frame, what follows it on the same line); ("", text) without such a frame."""
    m = _BAR_HEAD.match(text)
    if m is None or not text[m.end():].strip():
        return "", text
    return text[:m.end()].rstrip(), text[m.end():].lstrip()


def _fix_mojibake(text: str) -> str:
    if not _MOJIBAKE_HINT.search(text):
        return text
    import ftfy  # imported on first need: most logs never have mojibake

    return ftfy.fix_encoding(text)


def clean(text: str) -> str:
    """Everything except prefix removal: ANSI, overdraws, control characters, mojibake."""
    if text[:1] == "\ufeff":  # a byte-order mark at the start of a file
        text = text[1:]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = _strip_progress(text)
    if "%|" in text:
        text = _split_bar_head(text)[1]
    if "#01" in text:
        text = text.replace("#012", " ").replace("#011", " ")
    text = _CONTROL.sub("", text)
    if not text.isascii():
        text = _fix_mojibake(text)
    return text.rstrip()


def normalize_records(raw: str, source: str, lineno: int) -> list[Line]:
    """The records of one raw line: a progress-bar frame that other output was written after
    ("Loading checkpoint shards:  60%|…| 3/5 [00:41<00:27]Killed") is two, the bar and the rest,
    both at the same line; any other line is one."""
    line = normalize(raw, source, lineno)
    if "%|" not in raw:
        return [line]
    bar, _rest = _split_bar_head(_strip_progress(raw) if "\r" in raw else raw)
    if not bar:
        return [line]
    return [Line(line.loc, bar.strip(), line.stream, line.prefix), line]


def normalize(raw: str, source: str, lineno: int) -> Line:
    text = clean(raw)
    prefix_parts: list[str] = []
    stream = ""
    for _ in range(4):
        for what, pattern in _PREFIXES:
            m = pattern.match(text)
            if m and m.end() < len(text):
                prefix_parts.append(m.group(0).strip())
                if what == "rank":
                    gd = m.groupdict()
                    stream = f"rank{gd['rank']}" if gd.get("rank") else f"{gd.get('worker')}-{gd.get('pid')}"
                text = text[m.end():]
                break
        else:
            break
    return Line(Loc(source, lineno), depaste(text), stream, " ".join(prefix_parts))
