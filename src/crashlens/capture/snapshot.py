"""What the machine looked like when the job ended, and what the crash left elsewhere.

    environment(argv, cwd) -> str          versions, CPU flags, limits, nvidia-smi (env.txt)
    kernel_lines(since_uptime) -> str      the kernel log since the start (kernel.log), when readable
    find_cores(pattern, cwd, since, pids)  core files the kernel wrote for the job's processes
    scheduler_reason() -> str              Slurm's view of the job (scontrol), when under Slurm

Every command here is bounded (a timeout) and optional: what cannot be read is a note.
"""

from __future__ import annotations

import glob
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ("torch", "torchvision", "torchaudio", "numpy", "jax", "jaxlib", "tensorflow", "transformers", "accelerate",
            "deepspeed", "lightning", "pytorch-lightning", "triton", "xformers", "flash-attn", "bitsandbytes", "vllm",
            "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-cublas-cu12",
            "nvidia-cuda-runtime-cu12", "datasets", "safetensors", "peft", "ray", "onnxruntime", "onnxruntime-gpu")
_VERSIONS = ("import importlib.metadata as m, sys\n"
             "print('Python version:', sys.version.split()[0])\n"
             "for p in sys.argv[1:]:\n"
             "    try: print(f'{p}=={m.version(p)}')\n"
             "    except Exception: pass\n")
LIMITS = ("CORE", "NOFILE", "NPROC", "AS", "DATA", "STACK", "MEMLOCK", "FSIZE")


def _run(cmd: list[str], timeout: float) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else (res.stdout or None)


def _python_of(argv: list[str]) -> str | None:
    """The job's interpreter when it is a Python program (python …, torchrun …, a script with a
    python shebang), else None."""
    exe = shutil.which(argv[0]) if argv else None
    if not exe:
        return None
    base = os.path.basename(exe)
    if base.startswith("python"):
        return exe
    try:
        with open(exe, "rb") as f:
            first = f.readline(200)
    except OSError:
        return None
    if first.startswith(b"#!") and b"python" in first:
        interp = first[2:].decode("utf-8", "replace").split()
        if interp and os.path.basename(interp[0]) == "env" and len(interp) > 1:
            return shutil.which(interp[1])
        return interp[0] if interp else None
    return None


def environment(argv: list[str]) -> str:
    lines = [f"crashlens run: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
             f"OS: {platform.platform()}", f"Kernel: {platform.release()}", f"Machine: {platform.machine()}"]
    py = _python_of(argv) or sys.executable
    got = _run([py, "-c", _VERSIONS, *PACKAGES], timeout=30)
    lines.append(f"Python: {py}")
    if got:
        lines += got.strip().splitlines()
    cpu = Path("/proc/cpuinfo")
    try:
        text = cpu.read_text(encoding="utf-8", errors="replace")
        model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
        flags = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("flags")), "")
        if model:
            lines.append(f"Model name: {model}")
        if flags:
            lines.append(f"Flags: {flags}")
        lines.append(f"CPU(s): {os.cpu_count()}")
    except OSError:
        pass
    for name in LIMITS:
        try:
            soft, hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))
        except (AttributeError, ValueError, OSError):
            continue
        show = lambda v: "unlimited" if v == resource.RLIM_INFINITY else str(v)  # noqa: E731
        lines.append(f"ulimit {name.lower()}: {show(soft)} (hard {show(hard)})")
    if shutil.which("nvidia-smi"):
        smi = _run(["nvidia-smi"], timeout=15)
        if smi:
            lines += ["", smi.rstrip()]
    return "\n".join(lines) + "\n"


def uptime() -> float:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def kernel_lines(since_uptime: float) -> tuple[str, str]:
    """(kernel log lines stamped after `since_uptime`, a note when it could not be read)."""
    if not shutil.which("dmesg"):
        return "", "dmesg not found: no kernel log in the bundle"
    out = _run(["dmesg"], timeout=10)
    if out is None:
        return "", "the kernel log was not readable (dmesg: not permitted?): no kernel log in the bundle"
    keep = []
    for line in out.splitlines():
        if line.startswith("[") and "]" in line:
            try:
                stamp = float(line[1:line.index("]")].strip())
            except ValueError:
                continue
            if stamp >= since_uptime - 1.0:
                keep.append(line)
    return ("\n".join(keep) + "\n") if keep else "", ""


def core_files(pattern: str, cwd: str) -> dict[str, float]:
    """The files the core pattern could have written (path -> mtime): taken before the job
    starts, so that a core left by an earlier crash is never taken for this job's."""
    if not pattern or pattern.startswith("|"):
        return {}
    import re

    wild = re.sub(r"%[a-zA-Z%]", "*", pattern)
    base = wild if wild.startswith("/") else os.path.join(cwd, wild)
    out = {}
    for p in set(glob.glob(base) + glob.glob(base + ".*")):
        try:
            st = os.stat(p)
        except OSError:
            continue
        if os.path.isfile(p):
            out[p] = st.st_mtime
    return out


def find_cores(pattern: str, cwd: str, before: dict[str, float]) -> tuple[list[Path], str]:
    """Core files the kernel's core_pattern wrote during the job: a file pattern (%p, %e, %t…
    matched by wildcards, relative to the crashing process's directory, taken as the job's),
    new or changed since `before` (core_files at the start); or a note on where a pipe pattern
    (systemd-coredump, apport) put them."""
    if not pattern:
        return [], "core pattern unreadable"
    if pattern.startswith("|"):
        helper = os.path.basename(pattern[1:].split()[0])
        if "systemd-coredump" in helper:
            return [], "cores go to systemd-coredump: `coredumpctl list` and `coredumpctl dump PID -o core`"
        if "apport" in helper:
            return [], "cores go to apport: /var/crash/*.crash (`apport-unpack`)"
        return [], f"cores are piped to {helper}"
    found = [Path(p) for p, mtime in core_files(pattern, cwd).items() if before.get(p) != mtime]
    return sorted(found, key=lambda p: p.stat().st_mtime), ""


def scheduler_reason() -> str:
    job = os.environ.get("SLURM_JOB_ID")
    if job and shutil.which("scontrol"):
        got = _run(["scontrol", "show", "job", job], timeout=10)
        if got:
            return got
    return ""
