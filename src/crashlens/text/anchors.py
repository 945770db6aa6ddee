"""Anchors for selecting lines of a huge log (text.select): the lines worth keeping, with their
surroundings, besides the lines any rule could match.

select_lines keeps every line of a log below its size limit; above it, the head, the tail and
windows around anchor hits. The rules' own line patterns are anchors (engine.collect adds
them); these structure anchors keep what the parsers need around a hit: tracebacks, native
stacks, environment dumps, how the process ended.
"""

from __future__ import annotations

from typing import Iterable

import regex as re

STRUCTURE_ANCHORS = (
    r"Traceback \(most recent call last\)",
    r"Fatal Python error",
    r"Exception raised from",
    r"NVRM",
    r"(?i)(?:driver|cuda|cudnn|pytorch|torch|python) version",
    r"NVIDIA-SMI",
    r"(?i)compute capability",
    r"^(?:flags|Flags:)",
    r"Root Cause \(first observed failure\)",
    r"(?i)\b(?:killed|core dumped|segmentation fault|aborted)\b",
)

_STRUCTURE = tuple(re.compile(p) for p in STRUCTURE_ANCHORS)


def anchors(patterns: Iterable[re.Pattern[str]] = ()) -> list[re.Pattern[str]]:
    """The structure anchors, then the given (compiled) patterns."""
    return [*_STRUCTURE, *patterns]
