"""Knowledge tables shipped as package data (src/crashlens/data/*.yaml), each loaded once.

    data(name) -> the parsed data/<name>: YAML, or JSON for *.json  (cached; any stage may read it)
    data_path(name) -> Path of data/<name>, for readers that need a path (data/templates/)
    abort_frames() -> AbortFrames(functions, runtime_modules)       data/abort_frames.yaml
    environment_rules() -> tuple[EnvironmentRule, ...]              data/environment.yaml
    category_notes(category) -> CategoryNotes(async_cuda, testing)  data/categories.yaml
    async_cuda_categories() -> frozenset[str]                       data/categories.yaml
    async_cuda_testing() -> tuple[str, ...]                         data/categories.yaml

A neutral module: it imports nothing of crashlens, so parsers, binary, engine, signature and the
renderers can all read the same tables. Every reader of data/ outside binary/ goes through here
(the parsers' Xid catalogue, exception knowledge and environment table, the taxonomy and rule
schema, notes, similar cases, ...). A category that data/categories.yaml does not name (the
taxonomy grows independently) has no notes: not async, no testing steps of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any


@cache
def data(name: str) -> Any:
    """The parsed file data/<name>: YAML (libyaml's safe loader when available), or JSON when the
    name ends in .json; an empty file is {}. Raises FileNotFoundError when there is no such file.
    The value is shared by every caller: read it, never change it."""
    text = (resources.files("crashlens") / "data" / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        import json

        return json.loads(text) if text.strip() else {}
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the same result, 5-10x faster
    return yaml.load(text, Loader=loader) or {}  # noqa: S506 - a safe loader


def data_path(name: str) -> Path:
    """data/<name> as a file-system path, for readers that need one (Jinja's FileSystemLoader
    reads the built-in bug-report templates of data/templates/ by path)."""
    return Path(str(resources.files("crashlens") / "data" / name))


# --- the abort machinery --------------------------------------------------------------------------


@dataclass(frozen=True)
class AbortFrames:
    functions: tuple[str, ...]  # fnmatch patterns of functions that only carry an abort
    runtime_modules: tuple[str, ...]  # fnmatch patterns of runtime-library base names


@cache
def abort_frames() -> AbortFrames:
    doc = data("abort_frames.yaml")
    return AbortFrames(tuple(str(x) for x in doc.get("functions", ())),
                       tuple(str(x) for x in doc.get("runtime_modules", ())))


# --- per-category notes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CategoryNotes:
    async_cuda: bool = False  # CUDA reports this category's GPU errors asynchronously
    testing: tuple[str, ...] = ()  # how to verify a fix ({cmd}, {sm}, {at} are filled by the report)


@cache
def _categories() -> dict[str, CategoryNotes]:
    doc = data("categories.yaml").get("categories") or {}
    return {str(k): CategoryNotes(bool((v or {}).get("async_cuda", False)),
                                  tuple(str(s) for s in (v or {}).get("testing", ()) or ()))
            for k, v in doc.items()}


def category_notes(category: str) -> CategoryNotes:
    return _categories().get(category, CategoryNotes())


def async_cuda_categories() -> frozenset[str]:
    return frozenset(k for k, v in _categories().items() if v.async_cuda)


def async_cuda_testing() -> tuple[str, ...]:
    """Testing steps of every async_cuda category, before the category's own."""
    return tuple(str(s) for s in (data("categories.yaml").get("async_cuda") or {}).get("testing", ()) or ())


# --- the environment table ------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvironmentRule:
    """One row of data/environment.yaml; parsers/environment.py binds the names and compiles it."""

    hints: tuple[str, ...] | None  # lower-case substrings, one of which must be in the lower-cased line
    pattern: str  # a `regex` pattern, with the file's fragments inserted
    key: str  # the fact's key ("cuda_runtime", "framework.torch"), or "<name>()": a key function
    convert: str = "version"  # the converter that turns the match into the value
    priority: int = 1  # a higher priority replaces a value found by a lower one
    flags: tuple[str, ...] = ()  # regex flags by name ("ignorecase")
    every: bool = False  # one fact per match (finditer) instead of the first match only


_ENV_FIELDS = frozenset({"hints", "pattern", "key", "convert", "priority", "flags", "every"})
_FRAGMENT = re.compile(r"\$\{(\w+)\}")


@cache
def environment_rules() -> tuple[EnvironmentRule, ...]:
    """The rows of data/environment.yaml in file order (the order matters: at equal priority the
    first value found wins). Raises ValueError naming the row when one is malformed."""
    doc = data("environment.yaml")
    fragments = {str(k): str(v) for k, v in (doc.get("fragments") or {}).items()}
    rows = []
    for n, row in enumerate(doc.get("rules") or (), start=1):
        where = f"data/environment.yaml rule {n}"
        if not isinstance(row, dict) or not {"pattern", "key"} <= set(row) or set(row) - _ENV_FIELDS:
            raise ValueError(f"{where}: needs pattern and key, and only {sorted(_ENV_FIELDS)}: {row!r}")
        hints = row.get("hints")
        if isinstance(hints, str):
            hints = (hints,)
        if hints is not None:
            hints = tuple(str(h) for h in hints)
            if not hints or any(h != h.lower() for h in hints):
                raise ValueError(f"{where}: hints must be lower case and not empty: {hints!r}")
        unknown = [f for f in _FRAGMENT.findall(row["pattern"]) if f not in fragments]
        if unknown:
            raise ValueError(f"{where}: unknown fragment(s) {unknown} in the pattern")
        flags = row.get("flags") or {}
        if not isinstance(flags, dict):
            raise ValueError(f"{where}: flags is a mapping (ignorecase: true): {flags!r}")
        rows.append(EnvironmentRule(
            hints=hints,
            pattern=_FRAGMENT.sub(lambda m: fragments[m[1]], str(row["pattern"])),
            key=str(row["key"]),
            convert=str(row.get("convert", "version")),
            priority=int(row.get("priority", 1)),
            flags=tuple(sorted(str(k) for k, on in flags.items() if on)),
            every=bool(row.get("every", False)),
        ))
    return tuple(rows)
