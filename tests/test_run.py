"""`crashlens run -- CMD` with real child processes: the job behaves as the bare command (exit
status, signals, stdin, stdout and stderr, a terminal), and the bundle holds what it left."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CL = [sys.executable, "-m", "crashlens"]


def run(tmp_path: Path, code: str, *extra: str, stdin: str | None = None, **kw) -> tuple[subprocess.CompletedProcess, Path]:
    job = tmp_path / "job.py"
    job.write_text(code)
    out = tmp_path / "bundle"
    res = subprocess.run([*CL, "--no-color", "run", "-o", str(out), *extra, "--", sys.executable, str(job)],
                         input=stdin, capture_output=True, text=True, timeout=120, cwd=tmp_path, **kw)
    return res, out


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_exit_code_streams_and_stdin_are_the_jobs(tmp_path):
    code = ("import sys\nline = sys.stdin.readline().strip()\nprint('got', line)\n"
            "print('warn', file=sys.stderr)\nsys.exit(7)\n")
    res, out = run(tmp_path, code, stdin="hello\n")
    assert res.returncode == 7
    assert res.stdout == "got hello\n"                       # stdout is the job's alone
    assert res.stderr.startswith("warn\n")                   # the job's stderr, then crashlens' report
    m = manifest(out)
    assert m["exit"] == {"pid": m["exit"]["pid"], "code": 7, "signal": None, "core_dumped": False, "status": 7}
    assert m["output"] == "pipes"
    log = (out / "console.log").read_text()
    times = (out / "console.times").read_text().split("\n")[:-1]
    assert log.splitlines() == ["got hello", "warn"] or log.splitlines() == ["warn", "got hello"]
    assert len(times) == 2 and {t.split()[1] for t in times} == {"stdout", "stderr"}


def test_a_job_that_succeeds_leaves_a_bundle_and_no_report(tmp_path):
    res, out = run(tmp_path, "print('done')\n")
    assert res.returncode == 0 and res.stdout == "done\n"
    assert "the job succeeded" in res.stderr and not (out / "analysis.json").exists()


def test_a_signal_death_is_reproduced_and_analysed(tmp_path):
    res, out = run(tmp_path, "import os, signal\nprint('step 1', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n",
                   "--no", "core")
    assert res.returncode == -signal.SIGSEGV                  # the parent sees the job's signal
    assert manifest(out)["exit"]["signal"] == "SIGSEGV"
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["causes"][0]["category"] == "native-segfault"
    assert "Fatal Python error: Segmentation fault" in (out / "console.log").read_text()   # faulthandler was armed


def test_switches_are_armed_reported_and_can_be_turned_off(tmp_path):
    code = ("import os, json\nprint(json.dumps({k: os.environ.get(k) for k in "
            "('PYTHONFAULTHANDLER', 'CUDA_ENABLE_COREDUMP_ON_EXCEPTION', 'TORCH_NCCL_DUMP_ON_TIMEOUT', "
            "'TORCHELASTIC_ERROR_FILE', 'CUDA_COREDUMP_FILE')}))\n")
    res, out = run(tmp_path, code)
    seen = json.loads(res.stdout)
    assert seen["PYTHONFAULTHANDLER"] == "1" and seen["CUDA_ENABLE_COREDUMP_ON_EXCEPTION"] == "1"
    assert seen["CUDA_COREDUMP_FILE"].startswith(str(out)) and seen["TORCHELASTIC_ERROR_FILE"].startswith(str(out))
    states = {s["id"]: s["state"] for s in manifest(out)["switches"]}
    assert states["faulthandler"] == "on" and states["flight-recorder"] == "on"
    env = {**os.environ, "PYTHONFAULTHANDLER": "0"}
    res, out2 = run(tmp_path, code, "--no", "cuda-coredump", env=env)
    seen = json.loads(res.stdout)
    assert seen["PYTHONFAULTHANDLER"] == "0" and seen["CUDA_ENABLE_COREDUMP_ON_EXCEPTION"] is None
    states = {s["id"]: s["state"] for s in manifest(out2)["switches"]}
    assert states["faulthandler"] == "kept" and states["cuda-coredump"] == "off"


def test_sigterm_to_crashlens_reaches_the_job_and_is_recorded(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("import signal, sys, time\n"
                   "def stop(sig, frame):\n    print('job got', signal.Signals(sig).name, flush=True); sys.exit(3)\n"
                   "signal.signal(signal.SIGTERM, stop)\nprint('ready', flush=True)\n"
                   "while True:\n    time.sleep(0.05)\n")
    out = tmp_path / "bundle"
    p = subprocess.Popen([*CL, "--no-color", "run", "-o", str(out), "--", sys.executable, str(job)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert p.stdout is not None
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 3 and "job got SIGTERM" in stdout
    m = manifest(out)
    assert [s["signal"] for s in m["received_signals"]] == ["SIGTERM"]
    assert m["stopped_from_outside"][0]["signal"] == "SIGTERM"
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["causes"][0]["category"] == "job-terminated-externally"


def test_on_a_terminal_the_job_sees_a_terminal_of_the_same_size(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("import os, sys, shutil\n"
                   "print('tty', sys.stdout.isatty(), sys.stderr.isatty(), shutil.get_terminal_size().columns)\n"
                   "print('\\x1b[31mred\\x1b[0m'); sys.stdout.write('bar 1\\rbar 2\\n')\n")
    out = tmp_path / "bundle"
    pid, fd = pty.fork()
    if pid == 0:      # the child: crashlens on a terminal of 100 columns
        import fcntl
        import struct
        import termios

        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        # shutil.get_terminal_size reads COLUMNS first; a test runner may have put it in the C
        # environment (putenv), so the environment is given explicitly
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        os.chdir(tmp_path)
        os.execve(sys.executable, [sys.executable, "-m", "crashlens", "run", "-q", "-o", str(out), "--",
                                   sys.executable, str(job)], env)
    got = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    text = got.decode()
    assert "tty True True 100" in text
    assert "\x1b[31mred\x1b[0m" in text                       # colours pass through unchanged
    log = (out / "console.log").read_bytes()
    assert b"bar 1\rbar 2\n" in log and b"\x1b[31m" in log      # the bundle keeps the bytes as shown
    assert manifest(out)["output"] == "pty"


def test_command_not_found_is_127_and_one_line(tmp_path):
    res = subprocess.run([*CL, "run", "-o", str(tmp_path / "b"), "--", "no-such-command-here"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 127 and res.stderr.strip() == "crashlens run: no-such-command-here: command not found"


def test_a_core_of_the_job_is_kept_in_the_bundle(tmp_path):
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern.startswith("|") or "/" in pattern:
        pytest.skip(f"kernel.core_pattern {pattern!r} does not write cores into the job's folder")
    import resource

    if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0:
        pytest.skip("the hard core-size limit is 0 here")
    res, out = run(tmp_path, "import ctypes\nctypes.string_at(0x10, 4)\n")
    assert res.returncode == -signal.SIGSEGV
    m = manifest(out)
    assert m["exit"]["core_dumped"] is True
    kept = [f for f in m["files"] if f.startswith("core")]
    assert kept, m["files"]
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["causes"][0]["category"] == "native-segfault"
    assert any("core" in (e.get("text") or "") for e in analysis["causes"][0]["evidence"])


def _drive(argv: list[str], env: dict, send: list[tuple[str, bytes]] = (), timeout: float = 60) -> tuple[int, bytes]:
    """Run argv on a new terminal; when the output holds a marker, type the bytes given for it."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    got, todo = b"", list(send)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        while todo and todo[0][0].encode() in got:
            os.write(fd, todo.pop(0)[1])
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), got


def test_ctrl_c_on_the_terminal_reaches_the_job_as_with_the_bare_command(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    code, got = _drive([sys.executable, "-m", "crashlens", "--no-color", "run", "-o", str(tmp_path / "b"), "--",
                        sys.executable, str(job)], env, send=[("ready", b"\x03")])
    assert code == 130 or code == -signal.SIGINT, got        # KeyboardInterrupt's status, as the bare job's
    assert b"KeyboardInterrupt" in got
    m = manifest(tmp_path / "b")
    assert m["received_signals"] == []                       # the terminal sent it to the job, not to crashlens


def test_a_stop_signal_takes_the_jobs_python_stacks_first(tmp_path):
    import shutil as sh

    tool = sh.which("pystack") or sh.which("pystack", path=os.path.dirname(sys.executable))
    if tool is None:
        pytest.skip("pystack is not installed (crashlens[python])")
    probe = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        ok = subprocess.run([tool, "remote", str(probe.pid)], capture_output=True, text=True, timeout=60)
    finally:
        probe.kill()
        probe.wait()
    if ok.returncode != 0:
        pytest.skip(f"pystack cannot read a live process here: {ok.stderr.strip()[:200]}")
    job = tmp_path / "job.py"
    job.write_text("import time\ndef train_step():\n    time.sleep(60)\nprint('ready', flush=True)\ntrain_step()\n")
    out = tmp_path / "bundle"
    p = subprocess.Popen([*CL, "--no-color", "run", "-o", str(out), "--", sys.executable, str(job)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGUSR1)
    p.communicate(timeout=120)
    m = manifest(out)
    stacks = [f for f in m["files"] if f.startswith("stacks-")]
    assert stacks, m["stopped_from_outside"]
    assert "train_step" in (out / stacks[0]).read_text()
    assert m["stopped_from_outside"][0]["signal"] == "SIGUSR1"
