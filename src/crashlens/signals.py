"""Linux signal names and numbers, from data/signals.yaml (one table, one loader).

    SIGNALS          {4: "SIGILL", ...}
    SIGNAL_ALIASES   {"SIGIOT": "SIGABRT", ...}   other names of a signal -> its canonical name
    SIGNAL_NUMBERS   {"SIGILL": 4, "ILL": 4, "SIGIOT": 6, "IOT": 6, ...}   every spelling -> number

A neutral module: the log parsers and binary/ (cores) import it; it imports nothing of theirs.
"""

from __future__ import annotations

from importlib import resources
from types import MappingProxyType
from typing import Mapping

import yaml

__all__ = ["SIGNALS", "SIGNAL_ALIASES", "SIGNAL_NUMBERS"]


def _load() -> tuple[dict[int, str], dict[str, str]]:
    text = (resources.files("crashlens") / "data" / "signals.yaml").read_text("utf-8")
    doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    names = {int(k): str(v) for k, v in doc["names"].items()}
    aliases = {str(k): str(v) for k, v in (doc.get("aliases") or {}).items()}
    return names, aliases


_names, _aliases = _load()
SIGNALS: Mapping[int, str] = MappingProxyType(_names)
SIGNAL_ALIASES: Mapping[str, str] = MappingProxyType(_aliases)
_numbers = {v: k for k, v in _names.items()}
_numbers.update({a: _numbers[c] for a, c in _aliases.items()})
SIGNAL_NUMBERS: Mapping[str, int] = MappingProxyType(_numbers | {n[3:]: k for n, k in _numbers.items()})
del _names, _aliases, _numbers
