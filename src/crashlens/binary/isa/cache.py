"""The census cache: one SQLite database under $XDG_CACHE_HOME/crashlens (or ~/.cache), keyed by
the GNU build-id and file size (path, size and mtime without a build-id) plus everything that
changes the result (crashlens and iced versions, the census format, data/isa.yaml's digest, the
number of first addresses). A corrupt, locked or unwritable cache is ignored: recomputed, never
an error."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import fields
from pathlib import Path
from typing import Any

import iced_x86

from ... import __version__
from ..elf import ElfFile
from .results import ExtensionUse, FunctionUse, IsaCensus
from .tables import tables

__all__ = ["cache_dir", "cache_key", "cache_get", "cache_put", "from_cache"]

CENSUS_FORMAT = 1


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crashlens"


def cache_key(elf: ElfFile, bid: str | None, first_n: int) -> str:
    version = f"{__version__}/{CENSUS_FORMAT}/{getattr(iced_x86, '__version__', '')}/{tables().digest}/{first_n}"
    if bid:
        ident = f"build-id:{bid}:{elf.size}"
    else:
        try:
            st = os.stat(elf.path)
            ident = f"file:{os.path.realpath(elf.path)}:{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            return ""
    return f"{ident}|{version}"


def _connect() -> sqlite3.Connection:
    path = cache_dir() / "isa.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(str(path), timeout=0.5)
    con.execute("CREATE TABLE IF NOT EXISTS isa_census (key TEXT NOT NULL, part TEXT NOT NULL, "
                "json TEXT NOT NULL, PRIMARY KEY (key, part))")
    return con


def cache_get(key: str) -> dict[str, Any] | None:
    if not key:
        return None
    try:
        con = _connect()
        try:
            rows = con.execute("SELECT part, json FROM isa_census WHERE key = ?", (key,)).fetchall()
        finally:
            con.close()
        if not rows:
            return None
        parts = {p: json.loads(j) for p, j in rows}
        head = parts.pop("")
        head["extensions"] = [parts[n] for n in head["order"]]
        return head
    except Exception:  # noqa: BLE001 - corrupt, locked, unreadable, half-written: recompute
        return None


def cache_put(key: str, census: IsaCensus) -> None:
    if not key:
        return
    try:
        head = {f.name: getattr(census, f.name) for f in fields(census) if f.name != "extensions"}
        head["order"] = list(census.extensions)
        rows = [(key, "", json.dumps(head))]
        for name, e in census.extensions.items():
            row = {f.name: getattr(e, f.name) for f in fields(e)}  # FunctionUse rows: JSON arrays
            rows.append((key, name, json.dumps(row)))
        con = _connect()
        try:
            with con:
                con.execute("DELETE FROM isa_census WHERE key = ?", (key,))
                con.executemany("INSERT INTO isa_census (key, part, json) VALUES (?, ?, ?)", rows)
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - read-only home, locked or corrupt database: no cache
        pass


def from_cache(d: dict[str, Any], path: str, seconds: float) -> IsaCensus:
    exts = {}
    for e in d["extensions"]:
        e["cpuinfo"] = tuple(e["cpuinfo"])
        e["first_addresses"] = tuple(e["first_addresses"])
        e["functions"] = tuple(map(FunctionUse._make, e["functions"]))
        exts[e["name"]] = ExtensionUse(**e)
    keep = {k: v for k, v in d.items() if k not in ("extensions", "order")}
    for k in ("baseline", "dispatched", "undecodable_addresses", "function_sources", "notes"):
        keep[k] = tuple(keep[k])
    keep.update(path=path, seconds=seconds, cached=True, extensions=exts)
    keep["timings"] = dict(keep.get("timings") or {})
    return IsaCensus(**keep)
