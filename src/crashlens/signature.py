"""A stable crash signature: the same crash gives the same id in every run.

    signature(analysis) -> Signature(id, text, parts)

Like apport's duplicate signature, ABRT's "duphash" and Sentry's grouping, the signature is a
hash of the few facts that say *which* crash this is, normalised so that what differs between
two runs of the same crash (pids, addresses, timestamps, temporary directories, hex ids, rank
numbers, library line numbers) does not reach the hash:

- category: the taxonomy id of the top cause ("unrecognised" when no rule fired);
- frames: the top frames, innermost last. Python: up to three user frames as
  `file.py:function` (file base name, no line number: an edit above the crash keeps the group)
  and the call the innermost user frame makes (`F.linear`); without user frames, the three
  innermost library frames as `package.module:function`. Native: `module!function` (module
  base name, function without its argument list or offset) from the core's crash site and its
  backtrace when there is one, or from a gdb/lldb backtrace in the logs;
- module: the base name of the module the native crash happened in; signal: its signal name;
- message: the primary error's first line, secrets redacted (crashlens.redaction: a token
  differs between runs and must never reach a signature, which goes into CI outputs and triage
  databases), random-looking tokens (32+ characters of mixed case with 3+ digits) -> X, digits ->
  N, hex -> X, paths -> base name, cut after the first sentence that makes it at least 48
  characters long (empty for a core whose crash site is the primary error: its frames and
  signal say it).

parts holds exactly what was hashed; the id is the first 16 hex digits of the SHA-256 of parts
as canonical JSON (with a version number, so a change of the recipe shows as a new id).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import regex as re

from .knowledge import abort_frames
from .model import Analysis, Evidence, Frame, FrameKind
from .redaction import Redactor

VERSION = 1
MAX_FRAMES = 3
MESSAGE_MIN = 48  # sentences are added to the message until it is at least this long
MESSAGE_MAX = 160


@dataclass(frozen=True)
class Signature:
    id: str
    text: str
    parts: Mapping[str, Any]

    def as_json(self) -> dict[str, str]:
        return {"id": self.id, "text": self.text}


# --- text normalisation -------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_PCI = re.compile(r"\b(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b|\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\b")
_HEX_PREFIXED = re.compile(r"\b0[xX][0-9a-fA-F]+\b")
# hashes, build ids, object ids: 6+ hex digits with at least one digit and one letter, or 12+ of any
_HEX_ID = re.compile(r"\b(?:(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{6,}|[0-9a-fA-F]{12,})\b")
_QUOTED_PATH = re.compile(r"""(['"`])((?:[A-Za-z]:)?[^'"`\n]*[\\/][^'"`\n]*)\1""")
_ABS_PATH = re.compile(r"(?<![\w.~:/])(?:~|[A-Za-z]:)?(?:[\\/][^\s\\/'\"`,;:()\[\]{}<>]+)+[\\/]?")
_TMP_NAME = re.compile(r"\b(?:tmp|pytest-|pymp-)[\w-]{4,}", re.I)
_RANK = re.compile(r"\b(rank|local_rank|global_rank|worker|pid|tid|thread|process|node|host)([\s:=#_-]*)\d+\b", re.I)
_NUMBER = re.compile(r"(?<![A-Za-z_\d])\d+(?:[.,]\d+)*")
_SPACES = re.compile(r"\s+")
_DAY = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)(?:day|sday|nesday|rsday|urday)?\b")
_MONTH = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?(?=\s+N\b)")
# after numbers became N: a leading `[N.N]`, `[D D N N:N:N N]` or `ERROR N-N N:N:N.N file.py:N]`
_STAMP_PREFIX = re.compile(r"^(?:\[\s*N\]\s*|\[[^\]]*\bN(?:[:.]N)+[^\]]*\]\s*|M\s+N\s+N:N:N\s+\S+\s+|(?:[A-Z]+\s+)?N[-/]N(?:[-/]N)?[ T]N:N:N(?:[.,]N)?\S*\s*)+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
# a random token no secret format knows (an API key of some service): it differs between runs
_RANDOM_TOKEN = re.compile(r"(?<![\w+/=-])(?=[\w+/=-]*[a-z])(?=[\w+/=-]*[A-Z])(?=(?:[^\d\s]*\d){3})[\w+/=-]{32,}")


def _basename(path: str) -> str:
    path = path.rstrip("/\\")
    return re.split(r"[\\/]", path)[-1] if path else path


def normalise_text(text: str) -> str:
    """A log message with what varies between runs of the same crash replaced:
    ANSI codes removed, secrets redacted, random tokens -> X, UUIDs/hex numbers/hex ids -> X, quoted and absolute paths -> base name
    (temporary names -> tmpX), pid/rank/thread numbers and every other number -> N, spaces collapsed."""
    t = _ANSI.sub("", text)
    t = Redactor().redact(t)
    t = _RANDOM_TOKEN.sub("X", t)
    t = _UUID.sub("X", t)
    t = _PCI.sub("X", t)
    t = _HEX_PREFIXED.sub("X", t)
    t = _QUOTED_PATH.sub(lambda m: f"{m.group(1)}{_basename(m.group(2))}{m.group(1)}", t)
    t = _ABS_PATH.sub(lambda m: _basename(m.group(0)), t)
    t = _TMP_NAME.sub("tmpX", t)
    t = _HEX_ID.sub("X", t)
    t = _RANK.sub(lambda m: f"{m.group(1)}{m.group(2)}N", t)
    t = _NUMBER.sub("N", t)
    t = _DAY.sub("D", t)
    t = _MONTH.sub("M", t)
    return _SPACES.sub(" ", t).strip()


def normalise_message(text: str) -> str:
    """The first line of an error, normalised, cut after the sentence that makes it MESSAGE_MIN long."""
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    t = normalise_text(first)
    t = _STAMP_PREFIX.sub("", t) or t
    out = ""
    for sentence in _SENTENCE_END.split(t):
        out = f"{out} {sentence}" if out else sentence
        if len(out) >= MESSAGE_MIN:
            break
    if len(out) > MESSAGE_MAX:
        out = out[: MESSAGE_MAX - 1].rstrip() + "…"
    return out


# --- frames -------------------------------------------------------------------------------------

_PY_LIB_ROOT = re.compile(r".*(?:site-packages|dist-packages|[\\/]lib[\\/]python\d+(?:\.\d+)?t?|[\\/]Lib)[\\/]")
_ARGS = re.compile(r"\s*\(.*\)\s*(?:const)?\s*$")
_OFFSET = re.compile(r"\s*\+\s*(?:0x[0-9a-fA-F]+|\d+)\s*$")
_CALL = re.compile(r"^\s*(?:return\s+|await\s+|yield\s+|raise\s+|[\w.\[\], *]+?\s*[-+*/@|&]?=\s*(?!=))?"
                   r"(?:await\s+)?([A-Za-z_][\w.]*)\s*\(")


def _library_name(f: Frame) -> str:
    path = f.file.replace("\\", "/")
    m = _PY_LIB_ROOT.match(path)
    rel = path[m.end():] if m else _basename(path)
    rel = re.sub(r"\.py[cw]?$", "", rel)
    if rel.endswith("/__init__"):
        rel = rel[: -len("/__init__")]
    mod = rel.replace("/", ".").strip(".") or "?"
    if mod.startswith("<frozen "):
        mod = mod[len("<frozen "):].rstrip(">")
    return f"{mod}:{f.function or '?'}"


def native_function(name: str) -> str:
    """`ns::f(int, char const*) const + 0x1a` -> `ns::f`; addresses and clone suffixes dropped."""
    name = _OFFSET.sub("", (name or "").strip())
    if name.startswith("0x") or not name or name == "??":
        return "?"
    name = _ARGS.sub("", name)
    name = re.sub(r"\.(?:isra|constprop|part|cold|lto_priv)\.\d+", "", name)
    return name


def native_module(module: str) -> str:
    base = _basename(module or "")
    base = re.sub(r":\d+$", "", base)  # gdb's `at file.c:42`
    return base


def _native(function: str, module: str) -> str:
    fn, mod = native_function(function), native_module(module)
    return f"{mod}!{fn}" if mod else fn


def frame_key(f: Frame) -> str | None:
    """One frame as it enters the signature, or None for frames that say nothing stable."""
    if f.kind == FrameKind.USER:
        return f"{_basename(f.file) or '?'}:{f.function or '?'}"
    if f.kind == FrameKind.LIBRARY:
        return _library_name(f)
    if f.kind == FrameKind.NATIVE:
        key = _native(f.function, f.module or f.file)
        return None if key in ("?", "") else key
    return None  # gpu: the synthetic failing-operation frame; its text is the message


def callee(code: str) -> str | None:
    """The function a source line calls: `x = F.linear(x, w)` -> `F.linear`."""
    m = _CALL.match(code or "")
    return m.group(1) if m else None


def python_frames(frames: Sequence[Frame]) -> list[str]:
    real = [f for f in frames if f.kind in (FrameKind.USER, FrameKind.LIBRARY)]
    users = [f for f in real if f.kind == FrameKind.USER]
    if users:
        keys = [frame_key(f) for f in users[-MAX_FRAMES:]]
        call = callee(users[-1].code)
        if call:
            keys.append(call)
        return [k for k in keys if k]
    return [k for k in (frame_key(f) for f in real[-MAX_FRAMES:]) if k]


def _is_machinery(function: str, module: str) -> bool:
    """A frame of the abort machinery (data/abort_frames.yaml): frames that only carry an abort."""
    from fnmatch import fnmatchcase

    machinery = abort_frames()
    fn = native_function(function)
    if fn != "?":
        return any(fnmatchcase(fn, p) for p in machinery.functions)
    return bool(module) and any(fnmatchcase(native_module(module), p) for p in machinery.runtime_modules)


def native_frames(frames: Iterable[Mapping[str, Any] | Frame], limit: int = MAX_FRAMES) -> list[str]:
    """Innermost-first native frames (dicts with function/module, or Frames) -> keys, innermost first.
    The abort machinery on top (abort, raise, __assert_fail, std::terminate, ...) and the runtime
    library frames that called into it are skipped, as apport and Sentry do; signal frames too."""
    items: list[tuple[str, str]] = []
    for f in frames:
        if isinstance(f, Frame):
            if not f.signal_frame:
                items.append((f.function, f.module or f.file))
        elif not f.get("signal_frame"):
            items.append((str(f.get("function") or ""), str(f.get("module") or f.get("file") or "")))
    i = 0
    while i < len(items) - 1 and _is_machinery(*items[i]):
        i += 1
    if i:
        from fnmatch import fnmatchcase

        mods = abort_frames().runtime_modules
        while i < len(items) - 1 and any(fnmatchcase(native_module(items[i][1]), p) for p in mods):
            i += 1
    out: list[str] = []
    for fn, mod in items[i:]:
        key = _native(fn, mod)
        if key in ("?", "") or (key.endswith("!?") and out):
            continue
        out.append(key)
        if len(out) >= limit:
            break
    return out


def _stack_of(a: Analysis) -> Evidence | None:
    """A native backtrace from the logs among the top cause's evidence (or anywhere)."""
    pools: list[Iterable[Evidence]] = []
    if a.causes:
        pools.append(a.causes[0].evidence)
    for pool in pools:
        for e in pool:
            if e.kind == "stack" and e.frames:
                return e
    return None


# --- the signature ------------------------------------------------------------------------------


def signature_parts(a: Analysis) -> dict[str, Any]:
    top = a.causes[0] if a.causes else None
    parts: dict[str, Any] = {"v": VERSION, "category": top.category if top else "unrecognised"}
    frames: list[str] = []
    crash = a.crash
    bt = list(crash.backtrace.frames) if crash is not None and crash.backtrace is not None else []
    if crash is not None and (crash.function or crash.module or bt):
        # a core: the crash site, then its backtrace when the unwinder gave one (innermost first)
        # frames found by scanning the stack are guesses: they may differ between runs
        bt = [f for i, f in enumerate(bt) if i == 0 or f.trust != "scan"]
        site = [Frame(FrameKind.NATIVE, crash.function or "", module=crash.module or "")]
        native = native_frames(bt or site)
        py = [k for k in python_frames(a.code_path) if ":" in k][-1:]  # the user call that led there
        frames = py + list(reversed(native))
        inner_module = native[0].split("!", 1)[0] if native and "!" in native[0] else ""
        module = inner_module or native_module(str(crash.module or ""))
        if module:
            parts["module"] = module
        if crash.signal:
            parts["signal"] = str(crash.signal)
    elif a.code_path:
        frames = python_frames(a.code_path)
        if not frames:
            natives = [f for f in a.code_path if f.kind == FrameKind.NATIVE]
            frames = list(reversed(native_frames(reversed(natives))))
    else:
        stack = _stack_of(a)
        if stack is not None:
            frames = list(reversed(native_frames(reversed(stack.frames))))
            inner = next((f for f in reversed(stack.frames) if native_module(f.module)), None)
            if inner is not None and native_module(inner.module).find(".so") >= 0:
                parts["module"] = native_module(inner.module)
    parts["frames"] = frames
    if crash and frames and a.primary_error is not None and a.primary_error.kind == "crash":
        # the core's own one-liner repeats the frames (and names libc internals that differ
        # between glibc versions): signal and frames say it all, as in apport's signature
        parts["message"] = ""
    elif a.primary_error is not None:
        parts["message"] = normalise_message(a.primary_error.text)
    elif top is not None and top.evidence:
        parts["message"] = normalise_message(top.evidence[0].text)
    else:
        parts["message"] = ""
    return parts


def signature_of_parts(parts: Mapping[str, Any]) -> Signature:
    canon = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    sid = hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]
    bits = [str(parts.get("category") or "unrecognised")]
    where = " > ".join(parts.get("frames") or ())
    if not where and parts.get("module"):
        where = str(parts["module"])
    if where:
        bits.append(where)
    msg = str(parts.get("message") or "")
    if msg:
        bits.append(msg if len(msg) <= 100 else msg[:99].rstrip() + "…")
    return Signature(sid, " | ".join(bits), dict(parts))


def signature(a: Analysis) -> Signature:
    """The stable signature of one analysis (see the module docstring for the recipe)."""
    return signature_of_parts(signature_parts(a))
