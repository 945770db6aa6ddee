"""Kernel records (dmesg, journalctl -k, /var/log/syslog, kern.log) -> Evidence(kind="dmesg").

parse_kernel(line) looks at one normalised line and returns an Evidence whose facts["event"] is
one of:

  xid                 NVRM: Xid (PCI:0000:00:06): 13, pid=844, name=k_sm90, Graphics Exception ...
                      facts: xid, pci, pid, process, detail, xid_meaning, xid_cause, xid_mnemonic
  api-mismatch        NVRM: API mismatch: the client has the version X, but ... kernel module has
                      the version Y.      facts: client_version, kernel_version (either may be
                      missing when the message was split over two lines)
  segfault            python[1234]: segfault at 0 ip ... sp ... error 4 in libfoo.so[base+size]
  invalid-opcode      traps: python[1234] trap invalid opcode ip:... sp:... error:0 in lib[...]
  general-protection  traps: python[1234] general protection fault ip:... sp:... error:0 in ...
  divide-error        traps: python[1234] trap divide error ip:... sp:... error:0 in ...
                      facts (these four): process, pid, ip, sp, error, module, module_base,
                      module_size, offset (ip - module_base, or the offset the kernel printed),
                      and for segfault also address and cpu
  oom-kill            Out of memory: Killed process ..., Memory cgroup out of memory: Killed ...,
                      oom-kill:constraint=...,task=...,pid=..., oom_reaper: reaped process ...,
                      X invoked oom-killer: ...
                      facts: phase (killed|select|constraint|reaped|invoked), pid, process,
                      anon_rss_kb, total_vm_kb, constraint (global|memcg|cpuset|mempolicy), ...
  aer                 PCIe AER reports: facts severity (corrected|uncorrected-nonfatal|
                      uncorrected-fatal), device, reporter/driver, error_type
  nvrm-other          any other NVRM: line: facts detail, and pci / gpu_uuid when present

Everything else gives None. Patterns use search, not match-at-start, because a syslog or dmesg
prefix the normaliser did not recognise may still be in front of the message.
"""

from __future__ import annotations

import functools
from typing import Any

import regex as re

from crashlens.knowledge import data
from crashlens.model import Evidence, Line

__all__ = ["parse_kernel", "xid_info"]

_HEX = r"[0-9a-fA-F]+"
_PCI = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
# "in libfoo.so[7f12a0000000+1b000]"; newer kernels may also print the file offset first:
# "in libfoo.so[1b3c5,7f12a0000000+1b000]".
_IN_MODULE = (
    rf"(?:\s+in\s+(?P<module>[^\[\]]+?)\[(?:(?P<module_off>{_HEX}),)?"
    rf"(?P<module_base>{_HEX})\+(?P<module_size>{_HEX})\])?"
)


@functools.cache
def _xid_table() -> dict[int, dict[str, str]]:
    return {int(code): dict(info or {}) for code, info in data("xid.yaml").items()}


def xid_info(code: int) -> dict[str, str]:
    """What NVIDIA's Xid catalog says about a code: {meaning, cause, mnemonic?} or {}."""
    return dict(_xid_table().get(code, {}))


def _hex(value: str | None) -> int | None:
    return int(value, 16) if value else None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- event builders

_XID = re.compile(
    rf"NVRM: Xid \((?:PCI:)?(?P<pci>{_PCI})\): (?P<xid>\d+)"
    r"(?:,\s*pid=(?P<pid>'?<?\w+>?'?))?(?:,\s*name=(?P<name>[^,]*))?"
    r"(?:,\s*(?P<detail>.*?))?\s*$"
)


def _xid(m: re.Match) -> dict[str, Any]:
    code = int(m["xid"])
    pid = m["pid"].strip("'") if m["pid"] else None
    name = (m["name"] or "").strip()
    info = xid_info(code)
    facts: dict[str, Any] = {
        "event": "xid",
        "xid": code,
        "pci": m["pci"],
        "pid": _int(pid) if pid and pid.isdigit() else None,
        "process": name if name and name != "<unknown>" else None,
        "detail": (m["detail"] or "").strip(),
    }
    if info:
        facts["xid_meaning"] = info.get("meaning", "")
        facts["xid_cause"] = info.get("cause", "")
        if info.get("mnemonic"):
            facts["xid_mnemonic"] = info["mnemonic"]
    return facts


_API_MISMATCH = re.compile(
    r"NVRM: API mismatch: the client has the version (?P<client>\d+(?:\.\d+)+)"
    r"(?:,?\s*but\s*(?:NVRM:\s*)?this kernel module has the version (?P<kernel>\d+(?:\.\d+)+))?"
)
_API_MISMATCH_TAIL = re.compile(
    r"NVRM: this kernel module has the version (?P<kernel>\d+(?:\.\d+)+)"
)


def _api_mismatch(m: re.Match) -> dict[str, Any]:
    groups = m.groupdict()
    return {
        "event": "api-mismatch",
        "client_version": groups.get("client"),
        "kernel_version": groups.get("kernel"),
    }


_SEGFAULT = re.compile(
    rf"(?P<process>[^\s\[\]]+)\[(?P<pid>\d+)\]: segfault at (?P<address>{_HEX})"
    rf" ip (?P<ip>{_HEX}) sp (?P<sp>{_HEX}) error (?P<error>{_HEX})"
    + _IN_MODULE
    + r"(?:\s+likely on CPU (?P<cpu>\d+)(?: \(core (?P<core>\d+), socket (?P<socket>\d+)\))?)?"
)

_TRAP = re.compile(
    r"(?:traps:\s*)?(?P<process>[^\s\[\]]+)\[(?P<pid>\d+)\]\s+"
    r"(?P<kind>trap invalid opcode|general protection(?: fault)?|trap divide error)"
    rf"(?:\s+ip:(?P<ip>{_HEX}))?(?:\s+sp:(?P<sp>{_HEX}))?(?:\s+error:(?P<error>{_HEX}))?"
    + _IN_MODULE
)
_TRAP_EVENTS = {
    "trap invalid opcode": "invalid-opcode",
    "general protection": "general-protection",
    "general protection fault": "general-protection",
    "trap divide error": "divide-error",
}


def _fault_facts(m: re.Match, event: str) -> dict[str, Any]:
    ip = _hex(m["ip"])
    base = _hex(m["module_base"])
    if m["module_off"]:
        offset = _hex(m["module_off"])
    elif ip is not None and base is not None and ip >= base:
        offset = ip - base
    else:
        offset = None
    return {
        "event": event,
        "process": m["process"],
        "pid": int(m["pid"]),
        "ip": f"0x{ip:x}" if ip is not None else None,
        "sp": f"0x{_hex(m['sp']):x}" if m["sp"] else None,
        "error": m["error"],
        "module": m["module"].strip() if m["module"] else None,
        "module_base": f"0x{base:x}" if base is not None else None,
        "module_size": _hex(m["module_size"]),
        "offset": f"0x{offset:x}" if offset is not None else None,
    }


def _segfault(m: re.Match) -> dict[str, Any]:
    facts = _fault_facts(m, "segfault")
    facts["address"] = f"0x{int(m['address'], 16):x}"
    facts["cpu"] = _int(m["cpu"])
    return facts


def _trap(m: re.Match) -> dict[str, Any]:
    return _fault_facts(m, _TRAP_EVENTS[m["kind"]])


_OOM_KILLED = re.compile(
    r"(?:(?P<scope>Out of memory|Memory cgroup out of memory)(?: \((?P<why>[^)]*)\))?:\s*)?"
    r"Killed process (?P<pid>\d+) \((?P<process>[^)]*)\)"
    r"(?:.*?total-vm:(?P<total_vm>\d+)kB)?(?:.*?anon-rss:(?P<anon_rss>\d+)kB)?"
    r"(?:.*?file-rss:(?P<file_rss>\d+)kB)?(?:.*?shmem-rss:(?P<shmem_rss>\d+)kB)?"
    r"(?:.*?UID:(?P<uid>\d+))?(?:.*?oom_score_adj:(?P<adj>-?\d+))?"
)
_OOM_SELECT = re.compile(
    r"(?P<scope>Out of memory|Memory cgroup out of memory)(?: \((?P<why>[^)]*)\))?:\s*"
    r"Kill process (?P<pid>\d+) \((?P<process>[^)]*)\)(?: score (?P<score>\d+))?"
)
_OOM_CONSTRAINT = re.compile(r"oom-kill:(?P<fields>constraint=\S+)")
_OOM_REAPED = re.compile(
    r"oom_reaper: reaped process (?P<pid>\d+) \((?P<process>[^)]*)\)"
    r"(?:, now anon-rss:(?P<anon_rss>\d+)kB)?"
)
_OOM_INVOKED = re.compile(
    r"(?P<invoker>\S+) invoked oom-killer: gfp_mask=(?P<gfp>[^,\s]+).*?order=(?P<order>-?\d+)"
)
_CONSTRAINTS = {
    "CONSTRAINT_NONE": "global",
    "CONSTRAINT_MEMCG": "memcg",
    "CONSTRAINT_CPUSET": "cpuset",
    "CONSTRAINT_MEMORY_POLICY": "mempolicy",
}


def _oom_scope(scope: str | None) -> str | None:
    if scope is None:
        return None
    return "memcg" if scope.startswith("Memory cgroup") else "global"


def _oom_killed(m: re.Match) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "event": "oom-kill",
        "phase": "killed",
        "pid": int(m["pid"]),
        "process": m["process"],
        "anon_rss_kb": _int(m["anon_rss"]),
        "total_vm_kb": _int(m["total_vm"]),
        "file_rss_kb": _int(m["file_rss"]),
        "shmem_rss_kb": _int(m["shmem_rss"]),
        "uid": _int(m["uid"]),
        "oom_score_adj": _int(m["adj"]),
        "constraint": _oom_scope(m["scope"]),
    }
    return facts


def _oom_select(m: re.Match) -> dict[str, Any]:
    return {
        "event": "oom-kill",
        "phase": "select",
        "pid": int(m["pid"]),
        "process": m["process"],
        "score": _int(m["score"]),
        "anon_rss_kb": None,
        "constraint": _oom_scope(m["scope"]),
    }


def _oom_constraint(m: re.Match) -> dict[str, Any]:
    fields: dict[str, str] = {}
    for part in m["fields"].split(","):
        key, sep, value = part.partition("=")
        if sep:
            fields[key] = value
    constraint = fields.get("constraint", "")
    return {
        "event": "oom-kill",
        "phase": "constraint",
        "pid": _int(fields.get("pid")),
        "process": fields.get("task"),
        "uid": _int(fields.get("uid")),
        "anon_rss_kb": None,
        "constraint": _CONSTRAINTS.get(constraint, constraint.removeprefix("CONSTRAINT_").lower()),
        "oom_memcg": fields.get("oom_memcg"),
        "task_memcg": fields.get("task_memcg"),
    }


def _oom_reaped(m: re.Match) -> dict[str, Any]:
    return {
        "event": "oom-kill",
        "phase": "reaped",
        "pid": int(m["pid"]),
        "process": m["process"],
        "anon_rss_kb": _int(m["anon_rss"]),
        "constraint": None,
    }


def _oom_invoked(m: re.Match) -> dict[str, Any]:
    # The invoker is the task whose allocation failed, not necessarily the one that is killed.
    return {
        "event": "oom-kill",
        "phase": "invoked",
        "pid": None,
        "process": None,
        "invoker": m["invoker"],
        "gfp_mask": m["gfp"],
        "order": _int(m["order"]),
        "anon_rss_kb": None,
        "constraint": None,
    }


_AER_SEVERITY = (
    r"(?P<severity>Correct(?:ed|able)|Uncorrect(?:ed|able)\s*\((?:Fatal|Non-Fatal)\)"
    r"|Uncorrect(?:ed|able)|Fatal|Non-Fatal)"
)
_AER_RECEIVED = re.compile(
    rf"(?:(?P<driver>[\w-]+) (?P<reporter>{_PCI}): )?AER: (?:Multiple )?{_AER_SEVERITY}"
    rf" errors?(?: message)? received(?: from)?:?\s*(?:id=)?(?P<device>{_PCI}|[0-9a-fA-F]{{4}})?"
)
_AER_BUS_ERROR = re.compile(
    rf"(?:(?P<driver>[\w-]+) (?P<device>{_PCI}): )?(?:AER: )?PCIe Bus Error: "
    rf"severity={_AER_SEVERITY}(?:,\s*type=(?P<type>[^,]+))?(?:,\s*\((?P<agent>[^)]*)\))?"
)


def _aer_severity(text: str) -> str:
    low = text.lower()
    if low.startswith("correct"):
        return "corrected"
    if "non-fatal" in low:
        return "uncorrected-nonfatal"
    return "uncorrected-fatal"


def _aer_received(m: re.Match) -> dict[str, Any]:
    return {
        "event": "aer",
        "severity": _aer_severity(m["severity"]),
        "device": m["device"] or m["reporter"],
        "reporter": m["reporter"],
        "driver": m["driver"],
    }


def _aer_bus_error(m: re.Match) -> dict[str, Any]:
    return {
        "event": "aer",
        "severity": _aer_severity(m["severity"]),
        "device": m["device"],
        "driver": m["driver"],
        "error_type": m["type"].strip() if m["type"] else None,
        "agent": m["agent"],
    }


_NVRM = re.compile(r"NVRM:\s*(?P<detail>.*?)\s*$")
_NVRM_PCI = re.compile(rf"(?:PCI:|GPU )(?P<pci>{_PCI})\b")
_GPU_UUID = re.compile(r"\b(?P<uuid>GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\b")


def _nvrm_other(m: re.Match) -> dict[str, Any]:
    detail = m["detail"]
    facts: dict[str, Any] = {"event": "nvrm-other", "detail": detail}
    if pci := _NVRM_PCI.search(detail):
        facts["pci"] = pci["pci"]
    if uuid := _GPU_UUID.search(detail):
        facts["gpu_uuid"] = uuid["uuid"]
    if "fallen off the bus" in detail:
        facts["fallen_off_bus"] = True
    return facts


# (cheap substring that must be present, pattern, builder) -- first match wins; the NVRM
# catch-all comes last.
_RULES: tuple[tuple[str, re.Pattern, Any], ...] = (
    ("Xid", _XID, _xid),
    ("API mismatch", _API_MISMATCH, _api_mismatch),
    ("this kernel module has the version", _API_MISMATCH_TAIL, _api_mismatch),
    ("segfault at", _SEGFAULT, _segfault),
    ("] trap ", _TRAP, _trap),
    ("] general protection", _TRAP, _trap),
    ("Killed process", _OOM_KILLED, _oom_killed),
    ("Kill process", _OOM_SELECT, _oom_select),
    ("oom-kill:", _OOM_CONSTRAINT, _oom_constraint),
    ("oom_reaper", _OOM_REAPED, _oom_reaped),
    ("invoked oom-killer", _OOM_INVOKED, _oom_invoked),
    ("received", _AER_RECEIVED, _aer_received),
    ("PCIe Bus Error", _AER_BUS_ERROR, _aer_bus_error),
    ("NVRM", _NVRM, _nvrm_other),
)


def parse_kernel(line: Line) -> Evidence | None:
    """A kernel record on this line as Evidence(kind="dmesg"), or None."""
    text = line.text
    for needle, pattern, build in _RULES:
        if needle not in text:
            continue
        m = pattern.search(text)
        if m is None:
            continue
        return Evidence(kind="dmesg", text=text, loc=line.loc, facts=build(m))
    return None
