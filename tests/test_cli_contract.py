"""The command line's contract with shells and CI (issue 10, section 5): exit codes for Ctrl-C
and closed pipes, standard input, encodings, -V, --no-color, --gpu and `rules test -k`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, without_privilege

EXAMPLE = ROOT / "examples" / "seed-crash"


def _cmd() -> list[str]:
    exe = shutil.which("crashlens", path=str(Path(sys.executable).parent)) or shutil.which("crashlens")
    return [exe] if exe else [sys.executable, "-m", "crashlens"]


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
        encoding: str = "utf-8") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_cmd(), *args], input=stdin, capture_output=True, encoding=encoding, timeout=120,
                          env={**os.environ, "COLUMNS": "120", **(env or {})})


def test_stdin_dash_is_read_once_and_named():
    log = (EXAMPLE / "train.log").read_text(encoding="utf-8")
    r = run("analyze", "--json", "-", stdin=log)
    assert r.returncode == 0, r.stderr
    assert '"name": "<stdin>"' in r.stdout and "gpu-illegal-instruction" in r.stdout
    assert r.stderr == ""


def test_an_unreadable_input_is_reported_once():
    r = run("analyze", "/nonexistent/crash.log")
    assert r.returncode == 2
    assert r.stderr.count("No such file or directory") == 1, r.stderr


@pytest.mark.skipif(not hasattr(signal, "SIGPIPE"), reason="POSIX pipes")
@pytest.mark.parametrize("fmt", [[], ["--json"], ["--markdown"]])
def test_closed_stdout_exits_141_quietly(fmt):
    # the reader has gone before crashlens writes: what `crashlens analyze … | head -1` does
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    p = subprocess.run([*_cmd(), "analyze", *fmt, str(EXAMPLE)], stdout=w_fd, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    os.close(w_fd)
    assert p.returncode == 141, p.stderr  # not 1: that means "nothing recognised"
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_exits_130():
    # standard input that stays open and empty keeps crashlens waiting in its reader until SIGINT.
    # The child gets SIGINT's default action whatever this runner's is: a test run started in the
    # background of a non-interactive shell inherits SIGINT ignored, and so would crashlens.
    p = subprocess.Popen([*_cmd(), "analyze", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_until_blocked_on_stdin(p.pid)
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err  # not 1: that means "nothing recognised"
    assert "Traceback" not in err and "Aborted" not in err


def _wait_until_blocked_on_stdin(pid: int, limit: float = 120.0) -> None:
    """Until the process sleeps in poll/read (past its start-up, however slow the machine is):
    /proc/PID/syscall names the system call it sleeps in. Where that file cannot be read, a
    fixed wait stands in."""
    waits = ({63, 72, 73} if os.uname().machine == "aarch64"       # read, pselect6, ppoll
             else {0, 7, 23, 270, 271})                              # x86-64: read, poll, select, pselect6, ppoll
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            nr = Path(f"/proc/{pid}/syscall").read_text().split()[0]
        except (OSError, IndexError):
            time.sleep(3)
            return
        if nr.isdigit() and int(nr) in waits:
            time.sleep(0.2)
            return
        time.sleep(0.1)


def test_latin1_output_encoding_is_no_internal_error():
    for cmd in ("analyze", "report"):
        r = run(cmd, str(EXAMPLE), env={"PYTHONIOENCODING": "latin-1"}, encoding="latin-1")
        assert r.returncode == 0, r.stderr
        assert "internal error" not in r.stderr and "illegal instruction" in r.stdout


def test_short_version_flag():
    r = run("-V")
    assert r.returncode == 0 and r.stdout.startswith("crashlens")


def test_no_color_has_no_escape_codes():
    env = {"FORCE_COLOR": "1", "TERM": "xterm-256color"}
    coloured = run("analyze", str(EXAMPLE), env=env)
    assert "\x1b[" in coloured.stdout  # the check below means something
    for args in (["--no-color", "analyze", str(EXAMPLE)], ["analyze", "--no-color", str(EXAMPLE)]):
        r = run(*args, env=env)
        assert r.returncode == 0, r.stderr
        assert "\x1b[" not in r.stdout


def test_unknown_gpu_is_warned_about():
    r = run("analyze", "--gpu", "XYZ123", str(EXAMPLE))
    assert r.returncode == 0
    assert "warning: --gpu 'XYZ123'" in r.stderr
    assert "warning" not in run("analyze", "--gpu", "H100", str(EXAMPLE)).stderr


def test_rules_test_with_no_matching_rule_fails():
    r = run("rules", "test", "-k", "no-such-rule-anywhere")
    assert r.returncode == 2
    assert "no rule example matched" in r.stderr
    assert "0 passed" not in r.stdout


def test_completion_is_documented_and_works():
    assert "_CRASHLENS_COMPLETE" in (ROOT / "README.md").read_text(encoding="utf-8")
    r = run(env={"_CRASHLENS_COMPLETE": "bash_source"})
    assert r.returncode == 0 and "complete" in r.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_progress_on_stderr_only_when_it_is_a_terminal():
    import pty

    lib = str(ROOT / "fixtures" / "binaries" / "libaxpy_sm80.so")
    master, slave = pty.openpty()
    p = subprocess.Popen([*_cmd(), "inspect", "--json", lib], stdout=subprocess.PIPE, stderr=slave,
                         env={**os.environ, "TERM": "xterm"})
    os.close(slave)
    out, _ = p.communicate(timeout=300)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert p.returncode in (0, 1)
    assert b"inspecting" in seen and b"libaxpy_sm80.so" in seen
    assert b"inspecting" not in out  # stdout carries only the JSON
    r = run("inspect", "--json", lib)  # stderr a pipe: no progress at all
    assert "inspecting" not in r.stderr


def test_unreadable_files_without_privilege(tmp_path: Path):
    """A file of the bundle that cannot be read, and a library the log names under a folder that
    cannot be searched: notes and an answer, never an internal error. Run without the privilege
    to bypass permissions (as root too: see conftest.without_privilege)."""
    prefix = without_privilege()
    if prefix is None:
        pytest.skip("root without setpriv (util-linux): permission checks cannot be made to apply")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "libfused.so").write_bytes(b"\x7fELF")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    secret = bundle / "secret.log"
    secret.write_text("RuntimeError: CUDA error: out of memory\n")
    log = bundle / "run.log"
    log.write_text(f"ImportError: {locked}/libfused.so: cannot open shared object file: Permission denied\n")
    secret.chmod(0)
    locked.chmod(0)
    try:
        r = subprocess.run([*prefix, *_cmd(), "analyze", "--json", str(bundle)], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    finally:
        locked.chmod(0o755)
        secret.chmod(0o644)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    doc = json.loads(r.stdout)
    assert any("secret.log" in n and "Permission denied" in n for n in doc["notes"]), doc["notes"]
