"""Redaction for the renderers: everything that leaves the machine goes through one Redactor.

The engine (the formats, the Redactor, its counts) lives in crashlens/redaction.py, a neutral
module that the signature and triage use too; this module is the renderers' entry point.
"""

from __future__ import annotations

from typing import Any

from ..model import Analysis
from ..redaction import KINDS, R, Counts, Redactor, redact, shareable, summary
from ..signature import Signature

__all__ = ["KINDS", "R", "Counts", "Redactor", "redact", "redacted", "shareable", "summary"]


def redacted(a: Analysis, sig: Signature, red: Redactor | None = None, **options: Any) -> tuple[Analysis, Signature, Redactor]:
    """The analysis and its signature with every string redacted, before a renderer cuts, wraps or
    shortens anything (a token cut in two by a line wrap or shortened to `AKIAVFNQY…` is no
    longer recognised); the Redactor carries the counts for the closing line."""
    red = red if red is not None else Redactor(**options)
    red.learn_inputs(a.inputs)  # contexts far from their secret (an AWS key id at the top of the log)
    return red.analysis(a), red.signature(sig), red
