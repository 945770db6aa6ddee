"""`crashlens run -- CMD`: run a job with the evidence armed, keep what it leaves in one bundle
folder, and analyse it at once. A stage before `inputs`: its output is a folder that `analyze`
and `triage` read like any other.

    run_command(argv, out=None, off=(), interval=2.0) -> Run     the child's Exit and the bundle

The bundle (docs/run.md): manifest.json (crashlens.bundle/1), console.log and console.times,
samples.jsonl, env.txt, kernel.log, the job's cores, GPU core dumps, Flight Recorder dumps,
torchelastic error files, stacks-*.txt (grace-time stacks), analysis.json.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .arm import Armed, arm, switch_ids
from .console import Console
from .launch import Exit, exit_like, launch
from .sample import Sampler, group_members
from .snapshot import core_files, environment, find_cores, kernel_lines, scheduler_reason, uptime

__all__ = ["Run", "run_command", "exit_like", "switch_ids", "BUNDLE_SCHEMA"]

BUNDLE_SCHEMA = "crashlens.bundle/1"
MAX_CORE_COPY = 4 << 30          # cores up to this size are compressed (zstd) into the bundle; larger ones stay put
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT)
GRACE_BUDGET = 20.0             # seconds spent on stacks when a stop signal arrives


@dataclass
class Run:
    exit: Exit
    bundle: Path
    manifest: dict[str, Any] = field(default_factory=dict)


def default_bundle() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(os.environ.get("CRASHLENS_RUN_DIR", ".")) / f"crashlens-run-{stamp}-{os.getpid()}"


def run_command(argv: Sequence[str], out: Path | None = None, off: Sequence[str] = (),
                interval: float = 2.0) -> Run:
    bundle = Path(out) if out else default_bundle()
    bundle.mkdir(parents=True, exist_ok=True)
    bundle = bundle.resolve()
    notes: list[str] = []
    files: dict[str, str] = {}
    armed: Armed = arm(bundle, off)
    console = Console(bundle)
    sampler = Sampler(bundle, interval) if "samples" not in off and "all" not in off else None
    up0, cwd = uptime(), os.getcwd()
    cores_before = core_files(armed.core_pattern, cwd)
    stops: list[dict[str, Any]] = []

    def started(pid: int) -> None:
        armed.restore()             # the child has the raised limits; crashlens gets its own back
        if sampler is not None:
            sampler.start(pid)

    def on_signal(sig: int, ex: Exit) -> None:
        if sig not in STOP_SIGNALS:
            return
        stop = {"signal": signal.Signals(sig).name, "at": ex.received[-1][0] if ex.received else None}
        if sig != signal.SIGINT:      # Ctrl-C reaches the job itself; these came from outside
            stop["stacks"] = _grace_stacks(ex.pid, bundle, files)
            reason = scheduler_reason()
            if reason:
                (bundle / "scheduler.txt").write_text(reason, encoding="utf-8")
                files["scheduler.txt"] = "the scheduler's record of the job (scontrol show job)"
        stops.append(stop)

    try:
        ex = launch(list(argv), armed.env, console.feed, on_signal=on_signal, on_start=started)
    except FileNotFoundError:
        armed.restore()
        console.close()
        if sampler is not None:
            sampler.stop()
        raise
    finally:
        armed.restore()
    console_stats = console.close()
    files["console.log"] = "what the job printed, as the terminal showed it"
    files["console.times"] = "seconds since the start at which each line of console.log arrived, and its stream"
    sample_stats = sampler.stop() if sampler is not None else {}
    if sampler is not None:
        files["samples.jsonl"] = "memory, cgroup, file-system and GPU figures sampled while the job ran"
    env_text = _safe(notes, "the environment snapshot", lambda: environment(list(argv)), "")
    if env_text:
        (bundle / "env.txt").write_text(env_text, encoding="utf-8")
        files["env.txt"] = "versions, CPU flags, limits and nvidia-smi at the end"
    klog, note = _safe(notes, "the kernel log", lambda: kernel_lines(up0), ("", ""))
    if klog:
        (bundle / "kernel.log").write_text(klog, encoding="utf-8")
        files["kernel.log"] = "the kernel log since the job started"
    elif note:
        notes.append(note)
    cores, note = _safe(notes, "the core search", lambda: find_cores(armed.core_pattern, cwd, cores_before),
                        ([], "")) if _core_on(armed) else ([], "")
    if note and (ex.core_dumped or ex.signal in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT)):
        notes.append(note)
    for core in cores:
        files.update(_keep_core(core, bundle, notes))
    for p in sorted(bundle.iterdir()):
        if p.name.startswith(("gpucore.", "nccl_trace_rank_", "elastic-error")) and p.name not in files:
            files[p.name] = _what(p.name)
    manifest = {
        "schema": BUNDLE_SCHEMA,
        "command": _redacted(list(argv)),
        "cwd": cwd,
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ex.started)),
        "duration_s": ex.duration,
        "output": ex.mode,
        "exit": {"pid": ex.pid, "code": ex.code, "signal": signal.Signals(ex.signal).name if ex.signal else None,
                 "core_dumped": ex.core_dumped, "status": ex.status},
        "received_signals": [{"at_s": t, "signal": n} for t, n in ex.received],
        "stopped_from_outside": stops,
        "switches": [{"id": s.id, "state": s.state, "what": s.what, "detail": s.detail,
                      "env": {k: _redacted([v])[0] for k, v in s.env.items()}} for s in armed.switches],
        "core_pattern": armed.core_pattern,
        "console": console_stats,
        "samples": sample_stats,
        "files": files,
        "notes": notes,
    }
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return Run(ex, bundle, manifest)


def _safe(notes: list[str], what: str, fn, default):
    """One step of the end's snapshot; a failure is a note in the manifest, never a lost bundle."""
    try:
        return fn()
    except Exception as exc:   # noqa: BLE001 - whatever happens, the manifest is written
        notes.append(f"{what} failed: {type(exc).__name__}: {exc}")
        return default


def _core_on(armed: Armed) -> bool:
    return any(s.id == "core" and s.state in ("on", "kept") for s in armed.switches)


def _what(name: str) -> str:
    if name.startswith("gpucore."):
        return "a CUDA GPU core dump"
    if name.startswith("nccl_trace_rank_"):
        return "an NCCL Flight Recorder dump"
    return "a torchelastic error file"


def _keep_core(core: Path, bundle: Path, notes: list[str]) -> dict[str, str]:
    """A core into the bundle, compressed with zstd (a CUDA process's core of a gigabyte is mostly
    empty pages and shrinks to a few percent); the original is removed once the copy is whole. A
    core over 4 GiB stays where the kernel put it, named in the notes."""
    import zstandard

    try:
        size = core.stat().st_size
    except OSError as exc:
        notes.append(f"core {core}: {exc.strerror}")
        return {}
    if size > MAX_CORE_COPY:
        notes.append(f"core {core} ({size:,} bytes) left where the kernel wrote it: over {MAX_CORE_COPY >> 30} GiB")
        return {}
    name = f"{core.name}.zst"
    try:
        with open(core, "rb") as src, open(bundle / name, "wb") as raw:
            zstandard.ZstdCompressor(level=3, threads=-1).copy_stream(src, raw, size=size)
        got = (bundle / name).stat().st_size
        core.unlink()
    except (OSError, zstandard.ZstdError) as exc:
        notes.append(f"core {core} could not be copied: {getattr(exc, 'strerror', None) or exc}")
        return {}
    return {name: f"the core the kernel wrote ({core}, {size:,} bytes; zstd, {got:,} bytes)"}


def _grace_stacks(pgid: int, bundle: Path, files: dict[str, str]) -> str:
    """Python stacks of the job's processes in the scheduler's grace time, through pystack when it
    is installed (it reads a live process without stopping it for long)."""
    import sys

    # on PATH, or beside this interpreter (crashlens installed with its [python] extra in a venv)
    tool = shutil.which("pystack") or shutil.which("pystack", path=os.path.dirname(sys.executable))
    if tool is None:
        return "pystack not installed: no live stacks (faulthandler prints them only on a fatal signal)"
    t0 = time.monotonic()
    done = 0
    for pid, _rss in group_members(pgid):
        if time.monotonic() - t0 > GRACE_BUDGET:
            break
        try:
            res = subprocess.run([tool, "remote", str(pid)], capture_output=True, text=True,
                                 timeout=max(1.0, GRACE_BUDGET - (time.monotonic() - t0)))
        except (OSError, subprocess.TimeoutExpired):
            continue
        if res.returncode == 0 and res.stdout.strip():
            name = f"stacks-{pid}.txt"
            (bundle / name).write_text(res.stdout, encoding="utf-8")
            files[name] = f"Python stacks of process {pid} when the stop signal arrived (pystack)"
            done += 1
    return f"{done} process(es) by pystack"


def _redacted(values: list[str]) -> list[str]:
    from ..redaction import Redactor

    red = Redactor()
    return [red(v) for v in values]
