"""Bug reports pre-filled from an analysis (`crashlens report`, docs/report.md).

    context(a)                              the template context: the JSON dict plus helpers
    render_markdown(source, name, ctx)      a Jinja2 Markdown template, sandboxed, strict
    IssueForm.load(path) / fill_form(...)   a GitHub issue form (.github/ISSUE_TEMPLATE/*.yml)
    form_body(fields)                       the issue body GitHub makes from a submitted form
    issue_url(repo, ...)                    a prefilled /issues/new URL within a length limit
    make_report(a, ReportOptions(...))      what the CLI prints

Redaction (report/redact.py) runs on everything that leaves: the rendered Markdown, each form
field and the title; a closing line says how many items were redacted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote, urlencode

from ..errors import CrashlensError
from ..model import Analysis
from ..signature import Signature
from . import redact as redaction

URL_LIMIT = 8000  # characters of a whole prefilled URL (GitHub answers 414 beyond roughly 8 KB)
BUILTIN = "bug-report.md.j2"
SECTIONS = "sections.md.j2"


class TemplateError(CrashlensError):
    help = "See docs/report.md for the template context and syntax."


# ---------------------------------------------------------------------------------------------
# the context


# CPU flags a crash report should mention: the x86 extensions prebuilt wheels and JIT kernels
# dispatch on (ISA levels v2/v3/v4, AVX-512 subsets, AMX)
CPU_FLAGS_THAT_MATTER = (
    "sse4_2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi2", "avx_vnni",
    "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx512_vbmi", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
)
_CPU_FLAG_HEADS = ("avx", "avx2", "avx512f", "amx_tile")

# categories whose GPU errors are reported asynchronously (the Python line is only where they surfaced)
_ASYNC = {"gpu-illegal-instruction", "gpu-illegal-memory-access", "device-side-assert", "cuda-launch-config",
          "gpu-library-status-error"}

_TESTING: dict[str, tuple[str, ...]] = {
    "_async": (
        "Rerun with `CUDA_LAUNCH_BLOCKING=1 {cmd}`: kernel launches become synchronous, so the error is raised "
        "at the launch that failed{at}.",
        "Run `compute-sanitizer --tool memcheck {cmd}` (a smaller input is enough) to get the failing kernel, "
        "thread and address.",
    ),
    "gpu-illegal-instruction": (
        "Check that every library with GPU code carries SASS for this GPU: `crashlens inspect --gpu {sm} LIB...`.",
    ),
    "cuda-arch-unsupported": ("`crashlens inspect --gpu {sm} LIB...` reports every GPU library compatible.",),
    "cuda-compile-arch-unsupported": ("`crashlens inspect --gpu {sm} LIB...` reports every GPU library compatible.",),
    "device-side-assert": (
        "Check the inputs of the failing operation on the CPU (e.g. label values within `[0, num_classes)`, "
        "indices within the embedding size) before moving them to the GPU.",
    ),
    "gpu-oom": (
        "Rerun with the same inputs and log `torch.cuda.max_memory_allocated()` per step; with the fix the peak "
        "stays below the GPU's memory.",
        "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True {cmd}` tells fragmentation from real growth.",
    ),
    "host-oom-killed": (
        "Rerun under `/usr/bin/time -v {cmd}` (maximum resident set size) and watch `dmesg` for the OOM killer.",
    ),
    "collective-timeout-or-failure": (
        "Rerun with `NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL {cmd}` and compare the ranks' last collectives.",
        "Run nccl-tests (`all_reduce_perf`) across the same nodes to rule out the fabric.",
    ),
    "cpu-isa-unsupported": (
        "`crashlens inspect --cpu-flags /proc/cpuinfo LIB...` on the crashing machine reports no missing "
        "baseline extensions.",
    ),
    "native-segfault": (
        "Rerun with `python -X faulthandler` (or under `gdb --args {cmd}`) to get the native stack of the crash.",
    ),
    "native-abort": (
        "Rerun under `gdb --args {cmd}` (`catch throw`, then `bt`) to see who aborts.",
    ),
    "shared-library-missing": ("`ldd LIB` shows no `not found` and the import succeeds in the same environment.",),
    "python-extension-abi-mismatch": ("The import succeeds in the same environment: `python -c 'import MODULE'`.",),
    "cuda-driver-too-old": ("`nvidia-smi` shows a driver that supports the CUDA runtime the framework uses.",),
    "cuda-driver-library-mismatch": ("`nvidia-smi` runs and reports the same driver version as the kernel module "
                                     "(`cat /proc/driver/nvidia/version`).",),
    "cuda-toolkit-mismatch": ("`python -c 'import torch; print(torch.version.cuda)'` and `nvcc --version` agree.",),
    "cudnn-version-mismatch": ("`python -c 'import torch; print(torch.backends.cudnn.version())'` prints the "
                               "cuDNN the framework was built for.",),
    "gpu-not-available": ("`python -c 'import torch; print(torch.cuda.is_available())'` prints True in the job's "
                          "environment.",),
    "gpu-hardware-fault": (
        "Check the GPU: `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` and `dcgmi diag -r 3`; rerun on "
        "another GPU or node.",
    ),
    "device-or-dtype-mismatch": ("A unit test of the failing call with its real inputs passes on the GPU.",),
}


def _short(text: str, width: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _where(source: str, line: int | None, end_line: int | None = None) -> str:
    if not line:
        return source
    return f"{source}:{line}" + (f"-{end_line}" if end_line and end_line != line else "")


def loc(e: Mapping[str, Any] | None) -> str:
    """`source:line` of an evidence/error/frame dict."""
    if not e:
        return ""
    src = e.get("source") or e.get("file") or e.get("module") or "?"
    return _where(str(src), e.get("line"), e.get("end_line"))


def fence(text: Any, lang: str = "") -> str:
    """A fenced code block that the text cannot close early."""
    text = str(text).rstrip("\n")
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def code(text: Any) -> str:
    """Inline code that survives backticks in the text."""
    text = " ".join(str(text).split())
    n = 1
    while "`" * n in text:
        n += 1
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{'`' * n}{pad}{text}{pad}{'`' * n}"


def _read_ranges(a: Analysis, wanted: Mapping[str, Sequence[tuple[int, int]]]) -> dict[tuple[str, int, int], list[str]]:
    """The original lines (ANSI and overdraws cleaned) of the given 1-based ranges per input."""
    from ..text.normalize import clean

    out: dict[tuple[str, int, int], list[str]] = {}
    for inp in a.inputs:
        ranges = wanted.get(inp.name)
        if not ranges or inp.kind != "text":
            continue
        last = max(e for _, e in ranges)
        got: dict[int, str] = {}
        try:
            with inp.open() as f:
                for n, raw in enumerate(f, 1):
                    if n > last:
                        break
                    if any(s <= n <= e for s, e in ranges):
                        got[n] = clean(raw.decode("utf-8", "replace"))[:2000]
        except OSError:
            continue
        for s, e in ranges:
            out[(inp.name, s, e)] = [got[i] for i in range(s, e + 1) if i in got]
    return out


def _cut_middle(lines: list[str], keep: int, marker: str = "… [{n} lines cut] …") -> list[str]:
    if len(lines) <= keep:
        return lines
    head = keep // 3
    tail = keep - head
    return [*lines[:head], marker.format(n=len(lines) - keep), *lines[-tail:]]


# --- the command line -------------------------------------------------------------------------

_LAUNCHERS = re.compile(r"^(?:sudo\s+(?:-\S+\s+)*)?(?:(?:[A-Z_][A-Z0-9_]*=\S*\s+)*)(?:env\s+(?:[A-Z_]\w*=\S*\s+)*)?"
                        r"(?:\S*/)?(?:python[\d.]*|torchrun|accelerate|deepspeed|srun|sbatch|mpirun|mpiexec|"
                        r"horovodrun|composer|lightning|uv|poetry|pixi|conda|docker|podman|apptainer|singularity|"
                        r"gdb|cuda-gdb|compute-sanitizer|nsys|ncu|bash|sh|make|cmake|pip[\d.]*|pytest|jax|"
                        r"\./\S+|\S+\.py|\S+\.sh)\b")
_JOB = re.compile(r"(?:^|\s|/)(?:python[\d.]*|torchrun|accelerate|deepspeed|srun|mpirun|mpiexec|horovodrun|"
                  r"composer|pytest|\S+\.py)(?:\s|$)")
_NOISE = re.compile(r"^(?:cd|export|set|source|\.|ls|ll|cat|less|head|tail|grep|rg|sed|awk|echo|printf|ssh|scp|"
                    r"which|env|uname|whoami|id|df|du|free|top|htop|nvidia-smi|dmesg|journalctl|kubectl|"
                    r"sudo\s+dmesg|git|history|clear|exit|date|hostname|module|ulimit|watch|tee|mkdir|rm|cp|mv|"
                    r"ps|kill|pkill|cargo|nvcc|ldd|objdump|readelf|strings|file|gdb\s+-q\s+\S+\s+core)\b")
_PROMPT = re.compile(r"^(?:\([\w.\-]+\)\s*)?(?:[\w.\-]+@[\w.\-]+(?::[^\s$#]*)?)?[$#]\s+(?P<cmd>\S.*)$")
_WINPROMPT = re.compile(r"^(?:\([\w.\-]+\)\s*)?[A-Za-z]:\\[^>]*>\s*(?P<cmd>\S.*)$")
_XTRACE = re.compile(r"^\+{1,3}\s+(?P<cmd>\S.*)$")
_LABELLED = re.compile(r"^(?:Command|Cmd|Running|Executing|Launching|Launch command|Command line)\s*:\s*(?P<cmd>\S.*)$", re.I)
_GDB_CORE = re.compile(r"^Core was generated by `(?P<cmd>[^']*)'")
_BARE = re.compile(r"^(?P<cmd>(?:(?:[A-Z_][A-Z0-9_]*=\S+\s+)*)(?:torchrun|accelerate\s+launch|deepspeed|"
                   r"python[\d.]*\s+(?:-\S+\s+)*(?:\S+\.py|-m\s+\S+))(?:\s.*)?)$")


def find_command(a: Analysis, primary: Mapping[str, Any] | None = None, max_lines: int = 20000) -> dict[str, Any] | None:
    """The command that ran the job: a core's psargs, a shell prompt or `set -x` line, a labelled or
    bare launcher line in the logs, else the entry script of the traceback (arguments unknown)."""
    from ..text.normalize import normalize

    crash = a.crash or {}
    if crash.get("command"):
        return {"text": str(crash["command"]), "source": str(crash.get("source") or "core"), "exact": True,
                "note": "the core's process arguments (the kernel keeps at most 80 characters)"}
    best: tuple[int, int, dict[str, Any]] | None = None
    for inp in a.inputs:
        if inp.kind != "text":
            continue
        try:
            f = inp.open()
        except OSError:
            continue
        with f:
            for n, raw in enumerate(f, 1):
                if n > max_lines:
                    break
                if len(raw) > 4000:
                    continue
                text = normalize(raw.decode("utf-8", "replace"), inp.name, n).text.strip()
                if not text or text.startswith(("File \"", "Traceback")):
                    continue
                for pattern, base in ((_GDB_CORE, 6), (_PROMPT, 4), (_WINPROMPT, 4), (_XTRACE, 3), (_LABELLED, 3),
                                      (_BARE, 2)):
                    m = pattern.match(text)
                    if not m:
                        continue
                    cmd = m.group("cmd").strip()
                    if pattern is _XTRACE and not _LAUNCHERS.match(cmd):
                        continue  # `+ x=1` noise of set -x
                    if _NOISE.match(cmd) and not re.match(r"gdb\s+.*--args", cmd):
                        continue
                    score = base + (3 if _JOB.search(cmd) else 1 if _LAUNCHERS.match(cmd) else 0)
                    # the command that crashed comes before the error: prefer the last one before it
                    after = primary is not None and primary.get("source") == inp.name and (primary.get("line") or 0) < n
                    rank = (score - (5 if after else 0), n)
                    cand = {"text": cmd, "source": f"{inp.name}:{n}", "exact": pattern is not _GDB_CORE,
                            "note": "from gdb's `Core was generated by` (at most 80 characters)" if pattern is _GDB_CORE
                            else ""}
                    if best is None or rank >= best[:2]:
                        best = (*rank, cand)
                    break
    if best is not None:
        return best[2]
    for e in a.exceptions:
        for fr in e.frames:
            if fr.function == "<module>" and fr.file.endswith(".py") and fr.kind == "user":
                return {"text": f"python {fr.file}", "source": _where(e.loc.source, fr.loc.line if fr.loc else None)
                        if fr.loc else e.loc.source, "exact": False,
                        "note": "the entry script of the traceback; its arguments are not in the logs"}
    return None


# --- environment ------------------------------------------------------------------------------

def environment_summary(env: Mapping[str, Any]) -> dict[str, Any]:
    """Display strings for the environment; every key is present (None when unknown)."""
    fw = env.get("framework") or {}
    gpus = []
    for g in env.get("gpus") or []:
        bits = [b for b in (f"compute capability {g['compute_capability']}" if g.get("compute_capability") else "",
                            g.get("sm") or "") if b]
        name = g.get("name") or "GPU"
        gpus.append(f"{name}" + (f" ({', '.join(bits)})" if bits else ""))
    flags = env.get("cpu_flags")
    present = [f for f in CPU_FLAGS_THAT_MATTER if flags and f in flags] if flags else None
    absent = [f for f in _CPU_FLAG_HEADS if flags and f not in flags] if flags else None
    first = (env.get("gpus") or [{}])[0]
    driver = env.get("driver_version")
    out = {
        "framework": ", ".join(f"{k} {v}" for k, v in fw.items()) or None,
        "frameworks": dict(fw),
        "packages": dict(env.get("packages") or {}),
        "cuda_runtime": env.get("cuda_runtime"),
        "cuda_toolkit": env.get("cuda_toolkit"),
        "cuda_driver": env.get("cuda_driver"),
        "driver_version": driver,
        "driver": (f"{driver}" + (f" (supports CUDA {env['cuda_driver']})" if env.get("cuda_driver") else ""))
        if driver else (f"supports CUDA {env['cuda_driver']}" if env.get("cuda_driver") else None),
        "cudnn": env.get("cudnn"),
        "cudnn_built": env.get("cudnn_built"),
        "gpu": gpus[0] if gpus else None,
        "gpus": gpus,
        "gpu_name": first.get("name"),
        "compute_capability": first.get("compute_capability"),
        "sm": first.get("sm"),
        "cpu_model": env.get("cpu_model"),
        "cpu_flags": present,
        "cpu_flags_absent": absent,
        "cpu": None,
        "python": env.get("python"),
        "os": env.get("os"),
        "glibc": env.get("glibc"),
        "torch_arch_list": " ".join(env.get("torch_arch_list") or []) or None,
    }
    if present is not None:
        text = " ".join(present) or "none of " + ", ".join(_CPU_FLAG_HEADS)
        if absent and present:
            text += " (no " + ", ".join(absent) + ")"
        out["cpu"] = text
    return out


# --- the whole context ------------------------------------------------------------------------

def _actual(d: Mapping[str, Any], primary: Mapping[str, Any] | None) -> str:
    bits = []
    if primary:
        bits.append(f"The job stopped with {code(_short(primary['text'], 200))} ({code(primary['where'])}).")
    crash = d.get("crash") or {}
    if crash.get("signal"):
        what = f"The process died of {crash['signal']}"
        if crash.get("function") or crash.get("module"):
            where = crash.get("function") or crash.get("pc") or "?"
            if crash.get("module"):
                where += f" in {os.path.basename(str(crash['module']))}"
            what += f" at {where}"
        if crash.get("instruction"):
            what += f" executing {code(crash['instruction'])}"
        if crash.get("exit_code") is not None and not crash.get("function"):
            what += f" (exit code {crash['exit_code']})"
        if crash.get("core_dumped"):
            what += ", core dumped"
        bits.append(what + ".")
    if not bits:
        bits.append("The job failed; crashlens found no error line it could single out (see the logs below).")
    n = len(d.get("secondary_errors") or [])
    if n:
        bits.append(f"{n} later error{'s' if n > 1 else ''} {'are' if n > 1 else 'is'} a consequence of it "
                    "(see the error messages).")
    return " ".join(bits)


def _expected(command: Mapping[str, Any] | None, frames: Sequence[Mapping[str, Any]]) -> str:
    users = [f for f in frames if f.get("kind") == "user"]
    step = ""
    if users:
        f = users[-1]
        where = f"{os.path.basename(str(f.get('file') or '?'))}:{f.get('line')}"
        step = f" The call at {code(where)}" + (f" ({code(_short(f['code'], 80))})" if f.get("code") else "") + \
            " completes without error."
    if command:
        return f"{code(command['text'])} runs to completion (exit status 0).{step}"
    return f"The job runs to completion (exit status 0).{step}"


def _testing(d: Mapping[str, Any], command: Mapping[str, Any] | None, env: Mapping[str, Any],
             frames: Sequence[Mapping[str, Any]]) -> list[str]:
    cmd = command["text"] if command else "<command>"
    users = [f for f in frames if f.get("kind") == "user"]
    at = ""
    if users:
        at = f" (today it surfaces at `{os.path.basename(str(users[-1].get('file') or '?'))}:{users[-1].get('line')}`)"
    sm = env.get("sm") or "sm_XX"
    out: list[str] = []
    cats = [c["category"] for c in d.get("causes") or [] if not c.get("secondary")][:2]
    seen: set[str] = set()
    for cat in cats:
        for key in (("_async",) if cat in _ASYNC else ()) + (cat,):
            for line in _TESTING.get(key, ()):
                s = line.format(cmd=cmd, at=at, sm=sm)
                if s not in seen:
                    seen.add(s)
                    out.append(s)
    top = (d.get("causes") or [None])[0]
    if top:
        out.append(f"After the fix, rerun `{cmd}`; `crashlens analyze` on the new logs no longer reports "
                   f"`{top['category']}`.")
    else:
        out.append(f"After the fix, rerun `{cmd}` and check that it runs to completion.")
    return out


def _title(d: Mapping[str, Any], primary: Mapping[str, Any] | None, env: Mapping[str, Any]) -> str:
    top = (d.get("causes") or [None])[0]
    if primary:
        head = _short(primary["text"].splitlines()[0] if primary["text"] else "", 110)
    elif top:
        head = top["title"]
    else:
        head = "Crash: no known cause recognised"
    where = env.get("gpu_name") or env.get("cpu_model")
    return head + (f" ({where})" if where and where not in head else "")


def _summary(d: Mapping[str, Any], primary: Mapping[str, Any] | None, env: Mapping[str, Any], cpl: str | None) -> str:
    bits = []
    if primary:
        bits.append(f"The job crashed with {code(_short(primary['text'], 200))} at {code(primary['where'])}.")
    top = (d.get("causes") or [None])[0]
    if top:
        bits.append(f"Most likely cause (crashlens): **{top['title']}** (`{top['category']}`, confidence "
                    f"{top['confidence']:.2f}).")
    else:
        bits.append("crashlens recognised no known cause in the logs.")
    run = [x for x in (env.get("framework"), f"CUDA {env['cuda_runtime']}" if env.get("cuda_runtime") else None,
                       env.get("gpu")) if x]
    if run:
        bits.append("Ran on " + ", ".join(run) + ".")
    return " ".join(bits)


def context(a: Analysis, sig: Signature, red: "redaction.Redactor | None" = None) -> dict[str, Any]:
    """The template context: every key of the analysis JSON (docs/json-schema.md) plus helpers.
    With a Redactor, the analysis is redacted before anything is composed or cut from it."""
    from ..model import Frame
    from .json import to_dict
    from .text import code_path_line as _cpl

    d = to_dict(a, sig)
    scrub = red if red is not None else (lambda text: text)
    if red is not None:
        if red.options_hosts:  # host names are named by prefixes the analysis strips: read them from the logs
            for inp in a.inputs:
                if inp.kind == "text":
                    try:
                        with inp.open() as f:
                            red.learn(f.read(4 << 20).decode("utf-8", "replace"))
                    except OSError:
                        pass
        for s in _strings(d):
            red.learn(s)
        d = red.deep(d)
    primary = None
    if d.get("primary_error"):
        p = dict(d["primary_error"])
        p["where"] = loc(p)
        p["exception"] = None
        for e in d.get("exceptions") or []:
            if e.get("source") == p["source"] and e.get("line") and p.get("line") and \
                    e["line"] <= p["line"] <= (e.get("end_line") or e["line"]):
                p["exception"] = e
        primary = p
    # the original lines of the primary error (its whole traceback) and of the secondaries
    wanted: dict[str, list[tuple[int, int]]] = {}
    if primary and primary.get("line"):
        exc = primary["exception"]
        s, e = (exc["line"], exc.get("end_line") or exc["line"]) if exc else \
            (primary["line"], primary.get("end_line") or primary["line"])
        wanted.setdefault(primary["source"], []).append((s, e))
    lines = _read_ranges(a, wanted) if wanted else {}
    if primary:
        got = next(iter(lines.values()), None) if lines else None
        primary["excerpt"] = scrub("\n".join(_cut_middle(got, 60))) if got else primary["text"]
    env = environment_summary(d.get("environment") or {})
    frames = d.get("code_path") or []
    cpl = _cpl([Frame(f["kind"], f.get("function") or "", f.get("file") or "", f.get("line"), f.get("code") or "",
                      f.get("module") or "") for f in frames]) if frames else None
    command = find_command(a, primary)
    if command is not None:
        command = {**command, "text": scrub(command["text"])}
    secondaries = [{**s, "where": loc(s)} for s in d.get("secondary_errors") or []]
    users = [f for f in frames if f.get("kind") == "user"]
    user_frame = {**users[-1], "where": f"{os.path.basename(str(users[-1].get('file') or '?'))}:{users[-1].get('line')}"} \
        if users else None
    ctx = dict(d)
    ctx.update({
        "analysis": d,
        "version": d.get("tool", {}).get("version"),
        "primary": primary,
        "top": (d.get("causes") or [None])[0],
        "main_causes": [c for c in d.get("causes") or [] if not c.get("secondary")],
        "secondaries": secondaries,
        "env": env,
        "code_path_line": cpl,
        "user_frame": user_frame,
        "command": command,
        "title": _title(d, primary, env),
        "summary": _summary(d, primary, env, cpl),
        "expected": _expected(command, frames),
        "actual": _actual(d, primary),
        "testing": _testing(d, command, env, frames),
        "async_gpu_error": any(c["category"] in _ASYNC for c in d.get("causes") or [] if not c.get("secondary")),
        "sources": [i["name"] for i in d.get("inputs") or []],
    })
    return ctx


# ---------------------------------------------------------------------------------------------
# Jinja2: sandboxed, strict, with errors that name the missing key


class _Dict(dict):
    """A dict that knows its path in the context, for error messages."""

    __slots__ = ("_path",)


class _List(list):
    __slots__ = ("_path",)


def _wrap(value: Any, path: str) -> Any:
    if isinstance(value, Mapping):
        out = _Dict((k, _wrap(v, f"{path}.{k}" if path else str(k))) for k, v in value.items())
        out._path = path
        return out
    if isinstance(value, (list, tuple)):
        out_l = _List(_wrap(v, f"{path}[{i}]") for i, v in enumerate(value))
        out_l._path = path
        return out_l
    return value


def _environment(top_names: Iterable[str]):
    from jinja2 import FileSystemLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment
    from jinja2.utils import missing

    names = sorted(top_names)

    class ClearUndefined(StrictUndefined):
        __slots__ = ()

        @property
        def _undefined_message(self) -> str:  # type: ignore[override]
            if self._undefined_hint:
                return self._undefined_hint
            obj, name = self._undefined_obj, self._undefined_name
            if obj is missing:
                return f"'{name}' is undefined (top-level names: {', '.join(names)})"
            path = getattr(obj, "_path", None)
            if isinstance(obj, dict) and path is not None:
                keys = ", ".join(sorted(map(str, obj))) or "none"
                return f"'{path}.{name}' is undefined ({path} has: {keys})"
            if isinstance(obj, list) and path is not None:
                return f"'{path}[{name}]' is undefined ({path} has {len(obj)} item(s))"
            if obj is None:
                return f"'{name}' is undefined: the value it was looked up on is empty (guard it with {{% if … %}})"
            return f"'{name}' is undefined on a {type(obj).__name__}"

    env = SandboxedEnvironment(
        loader=FileSystemLoader(str(_builtin_dir())),
        autoescape=False,
        undefined=ClearUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update({"loc": loc, "fence": fence, "code": code, "short": _short,
                        "basename": lambda p: os.path.basename(str(p or "")),
                        "conf": lambda x: f"{float(x):.2f}",
                        "bullets": lambda xs: "\n".join(f"- {x}" for x in xs)})
    env.globals.update({"loc": loc, "fence": fence, "code": code})
    return env


def _builtin_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "templates"


def _template_line(exc: BaseException, name: str) -> int | None:
    import traceback

    line = getattr(exc, "lineno", None)
    if line:
        return line
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if fr.filename in (name, "<template>"):
            return fr.lineno
    return None


def render_markdown(source: str, name: str, ctx: Mapping[str, Any]) -> str:
    """Render a Markdown template with the context; errors become one-line TemplateErrors."""
    from jinja2 import TemplateError as JinjaError, TemplateSyntaxError, UndefinedError
    from jinja2.sandbox import SecurityError

    env = _environment(ctx)
    wrapped = {k: _wrap(v, k) for k, v in ctx.items()}
    try:
        tmpl = env.from_string(source)
        return tmpl.render(wrapped)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template {name}, line {exc.lineno}: syntax error: {exc.message}") from None
    except UndefinedError as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") + f": {exc.message}") from None
    except SecurityError as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") +
                            f": not allowed in a template: {exc}") from None
    except JinjaError as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") + f": {exc}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError) as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") +
                            f": {type(exc).__name__}: {exc}") from None


def section(name: str, ctx: Mapping[str, Any]) -> str:
    """One section of the built-in report (a macro of data/templates/sections.md.j2)."""
    macro = name if name.endswith("_plain") else name + "_section"
    src = '{% import "' + SECTIONS + '" as s with context %}{{ s.' + macro + '() }}'
    return render_markdown(src, f"{SECTIONS}:{name}", ctx).strip("\n")


# ---------------------------------------------------------------------------------------------
# GitHub issue forms


@dataclass
class FormField:
    type: str
    id: str | None
    label: str
    value: str = ""  # the filled value (plain; GitHub renders `render:` fields as code blocks)
    options: list[str] = field(default_factory=list)
    checked: list[bool] = field(default_factory=list)
    render: str | None = None
    filled_from: str | None = None  # which context section filled it
    default: str = ""


@dataclass
class IssueForm:
    name: str  # the file name, for the template= query parameter
    title: str  # the form's title prefix ("[Bug]: ")
    labels: list[str]
    fields: list[FormField]

    @staticmethod
    def load(path: Path) -> "IssueForm":
        import yaml

        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"{path}: could not be read: {exc}") from None
        except yaml.YAMLError as exc:
            raise TemplateError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
        return IssueForm.parse(doc, path.name)

    @staticmethod
    def parse(doc: Any, name: str) -> "IssueForm":
        if not isinstance(doc, dict) or not isinstance(doc.get("body"), list):
            raise TemplateError(f"{name}: not a GitHub issue form (no `body:` list of fields)")
        fields = []
        for i, item in enumerate(doc["body"]):
            if not isinstance(item, dict) or "type" not in item:
                raise TemplateError(f"{name}: body item {i + 1} has no `type`")
            attrs = item.get("attributes") or {}
            if not isinstance(attrs, dict):
                raise TemplateError(f"{name}: body item {i + 1}: `attributes` is not a mapping")
            t = str(item["type"])
            if t not in ("markdown", "textarea", "input", "dropdown", "checkboxes"):
                raise TemplateError(f"{name}: body item {i + 1}: unknown type {t!r}")
            opts = attrs.get("options") or []
            labels = [str(o.get("label", "")) if isinstance(o, dict) else str(o) for o in opts]
            f = FormField(t, str(item["id"]) if item.get("id") is not None else None,
                          str(attrs.get("label") or ""), options=labels, render=attrs.get("render"),
                          default=str(attrs.get("value") or "") if t != "markdown" else "")
            f.value = f.default
            f.checked = [False] * len(labels) if t == "checkboxes" else []
            if t != "markdown" and not f.label:
                raise TemplateError(f"{name}: body item {i + 1} ({t}) has no attributes.label")
            fields.append(f)
        labels = doc.get("labels") or []
        if isinstance(labels, str):
            labels = [s.strip() for s in labels.split(",") if s.strip()]
        return IssueForm(name, str(doc.get("title") or ""), [str(x) for x in labels], fields)


# (section, pattern over "id label" words) in order: the first that matches fills the field
_TEXT_MAP: tuple[tuple[str, str], ...] = (
    ("expected", r"\bexpect"),
    ("actual", r"\bactual\b|current behaviou?r|observed|\binstead\b"),
    ("steps", r"\brepro|\bsteps?\b|how to|\bminimal\b|code sample|\bsnippet|\bcommand"),
    ("logs", r"\blogs?\b|\berrors?\b|traceback|stack ?trace|backtrace|\boutput\b|crash ?report|\bmessages?\b|\bdump\b"),
    ("solution", r"\bfix|solution|workaround|proposal|proposed|suggest|alternatives?|remed"),
    ("root_cause", r"root ?cause|\bcause\b|analysis|diagnos"),
    ("testing", r"\btest"),
    ("environment", r"environment|\benv\b|versions?|system|platform|setup|collect ?env|configuration|install|hardware"),
    ("context", r"additional|context|anything else|\bother\b|\bnotes?\b|comments?|\bextra\b"),
    ("summary", r"descri|summary|\bbug\b|problem|\bissue\b|what happened|what went wrong|overview|details?|title"),
)
_INPUT_MAP: tuple[tuple[str, str], ...] = (
    ("command", r"\bcommand"),
    ("cudnn", r"cudnn"),
    ("cuda", r"\bcuda\b"),
    ("driver", r"driver"),
    ("framework", r"torch|tensorflow|\btf\b|\bjax\b|framework|paddle|mxnet"),
    ("python", r"python"),
    ("gpu", r"\bgpus?\b|graphics|accelerator|\bdevice\b|hardware"),
    ("cpu", r"\bcpu\b|processor"),
    ("os", r"\bos\b|operating system|distro|platform"),
    ("title", r"summary|title|short description|one line|descri"),
)


def _words(f: FormField) -> str:
    return re.sub(r"[_\-/]+", " ", f"{f.id or ''} {f.label}".lower())


def _input_value(key: str, ctx: Mapping[str, Any]) -> str:
    env = ctx["env"]
    if key == "command":
        return ctx["command"]["text"] if ctx.get("command") else ""
    if key == "cuda":
        v = env.get("cuda_runtime") or env.get("cuda_toolkit")
        return f"{v}" + (f" (driver supports {env['cuda_driver']})" if env.get("cuda_driver") else "") if v else \
            (f"driver supports {env['cuda_driver']}" if env.get("cuda_driver") else "")
    if key == "title":
        return ctx["title"]
    return str({"cudnn": env.get("cudnn"), "driver": env.get("driver"), "framework": env.get("framework"),
                "python": env.get("python"), "gpu": ", ".join(env.get("gpus") or []) or None, "cpu": env.get("cpu_model"),
                "os": env.get("os")}.get(key) or "")


_OS_WORDS = {"linux": ("linux", "ubuntu", "debian", "centos", "rhel", "red hat", "rocky", "alma", "fedora", "suse",
                       "arch", "amazon linux", "wsl"),
             "windows": ("windows", "win32", "win64"), "macos": ("macos", "darwin", "mac os", "os x")}


def _pick_option(f: FormField, ctx: Mapping[str, Any]) -> str | None:
    """A dropdown option that matches the analysis, or None to leave it to the reporter."""
    words = _words(f)
    if re.search(r"\bos\b|operating system|platform", words):
        os_text = (ctx["env"].get("os") or "").lower()
        for opt in f.options:
            o = opt.lower()
            for family, keys in _OS_WORDS.items():
                if (family in o or any(k in o for k in keys)) and any(k in os_text for k in keys):
                    return opt
        return None
    if re.search(r"version", words):
        have = " ".join(str(v) for v in ctx["env"].get("frameworks", {}).values())
        for opt in f.options:
            m = re.match(r"v?(\d+\.\d+(?:\.\d+)?)", opt.strip())
            if m and re.search(r"(?<![\d.])" + re.escape(m.group(1)) + r"(?![\d])", have):
                return opt
        return None
    top = ctx.get("top") or {}
    hay = " ".join([str(top.get("category", "")), str(top.get("title", "")),
                    str((ctx.get("primary") or {}).get("text", "")), " ".join(ctx["env"].get("frameworks", {})),
                    "crash bug error"]).lower()
    hay_words = set(re.findall(r"[a-z0-9]+", hay.replace("-", " ")))
    scored = []
    for opt in f.options:
        ow = {w for w in re.findall(r"[a-z0-9]+", opt.lower()) if len(w) >= 3 or w in ("gpu", "os", "oom")}
        scored.append((len(ow & hay_words), opt))
    best = max((s for s, _ in scored), default=0)
    winners = [o for s, o in scored if s == best]
    return winners[0] if best > 0 and len(winners) == 1 else None


def fill_form(form: IssueForm, ctx: Mapping[str, Any]) -> list[FormField]:
    """Fill every field of the form from the context (by id, then label, then type)."""
    cache: dict[str, str] = {}

    def sec(name: str) -> str:
        if name not in cache:
            cache[name] = section(name, ctx)
        return cache[name]

    for f in form.fields:
        words = _words(f)
        if f.type == "textarea":
            key = next((k for k, p in _TEXT_MAP if re.search(p, words)), None)
            if key is None:
                continue
            if f.render:  # GitHub shows it as a code block: plain text only
                key = {"logs": "logs_plain", "steps": "command_plain", "environment": "environment_plain"}.get(key, key)
                if key == "command_plain" and not ctx.get("command"):
                    key = "steps"
            elif key == "logs":
                key = "errors"
            value = sec(key)
            if key == "root_cause" and ctx.get("code_path_line"):
                value += "\n\n**Code path**\n\n" + sec("code_path")
            if value.strip():
                f.value, f.filled_from = value, key
        elif f.type == "input":
            key = next((k for k, p in _INPUT_MAP if re.search(p, words)), None)
            if key:
                v = _input_value(key, ctx)
                if v:
                    f.value, f.filled_from = v, key
        elif f.type == "dropdown":
            opt = _pick_option(f, ctx)
            if opt is not None:
                f.value, f.filled_from = opt, "dropdown"
    # what the form has no field for goes to its "additional context" field
    filled = {f.filled_from for f in form.fields}
    extra = [(k, h) for k, h in (("testing", "Testing"), ("solution", "Proposed solution")) if k not in filled]
    ctx_field = next((f for f in form.fields if f.filled_from == "context"), None)
    if ctx_field is not None:
        for k, heading in extra:
            ctx_field.value += f"\n\n**{heading}**\n\n" + sec(k)
    return form.fields


def form_body(fields: Sequence[FormField]) -> str:
    """The issue body GitHub creates from a submitted form: `### Label`, a blank line, the value."""
    out: list[str] = []
    for f in fields:
        if f.type == "markdown":
            continue
        out += [f"### {f.label}", ""]
        if f.type == "checkboxes":
            out += [f"- [{'X' if c else ' '}] {o}" for o, c in zip(f.options, f.checked)]
        elif not f.value.strip():
            out.append("_No response_")
        elif f.type == "textarea" and f.render:
            out.append(fence(f.value, str(f.render)))
        else:
            out.append(f.value.rstrip("\n"))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# the prefilled URL


_MARKER = re.compile(r"… \[(\d+) lines? cut by crashlens to fit the URL\] …|…")


def shorten(text: str, max_chars: int, keep: Sequence[str] = (), head_share: float = 1 / 3) -> str:
    """Cut lines from the middle of text until it fits max_chars: the first and last lines (a
    head_share of the budget for the head; the end of a log says most), the lines that contain
    any of `keep` (the primary error) and code fences stay, and a marker line says how many
    lines were cut."""
    if len(text) <= max_chars:
        return text
    lines = text.split("\n")
    forced = {i for i, ln in enumerate(lines) if ln.lstrip().startswith("```")}
    for k in keep:  # the first line with each kept text (the primary error, the redaction line)
        forced |= {next((i for i, ln in enumerate(lines) if k and k in ln), -1)} - {-1}
    marker = "… [{n} line{s} cut by crashlens to fit the URL] …"
    budget = max_chars - sum(len(lines[i]) + 1 for i in forced) - len(marker) - 8
    if budget < 0 or len(lines) <= 2:  # even the kept lines are too long: cut characters from the middle
        if max_chars < 40:
            return text[:max(0, max_chars)]
        half = (max_chars - 40) // 2
        return text[:half] + f" … [{len(text) - 2 * half} characters cut] … " + text[len(text) - half:]
    head_budget = int(budget * head_share)
    hi, ti, used = 0, len(lines) - 1, 0
    while hi <= ti:  # the head first, to its share of the budget
        cost = 0 if hi in forced else len(lines[hi]) + 1
        if used + cost > head_budget:
            room = head_budget - used - 2
            if room >= 80 and hi not in forced:  # a long line (an explanation): keep its start
                lines[hi] = lines[hi][:room] + "…"
                used += room + 2
                hi += 1
            break
        used += cost
        hi += 1
    while ti >= hi:  # then the tail, with what is left
        cost = 0 if ti in forced else len(lines[ti]) + 1
        if used + cost > budget:
            break
        used += cost
        ti -= 1
    if hi > ti:
        return text
    cut = [i for i in range(hi, ti + 1) if i not in forced]
    n_cut = 0  # lines cut now, and the lines that earlier cuts' markers stand for
    for i in cut:
        m = _MARKER.fullmatch(lines[i])
        n_cut += int(m.group(1)) if m and m.group(1) else 0 if m else 1
    out = lines[:hi]
    marked, prev = False, hi - 1
    for i in sorted(forced & set(range(hi, ti + 1))) + [ti + 1]:
        if i - prev > 1:
            out.append(marker.format(n=n_cut, s="s" if n_cut != 1 else "") if not marked else "…")
            marked = True
        if i <= ti:
            out.append(lines[i])
        prev = i
    return "\n".join(out + lines[ti + 1:])


def shorten_markdown(text: str, max_chars: int, keep: Sequence[str] = (), always: Sequence[str] = ()) -> str:
    """shorten() unit by unit, the largest unit first, until the text fits: units are the
    `##`/`###` sections (cut from their end: what comes first matters most) and fenced code
    blocks (logs: cut from the middle, keeping the start, the end and the primary error).
    Lines with a text of `always` (the redaction line) stay everywhere."""
    if len(text) <= max_chars:
        return text
    units: list[list[Any]] = []  # [text, is_code]
    cur: list[str] = []
    in_fence = False

    def flush(is_code: bool) -> None:
        if cur:
            units.append(["\n".join(cur), is_code])
            cur.clear()

    for ln in text.split("\n"):
        if ln.lstrip().startswith("```"):
            if not in_fence:
                flush(False)
                cur.append(ln)
                in_fence = True
                continue
            cur.append(ln)
            flush(True)
            in_fence = False
            continue
        if not in_fence and re.match(r"#{2,3} ", ln):
            flush(False)
        cur.append(ln)
    flush(in_fence)
    for _ in range(200):
        total = sum(len(u[0]) + 1 for u in units) - 1
        if total <= max_chars:
            break
        i = max(range(len(units)), key=lambda j: len(units[j][0]))
        body, is_code = units[i]
        target = max(len(body) - (total - max_chars) - 8, int(len(body) * 0.6))
        new = shorten(body, target, [*keep, *always] if is_code else always, head_share=1 / 3 if is_code else 0.75)
        if len(new) >= len(body):
            return shorten("\n".join(u[0] for u in units), max_chars, always)
        units[i][0] = new
    return "\n".join(u[0] for u in units)


# which form fields give way first when a URL is too long (weight > 1: sooner)
_CUT_FIRST = {"context": 3.0, "solution": 2.0, "testing": 2.0, "environment": 1.5, "root_cause": 1.0, "errors": 1.0,
              "logs_plain": 1.0, "steps": 0.7, "command_plain": 0.5, "expected": 0.7, "actual": 0.7, "summary": 0.5}


def validate_repo(url: str) -> str:
    m = re.fullmatch(r"(https?://[^/\s?#]+/[^/\s?#]+/[^/\s?#]+?)(?:\.git)?/?", url.strip())
    if not m:
        raise CrashlensError(f"--url {url!r} is not a repository URL",
                             "Pass the repository's web address, e.g. https://github.com/OWNER/REPO.")
    return m.group(1)


def issue_url(repo: str, params: list[tuple[str, str]], shrinkable: Mapping[str, str], limit: int = URL_LIMIT,
              keep: Sequence[str] = (), weights: Mapping[str, float] | None = None,
              always: Sequence[str] = ()) -> tuple[str, list[str]]:
    """`REPO/issues/new?...` within `limit` characters: the longest shrinkable fields are cut
    until it fits (shrinkable: field -> "log", cut from the middle keeping its end, or
    "markdown", cut section by section); a field's weight (default 1) makes it cut sooner.
    Returns (url, notes about what was cut)."""
    base = validate_repo(repo) + "/issues/new?"
    values = dict(params)
    order = [k for k, _ in params]
    notes: list[str] = []

    def build() -> str:
        return base + urlencode([(k, values[k]) for k in order if values.get(k) is not None], quote_via=quote)

    url = build()
    cut: set[str] = set()
    for _ in range(200):
        if len(url) <= limit:
            break
        cands = [k for k in shrinkable if values.get(k)]
        if not cands:
            break
        k = max(cands, key=lambda k: len(quote(values[k], safe="")) * (weights or {}).get(k, 1.0))
        enc = len(quote(values[k], safe=""))
        over = len(url) - limit
        if enc <= 120:  # nothing sensible left to cut from: drop the field
            values[k] = None  # type: ignore[assignment]
            notes.append(f"{k}: left out to fit the URL")
        else:
            ratio = max(0.6, (enc - over - 60) / enc)  # at most 40% per step: the cut spreads over fields
            target = max(60, int(len(values[k]) * ratio))
            new = shorten(values[k], target, [*keep, *always]) if shrinkable[k] == "log" else \
                shorten_markdown(values[k], target, keep, always)
            if len(new) >= len(values[k]):
                new = values[k][: int(len(values[k]) * 0.8)]
            values[k] = new
            cut.add(k)
        url = build()
    for k in sorted(cut):
        if values.get(k) is not None:
            notes.append(f"{k}: shortened to fit the URL")
    if len(url) > limit:
        notes.append(f"the URL is {len(url)} characters, over the limit of {limit}")
    return url, notes


# ---------------------------------------------------------------------------------------------
# the command


@dataclass
class ReportOptions:
    template: Path | None = None
    url: str | None = None
    url_limit: int = URL_LIMIT
    redact: bool = True
    emails: bool = False
    home_users: bool = False
    hostnames: bool | Sequence[str] = False
    extra: Sequence[str] = ()
    title: str | None = None


@dataclass
class ReportResult:
    text: str  # what goes to stdout or -o
    messages: list[str] = field(default_factory=list)  # for stderr
    counts: dict[str, int] = field(default_factory=dict)


def _front_matter(source: str) -> tuple[dict[str, Any], str]:
    """A Markdown issue template's YAML front matter (name/about/title/labels) and the rest."""
    m = re.match(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", source, re.S)
    if not m:
        return {}, source
    import yaml

    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return {}, source
    return (meta if isinstance(meta, dict) else {}), source[m.end():]


def _is_form(path: Path, source: str) -> bool:
    """A .yml/.yaml template is a GitHub issue form (IssueForm.load says so when it is not one)."""
    return path.suffix.lower() in (".yml", ".yaml")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def make_report(a: Analysis, sig: Signature, opts: ReportOptions) -> ReportResult:
    red = redaction.Redactor(emails=opts.emails, home_users=opts.home_users, hostnames=opts.hostnames,
                             extra=opts.extra) if opts.redact else None
    # the analysis is redacted first (templates cut long strings, and a secret cut short is no
    # longer recognised), then everything that is printed
    ctx = context(a, sig, red)
    if opts.title:
        ctx["title"] = opts.title
    scrub = red if red is not None else (lambda text: text)

    source = None
    if opts.template is not None:
        try:
            source = opts.template.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"template {opts.template}: could not be read: {exc}") from None

    if opts.template is not None and source is not None and _is_form(opts.template, source):
        form = IssueForm.load(opts.template)
        fields = fill_form(form, ctx)
        for f in fields:
            if f.value and f.type in ("textarea", "input"):
                f.value = scrub(f.value)
        title = scrub(form.title + ctx["title"])
        footer = red.summary() if red is not None else None
        if footer:  # the last filled free-text field carries the redaction line
            last = next((f for f in reversed(fields) if f.type == "textarea" and not f.render and f.value.strip()), None)
            if last is not None:
                last.value = last.value.rstrip("\n") + f"\n\n{footer}"
        counts = red.counts if red is not None else {}
        if opts.url:
            params = [("template", form.name), ("title", title)]
            params += [(f.id, f.value) for f in fields
                       if f.id and f.type in ("textarea", "input", "dropdown") and f.value and f.value != f.default]
            long = {f.id: "log" if f.render else "markdown" for f in fields if f.id and f.type == "textarea" and f.value}
            weights = {f.id: _CUT_FIRST.get(f.filled_from or "", 1.0) for f in fields if f.id}
            keep = [ctx["primary"]["text"][:200]] if ctx.get("primary") else []
            url, notes = issue_url(opts.url, params, long, opts.url_limit, keep, weights, [footer] if footer else [])
            return ReportResult(url + "\n", notes + ([footer] if footer else []), counts)
        body = form_body(fields)
        if footer and not any(footer in f.value for f in fields):
            body += f"\n{footer}\n"
        return ReportResult(body, [], counts)

    # a Markdown template (the built-in one unless --template)
    if source is None:
        name = BUILTIN
        source = (_builtin_dir() / BUILTIN).read_text(encoding="utf-8")
        meta: dict[str, Any] = {}
    else:
        name = str(opts.template)
        meta, source = _front_matter(source)
    text = scrub(render_markdown(source, name, ctx))
    title = scrub(str(meta.get("title") or "") + ctx["title"])
    footer = red.summary() if red is not None else None
    counts = red.counts if red is not None else {}
    text = text.rstrip("\n") + "\n"
    if footer:
        text += f"\n{footer}\n"
    if opts.url:
        params = [("title", title), ("body", text)]
        labels = meta.get("labels")
        if labels:
            params.append(("labels", labels if isinstance(labels, str) else ",".join(map(str, labels))))
        keep = [ctx["primary"]["text"][:200]] if ctx.get("primary") else []
        url, notes = issue_url(opts.url, params, {"body": "markdown"}, opts.url_limit, keep,
                               always=[footer] if footer else [])
        return ReportResult(url + "\n", notes + ([footer] if footer else []), counts)
    return ReportResult(text, [], counts)

