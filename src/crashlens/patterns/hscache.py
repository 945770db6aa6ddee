"""Compiled hyperscan databases kept on disk, keyed by what they were compiled from.

Compiling the rule base's few hundred patterns costs 0.2–0.5 s, more than scanning a large
log; a database serialised with hyperscan.dumpb loads in milliseconds. The cache lives in
$XDG_CACHE_HOME/crashlens (or ~/.cache/crashlens); an unwritable or corrupt cache only means
compiling again.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from . import hsdb


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crashlens"


def cached_databases(kind: str, key_text: str, build: Callable[[], tuple[dict[str, Any], list[Any]]]
                     ) -> tuple[dict[str, Any], list[Any]]:
    """(meta, databases) for key_text, from the cache or from build() (then stored)."""
    hs = hsdb.hs
    assert hs is not None
    hs_version = getattr(hs, "__version__", "")
    digest = hashlib.sha256(f"{__version__}\0{hs_version}\0{key_text}".encode()).hexdigest()[:32]
    path = cache_dir() / f"{kind}-{digest}.hsdb"
    try:
        return _read(path)
    except Exception:  # noqa: BLE001 - missing, truncated or from another build: rebuild
        pass
    meta, dbs = build()
    try:
        _write(path, meta, dbs)
    except OSError:
        pass
    return meta, dbs


def _read(path: Path) -> tuple[dict[str, Any], list[Any]]:
    hs = hsdb.hs
    assert hs is not None
    data = path.read_bytes()
    (n,) = struct.unpack_from("<I", data, 0)
    meta = json.loads(data[4:4 + n])
    pos = 4 + n
    dbs = []
    for mode in meta["_modes"]:
        (size,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        db = None
        if size:
            db = hs.loadb(bytes(data[pos:pos + size]), mode)
            db.scratch = hs.Scratch(db)  # a loaded database has no scratch space yet
        dbs.append(db)
        pos += size
    if pos != len(data):
        raise ValueError("trailing bytes")
    return meta, dbs


KEEP_PER_KIND = 8  # databases kept per kind; the least recently written go first


def _prune(directory: Path, kind: str) -> None:
    files = sorted(directory.glob(f"{kind}-*.hsdb"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP_PER_KIND:]:
        try:
            old.unlink()
        except OSError:
            pass


def _write(path: Path, meta: dict[str, Any], dbs: list[Any]) -> None:
    hs = hsdb.hs
    assert hs is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    _prune(path.parent, path.name.split("-", 1)[0])
    modes = [db.mode if db is not None else 0 for db in dbs]
    head = json.dumps({**meta, "_modes": modes}).encode()
    parts = [struct.pack("<I", len(head)), head]
    for db in dbs:
        blob = hs.dumpb(db) if db is not None else b""
        parts += [struct.pack("<Q", len(blob)), blob]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(b"".join(parts))
    tmp.replace(path)
