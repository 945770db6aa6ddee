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
    ex = doc.get("exit") or {}
    sig = ex.get("signal")
    code = ex.get("code")
    facts: dict[str, Any] = {"source": "run", "pid": ex.get("pid"), "failed": (ex.get("status") or 0) != 0,
                             "core_dumped": bool(ex.get("core_dumped"))}
    if sig:
        facts["signal"] = sig
        text = f"the job (pid {ex.get('pid')}) was ended by {sig}" + (" (core dumped)" if ex.get("core_dumped") else "")
    else:
        facts["exit_code"] = code
        text = f"the job (pid {ex.get('pid')}) exited with status {code}"
    stops = [s for s in doc.get("stopped_from_outside") or [] if isinstance(s, dict)]
    if stops:
        facts["stopped_by"] = stops[0].get("signal")
    out.append(Evidence(EvidenceKind.OUTCOME, text + " (crashlens run)", Loc(source, 0), facts=facts))
    for s in stops:
        name = s.get("signal")
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


def _series(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    """(resource, name) -> [(t, used, total)]."""
    out: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in rows:
        t = float(r.get("t") or 0)
        mem = r.get("mem") or {}
        if mem.get("MemTotal") and mem.get("MemAvailable") is not None:
            out.setdefault(("memory", "host"), []).append((t, mem["MemTotal"] - mem["MemAvailable"], mem["MemTotal"]))
        cg = r.get("cgroup") or {}
        if cg.get("max") and cg.get("current") is not None:
            out.setdefault(("cgroup-memory", str(cg.get("path") or "")), []).append((t, cg["current"], cg["max"]))
        for key, fs in (r.get("fs") or {}).items():
            if isinstance(fs, dict) and fs.get("total"):
                kind = "shm" if key == "shm" else "disk"
                out.setdefault((kind, str(fs.get("path") or key)), []).append((t, fs["total"] - fs["free"], fs["total"]))
        for g in r.get("gpus") or []:
            if isinstance(g, dict) and g.get("total"):
                out.setdefault(("gpu-memory", f"GPU {g.get('index')}"), []).append((t, g["used"], g["total"]))
    return out


def _oom_counters(rows: list[dict[str, Any]]) -> dict[str, int]:
    first = next((r.get("cgroup") for r in rows if r.get("cgroup")), None) or {}
    last = next((r.get("cgroup") for r in reversed(rows) if r.get("cgroup")), None) or {}
    out = {}
    for k in ("oom_kill", "oom"):
        if k in last:
            out[k] = int(last.get(k) or 0) - int(first.get(k) or 0)
    return out


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
            facts["cgroup_version"] = next((int(r["cgroup"].get("version") or 0) for r in rows if r.get("cgroup")), 0)
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
                 "cgroup_version": next((int(r["cgroup"].get("version") or 0) for r in rows if r.get("cgroup")), 0)}
        text = ("the memory cgroup's OOM killer killed " + (f"{counters['oom_kill']} process(es)" if counters["oom_kill"]
                                                             else "nothing") + " during the run")
        out.append(Evidence(EvidenceKind.RESOURCE, text, Loc(source, 0), facts=facts))
    return out


__all__ = ["parse_run_manifest", "parse_run_samples"]
