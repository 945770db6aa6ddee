"""The triage database (`crashlens triage --db`): one small interface, two backends.

    open_db(spec) -> TriageDB        an SQLite file path, or a postgresql:// / postgres:// URL
    db.record(bundles)               upsert this triage's analysed bundles, in one transaction
    db.history(signature, current)   what the database knows of a signature
    db.close()
    db.name                          what to print for it (a URL without its password)

Both backends keep the same schema (docs/ci.md "Triage database") and the same key: one row per
bundle, upserted by (path, content_hash), so analysing the same bundle again updates its row
(`first_analysed` stays) and a signature's row count is how many distinct bundles showed it.

PostgreSQL (the psycopg 3 driver, `pip install 'crashlens[postgres]'`) is for many writers at once,
say one `crashlens triage` per node: the schema is created under a transaction-scoped advisory
lock (CREATE ... IF NOT EXISTS alone races on pg_type), each triage's rows go in one transaction in
key order (concurrent upserts of overlapping bundles lock rows in the same order: no deadlock),
and a transaction the server rolls back (deadlock, serialization failure) or a connection lost
since the analysis began is retried: every statement is idempotent. Every failure is one line
(DatabaseError) that names the server and never holds a password from the URL.
"""

from __future__ import annotations

import datetime as _dt
import random
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import unquote

from . import __version__
from .errors import CrashlensError

DB_SCHEMA = "crashlens.triage-db/1"

DB_DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bundles (
    path           TEXT NOT NULL,   -- absolute path of the bundle when it was analysed
    content_hash   TEXT NOT NULL,   -- sha256 of its files (names, sizes, contents)
    name           TEXT NOT NULL,   -- folder or archive name (run-1234)
    signature      TEXT NOT NULL,   -- 16 hex digits (crashlens.signature)
    signature_text TEXT NOT NULL,
    category       TEXT NOT NULL,   -- top cause, or 'unrecognised'
    title          TEXT,
    confidence     REAL,
    crash_time     TEXT,            -- 'YYYY-MM-DD HH:MM:SS': latest log timestamp, else newest mtime (UTC)
    time_source    TEXT,            -- 'log' or 'mtime (UTC)'
    first_analysed TEXT NOT NULL,   -- UTC, when this row was written first
    last_analysed  TEXT NOT NULL,   -- UTC, when it was written last
    tool_version   TEXT NOT NULL,
    PRIMARY KEY (path, content_hash)
);
CREATE INDEX IF NOT EXISTS bundles_by_signature ON bundles (signature, crash_time);
CREATE VIEW IF NOT EXISTS signatures AS
    SELECT signature, MAX(signature_text) AS text, MAX(category) AS category, COUNT(*) AS seen,
           MIN(crash_time) AS first_seen, MAX(crash_time) AS last_seen
    FROM bundles GROUP BY signature;
"""

# The same schema in PostgreSQL: texts compare byte by byte (COLLATE "C", as SQLite's BINARY),
# REAL is SQLite's 8-byte float (DOUBLE PRECISION), NULL crash times sort first (as in SQLite).
PG_DDL = (
    """CREATE TABLE IF NOT EXISTS meta (
        key   TEXT COLLATE "C" PRIMARY KEY,
        value TEXT COLLATE "C" NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS bundles (
        path           TEXT COLLATE "C" NOT NULL,
        content_hash   TEXT COLLATE "C" NOT NULL,
        name           TEXT COLLATE "C" NOT NULL,
        signature      TEXT COLLATE "C" NOT NULL,
        signature_text TEXT COLLATE "C" NOT NULL,
        category       TEXT COLLATE "C" NOT NULL,
        title          TEXT COLLATE "C",
        confidence     DOUBLE PRECISION,
        crash_time     TEXT COLLATE "C",
        time_source    TEXT COLLATE "C",
        first_analysed TEXT COLLATE "C" NOT NULL,
        last_analysed  TEXT COLLATE "C" NOT NULL,
        tool_version   TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (path, content_hash))""",
    "CREATE INDEX IF NOT EXISTS bundles_by_signature ON bundles (signature, crash_time)",
    """CREATE OR REPLACE VIEW signatures AS
        SELECT signature, MAX(signature_text) AS text, MAX(category) AS category, COUNT(*) AS seen,
               MIN(crash_time) AS first_seen, MAX(crash_time) AS last_seen
        FROM bundles GROUP BY signature""",
)
PG_LOCK_KEY = 0x63726173686C656E  # pg_advisory_xact_lock key of the schema creation ('crashlen')
PG_RETRIES = 8

_COLUMNS = ("path, content_hash, name, signature, signature_text, category, title, confidence, "
            "crash_time, time_source, first_analysed, last_analysed, tool_version")
_UPSERT = f"""
    INSERT INTO bundles ({_COLUMNS}) VALUES ({{marks}})
    ON CONFLICT (path, content_hash) DO UPDATE SET
        name = excluded.name, signature = excluded.signature, signature_text = excluded.signature_text,
        category = excluded.category, title = excluded.title, confidence = excluded.confidence,
        crash_time = excluded.crash_time, time_source = excluded.time_source,
        last_analysed = excluded.last_analysed, tool_version = excluded.tool_version"""
_HISTORY = ("SELECT path, content_hash, name, crash_time FROM bundles WHERE signature = {mark} "
            "ORDER BY crash_time{nulls}, last_analysed")

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class DatabaseError(CrashlensError):
    """The --db database cannot be used: one line naming it (never its password), exit code 2."""


# --- the interface --------------------------------------------------------------------------------


class TriageDB:
    """What triage() needs of a database. A backend implements _upsert and _signature_rows."""

    name: str

    def record(self, bundles: Iterable[dict[str, Any]]) -> None:
        """Upsert the analysed bundles (one row per (path, content_hash)) in one transaction."""
        now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        rows = {(b["path"], b["content_hash"]): (
                    b["path"], b["content_hash"], b["name"], b["signature"], b["signature_text"], b["category"],
                    b.get("title"), b.get("confidence"), b.get("time"), b.get("time_source"), now, now, __version__)
                for b in bundles if b["status"] == "analysed"}
        self._upsert([rows[k] for k in sorted(rows)])  # key order: concurrent writers lock rows alike

    def history(self, sig: str, current: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
        """What the database knows of a signature: seen (bundles), first/last seen, the last bundle,
        and how many of those bundles are not among `current` ((path, content_hash) of this run)."""
        rows = self._signature_rows(sig)
        cur = set(current)
        if not rows:
            return {"seen": 0, "before": 0, "first_seen": None, "last_seen": None, "last_bundle": None}
        times = [r[3] for r in rows if r[3]]
        return {"seen": len(rows), "before": sum(1 for r in rows if (r[0], r[1]) not in cur),
                "first_seen": min(times) if times else None, "last_seen": max(times) if times else None,
                "last_bundle": rows[-1][2]}

    def close(self) -> None:
        raise NotImplementedError

    def _upsert(self, rows: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    def _signature_rows(self, sig: str) -> list[tuple[Any, ...]]:
        """(path, content_hash, name, crash_time) of a signature, by crash time (none first)."""
        raise NotImplementedError

    def __enter__(self) -> "TriageDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_postgres(spec: str) -> bool:
    return spec.lower().startswith(("postgresql://", "postgres://"))


def open_db(spec: str) -> TriageDB:
    """The database of --db: PostgreSQL for a postgresql:// or postgres:// URL, else an SQLite file.
    Creates the schema when missing; raises DatabaseError (one line) when it cannot be used."""
    if is_postgres(spec):
        return PostgresDB(spec)
    if _URL.match(spec):
        raise DatabaseError(f"{display_url(spec)}: not a supported database URL "
                            "(an SQLite file path or postgresql://user@host:port/dbname)")
    return SQLiteDB(spec)


# --- SQLite ---------------------------------------------------------------------------------------


class SQLiteDB(TriageDB):
    def __init__(self, path: str) -> None:
        self.name = path
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(f"{path}: cannot create its folder: {exc.strerror or exc}") from exc
        try:
            con = sqlite3.connect(path, timeout=30)
        except sqlite3.Error as exc:
            raise DatabaseError(f"{path}: not a usable SQLite database: {exc}") from exc
        try:
            con.executescript(DB_DDL)
            row = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (DB_SCHEMA,))
            elif row[0] != DB_SCHEMA:
                raise DatabaseError(f"{path}: a {row[0]} database; this crashlens writes {DB_SCHEMA}")
            con.commit()
        except sqlite3.DatabaseError as exc:
            con.close()
            raise DatabaseError(f"{path}: not a usable SQLite database: {exc}") from exc
        except DatabaseError:
            con.close()
            raise
        self.con = con

    def _upsert(self, rows: list[tuple[Any, ...]]) -> None:
        try:
            with self.con:
                self.con.executemany(_UPSERT.format(marks=", ".join("?" * 13)), rows)
        except sqlite3.Error as exc:
            raise DatabaseError(f"{self.name}: cannot record the bundles: {exc}") from exc

    def _signature_rows(self, sig: str) -> list[tuple[Any, ...]]:
        try:
            return self.con.execute(_HISTORY.format(mark="?", nulls=""), (sig,)).fetchall()
        except sqlite3.Error as exc:
            raise DatabaseError(f"{self.name}: cannot read the history: {exc}") from exc

    def close(self) -> None:
        self.con.close()


# --- PostgreSQL -----------------------------------------------------------------------------------


def _split_url(url: str) -> tuple[str, str | None, str, str]:
    """scheme://, user info (None without '@'), the rest before '?', the query (after '?', with any
    #fragment). The user info ends at the last '@' before the query, so that a password with an
    unencoded '/' or '@' is still taken for one."""
    head, _, query = url.partition("?")
    m = _URL.match(head)
    if not m:
        return "", None, head, query
    scheme, rest = head[:m.end()], head[m.end():]
    if "@" not in rest:
        return scheme, None, rest, query
    at = rest.rindex("@")
    return scheme, rest[:at], rest[at:], query


def _url_secrets(url: str) -> list[str]:
    """The passwords a URL holds (user info and password= parameters), raw and decoded."""
    _, userinfo, _, query = _split_url(url)
    found = [userinfo.split(":", 1)[1]] if userinfo and ":" in userinfo else []
    for part in query.split("#", 1)[0].split("&"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "password" and value:
            found.append(value)
    return sorted({s for f in found for s in (f, unquote(f)) if s}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    for secret in _url_secrets(url):
        text = text.replace(secret, "***")
    return text


def display_url(url: str) -> str:
    """The URL as printed: as given, less its password (user info or password= parameter)."""
    scheme, userinfo, rest, query = _split_url(url)
    query, hash_, fragment = query.partition("#")
    kept = [p for p in query.split("&") if p and p.partition("=")[0].strip().lower() != "password"]
    out = (scheme + (userinfo.split(":", 1)[0] if userinfo is not None else "") + rest
           + ("?" + "&".join(kept) if kept else "") + hash_ + fragment)
    return scrub(out, url)


def _one_line(exc: BaseException, url: str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return scrub(text, url)


class PostgresDB(TriageDB):
    def __init__(self, url: str) -> None:
        self.url = url
        self.name = display_url(url)
        try:
            import psycopg
        except ImportError:
            raise DatabaseError(f"{self.name}: PostgreSQL needs the psycopg driver, which is not installed: "
                                "pip install 'crashlens[postgres]'") from None
        self._pg = psycopg
        self._con: Any = None
        self._connect()
        self._transaction(self._create_schema, "cannot create the schema")

    def _connect(self) -> None:
        pg = self._pg
        opts: dict[str, Any] = {"autocommit": False}
        if "application_name" not in self.url:
            opts["application_name"] = "crashlens"
        if "connect_timeout" not in self.url:
            opts["connect_timeout"] = 15
        try:
            self._con = pg.connect(self.url, **opts)
        except pg.Error as exc:
            raise DatabaseError(f"{self.name}: cannot connect to PostgreSQL: {_one_line(exc, self.url)}") from None

    def _transaction(self, work: Callable[[Any], Any], what: str) -> Any:
        """work(cursor) in one transaction; retried when the server rolled it back (deadlock,
        serialization failure, a unique violation of a concurrent DDL) or the connection dropped."""
        pg = self._pg
        retry = (pg.errors.TransactionRollback, pg.errors.UniqueViolation)
        for attempt in range(PG_RETRIES):
            if self._con is None or self._con.closed:
                self._connect()
            try:
                with self._con.transaction(), self._con.cursor() as cur:
                    return work(cur)
            except retry as exc:
                failure = exc
            except pg.Error as exc:
                if not self._con.closed and not self._con.broken:
                    raise DatabaseError(f"{self.name}: {what}: {_one_line(exc, self.url)}") from None
                failure = exc  # the connection went away (idle through a long analysis): again, anew
                self._close_quietly()
            if attempt + 1 < PG_RETRIES:
                time.sleep(min(2.0, 0.02 * 2 ** attempt) * (0.5 + random.random()))
        raise DatabaseError(f"{self.name}: {what}: {_one_line(failure, self.url)} "
                            f"(after {PG_RETRIES} attempts)")

    def _create_schema(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (PG_LOCK_KEY,))
        cur.execute("SELECT to_regclass('meta'), to_regclass('bundles'), to_regclass('bundles_by_signature'), "
                    "to_regclass('signatures')")
        if None in cur.fetchone():
            for stmt in PG_DDL:
                cur.execute(stmt)
        cur.execute("INSERT INTO meta (key, value) VALUES ('schema', %s) ON CONFLICT (key) DO NOTHING", (DB_SCHEMA,))
        cur.execute("SELECT value FROM meta WHERE key = 'schema'")
        value = cur.fetchone()[0]
        if value != DB_SCHEMA:
            raise DatabaseError(f"{self.name}: a {value} database; this crashlens writes {DB_SCHEMA}")

    def _upsert(self, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            sql = _UPSERT.format(marks=", ".join(["%s"] * 13))
            self._transaction(lambda cur: cur.executemany(sql, rows), "cannot record the bundles")

    def _signature_rows(self, sig: str) -> list[tuple[Any, ...]]:
        sql = _HISTORY.format(mark="%s", nulls=" NULLS FIRST")

        def read(cur: Any) -> list[tuple[Any, ...]]:
            cur.execute(sql, (sig,))
            return cur.fetchall()

        return self._transaction(read, "cannot read the history")

    def _close_quietly(self) -> None:
        try:
            if self._con is not None:
                self._con.close()
        except Exception:  # noqa: BLE001 - a dead connection has nothing left to close
            pass
        self._con = None

    def close(self) -> None:
        self._close_quietly()
