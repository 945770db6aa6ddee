"""Many crash bundles -> groups of the same crash, the way apport, ABRT and Sentry group duplicates.

    find_bundles(paths) -> (bundles, problems)     what counts as a bundle (below)
    analyse_bundle(path, rules_dir) -> dict        one bundle, in a worker process
    triage(paths, jobs=None, db=None) -> Triage    analyse in a process pool, group by signature
    render_text(t) / render_json(t)

A crash bundle is a folder or an archive (or a compressed file) that holds at least one input
`crashlens analyze` can read (a text log, an ELF core, a library). For each DIR argument:
- an archive or compressed file is one bundle;
- a folder with files of its own (other than archives and compressed files) is one bundle,
  its subfolders included, as `analyze` would read it;
- a folder without such files holds bundles: each immediate subfolder and each archive in it
  (the usual artifact layout: artifacts/run-1233/, artifacts/run-1234.tar.gz, ...).
Hidden entries (.name) are ignored. A bundle without a readable input is listed as skipped; a
bundle that fails to analyse is listed with its error; neither stops the others.

When a bundle crashed (its time): the latest timestamp found in its logs (ISO 8601
`2026-11-20 03:02:11`, `2026/11/20 03:02:11`, dmesg's `[Fri Nov 20 03:02:11 2026]`), written as
found (time zone unknown); else the newest mtime of its files, in UTC.

--db FILE keeps every analysed bundle in SQLite, --db postgresql://user@host:port/dbname in
PostgreSQL (triagedb.py; docs/ci.md "Triage database"), keyed by the bundle's absolute path and
content hash: analysing the same bundle again updates its row,
a new run (another path, or the same path with other content) adds one, so a signature's row
count is how many distinct crash bundles showed it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import stat
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import regex as re

from . import __version__
from .redaction import Redactor
from .triagedb import DB_SCHEMA, DatabaseError, TriageDB, open_db  # noqa: F401 - the database part

SCHEMA = "crashlens.triage/1"
HASH_FULL_BELOW = 64 << 20  # files above: size + first and last HASH_EDGE bytes
HASH_EDGE = 4 << 20
TIME_SCAN = 256 << 10  # bytes read from the head and the tail of each log for timestamps

_ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".tbz2", ".txz", ".tzst", ".gz", ".bz2", ".xz", ".zst", ".lz4",
                     ".7z")


@dataclass(frozen=True)
class Bundle:
    path: str  # as found (absolute)
    name: str  # what humans call it: the folder or archive name (run-1234)


@dataclass
class Group:
    signature: str
    text: str
    bundles: list[dict[str, Any]] = field(default_factory=list)
    history: dict[str, Any] | None = None

    @property
    def count(self) -> int:
        return len(self.bundles)

    @property
    def first_seen(self) -> str | None:
        times = [b["time"] for b in self.bundles if b.get("time")]
        return min(times) if times else None

    @property
    def last_seen(self) -> str | None:
        times = [b["time"] for b in self.bundles if b.get("time")]
        return max(times) if times else None

    @property
    def example(self) -> dict[str, Any]:
        """The earliest bundle (by crash time, then name)."""
        return min(self.bundles, key=lambda b: (b.get("time") or "9999", b["name"]))

    @property
    def categories(self) -> list[str]:
        out: list[str] = []
        for b in self.bundles:
            for c in b.get("categories", ()):
                if c not in out:
                    out.append(c)
        return out

    def to_json(self) -> dict[str, Any]:
        ex = self.example
        return {"signature": self.signature, "text": self.text, "count": self.count,
                "first_seen": self.first_seen, "last_seen": self.last_seen, "categories": self.categories,
                "title": ex.get("title"), "example": {"name": ex["name"], "path": ex["path"]},
                "bundles": [b["name"] for b in sorted(self.bundles, key=lambda b: (b.get("time") or "", b["name"]))],
                "history": self.history}


@dataclass
class Triage:
    bundles: list[dict[str, Any]]
    groups: list[Group]
    problems: list[str]  # arguments that were not usable
    db: str | None = None

    @property
    def analysed(self) -> list[dict[str, Any]]:
        return [b for b in self.bundles if b["status"] == "analysed"]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [b for b in self.bundles if b["status"] == "failed"]

    @property
    def skipped(self) -> list[dict[str, Any]]:
        return [b for b in self.bundles if b["status"] == "skipped"]


# --- bundles --------------------------------------------------------------------------------------


def _is_archive(p: Path) -> bool:
    name = p.name.lower()
    if name.endswith(_ARCHIVE_SUFFIXES):
        return True
    try:
        from .inputs.detect import detect_codec, detect_container

        with open(p, "rb") as fh:
            head = fh.read(1024)
        return bool(detect_codec(head) or detect_container(head))
    except (OSError, ImportError):
        return False


def find_bundles(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Bundle], list[str]]:
    bundles: list[Bundle] = []
    problems: list[str] = []
    for arg in paths:
        p = Path(arg)
        if not p.exists():
            problems.append(f"{arg}: no such file or directory")
            continue
        full = p.resolve()
        if p.is_file():
            bundles.append(Bundle(str(full), full.name))
            continue
        try:
            entries = sorted(e for e in p.iterdir() if not e.name.startswith("."))
        except OSError as exc:
            problems.append(f"{arg}: {exc.strerror or exc}")
            continue
        loose = [e for e in entries if e.is_file() and not _is_archive(e)]
        if loose or not entries:
            bundles.append(Bundle(str(full), full.name))
            continue
        for e in entries:
            if e.is_dir() or (e.is_file() and _is_archive(e)):
                bundles.append(Bundle(str(e.resolve()), e.name))
    seen: set[str] = set()
    unique = [b for b in bundles if not (b.path in seen or seen.add(b.path))]  # type: ignore[func-returns-value]
    return unique, problems


def _files(path: str) -> list[Path]:
    p = Path(path)
    if p.is_file():
        return [p]
    out: list[Path] = []
    for root, dirs, files in os.walk(p):
        dirs.sort()
        out.extend(Path(root, f) for f in sorted(files))
    return out


def content_hash(path: str) -> str:
    """sha256 over every file of the bundle: relative name, size and content (files over
    HASH_FULL_BELOW: their first and last HASH_EDGE bytes). Inside a folder a symlink counts
    by its target's name and a FIFO or device by its kind: neither is opened."""
    h = hashlib.sha256()
    base = Path(path)
    for f in _files(path):
        try:
            rel = f.name if base.is_file() else f.relative_to(base).as_posix()
            lst = f.lstat()
            if not base.is_file() and not stat.S_ISREG(lst.st_mode):
                what = os.readlink(f) if stat.S_ISLNK(lst.st_mode) else f"mode {stat.S_IFMT(lst.st_mode):o}"
                h.update(f"{rel}\0->{what}\0".encode("utf-8", "surrogateescape"))
                continue
            fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO given by name must not block
            st = os.fstat(fd)
            h.update(f"{rel}\0{st.st_size}\0".encode("utf-8", "surrogateescape"))
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                h.update(b"\0not a regular file\0")
                continue
            with open(fd, "rb") as fh:
                if st.st_size <= HASH_FULL_BELOW:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                else:
                    h.update(fh.read(HASH_EDGE))
                    fh.seek(st.st_size - HASH_EDGE)
                    h.update(fh.read(HASH_EDGE))
        except OSError:
            h.update(b"\0unreadable\0")
    return h.hexdigest()


def newest_mtime(path: str) -> str | None:
    times = []
    for f in _files(path):
        try:
            times.append(f.stat().st_mtime)
        except OSError:
            pass
    if not times:
        return None
    return _dt.datetime.fromtimestamp(max(times), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
_ISO = re.compile(rb"(?<!\d)((?:19|20)\d\d)[-/](\d\d)[-/](\d\d)[ T](\d\d):(\d\d):(\d\d)(?!\d)")
_CTIME = re.compile(rb"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) "
                    rb"(\d\d):(\d\d):(\d\d) ((?:19|20)\d\d)\b")


def timestamps(data: bytes) -> list[str]:
    out = []
    for m in _ISO.finditer(data):
        y, mo, d, hh, mm, ss = (int(x) for x in m.groups())
        if 1 <= mo <= 12 and 1 <= d <= 31 and hh < 24 and mm < 60 and ss < 61:
            out.append(f"{y:04d}-{mo:02d}-{d:02d} {hh:02d}:{mm:02d}:{ss:02d}")
    for m in _CTIME.finditer(data):
        mon, d, hh, mm, ss, y = m.groups()
        out.append(f"{int(y):04d}-{_MONTHS[mon.decode()]:02d}-{int(d):02d} {int(hh):02d}:{int(mm):02d}:{int(ss):02d}")
    return out


def log_times(inputs: Sequence[Any]) -> list[str]:
    """Timestamps from the head and the tail of every text input."""
    found: list[str] = []
    for inp in inputs:
        if inp.kind != "text":
            continue
        try:
            with inp.open() as fh:
                head = fh.read(TIME_SCAN)
                tail = b""
                size = inp.size or 0
                if size > 2 * TIME_SCAN:
                    try:
                        fh.seek(size - TIME_SCAN)
                        tail = fh.read(TIME_SCAN)
                    except (OSError, ValueError):  # io.UnsupportedOperation: a decompressing stream
                        tail = b""
        except OSError:
            continue
        found += timestamps(head) + timestamps(tail)
    return found


def analyse_bundle(path: str, rules_dir: str | None = None) -> dict[str, Any]:
    """Analyse one bundle (runs in a worker process): a plain dict, picklable."""
    name = Path(path).name
    out: dict[str, Any] = {"path": path, "name": name, "status": "failed"}
    try:
        from .pipeline import Options, analyze_inputs
        from .inputs import collect_inputs
        from .signature import signature

        out["content_hash"] = content_hash(path)
        inputs, notes = collect_inputs([path])
        readable = [i for i in inputs if i.kind in ("text", "elf", "elf-core")]
        if not readable:
            out.update(status="skipped", error="not a crash bundle: no readable input"
                       + (f" ({notes[0]})" if notes else ""))
            return out
        a = analyze_inputs(inputs, notes, Options(rules_dir=Path(rules_dir) if rules_dir else None))
        sig = signature(a)
        times = log_times(readable)
        top = a.causes[0] if a.causes else None
        red = Redactor()  # what is printed and kept in the database holds no secret
        red.learn_inputs(readable)
        out.update(
            status="analysed", signature=sig.id, signature_text=red(sig.text),
            category=top.category if top else "unrecognised", title=top.title if top else None,
            confidence=top.confidence if top else None,
            categories=[c.category for c in a.causes if not c.secondary] or ["unrecognised"],
            primary_error=red(a.primary_error.text) if a.primary_error else None,
            inputs=len(readable),
        )
        if times:
            out.update(time=max(times), time_source="log", first_log_time=min(times))
        else:
            out.update(time=newest_mtime(path), time_source="mtime (UTC)")
    except Exception as exc:  # noqa: BLE001 - one bad bundle must not stop a triage
        out.update(status="failed", error=Redactor().redact(f"{type(exc).__name__}: {exc}"))
    return out


# --- the pool -------------------------------------------------------------------------------------


def _run_pool(bundles: Sequence[Bundle], jobs: int, rules_dir: str | None) -> list[dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    retry: list[Bundle] = []
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(bundles)))) as pool:
        futures: list[tuple[Bundle, Future]] = [(b, pool.submit(analyse_bundle, b.path, rules_dir)) for b in bundles]
        for b, fut in futures:
            try:
                results[b.path] = fut.result()
            except BrokenProcessPool:
                retry.append(b)
            except Exception as exc:  # noqa: BLE001
                results[b.path] = {"path": b.path, "name": b.name, "status": "failed",
                                   "error": f"{type(exc).__name__}: {exc}"}
    for b in retry:  # a worker died (a native crash in a parser): each alone, to find the culprit
        try:
            with ProcessPoolExecutor(max_workers=1) as pool:
                results[b.path] = pool.submit(analyse_bundle, b.path, rules_dir).result()
        except BrokenProcessPool:
            results[b.path] = {"path": b.path, "name": b.name, "status": "failed",
                               "error": "the analysis process died (a crash in crashlens: please report it)"}
    for b in bundles:
        results[b.path]["name"] = b.name
    return [results[b.path] for b in bundles]


def group(bundles: Iterable[dict[str, Any]]) -> list[Group]:
    groups: dict[str, Group] = {}
    for b in bundles:
        if b["status"] != "analysed":
            continue
        g = groups.setdefault(b["signature"], Group(b["signature"], b["signature_text"]))
        g.bundles.append(b)
    return sorted(groups.values(), key=lambda g: (-g.count, _neg(g.last_seen or ""), g.signature))


def _neg(s: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in s)


# --- the whole triage -----------------------------------------------------------------------------


def triage(paths: Sequence[str | os.PathLike[str]], jobs: int | None = None, db: str | None = None,
           rules_dir: str | None = None) -> Triage:
    bundles, problems = find_bundles(paths)
    store: TriageDB | None = open_db(db) if db else None  # a bad --db is a usage error before any work
    try:
        results = _run_pool(bundles, jobs or os.cpu_count() or 1, rules_dir) if bundles else []
        groups = group(results)
        if store is not None:
            store.record(results)
            for g in groups:
                g.history = store.history(g.signature, [(b["path"], b["content_hash"]) for b in g.bundles])
    finally:
        if store is not None:
            store.close()
    return Triage(results, groups, problems, store.name if store is not None else None)


def history_line(h: dict[str, Any]) -> str:
    if not h or not h.get("seen"):
        return ""
    since = (h.get("first_seen") or "")[:10]
    if not h.get("before"):
        return f"new: first seen in this triage ({h['seen']} bundle{'s' if h['seen'] != 1 else ''})"
    return (f"seen {h['seen']} time{'s' if h['seen'] != 1 else ''}" + (f" since {since}" if since else "")
            + f", last in {h['last_bundle']} ({h['before']} before this triage)")


def render_text(t: Triage) -> str:
    n_ok, n_fail, n_skip = len(t.analysed), len(t.failed), len(t.skipped)
    out = [f"crashlens triage: {len(t.bundles)} bundle{'s' if len(t.bundles) != 1 else ''}, "
           f"{len(t.groups)} signature{'s' if len(t.groups) != 1 else ''} "
           f"({n_ok} analysed, {n_fail} failed, {n_skip} skipped)"
           + (f"; database {t.db}" if t.db else ""), ""]
    for g in t.groups:
        out.append(f"{g.count:>4}x  {g.signature}  {g.text}")
        times = f"first {g.first_seen or '?'}, last {g.last_seen or '?'}"
        out.append(f"       {times}; example {g.example['name']} ({g.example['path']})")
        out.append(f"       bundles: {', '.join(b for b in g.to_json()['bundles'])}")
        if len(g.categories) > 1 or g.categories[0] not in g.text:
            out.append(f"       categories: {', '.join(g.categories)}")
        h = history_line(g.history or {})
        if h:
            out.append(f"       history: {h}")
        out.append("")
    if t.failed:
        out.append("Failed to analyse:")
        out += [f"  {b['name']}: {b.get('error')}" for b in t.failed] + [""]
    if t.skipped:
        out.append("Skipped:")
        out += [f"  {b['name']}: {b.get('error')}" for b in t.skipped] + [""]
    return "\n".join(out).rstrip() + "\n"


def to_dict(t: Triage) -> dict[str, Any]:
    keys = ("name", "path", "status", "signature", "signature_text", "category", "title", "confidence",
            "categories", "time", "time_source", "content_hash", "error")
    return {"schema": SCHEMA, "tool": {"name": "crashlens", "version": __version__},
            "database": t.db,
            "groups": [g.to_json() for g in t.groups],
            "bundles": [{k: b.get(k) for k in keys} for b in t.bundles],
            "problems": list(t.problems)}


def render_json(t: Triage) -> str:
    return json.dumps(to_dict(t), indent=2, ensure_ascii=False)
