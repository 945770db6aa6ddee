"""One Record per line: its time, level and logger where the line or its prefix states them,
and whether it starts a record of its own.

    record_of(line) -> Record                 stream, time, level, logger, starts
    BAR                                       a progress-bar frame (tqdm, Keras, rich)

`starts` is what ends an exception's message: the next line of a log is part of the message
unless it begins a record of its own — a progress-bar frame, a glog/c10 record, a logging
record, what a shell or launcher prints after a process ended, or any line whose prefix holds a
clock (the logger stamped it). `level` is what the ranking stage reads to tell an error from an
informational or warning record.
"""

from __future__ import annotations

import regex as re

from ..model import Line, Record

# a progress-bar frame: tqdm "45%|####  | 9/20 [...]", Keras "3/10 [==>....]", rich "━━━━"
BAR = re.compile(r"^(?:[^|]{0,120}?\d{1,3}%\||\s*\d+/\d+ \[[=>.]+\]|.{0,80}?[━]{4,})")
# A line that starts a record of its own, so an exception's message cannot continue onto it:
# a progress bar, a glog/c10 record ("E1128 03:21:18.107 …", "[W …cpp:104]"), a logging record
# ("ERROR:torch…", "WARNING: …", "INFO | …"), what a shell or launcher prints after a process
# ended ("exit status 1", "Error in sys.excepthook:", "+ cmd", srun/slurmstepd, a shell's job report).
NEW_RECORD = re.compile(
    r"^(?:[^|]{0,120}?\d{1,3}%\||\s*\d+/\d+ \[[=>.]+\]|[IWEF]\d{4} \d\d:\d\d:\d\d|\[[IWEF][\s\d][^\]]{0,60}:\d+\]"
    r"|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)(?::[\w.]|:\s|\s*[|\]-]|\s+\S+:\d+)"
    r"|exit status -?\d+|Error in sys\.excepthook|\+ \S|srun: |slurmstepd: "
    # a shell's report of a job that died: "make.sh: line 13:  8992 Aborted    python x.py", "Killed"
    r"|\S+: line \d+: +\d+ |(?:Aborted|Segmentation fault|Killed|Bus error|Illegal instruction)(?: \(core dumped\))?\s*$)")
_CLOCK = re.compile(r"\d:\d\d|\d\.\d{3}")
_TIME = re.compile(r"\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?|\b\d\d:\d\d:\d\d(?:[.,]\d+)?|^\[\s*\d+\.\d+\]")

_LETTER = {"D": "debug", "I": "info", "W": "warning", "E": "error", "F": "fatal"}
_WORD = {"DEBUG": "debug", "INFO": "info", "WARNING": "warning", "WARN": "warning", "ERROR": "error",
         "CRITICAL": "fatal", "FATAL": "fatal"}
# (pattern, how its groups give the level, found anywhere in the line rather than at its
# start); tried in order, the first match decides
_LEVELS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    # glog/absl "W1128 03:21:18.107 …", "E tensorflow/core/…:123] …"
    (re.compile(r"^(?P<letter>[IWEF])\d{4}\s"), "letter", False),
    (re.compile(r"^(?P<letter>[IWEF]) (?:external/|tensorflow/|xla/|third_party/)?\S+:\d+\]"), "letter", False),
    # c10 "[W socket.cpp:464] …", "[E ProcessGroupNCCL.cpp:…]"
    (re.compile(r"^\[(?P<letter>[IWEF])[ \d]"), "letter", False),
    # logging's default "ERROR:torch.distributed:…", "WARNING:root:…"
    (re.compile(r"^(?P<word>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):(?P<logger>[\w.]+):"), "word", False),
    # "INFO: …", "[INFO] …", "| ERROR    | mod:fn:12 - …" (loguru), "WARNING - …"
    (re.compile(r"^\|?\s*\[?(?P<word>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?(?=[: |\]-])"), "word", False),
    # hydra and other formats: "[__main__][INFO] - …", "root - ERROR - …", "train.py:12 ERROR …"
    (re.compile(r"^(?:\[(?P<logger>[\w.]+)\]\[|(?P<logger2>[\w.]+) - |\S+:\d+\s+)"
                r"(?P<word>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"), "word", False),
    # NCCL "host:123:456 [0] NCCL INFO …" / "NCCL WARN …"
    (re.compile(r"\bNCCL (?P<word>INFO|WARN)\b"), "word", True),
    # the warnings module "path:12: UserWarning: …", "TF-TRT Warning", "warning: …"
    (re.compile(r"\b[A-Z]\w*Warning: |\bTF-TRT Warning\b|^(?i:warn(?:ing)?: )"), "warning", True),
)


# every line any of _LEVELS can match holds one of these (one search instead of eight on most lines)
_HINT = re.compile(r"^[\[IWEF|]|INFO|WARN|ERROR|DEBUG|CRITICAL|FATAL|Warning|^(?i:warn)")


def _level(text: str) -> tuple[str, str]:
    if not _HINT.search(text):
        return "", ""
    for pattern, how, anywhere in _LEVELS:
        m = pattern.search(text) if anywhere else pattern.match(text)
        if m is None:
            continue
        if how == "warning":
            return "warning", ""
        gd = m.groupdict()
        level = _LETTER[gd["letter"]] if how == "letter" else _WORD[gd["word"]]
        return level, gd.get("logger") or gd.get("logger2") or ""
    return "", ""


def record_of(line: Line) -> Record:
    text = line.text.lstrip()
    level, logger = _level(text) if text else ("", "")
    m = _TIME.search(line.prefix) if line.prefix else None
    time = m.group(0).strip("[] ") if m else ""
    starts = bool(text) and (bool(NEW_RECORD.match(text)) or bool(line.prefix and _CLOCK.search(line.prefix)))
    return Record(stream=line.stream, time=time, level=level, logger=logger, starts=starts)
