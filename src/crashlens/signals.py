"""Linux signal names and numbers, from data/signals.yaml (read through crashlens.knowledge).

    SIGNALS          {4: "SIGILL", ...}
    SIGNAL_ALIASES   {"SIGIOT": "SIGABRT", ...}   other names of a signal -> its canonical name
    SIGNAL_NUMBERS   {"SIGILL": 4, "ILL": 4, "SIGIOT": 6, "IOT": 6, ...}   every spelling -> number

A neutral module: the log parsers and binary/ (cores) import it; it imports only crashlens.knowledge.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Callable, Iterator, Mapping

__all__ = ["SIGNALS", "SIGNAL_ALIASES", "SIGNAL_NUMBERS"]


@cache
def _tables() -> tuple[dict[int, str], dict[str, str], dict[str, int]]:
    from .knowledge import data

    doc = data("signals.yaml")
    names = {int(k): str(v) for k, v in doc["names"].items()}
    aliases = {str(k): str(v) for k, v in (doc.get("aliases") or {}).items()}
    numbers = {v: k for k, v in names.items()}
    numbers.update({a: numbers[c] for a, c in aliases.items()})
    numbers.update({n[3:]: k for n, k in list(numbers.items())})
    return names, aliases, numbers


class _Table(Mapping):
    """A read-only mapping filled from the data file on first use (importing this module reads
    nothing: a core can be read without loading YAML)."""

    def __init__(self, pick: Callable[[tuple], dict]) -> None:
        self._pick = pick

    def _d(self) -> dict:
        return self._pick(_tables())

    def __getitem__(self, key: Any) -> Any:
        return self._d()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._d()

    def __iter__(self) -> Iterator:
        return iter(self._d())

    def __len__(self) -> int:
        return len(self._d())

    def get(self, key: Any, default: Any = None) -> Any:
        return self._d().get(key, default)

    def keys(self):  # type: ignore[override]
        return self._d().keys()

    def values(self):  # type: ignore[override]
        return self._d().values()

    def items(self):  # type: ignore[override]
        return self._d().items()

    def __repr__(self) -> str:
        return repr(self._d())


SIGNALS: Mapping[int, str] = _Table(lambda t: t[0])
SIGNAL_ALIASES: Mapping[str, str] = _Table(lambda t: t[1])
SIGNAL_NUMBERS: Mapping[str, int] = _Table(lambda t: t[2])
