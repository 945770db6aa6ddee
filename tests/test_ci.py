"""CI outputs end to end from the CLI: GitHub step summary and workflow commands, JUnit XML,
GitLab Code Quality, --fail-on exit codes, triage grouping and its database."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from crashlens.report.ci import escape_data, escape_property, workflow_command

from .conftest import ROOT
from .test_signature import ILLEGAL_ADDRESS_LOG, OOM_LOG, RUN_A, RUN_B

EXAMPLE = ROOT / "examples" / "seed-crash"


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("crashlens", path=str(Path(sys.executable).parent)) or shutil.which("crashlens")
    cmd = [exe] if exe else [sys.executable, "-m", "crashlens"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_PROJECT"))}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**base, "COLUMNS": "120", **(env or {})})


def _redaction_available() -> bool:
    try:
        from crashlens.report import redact  # noqa: F401
    except ImportError:
        return False
    return True


# --- workflow commands ---------------------------------------------------------------------------


def test_escaping_rules():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = workflow_command("error", "50%: bad\nline", file="dir/a,b.log", line=3, title="x: y, z")
    assert line == "::error file=dir/a%2Cb.log,line=3,title=x%3A y%2C z::50%25: bad%0Aline"
    assert workflow_command("notice", "m", file=None, line=None) == "::notice::m"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout with a training script and the log of its crash (a file name with a comma)."""
    ws = tmp_path / "ws"
    (ws / "logs").mkdir(parents=True)
    (ws / "train.py").write_text("\n" * 130)
    log = OOM_LOG.format(**{**RUN_A, "tmp": str(ws)})
    log = log.replace("INFO starting job", "INFO 100% ready, starting job")
    log += "::set-output name=pwned::yes\n"  # a log line that looks like a workflow command
    # a secret in the primary error line: it reaches every output unless redacted
    log = log.replace("Object at", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF12 Object at")
    (ws / "logs" / "rank,3.log").write_text(log)
    return ws


def test_github_annotations_summary_and_outputs(repo: Path):
    summary = repo.parent / "summary.md"
    summary.write_text("## earlier step\n")
    outputs = repo.parent / "outputs.txt"
    r = run("analyze", "--github", "logs", cwd=repo,
            env={"GITHUB_WORKSPACE": str(repo), "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    err = [ln for ln in lines if ln.startswith("::error ")]
    assert len(err) == 1
    # the primary error: its log line, relative to the workspace, properties escaped
    assert err[0].startswith("::error file=logs/rank%2C3.log,line=12,title=crashlens%3A GPU memory exhausted::")
    assert "%0Asignature " in err[0] and "\n" not in err[0]
    # the failing call and the code path in the repository
    assert "::warning file=train.py,line=61,title=crashlens%3A failing call::training_step: h = F.linear(x, w)" in lines
    assert "::notice file=train.py,line=98,title=crashlens%3A code path::main: loss = training_step(model, batch)" in lines
    # the report follows, with workflow commands stopped around it
    start = next(i for i, ln in enumerate(lines) if ln.startswith("::stop-commands::"))
    token = lines[start].split("::")[2]
    end = lines.index(f"::{token}::")
    assert start < end and len(token) == 32
    assert all(not ln.startswith("::set-output") for ln in lines[:start] + lines[end + 1:])
    # step outputs
    out = dict(ln.split("=", 1) for ln in outputs.read_text().splitlines())
    assert out["category"] == "gpu-oom" and len(out["signature"]) == 16 and out["exit-code"] == "0"
    # the summary was appended, not overwritten
    md = summary.read_text()
    assert md.startswith("## earlier step\n")
    assert "### crashlens: GPU memory exhausted" in md
    assert f"`{out['signature']}`" in md and "| **Primary error** |" in md and "<details>" in md
    if _redaction_available():
        assert "hf_abcdefghijklmnopqrstuvwxyz" not in md + r.stdout
        assert "item(s) redacted</sub>" in md
    else:
        assert "redaction unavailable" in md


def test_github_groups_long_output_and_without_summary_env(tmp_path: Path):
    r = run("analyze", "--github", "--verbose", str(EXAMPLE), cwd=tmp_path, env={"GITHUB_WORKSPACE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("::error title=crashlens%3A A GPU kernel executed an illegal instruction::")  # no file
    g = lines.index("::group::crashlens report (gpu-illegal-instruction)")
    assert lines[-1] == "::endgroup::" and g < len(lines) - 1
    assert "GITHUB_STEP_SUMMARY is not set" in r.stderr
    # paths outside the workspace never become file= properties
    assert not any("file=" in ln for ln in lines if ln.startswith("::"))


# --- JUnit and Code Quality ----------------------------------------------------------------------


def test_junit_and_codequality_files(tmp_path: Path):
    junit, cq = tmp_path / "out" / "crashlens.xml", tmp_path / "gl-code-quality.json"
    r = run("analyze", "--json", "--junit", str(junit), "--codequality", str(cq), str(EXAMPLE), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    causes, sig = doc["causes"], doc["signature"]["id"]

    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1 and suites[0].get("name") == "crashlens"
    s = suites[0]
    cases = s.findall("testcase")
    assert len(cases) == len(causes) == int(s.get("tests")) == int(root.get("tests"))
    assert int(s.get("failures")) == 1 and len(s.findall("testcase/failure")) == 1
    assert s.get("errors") == "0" and s.get("skipped") == "0"
    first = cases[0]
    assert first.get("classname") == f"crashlens.{causes[0]['category']}"
    assert first.get("name") == f"{causes[0]['title']} [{causes[0]['rule']}]"
    assert first.find("failure").get("type") == causes[0]["category"]
    assert "an illegal instruction was encountered" in first.find("failure").get("message")
    assert all(c.find("system-out") is not None and "Evidence:" in c.find("system-out").text for c in cases)
    assert "train.log:30" in first.find("system-out").text
    assert {p.get("name"): p.get("value") for p in s.find("properties")}["signature"] == sig

    issues = json.loads(cq.read_text())
    assert isinstance(issues, list) and len(issues) == len(causes)
    for i, (issue, cause) in enumerate(zip(issues, causes)):
        assert issue["check_name"] == cause["rule"]
        assert issue["description"].startswith("crashlens: ")
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert issue["fingerprint"] == hashlib.sha256(f"{sig}:{cause['rule']}".encode()).hexdigest()
        assert isinstance(issue["location"]["path"], str) and issue["location"]["lines"]["begin"] >= 1
    assert issues[0]["severity"] == "critical"
    assert issues[0]["location"] == {"path": "examples/seed-crash/train.log", "lines": {"begin": 30}}
    assert len({i["fingerprint"] for i in issues}) == len(issues)


def test_junit_nothing_recognised_is_skipped(tmp_path: Path):
    log = tmp_path / "ok.log"
    log.write_text("epoch 1 done\nepoch 2 done\n")
    junit = tmp_path / "j.xml"
    r = run("analyze", "--junit", str(junit), str(log))
    assert r.returncode == 1
    s = ET.parse(junit).getroot().find("testsuite")
    assert (s.get("tests"), s.get("failures"), s.get("skipped")) == ("1", "0", "1")
    assert s.find("testcase/skipped") is not None


def test_unwritable_output_file_is_a_usage_error(tmp_path: Path):
    (tmp_path / "f").write_text("")
    r = run("analyze", "--junit", str(tmp_path / "f" / "x.xml"), str(EXAMPLE))
    assert r.returncode == 2 and "cannot write the JUnit file" in r.stderr


# --- exit codes ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fail_on_exit_codes(tmp_path: Path):
    ok = tmp_path / "ok.log"
    ok.write_text("all fine\n")
    ex = str(EXAMPLE)
    assert run("analyze", ex).returncode == 0
    assert run("analyze", "--fail-on", "gpu-illegal-instruction", ex).returncode == 4
    assert run("analyze", "--fail-on", "gpu-oom,native-abort", "--fail-on", "gpu-illegal-instruction", ex).returncode == 4
    assert run("analyze", "--fail-on", "any", ex).returncode == 4
    # the second cause (gpu-illegal-memory-access) does not gate: only the top one does
    assert run("analyze", "--fail-on", "gpu-illegal-memory-access", ex).returncode == 0
    assert run("analyze", "--fail-on", "gpu-oom", str(ok)).returncode == 1
    assert run("analyze", str(ok)).returncode == 1
    bad = run("analyze", "--fail-on", "gpu-ooom", ex)
    assert bad.returncode == 2 and "unknown category: gpu-ooom" in bad.stderr
    assert run("analyze", str(tmp_path / "missing.log")).returncode == 2
    gh = run("analyze", "--github", "--fail-on", "gpu-illegal-instruction", ex, env={"GITHUB_WORKSPACE": str(tmp_path)})
    assert gh.returncode == 4 and gh.stdout.startswith("::error")


# --- triage ----------------------------------------------------------------------------------------


def _bundles(root: Path) -> Path:
    """artifacts/: run-1 and run-2 the same OOM (other pids, times, tmp dirs), run-3 an illegal
    address, run-4.tar.gz the seed crash, empty/ no readable input."""
    art = root / "artifacts"
    for name, template, values in (("run-1", OOM_LOG, RUN_A), ("run-2", OOM_LOG, RUN_B),
                                   ("run-3", "2026-11-25 10:00:00 start\n" + ILLEGAL_ADDRESS_LOG, RUN_A)):
        d = art / name
        d.mkdir(parents=True)
        (d / "train.log").write_text(template.format(**values))
    with tarfile.open(art / "run-4.tar.gz", "w:gz") as tf:
        for f in EXAMPLE.iterdir():
            tf.add(f, arcname=f"seed/{f.name}")
    (art / "empty").mkdir()
    return art


def test_triage_groups_bundles(tmp_path: Path):
    art = _bundles(tmp_path)
    r = run("triage", "--json", "-j", "2", str(art))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "crashlens.triage/1"
    status = {b["name"]: b["status"] for b in doc["bundles"]}
    assert status == {"run-1": "analysed", "run-2": "analysed", "run-3": "analysed", "run-4.tar.gz": "analysed",
                      "empty": "skipped"}
    groups = doc["groups"]
    assert [g["count"] for g in groups] == [2, 1, 1]
    oom = groups[0]
    assert oom["categories"] == ["gpu-oom"] and oom["bundles"] == ["run-1", "run-2"]
    assert oom["first_seen"] == "2026-11-20 03:02:11" and oom["last_seen"] == "2026-12-01 22:47:09"
    assert oom["example"]["name"] == "run-1" and oom["text"].startswith("gpu-oom | ")
    cats = {g["categories"][0] for g in groups}
    assert cats == {"gpu-oom", "gpu-illegal-memory-access", "gpu-illegal-instruction"}
    assert len({g["signature"] for g in groups}) == 3

    text = run("triage", str(art))
    assert text.returncode == 0
    assert "5 bundles, 3 signatures (4 analysed, 0 failed, 1 skipped)" in text.stdout
    assert f"   2x  {oom['signature']}  gpu-oom" in text.stdout
    assert "empty: not a crash bundle: no readable input" in text.stdout


def test_triage_single_bundle_folder_and_errors(tmp_path: Path):
    # a folder with files of its own is one bundle
    r = run("triage", "--json", str(EXAMPLE))
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert [b["name"] for b in doc["bundles"]] == ["seed-crash"]
    # nothing there
    r = run("triage", str(tmp_path / "nope"))
    assert r.returncode == 2 and "no such file or directory" in r.stderr
    # every bundle failing to analyse (a broken rule base) is reported, not fatal
    art = _bundles(tmp_path)
    r = run("triage", "--rules", str(tmp_path / "no-rules"), str(art))
    assert r.returncode == 1
    assert "Failed to analyse:" in r.stdout and "run-1:" in r.stdout


def test_triage_database_recurrence(tmp_path: Path):
    db = tmp_path / "state" / "crashes.sqlite"
    first = tmp_path / "ci-1"
    for name, values in (("run-1233", RUN_A), ("run-1234", RUN_B)):
        (first / name).mkdir(parents=True)
        (first / name / "train.log").write_text(OOM_LOG.format(**values))
    r1 = run("triage", "--db", str(db), "--json", str(first))
    assert r1.returncode == 0, r1.stderr
    h1 = json.loads(r1.stdout)["groups"][0]["history"]
    assert h1["seen"] == 2 and h1["before"] == 0

    # the same bundles again: upserted, not counted twice
    r1b = run("triage", "--db", str(db), "--json", str(first))
    assert json.loads(r1b.stdout)["groups"][0]["history"]["seen"] == 2

    # a later CI run with the same crash (other pid, time, tmp dir)
    later = tmp_path / "ci-2" / "run-1240"
    later.mkdir(parents=True)
    (later / "train.log").write_text(OOM_LOG.format(**{**RUN_B, "ts": "2026-12-05 08:00:00", "pid": 31337}))
    r2 = run("triage", "--db", str(db), str(later.parent))
    assert r2.returncode == 0
    assert "history: seen 3 times since 2026-11-20, last in run-1240 (2 before this triage)" in r2.stdout

    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == "crashlens.triage-db/1"
    (seen, first_seen, last_seen), = con.execute("SELECT seen, first_seen, last_seen FROM signatures").fetchall()
    assert (seen, first_seen, last_seen) == (3, "2026-11-20 03:02:11", "2026-12-05 08:00:00")
    con.close()

    # not a database
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not sqlite at all " * 100)
    r3 = run("triage", "--db", str(bad), str(first))
    assert r3.returncode == 2 and "not a usable SQLite database" in r3.stderr


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="the patch must reach forked workers")
def test_triage_worker_death_and_exception_are_reported(tmp_path: Path, monkeypatch):
    from crashlens import pipeline as analyze, triage

    art = _bundles(tmp_path)
    real = analyze.analyze_inputs

    def flaky(inputs, notes=(), opts=analyze.Options(), extra=()):
        names = " ".join(i.name for i in inputs)
        if "run-2" in names:
            os._exit(9)  # the worker dies as a native crash would kill it
        if "run-3" in names:
            raise ValueError("boom")
        return real(inputs, notes, opts, extra)

    monkeypatch.setattr(analyze, "analyze_inputs", flaky)
    t = triage.triage([art], jobs=2)
    by = {b["name"]: b for b in t.bundles}
    assert by["run-1"]["status"] == "analysed" and by["run-4.tar.gz"]["status"] == "analysed"
    assert by["run-2"]["status"] == "failed" and "process died" in by["run-2"]["error"]
    assert by["run-3"]["status"] == "failed" and by["run-3"]["error"] == "ValueError: boom"
