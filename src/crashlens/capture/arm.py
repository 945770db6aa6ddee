"""Arm the evidence a crash should leave, before the job starts (data/run_switches.yaml).

    arm(bundle, off) -> Armed        the child's environment, the switches and what each did
    Armed.restore()                  put back the limits changed in this process

Environment variables are set for the child only; a variable the user already set is kept and
reported as kept. The core-size limit is raised in this process (the child inherits it) and put
back after the child has started.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..knowledge import data


@dataclass
class Switch:
    id: str
    what: str
    state: str            # "on" | "kept" (the user's own value) | "off" (turned off) | "failed"
    detail: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Armed:
    env: dict[str, str]
    switches: list[Switch]
    core_pattern: str = ""
    _restore_core: tuple[int, int] | None = None

    def restore(self) -> None:
        if self._restore_core is not None:
            try:
                resource.setrlimit(resource.RLIMIT_CORE, self._restore_core)
            except (ValueError, OSError):
                pass
            self._restore_core = None


def switch_ids() -> list[str]:
    return [s["id"] for s in data("run_switches.yaml")["switches"]]


def read_core_pattern() -> str:
    try:
        return Path("/proc/sys/kernel/core_pattern").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def arm(bundle: Path, off: Iterable[str] = ()) -> Armed:
    off = set(off)
    env = dict(os.environ)
    armed = Armed(env, [], read_core_pattern())
    for spec in data("run_switches.yaml")["switches"]:
        sid, what = spec["id"], spec["what"]
        if "all" in off or sid in off:
            armed.switches.append(Switch(sid, what, "off", "turned off with --no"))
            continue
        if spec.get("limit") == "core":
            armed.switches.append(_raise_core(armed, what))
            continue
        values = {k: str(v).replace("{bundle}", str(bundle)) for k, v in (spec.get("env") or {}).items()}
        kept = {k: env[k] for k in values if k in env}
        if kept:
            armed.switches.append(Switch(sid, what, "kept", "already set: " + ", ".join(f"{k}={v}" for k, v in kept.items()),
                                         env=kept))
            continue
        env.update(values)
        armed.switches.append(Switch(sid, what, "on", "", env=values))
    return armed


def _raise_core(armed: Armed, what: str) -> Switch:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    except (ValueError, OSError) as exc:
        return Switch("core", what, "failed", f"getrlimit: {exc}")
    where = f"core pattern {armed.core_pattern!r}" if armed.core_pattern else "core pattern unreadable"
    if soft == hard:
        limit = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard} bytes"
        state = "on" if hard != 0 else "failed"
        return Switch("core", what, state, f"limit already {limit} (hard limit); {where}")
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    except (ValueError, OSError) as exc:
        return Switch("core", what, "failed", f"setrlimit: {exc}")
    armed._restore_core = (soft, hard)
    limit = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard} bytes"
    return Switch("core", what, "on", f"raised from {soft if soft != resource.RLIM_INFINITY else 'unlimited'} to {limit}; {where}")
