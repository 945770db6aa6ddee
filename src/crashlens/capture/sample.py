"""Cheap figures of the moment, sampled while the job runs (a thread), so that the bundle holds
the last ones before it died.

    Sampler(folder, pgid, interval).start() / .stop() -> dict     samples.jsonl in the bundle
    sample_once(pgid) -> dict                                        one sample

Each sample: seconds since the start; host memory (/proc/meminfo); the memory cgroup of this
process (v2 memory.current/max/events, v1 usage/limit/oom_control: its oom and oom_kill counters);
total and free bytes of the working directory's, the temporary directory's and /dev/shm's file
systems; the resident memory of the job's processes (its process group); GPU memory and
utilisation from NVML (nvidia-ml-py, where importable) or `nvidia-smi` (every fifth sample). The
first 40 samples are 0.25 s apart (a job that dies at once still leaves figures). The
file keeps the first 2,000 samples as they come and, past them, the last 2,000 at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

KEEP = 2000
FAST_SAMPLES, FAST_INTERVAL = 40, 0.25   # the first 10 s are sampled every 0.25 s
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (_read("/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree", "Shmem"):
            try:
                out[key] = int(rest.split()[0]) * 1024
            except (ValueError, IndexError):
                pass
    return out


def cgroup_memory(pid: int | str = "self") -> dict[str, Any]:
    """The memory cgroup of a process: usage, limit and OOM counters (v2 or v1)."""
    text = _read(f"/proc/{pid}/cgroup") or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _id, controllers, path = parts
        if controllers == "" and os.path.exists(f"/sys/fs/cgroup{path}/memory.current"):
            base = f"/sys/fs/cgroup{path.rstrip('/')}"
            out: dict[str, Any] = {"version": 2, "path": path}
            cur, mx = _read(base + "/memory.current"), _read(base + "/memory.max")
            if cur and cur.strip().isdigit():
                out["current"] = int(cur)
            if mx and mx.strip().isdigit():
                out["max"] = int(mx)
            for row in (_read(base + "/memory.events") or "").splitlines():
                k, _, v = row.partition(" ")
                if k in ("oom", "oom_kill", "max") and v.strip().isdigit():
                    out[k if k != "max" else "max_events"] = int(v)
            return out
        if "memory" in controllers.split(","):
            base = f"/sys/fs/cgroup/memory{path.rstrip('/')}"
            if not os.path.exists(base + "/memory.usage_in_bytes"):
                continue
            out = {"version": 1, "path": path}
            cur, mx = _read(base + "/memory.usage_in_bytes"), _read(base + "/memory.limit_in_bytes")
            if cur and cur.strip().isdigit():
                out["current"] = int(cur)
            if mx and mx.strip().isdigit() and int(mx) < 1 << 60:
                out["max"] = int(mx)
            for row in (_read(base + "/memory.oom_control") or "").splitlines():
                k, _, v = row.partition(" ")
                if k in ("oom_kill", "under_oom") and v.strip().isdigit():
                    out[k] = int(v)
            return out
    return {}


def filesystems(cwd: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, path in (("cwd", cwd), ("tmp", tempfile.gettempdir()), ("shm", "/dev/shm")):
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        out[name] = {"path": path, "total": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize}
    return out


def group_members(pgid: int) -> list[tuple[int, int]]:
    """(pid, resident bytes) of every process of a process group (from /proc/PID/stat)."""
    out: list[tuple[int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat")
        if not stat:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        try:
            if int(fields[2]) == pgid:                       # field 5 of stat: the process group
                out.append((int(name), int(fields[21]) * PAGE))  # field 24: rss in pages
        except (ValueError, IndexError):
            continue
    return out


def group_rss(pgid: int) -> int:
    """Resident memory of the processes of a process group."""
    return sum(rss for _pid, rss in group_members(pgid))


class _Gpus:
    def __init__(self) -> None:
        self.nvml: Any = None
        self.smi = shutil.which("nvidia-smi")
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self.nvml = pynvml
        except Exception:
            self.nvml = None

    def read(self, n: int) -> list[dict[str, Any]] | None:
        if self.nvml is not None:
            try:
                out = []
                for i in range(self.nvml.nvmlDeviceGetCount()):
                    h = self.nvml.nvmlDeviceGetHandleByIndex(i)
                    mem = self.nvml.nvmlDeviceGetMemoryInfo(h)
                    util = self.nvml.nvmlDeviceGetUtilizationRates(h)
                    out.append({"index": i, "used": int(mem.used), "total": int(mem.total), "util": int(util.gpu)})
                return out
            except Exception:
                return None
        if self.smi is None or n % 5:
            return None
        try:
            res = subprocess.run([self.smi, "--query-gpu=index,memory.used,memory.total,utilization.gpu",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return None
        out = []
        for row in res.stdout.splitlines():
            try:
                i, used, total, util = (x.strip() for x in row.split(","))
                out.append({"index": int(i), "used": int(used) << 20, "total": int(total) << 20,
                            "util": int(util) if util.isdigit() else None})
            except ValueError:
                continue
        return out or None


def sample_once(pgid: int, t: float = 0.0, gpus: _Gpus | None = None, n: int = 0) -> dict[str, Any]:
    s: dict[str, Any] = {"t": round(t, 3), "mem": meminfo(), "cgroup": cgroup_memory(), "fs": filesystems(os.getcwd())}
    if pgid:
        s["job_rss"] = group_rss(pgid)
    if gpus is not None:
        g = gpus.read(n)
        if g:
            s["gpus"] = g
    return s


class Sampler:
    def __init__(self, folder: Path, interval: float = 2.0) -> None:
        self.path = folder / "samples.jsonl"
        self.interval = interval
        self.pgid = 0
        self.t0 = time.monotonic()
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.count = 0
        self.last: deque[str] = deque(maxlen=KEEP)
        self.first: dict[str, Any] | None = None
        self.latest: dict[str, Any] | None = None
        self.errors = 0

    def start(self, pgid: int) -> None:
        self.pgid = pgid
        self.thread = threading.Thread(target=self._loop, name="crashlens-sampler", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        gpus = _Gpus()
        with open(self.path, "w", encoding="utf-8") as f:
            while True:
                try:
                    s = sample_once(self.pgid, time.monotonic() - self.t0, gpus, self.count)
                except Exception:            # a sample never ends the job
                    self.errors += 1
                    s = None
                if s is not None:
                    row = json.dumps(s, separators=(",", ":"))
                    self.last.append(row)
                    if self.count < KEEP:
                        f.write(row + "\n")
                        f.flush()
                    self.count += 1
                    self.first = self.first or s
                    self.latest = s
                # fast at first (a job that dies in its first seconds still leaves figures), then the interval
                if self.stop_event.wait(min(self.interval, FAST_INTERVAL) if self.count < FAST_SAMPLES else self.interval):
                    break

    def stop(self) -> dict[str, Any]:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        try:   # the figures after the end: the cgroup's OOM counters once the kernel has killed
            final = json.dumps(sample_once(0, time.monotonic() - self.t0), separators=(",", ":"))
        except Exception:
            final = None
        if final is not None:
            self.last.append(final)
            self.count += 1
        if self.count > KEEP:
            self.path.write_text("\n".join(self.last) + "\n", encoding="utf-8")
        elif final is not None:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(final + "\n")
        return {"samples": self.count, "interval": self.interval, "kept": min(self.count, KEEP),
                "file": self.path.name}
