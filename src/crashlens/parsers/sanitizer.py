"""compute-sanitizer reports (memcheck, racecheck, initcheck, synccheck) -> `gpu-fault` evidence.

    parse_sanitizer(lines) -> list[Evidence]

One report is a block of `========= ` lines (real examples: fixtures/gpu-cores/san_*.log):

    ========= Invalid __global__ write of size 4 bytes
    =========     at [clone write_wild(int *, int)] store_value(int *, int)+0x140 in crash.cu:38
    =========     by thread (5,0,0) in block (1,0,0)
    =========     Access to 0x100 is out of bounds
    =========         Device Frame: write_wild(int *, int)+0x100 in crash.cu:46
    =========     Saved host backtrace up to driver entry point at kernel launch time
    =========         Host Frame: main [0x8f0b] in crash_li

The headline is the error; `at FUNCTION+0xOFF [in FILE:LINE]` the faulting instruction (the
offset counts from the kernel's start; "in file:line" only when built with -lineinfo);
`[clone KERNEL]` names the kernel a device function was compiled into; `Device Frame:` lines
are the device-side callers, `Host Frame:` lines the host stack at the launch. Repeated reports
(one per faulting thread) are folded into the first, with a count. Headlines map to categories
through data/cuda_exceptions.yaml (`sanitizer:`). The parser never raises.
"""

from __future__ import annotations

from typing import Any, Iterable

import regex as re

from .. import knowledge
from ..model import Evidence, EvidenceKind, Frame, FrameKind, Line, Loc

_PREFIX = re.compile(r"^=========(?: |$)")
_TOOL = re.compile(r"compute-sanitizer\b.*?--tool[ =](\w+)")
_AT = re.compile(r"^\s+at (?:\[clone (?P<clone>[^\]]+)\] )?(?P<fn>.+?)\+0x(?P<off>[0-9a-f]+)"
                 r"(?: in (?P<file>[^:\s]+):(?P<line>\d+))?\s*$")
_RACE_AT = re.compile(r"(?:Write|Read) access at (?P<fn>.+?)\+0x(?P<off>[0-9a-f]+)(?: in (?P<file>[^:\s]+):(?P<line>\d+))?")
_BY = re.compile(r"^\s+by thread \((?P<t>[\d,]+)\) in block \((?P<b>[\d,]+)\)")
_ADDR = re.compile(r"^\s+(?:Access to|Address) (?P<a>0x[0-9a-f]+)(?: is (?P<why>out of bounds|misaligned))?")
_DEV = re.compile(r"^\s+Device Frame: (?P<fn>.+?)\+0x(?P<off>[0-9a-f]+)(?: in (?P<file>[^:\s]+):(?P<line>\d+))?")
_HOST = re.compile(r"^\s+Host Frame: (?P<fn>.+?)(?: \[0x(?P<off>[0-9a-f]+)\])? in (?P<mod>\S+)")
_SIZE = re.compile(r"^Invalid __(?P<space>global|shared|local)__ (?P<access>read|write|atomic) of size (?P<size>\d+)")
_API = re.compile(r"^Program hit (?P<err>\w+) \(error (?P<code>\d+)\) due to \"(?P<msg>[^\"]+)\" on CUDA API call to (?P<call>\w+)")


def _headline_class(text: str) -> dict[str, Any] | None:
    for entry in knowledge.data("cuda_exceptions.yaml").get("sanitizer", []):
        if re.search(entry["match"], text):
            return entry
    return None


def parse_sanitizer(lines: Iterable[Line]) -> list[Evidence]:
    out: list[Evidence] = []
    tool = ""
    cur: dict[str, Any] | None = None
    seen: dict[tuple, dict[str, Any]] = {}
    in_host = ""

    def finish() -> None:
        nonlocal cur
        if cur is None:
            return
        key = (cur["facts"].get("error"), cur["facts"].get("function"), cur["facts"].get("offset"))
        if key in seen:
            seen[key]["facts"]["reports"] += 1
            seen[key]["end"] = cur["loc"].line
        else:
            seen[key] = cur
        cur = None

    for ln in lines:
        try:
            m = _TOOL.search(ln.text)
            if m and "=========" not in ln.text:
                tool = m.group(1)
                continue
            if not _PREFIX.match(ln.text):
                continue
            body = ln.text[10:] if len(ln.text) > 9 else ""
            if not body.strip():
                finish()
                continue
            if not body.startswith(" "):  # a headline
                finish()
                api = _API.match(body)
                if api:
                    continue
                cls = _headline_class(body)
                if cls is None:
                    continue
                cur = {"loc": ln.loc, "end": ln.loc.line, "host": [], "device": [],
                       "facts": {"source": "compute-sanitizer", "tool": tool or _guess_tool(body),
                                 "error": body.strip(), "exception": cls.get("exception") or body.strip(),
                                 "category": cls.get("category"), "reports": 1}}
                sz = _SIZE.match(body)
                if sz:
                    cur["facts"].update(space=sz["space"], access=sz["access"], size=int(sz["size"]))
                ra = _RACE_AT.search(body)
                if ra:
                    _set_at(cur, ra)
                in_host = ""
                continue
            if cur is None:
                continue
            cur["end"] = ln.loc.line
            f = cur["facts"]
            if (m := _AT.match(body)) and "function" not in f:
                _set_at(cur, m)
                if m["clone"]:
                    f["kernel"] = m["clone"]
            elif m := _BY.match(body):
                f["thread"] = "(" + m["t"] + ")"
                f["block"] = "(" + m["b"] + ")"
            elif m := _ADDR.match(body):
                f["address"] = m["a"]
                if m["why"]:
                    f["address_is"] = m["why"]
            elif m := _DEV.match(body):
                cur["device"].append(Frame(FrameKind.GPU, function=m["fn"], file=m["file"] or "",
                                           line=int(m["line"]) if m["line"] else None,
                                           module_offset=int(m["off"], 16), loc=ln.loc))
                f.setdefault("kernel", m["fn"])
            elif "Saved host backtrace" in body:
                in_host = "launch" if "kernel launch" in body else "error"
            elif (m := _HOST.match(body)) and in_host:
                cur["host"].append(Frame(FrameKind.NATIVE, function=m["fn"], module=m["mod"],
                                         module_offset=int(m["off"], 16) if m["off"] else None, loc=ln.loc))
        except Exception:  # noqa: BLE001 - a parser never raises; a damaged report is skipped
            cur = None
    finish()
    for ev in seen.values():
        f = ev["facts"]
        f.setdefault("kernel", f.get("function"))
        f["device_frames"] = len(ev["device"])
        where = f" in {f['file']}:{f['line']}" if f.get("file") else ""
        who = f" by thread {f['thread']} in block {f['block']}" if f.get("thread") else ""
        text = f"compute-sanitizer {f['tool'] or ''}: {f['error']} at {f.get('function', '?')}+0x{f.get('offset', 0):x}{where}{who}"
        # frames innermost first: the faulting instruction, its device callers, the host stack
        top = Frame(FrameKind.GPU, function=f.get("function", ""), file=f.get("file", ""), line=f.get("line"),
                    module_offset=f.get("offset"), loc=ev["loc"])
        out.append(Evidence(EvidenceKind.GPU_FAULT, " ".join(text.split()), Loc(ev["loc"].source, ev["loc"].line, ev["end"]),
                            facts=f, frames=(top, *ev["device"], *ev["host"])))
    return out


def _set_at(cur: dict[str, Any], m) -> None:
    f = cur["facts"]
    f["function"] = m["fn"].strip()
    f["offset"] = int(m["off"], 16)
    if m["file"]:
        f["file"], f["line"] = m["file"], int(m["line"])


def _guess_tool(headline: str) -> str:
    if headline.startswith("Error: Race"):
        return "racecheck"
    if headline.startswith("Uninitialized"):
        return "initcheck"
    if headline.startswith("Barrier error"):
        return "synccheck"
    return "memcheck"
