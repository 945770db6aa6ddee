"""Knowledge tables shipped as package data (src/crashlens/data/*.yaml), each loaded once.

    data(name) -> the parsed YAML of data/<name>          (cached; any stage may read it)
    abort_frames() -> AbortFrames(functions, runtime_modules)       data/abort_frames.yaml
    category_notes(category) -> CategoryNotes(async_cuda, testing)  data/categories.yaml
    async_cuda_categories() -> frozenset[str]                       data/categories.yaml
    async_cuda_testing() -> tuple[str, ...]                         data/categories.yaml

A neutral module: it imports nothing of crashlens, so parsers, binary, engine, signature and the
renderers can all read the same tables. A category that data/categories.yaml does not name (the
taxonomy grows independently) has no notes: not async, no testing steps of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@cache
def data(name: str) -> Any:
    """The parsed YAML file data/<name> (an empty file is {})."""
    import yaml

    return yaml.safe_load((resources.files("crashlens") / "data" / name).read_text(encoding="utf-8")) or {}


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
