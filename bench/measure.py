"""Run a command from a fresh runner process and report its wall time, CPU time and peak RSS.

    measure(cmd, env=None) -> {"cmd", "rc", "seconds", "user", "sys", "peak_rss_mb", "stdout", "stderr"}

The runner (this file, run as a script) starts the command, waits for it and reads
getrusage(RUSAGE_CHILDREN): the peak RSS is the command's own (the largest process it ran),
not the benchmark script's. A no-op command shows the runner's floor (~12 MB here).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time


def measure(cmd: list[str], env: dict | None = None) -> dict:
    runner = [sys.executable, os.path.abspath(__file__), "--", *cmd]
    res = subprocess.run(runner, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"runner failed ({res.returncode}): {res.stderr.strip()}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _main(cmd: list[str]) -> int:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "cmd": cmd, "rc": res.returncode, "seconds": wall, "user": ru.ru_utime, "sys": ru.ru_stime,
        "peak_rss_mb": ru.ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10),
        "stdout": res.stdout.decode("utf-8", "replace")[-20000:],
        "stderr": res.stderr.decode("utf-8", "replace")[-2000:],
    }))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    raise SystemExit(_main(args[1:] if args[:1] == ["--"] else args))
