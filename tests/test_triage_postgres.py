"""`crashlens triage --db postgresql://...` against a real PostgreSQL server.

A session fixture creates a throwaway cluster with initdb in a temporary folder and starts it
with pg_ctl, listening on a unix socket in that folder and on a free loopback port (password
authentication over TCP, trust on the socket); run as root, the server runs as the `postgres` user
(else `nobody`), since initdb refuses root. The tests skip, saying why, only where initdb/pg_ctl
cannot be found or the server does not start; .ci/run installs Debian's `postgresql` package when
it can. The missing-driver and server-down tests need no server.

Checked: the same results and history as the SQLite backend, on real bundles
(fixtures/real-runs/cases); 16 concurrent `crashlens triage` processes with overlapping bundles
into one fresh database record every bundle exactly once; 16 processes upserting overlapping
rows through the backend at once; every connection failure is one line, exit 2, no password.
"""

from __future__ import annotations

import glob
import hashlib
import json
import multiprocessing
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import ROOT

CASES = sorted(p for p in (ROOT / "fixtures" / "real-runs" / "cases").iterdir() if p.is_dir())
PASSWORD = "pg-Secret-4711"
SUPERUSER = "crashlens"


def _env() -> dict[str, str]:
    """No PG* variable of the caller's (PGHOST, PGPASSWORD...) may steer the connections."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "GITHUB_", "CI_PROJECT"))}
    return {**env, "COLUMNS": "120"}


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("crashlens", path=str(Path(sys.executable).parent)) or shutil.which("crashlens")
    cmd = [exe] if exe else [sys.executable, "-m", "crashlens"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env={**_env(), **(env or {})})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the server -----------------------------------------------------------------------------------


def _bindir() -> Path | None:
    """Where initdb and pg_ctl are: $PG_BINDIR, PATH, pg_config --bindir, Debian's and RHEL's
    versioned folders (newest first)."""
    cands: list[Path] = []
    if os.environ.get("PG_BINDIR"):
        cands.append(Path(os.environ["PG_BINDIR"]))
    if shutil.which("pg_ctl"):
        cands.append(Path(shutil.which("pg_ctl")).resolve().parent)  # type: ignore[arg-type]
    if shutil.which("pg_config"):
        try:
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30).stdout.strip()
            if out:
                cands.append(Path(out))
        except (OSError, subprocess.SubprocessError):
            pass

    def version(p: str) -> tuple[int, ...]:
        digits = "".join(c if c.isdigit() else " " for c in p).split()
        return tuple(int(d) for d in digits)

    for pattern in ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin"):
        cands += [Path(p) for p in sorted(glob.glob(pattern), key=version, reverse=True)]
    for d in cands:
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file():
            return d
    return None


def _run_as() -> dict[str, object] | None:
    """subprocess arguments that run the server unprivileged: {} when we are not root."""
    if os.geteuid() != 0:
        return {}
    for user in ("postgres", "nobody"):
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            continue
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "_uid": pw.pw_uid, "_gid": pw.pw_gid}
    return None


@dataclass
class Server:
    sockdir: str
    port: int

    def url(self, dbname: str, scheme: str = "postgresql") -> str:
        """A libpq URI with a unix socket host."""
        return f"{scheme}:///{dbname}?host={self.sockdir}&port={self.port}&user={SUPERUSER}"

    def tcp_url(self, dbname: str, password: str = PASSWORD, scheme: str = "postgresql") -> str:
        return f"{scheme}://{SUPERUSER}:{password}@127.0.0.1:{self.port}/{dbname}"

    def createdb(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}"')
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def query(self, dbname: str, sql: str) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(dbname)) as con:
            return con.execute(sql).fetchall()


@pytest.fixture(scope="session")
def pg() -> Server:
    bindir = _bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's `postgresql` "
                    "package (.ci/run does where apt-get may be used) or set PG_BINDIR")
    as_user = _run_as()
    if as_user is None:
        pytest.skip("running as root with no unprivileged user (postgres, nobody) to run initdb/pg_ctl as")
    uid, gid = as_user.pop("_uid", None), as_user.pop("_gid", None)
    base = Path(tempfile.mkdtemp(prefix="crashlens-pg-"))  # short: a socket path has ~100 bytes
    data, sock, log, pwfile = base / "data", base / "sock", base / "server.log", base / "pwfile"
    sock.mkdir()
    pwfile.write_text(PASSWORD + "\n")
    if uid is not None:
        for p in (base, sock, pwfile):
            os.chown(p, uid, gid)  # type: ignore[arg-type]
    kw = {**as_user, "cwd": str(base), "env": {**_env(), "LC_ALL": "C"}, "capture_output": True, "text": True}

    def pgrun(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bindir / args[0]), *args[1:]], timeout=timeout, **kw)  # type: ignore[call-overload]

    started = False
    try:
        r = pgrun("initdb", "-D", str(data), "-U", SUPERUSER, f"--pwfile={pwfile}", "--auth-local=trust",
                  "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
        if r.returncode != 0:
            pytest.skip(f"initdb ({bindir}) failed: {(r.stderr or r.stdout).strip()[-500:]}")
        for _ in range(3):  # a free port may be taken before the server binds it
            port = _free_port()
            opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c max_connections=100"
            r = pgrun("pg_ctl", "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start")
            if r.returncode == 0:
                started = True
                break
        if not started:
            tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
            pytest.skip(f"the PostgreSQL server ({bindir}) did not start: {(r.stderr or r.stdout).strip()[-300:]} "
                        f"{tail}")
        yield Server(str(sock), port)
    finally:
        if started:
            r = pgrun("pg_ctl", "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop")
            if r.returncode != 0:
                pgrun("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


# --- (a) the same results and history as SQLite ---------------------------------------------------


def _comparable(stdout: str) -> dict:
    doc = json.loads(stdout)
    doc.pop("database")
    return doc


def test_triage_records_and_second_run_sees_history(pg: Server, tmp_path: Path):
    url = pg.createdb("history")
    sqlite = tmp_path / "crashes.sqlite"
    first = CASES[:3]
    # the second CI run: the first case again under a new path (a recurrence), the second unchanged
    again = tmp_path / "ci-2" / first[0].name
    shutil.copytree(first[0], again)
    second = [again, first[1]]

    docs = {}
    for name, db in (("pg", url), ("sqlite", str(sqlite))):
        r1 = run("triage", "--json", "-j", "2", "--db", db, *map(str, first))
        assert r1.returncode == 0, r1.stderr
        assert json.loads(r1.stdout)["database"] == db  # a libpq URI with a socket host, printed as given
        r2 = run("triage", "--json", "-j", "2", "--db", db, *map(str, second))
        assert r2.returncode == 0, r2.stderr
        docs[name] = (_comparable(r1.stdout), _comparable(r2.stdout))
    assert docs["pg"] == docs["sqlite"]  # the backends agree, history included

    one, two = docs["pg"]
    assert all(g["history"]["seen"] == 1 and g["history"]["before"] == 0 for g in one["groups"])
    hist = {g["bundles"][0]: g["history"] for g in two["groups"]}
    assert len(hist) == 2
    assert hist[first[0].name]["seen"] == 2 and hist[first[0].name]["before"] == 1  # seen in the first run
    assert hist[first[1].name]["seen"] == 1 and hist[first[1].name]["before"] == 0  # upserted, not counted twice

    rows = pg.query("history", "SELECT path, first_analysed <= last_analysed, tool_version FROM bundles ORDER BY path")
    assert sorted(r[0] for r in rows) == sorted([*map(str, first), str(again)])
    assert all(r[1] for r in rows)
    assert pg.query("history", "SELECT key, value FROM meta") == [("schema", "crashlens.triage-db/1")]
    (seen,), = pg.query("history", "SELECT SUM(seen) FROM signatures")
    assert seen == 4

    # postgres:// over TCP with a password: the same history, and the password is never printed
    tcp = pg.tcp_url("history", scheme="postgres")
    r = run("triage", "-j", "2", "--db", tcp, str(again))
    assert r.returncode == 0, r.stderr
    assert PASSWORD not in r.stdout + r.stderr
    assert f"; database postgres://{SUPERUSER}@127.0.0.1:{pg.port}/history" in r.stdout
    assert "history: seen 2 times" in r.stdout


# --- (b) many writers at once ---------------------------------------------------------------------


def _content_hash(path: str) -> str:
    from crashlens.triage import content_hash

    return content_hash(path)


def test_16_concurrent_cli_writers_record_every_bundle_once(pg: Server):
    url = pg.createdb("writers")  # empty: the 16 writers also race to create the schema
    writers, per_writer, step = 16, 20, 5
    n = len(CASES)
    assert n >= writers * step
    sets = [[CASES[(w * step + k) % n] for k in range(per_writer)] for w in range(writers)]
    expected = {str(p) for s in sets for p in s}

    t0 = time.monotonic()
    procs = [subprocess.Popen([*_cli(), "triage", "--json", "-j", "1", "--db", url, *map(str, s)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for s in sets]
    outs = [p.communicate(timeout=280) for p in procs]
    elapsed = time.monotonic() - t0

    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert err == ""
        doc = json.loads(out)
        assert all(b["status"] == "analysed" for b in doc["bundles"])
        assert all(g["history"]["seen"] >= 1 for g in doc["groups"])
    rows = pg.query("writers", "SELECT path, content_hash, COUNT(*) OVER (PARTITION BY path) FROM bundles")
    assert len(rows) == len(expected)
    assert {r[0] for r in rows} == expected
    assert all(r[2] == 1 for r in rows)  # one row per bundle: each bundle recorded exactly once
    assert all(r[1] == _content_hash(r[0]) for r in rows)
    assert pg.query("writers", "SELECT key, value FROM meta") == [("schema", "crashlens.triage-db/1")]
    recorded = sum(len(s) for s in sets)
    print(f"\n16 concurrent `crashlens triage --db postgresql://` writers: {recorded} bundle analyses upserted, "
          f"{len(rows)} rows, {elapsed:.1f} s wall ({os.cpu_count()} CPUs)")


def _cli() -> list[str]:
    exe = shutil.which("crashlens", path=str(Path(sys.executable).parent)) or shutil.which("crashlens")
    return [exe] if exe else [sys.executable, "-m", "crashlens"]


SYNTH_BUNDLES, SYNTH_PER_WRITER = 2000, 500


def _synthetic(n: int) -> dict:
    return {"path": f"/ci/artifacts/run-{n:05d}", "name": f"run-{n:05d}", "status": "analysed",
            "content_hash": hashlib.sha256(str(n).encode()).hexdigest(), "signature": f"{n % 37:016x}",
            "signature_text": f"gpu-oom | train.py:main | crash {n % 37}", "category": "gpu-oom",
            "title": "CUDA out of memory", "confidence": 0.9, "time": f"2026-11-{1 + n % 28:02d} 03:02:11",
            "time_source": "log"}


def _writer(url: str, w: int, barrier, rounds: int) -> str:
    from crashlens.triagedb import open_db

    try:
        barrier.wait(60)
        db = open_db(url)  # all at once: the schema creation race
        try:
            mine = [_synthetic((w * 125 + k) % SYNTH_BUNDLES) for k in range(SYNTH_PER_WRITER)]
            for r in range(rounds):
                db.record(mine[r::2] + mine[:r] if r else list(reversed(mine)))  # other orders on purpose
                sigs = {b["signature"] for b in mine}
                for s in sigs:
                    assert db.history(s)["seen"] >= 1
            return "ok"
        finally:
            db.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        return f"{type(exc).__name__}: {exc}"


def test_16_concurrent_backend_writers_upsert_overlapping_rows(pg: Server):
    url = pg.createdb("upserts")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(16)
        with ctx.Pool(16) as pool:
            t0 = time.monotonic()
            results = pool.starmap(_writer, [(url, w, barrier, 3) for w in range(16)])
            elapsed = time.monotonic() - t0
    assert results == ["ok"] * 16
    (count, distinct), = pg.query("upserts", "SELECT COUNT(*), COUNT(DISTINCT (path, content_hash)) FROM bundles")
    assert count == distinct == SYNTH_BUNDLES
    (seen,), = pg.query("upserts", "SELECT SUM(seen) FROM signatures")
    assert seen == SYNTH_BUNDLES
    print(f"\n16 backend writers x 3 rounds x {SYNTH_PER_WRITER} overlapping rows: {count} rows, {elapsed:.1f} s")


# --- (c) failures are one line --------------------------------------------------------------------


def _one_line_error(r: subprocess.CompletedProcess[str], *secrets: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlens: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for s in secrets:
        assert s not in r.stderr
    return lines[0]


def test_missing_driver_is_one_line(tmp_path: Path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "psycopg.py").write_text("raise ModuleNotFoundError(\"No module named 'psycopg'\", name='psycopg')\n")
    url = f"postgresql://ci:{PASSWORD}@db.example.org:5433/crashes"
    r = run("triage", "--db", url, str(CASES[0]), env={"PYTHONPATH": str(shim)})
    line = _one_line_error(r, PASSWORD)
    assert "postgresql://ci@db.example.org:5433/crashes" in line
    assert "psycopg" in line and "crashlens[postgres]" in line


def test_unreachable_server_is_one_line():
    pytest.importorskip("psycopg", reason="the psycopg driver is not installed (pip install 'crashlens[postgres]')")
    port = _free_port()  # nothing listens there
    r = run("triage", "--db", f"postgresql://ci:{PASSWORD}@127.0.0.1:{port}/crashes", str(CASES[0]))
    line = _one_line_error(r, PASSWORD)
    assert f"postgresql://ci@127.0.0.1:{port}/crashes: cannot connect to PostgreSQL" in line
    assert "127.0.0.1" in line.split("cannot connect", 1)[1]  # libpq's reason names the server too


def test_wrong_password_and_unknown_database_are_one_line(pg: Server):
    pg.createdb("present")
    wrong = "not-" + PASSWORD
    r = run("triage", "--db", pg.tcp_url("present", password=wrong), str(CASES[0]))
    line = _one_line_error(r, wrong, PASSWORD)
    assert "password authentication failed" in line and f"127.0.0.1:{pg.port}/present" in line

    r = run("triage", "--db", pg.url("no_such_db") + f"&password={PASSWORD}", str(CASES[0]))
    line = _one_line_error(r, PASSWORD)
    assert 'database "no_such_db" does not exist' in line and "password=" not in line


def test_display_url_hides_passwords():
    from crashlens.triagedb import display_url, is_postgres

    assert display_url("postgresql://u:p%40ss@h:5432/db") == "postgresql://u@h:5432/db"
    assert display_url("postgres://u:s3cret@h1:5432,h2:5433/db?sslmode=require") == \
        "postgres://u@h1:5432,h2:5433/db?sslmode=require"
    assert display_url("postgresql:///crashes?host=/var/run/postgresql&password=s3cret") == \
        "postgresql:///crashes?host=/var/run/postgresql"
    assert display_url("postgresql://u:s3/cr@t@h/db") == "postgresql://u@h/db"  # unencoded '/' and '@'
    assert "s3cret" not in display_url("postgresql://u:s3cret@[::1/db")  # not even a valid URL
    assert display_url("postgresql://h/db?user=a&PASSWORD=x%26y&sslmode=require") == \
        "postgresql://h/db?user=a&sslmode=require"
    assert is_postgres("PostgreSQL://h/db") and is_postgres("postgres://h/db") and not is_postgres("crashes.db")


def test_unsupported_url_is_one_line():
    r = run("triage", "--db", "mysql://u:hunter2@h/db", str(CASES[0]))
    line = _one_line_error(r, "hunter2")
    assert "not a supported database URL" in line
