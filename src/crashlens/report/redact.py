"""Redaction for the renderers: everything that leaves the machine goes through one Redactor.

The engine (the formats, the Redactor, its counts) lives in crashlens/redaction.py, a neutral
module that the signature and triage use too; this module is the renderers' entry point.
"""

from __future__ import annotations

from ..redaction import KINDS, R, Counts, Redactor, redact, shareable, summary

__all__ = ["KINDS", "R", "Counts", "Redactor", "redact", "shareable", "summary"]
