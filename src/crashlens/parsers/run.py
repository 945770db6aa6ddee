"""A `crashlens run` bundle's own records -> evidence: how the job ended and what it was told
from outside (manifest.json), and the figures of the moment (samples.jsonl).

    parse_run_manifest(data, source) -> list[Evidence]     outcome evidence (source "run")
    parse_run_samples(data, source) -> list[Evidence]      resource evidence, one per resource

A resource is `full` when its peak use during the run reached 98 % of its size or left less than
1 MiB, and /dev/shm `small` when it holds less than 256 MiB in all: what explains a library status
error (GPU memory), an errno 28 (/dev/shm, a disk), or a SIGKILL (the memory cgroup, with its OOM
counter).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ..model import Evidence, EvidenceKind, Loc

FULL_PCT = 98.0
FULL_FREE = 1 << 20
SMALL_SHM = 256 << 20    # a /dev/shm this small cannot hold a few DataLoader batches (Docker's default is 64 MiB)


def _mib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def parse_run_manifest(data: bytes, source: str) -> list[Evidence]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return []
    if not isinstance(doc, dict) or doc.get("schema") != "crashlens.bundle/1":
        return []
    out: list[Evidence] = []
    ex = _dict(doc.get("exit"))
    sig = ex.get("signal") if isinstance(ex.get("signal"), str) else None
    code = ex.get("code") if _num(ex.get("code")) is not None else None
    facts: dict[str, Any] = {"source": "run", "pid": ex.get("pid"), "failed": (_num(ex.get("status")) or 0) != 0,
                             "core_dumped": bool(ex.get("core_dumped"))}
    if sig:
        facts["signal"] = sig
        text = f"the job (pid {ex.get('pid')}) was ended by {sig}" + (" (core dumped)" if ex.get("core_dumped") else "")
    else:
        facts["exit_code"] = code
        text = f"the job (pid {ex.get('pid')}) exited with status {code}"
    listed = doc.get("stopped_from_outside")
    stops = [s for s in (listed if isinstance(listed, list) else []) if isinstance(s, dict)]
    if stops:
        facts["stopped_by"] = stops[0].get("signal")
    out.append(Evidence(EvidenceKind.OUTCOME, text + " (crashlens run)", Loc(source, 0), facts=facts))
    for s in stops:
        name = s.get("signal") if isinstance(s.get("signal"), str) else None
        if name and name != "SIGINT":
            out.append(Evidence(EvidenceKind.OUTCOME,
                                f"crashlens run received {name} at {s.get('at')} s and passed it on to the job: "
                                f"the job was stopped from outside",
                                Loc(source, 0), facts={"source": "run", "signal": name, "received": True,
                                                       "failed": True, "sent_by": "outside"}))
    return out


def _rows(data: bytes) -> list[dict[str, Any]]:
    rows = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "t" in row:
            rows.append(row)
    return rows


def _num(v: Any) -> float | None:
    """A figure of a sample, or None for anything that is not a finite number (a sample file is
    input like any other: it may be damaged or made up)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        return None
    return float(v)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _series(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    """(resource, name) -> [(t, used, total)], from the rows' well-formed figures only."""
    out: dict[tuple[str, str], list[tuple[float, float, float]]] = {}

    def add(key: tuple[str, str], t: float, used: Any, total: Any) -> None:
        u, tt = _num(used), _num(total)
        if u is not None and tt:
            out.setdefault(key, []).append((t, u, tt))

    for r in rows:
        t = _num(r.get("t"))
        if t is None:
            continue
        mem = _dict(r.get("mem"))
        if _num(mem.get("MemTotal")) and _num(mem.get("MemAvailable")) is not None:
            add(("memory", "host"), t, mem["MemTotal"] - mem["MemAvailable"], mem["MemTotal"])
        cg = _dict(r.get("cgroup"))
        add(("cgroup-memory", str(cg.get("path") or "")), t, cg.get("current"), cg.get("max"))
        for key, fs in _dict(r.get("fs")).items():
            fs = _dict(fs)
            if _num(fs.get("total")) and _num(fs.get("free")) is not None:
                add(("shm" if key == "shm" else "disk", str(fs.get("path") or key)), t, fs["total"] - fs["free"], fs["total"])
        for g in r.get("gpus") if isinstance(r.get("gpus"), list) else []:
            g = _dict(g)
            add(("gpu-memory", f"GPU {g.get('index')}"), t, g.get("used"), g.get("total"))
    return out


def _oom_counters(rows: list[dict[str, Any]]) -> dict[str, int]:
    cgs = [c for c in (_dict(r.get("cgroup")) for r in rows) if c]
    out = {}
    for k in ("oom_kill", "oom"):
        counts = [int(c[k]) for c in cgs if _num(c.get(k)) is not None]
        if counts:
            out[k] = counts[-1] - counts[0]
    return out


def _cgroup_version(rows: list[dict[str, Any]]) -> int:
    v = next((_dict(r.get("cgroup")).get("version") for r in rows if _dict(r.get("cgroup"))), 0)
    return int(v) if _num(v) is not None else 0


def parse_run_samples(data: bytes, source: str) -> list[Evidence]:
    rows = _rows(data)
    if not rows:
        return []
    out: list[Evidence] = []
    counters = _oom_counters(rows)
    for (kind, name), pts in _series(rows).items():
        t, used, total = pts[-1]
        peak_used, peak_total = max(((u, tt) for _t, u, tt in pts), key=lambda p: p[0] / p[1] if p[1] else 0)
        peak_pct = round(100.0 * peak_used / peak_total, 1) if peak_total else 0.0
        full = peak_pct >= FULL_PCT or (peak_total - peak_used) < FULL_FREE
        facts: dict[str, Any] = {"resource": kind, "name": name, "used": int(used), "total": int(total),
                                 "used_pct": round(100.0 * used / total, 1) if total else 0.0, "peak_pct": peak_pct,
                                 "full": full, "samples": len(pts), "last_at_s": t}
        if kind == "shm":
            facts["small"] = total < SMALL_SHM
        what = {"memory": "host memory", "cgroup-memory": f"the memory cgroup {name}", "disk": name, "shm": name,
                "gpu-memory": f"{name} memory"}[kind]
        text = (f"{what}: peak {peak_pct:g} % used ({_mib(peak_used)} of {_mib(peak_total)}), "
                f"{facts['used_pct']:g} % at the last sample ({t:g} s)")
        if facts.get("small"):
            text += f"; only {_mib(total)} in all (Docker's default is 64 MiB; DataLoader workers need more)"
        if kind == "cgroup-memory":
            facts.update(counters)
            facts["oom_killed"] = bool(counters.get("oom_kill"))
            facts["cgroup_version"] = _cgroup_version(rows)
            if counters.get("oom_kill"):
                text += f"; its OOM killer killed {counters['oom_kill']} process(es) during the run"
            elif "oom_kill" in counters:
                text += "; its OOM killer killed nothing during the run"
        out.append(Evidence(EvidenceKind.RESOURCE, text, Loc(source, 0), facts=facts))
        if kind == "gpu-memory" and full:   # the fact nvidia-smi's table gives (parsers/environment)
            out.append(Evidence(EvidenceKind.ENV, f"gpu_memory_full: True ({text})", Loc(source, 0),
                                facts={"key": "gpu_memory_full", "value": True}))
    if "oom_kill" in counters and not any(e.facts.get("resource") == "cgroup-memory" for e in out):
        # a cgroup without a limit still counts its OOM kills (the host's OOM killer inside it)
        facts = {"resource": "cgroup-memory", "name": "", "full": False, **counters,
                 "oom_killed": bool(counters.get("oom_kill")),
                 "cgroup_version": _cgroup_version(rows)}
        text = ("the memory cgroup's OOM killer killed " + (f"{counters['oom_kill']} process(es)" if counters["oom_kill"]
                                                             else "nothing") + " during the run")
        out.append(Evidence(EvidenceKind.RESOURCE, text, Loc(source, 0), facts=facts))
    return out


__all__ = ["parse_run_manifest", "parse_run_samples"]
