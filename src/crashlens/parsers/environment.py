"""Environment facts from whatever a job printed -> (environment dict, [Evidence(kind="env")]).

Sources understood: PyTorch's collect_env, `transformers-cli env`, `jax.print_environment_info()`,
nvidia-smi (table, -L and -q), deviceQuery, nvcc --version, lscpu, /proc/cpuinfo, /etc/os-release,
/proc/driver/nvidia/version, pip list / pip freeze / conda list / pip install output, and the
free-form lines training scripts and frameworks print (`torch 2.5.1+cu124 cuda 12.4 device
NVIDIA H100 80GB HBM3`, TensorFlow's "Created device ... compute capability: 8.0", XLA's
"StreamExecutor device (0): ...", PyTorch's "... with CUDA capability sm_120 is not compatible").

The returned dict (JSON-serialisable) holds only the keys that were found:

  framework        {"torch": "2.1.0+cu121", "tensorflow": "2.15.0", "jax": ..., "mxnet": ..., "paddle": ...}
  packages         {"numpy": "1.26.4", "nvidia-cudnn-cu12": "8.9.2.26", ...} (the packages that matter)
  cuda_runtime     "12.1"  CUDA the framework was built with / runs on (major.minor)
  cuda_toolkit     "12.4"  the system's CUDA toolkit (nvcc; collect_env's "CUDA runtime version")
                           -- also used as cuda_runtime when nothing better was printed
  cuda_driver      "12.2"  the newest CUDA the driver supports (nvidia-smi "CUDA Version")
  driver_version   "535.104.05"
  cudnn            "8.9.2"  the cuDNN loaded (or installed)
  cudnn_built      "8.7.0"  the cuDNN PyTorch was compiled against (from its mismatch error)
  gpus             [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0",
                     "sm": "sm_80", "pci_bus_id": "00000000:07:00.0"}, ...] (keys present when known)
  cpu_model        "Intel(R) Xeon(R) Platinum 8480+"
  cpu_flags        sorted list of CPU feature flags
  python           "3.10.12"
  os               "Ubuntu 22.04.3 LTS (x86_64)"
  glibc            "2.35"
  torch_arch_list  ["sm_50", "sm_60", ...] (what the installed PyTorch was compiled for, when printed)
  gpu_memory_full  True when nvidia-smi shows a GPU with 95 % or more of its memory in use

Each fact found gives one Evidence(kind="env", text=line.text, loc=line.loc,
facts={"key": key, "value": value}); key is "framework.torch", "packages.numpy", "cuda_runtime",
"gpus", ... and for "gpus" the value is what that line said about one GPU. Repeated lines
(/proc/cpuinfo prints the same flags for every core) give evidence once.

One mechanism does it all: a table of rules (hints, pattern, key, converter, priority), kept as
data in data/environment.yaml (read through crashlens.knowledge; that file documents the rule
format and says where each group's text comes from). This module only holds the converters and
key functions the table names by name. Every rule whose hint occurs in a line is tried on it; a
value found by a higher-priority rule replaces one found by a lower-priority rule (collect_env's
"CUDA used to build PyTorch" beats the "+cu121" suffix, which beats the system nvcc); at equal
priority the first value wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Callable, Iterable

import regex as re

from crashlens.gpus import gpu_compute_capability, gpu_name_words as _words
from crashlens.knowledge import EnvironmentRule, environment_rules
from crashlens.model import Evidence, Line

__all__ = ["parse_environment", "gpu_compute_capability"]


# ------------------------------------------------------------------------------ GPU table

# the table and its matching live in crashlens.gpus (binary/cudacompat uses them too)


def _sm(cc: str) -> str:
    major, _, minor = cc.partition(".")
    return f"sm_{major}{minor or '0'}"


def _cc_from_sm(sm: str) -> str | None:
    digits = re.match(r"(?:sm_|compute_)?(\d+)", sm)
    if not digits or len(digits[1]) < 2:
        return None
    return f"{int(digits[1][:-1])}.{digits[1][-1]}"


# ---------------------------------------------------------------------------- packages

# Packages worth reporting (names normalised: lower case, "_" -> "-").
_PACKAGE = re.compile(
    r"(?:torch|pytorch|torchvision|torchaudio|tensorflow(?:-gpu|-cpu|-intel|-macos)?|tf-nightly"
    r"|tf-keras|keras|jax|jaxlib|jax-cuda\d+-(?:plugin|pjrt)|triton|pytorch-triton(?:-rocm)?"
    r"|numpy|flash-attn|xformers|vllm|deepspeed|transformers|accelerate|lightning"
    r"|pytorch-lightning|onnxruntime(?:-gpu)?|mxnet(?:-cu\d+\w*)?|cupy(?:-cuda\d+x?)?"
    r"|nvidia-[a-z0-9][a-z0-9-]*|nccl|cudnn|cudatoolkit|cuda-version|pytorch-cuda|bitsandbytes"
    r"|apex|paddlepaddle(?:-gpu)?|tensorrt(?:-cu\d+)?|cuda-python)"
)
_RENAMES = {"pytorch": "torch"}  # conda's name -> pip's


def _package(name: str) -> str | None:
    canonical = name.strip("`'\"").lower().replace("_", "-")
    canonical = _RENAMES.get(canonical, canonical)
    return canonical if _PACKAGE.fullmatch(canonical) else None


def _framework(package: str) -> str | None:
    if package == "torch":
        return "torch"
    if package.startswith(("tensorflow", "tf-nightly")) and package != "tf-keras":
        return "tensorflow"
    if package == "jax":
        return "jax"
    if package.startswith("mxnet"):
        return "mxnet"
    if package.startswith("paddlepaddle") or package == "paddle":
        return "paddle"
    return None


# -------------------------------------------------------------------------- converters


def _clean_version(text: str) -> str:
    return text.strip().strip("'\"").rstrip(".,;:)-")


def _v(m: re.Match) -> str | None:
    value = _clean_version(m["v"])
    return value or None


def _text(m: re.Match) -> str | None:
    value = m["v"].strip().strip('"')
    return value or None


def _major_minor(text: str) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", text.strip())
    return f"{int(m[1])}.{int(m[2])}" if m else None


def _v_major_minor(m: re.Match) -> str | None:
    return _major_minor(m["v"])


def _cudnn_number(number: int) -> str:
    # cuDNN's integer version: major*1000 + minor*100 + patch before 9.0, major*10000 + minor*100
    # + patch from 9.0 on (8902 -> 8.9.2, 90100 -> 9.1.0).
    if number >= 10000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"


def _cudnn(m: re.Match) -> str | None:
    value = m["v"]
    if value.isdigit():
        return _cudnn_number(int(value)) if len(value) >= 4 else value
    parts = _clean_version(value).split(".")
    return ".".join(parts[:3])


def _version_tuple(m: re.Match) -> str:
    return f"{m['a']}.{m['b']}.{m['c']}"


def _flags(m: re.Match) -> list[str] | None:
    tokens = m["v"].split()
    if len(tokens) < 3 or not all(re.fullmatch(r"[a-z0-9_.]+", t) for t in tokens):
        return None
    return sorted(set(tokens))


def _arch_list(m: re.Match) -> list[str] | None:
    archs = sorted(set(re.findall(r"\b(?:sm|compute)_\d+[a-z]?\b", m["v"])))
    return archs or None


def _gpu(m: re.Match) -> dict[str, Any] | None:
    groups = m.groupdict()
    gpu: dict[str, Any] = {}
    if groups.get("index") is not None:
        gpu["index"] = int(groups["index"])
    name = (groups.get("name") or "").strip().strip('"').strip()
    if name:
        gpu["name"] = name
    cc = groups.get("cc")
    if not cc and groups.get("sm"):
        cc = _cc_from_sm(groups["sm"])
    if not cc and groups.get("maj") is not None and groups.get("min") is not None:
        cc = f"{groups['maj']}.{groups['min']}"
    if cc:
        gpu["compute_capability"] = cc
    if groups.get("pci"):
        gpu["pci_bus_id"] = groups["pci"]
    return gpu if "name" in gpu or "index" in gpu else None


def _memory_full(m: re.Match) -> bool | None:
    """nvidia-smi's "used / total" memory column: True when 95 % or more is in use."""
    used, total = int(m.group("used")), int(m.group("total"))
    return True if total and used >= 0.95 * total else None


# ------------------------------------------------------------------------------ keys


def _package_key(m: re.Match) -> str | None:
    package = _package(m["name"])
    return f"packages.{package}" if package else None


def _framework_key(m: re.Match) -> str | None:
    package = _package(m["name"]) or m["name"].lower()
    framework = _framework(package)
    if framework:
        return f"framework.{framework}"
    return f"packages.{package}" if _package(package) else None


# ------------------------------------------------------------------------------ rules

# The names data/environment.yaml may use: its converters, key functions and regex flags.
_CONVERTERS: dict[str, Callable[[re.Match], Any]] = {
    "version": _v,
    "text": _text,
    "major_minor": _v_major_minor,
    "cudnn": _cudnn,
    "version_tuple": _version_tuple,
    "cpu_flags": _flags,
    "arch_list": _arch_list,
    "gpu": _gpu,
    "memory_full": _memory_full,
}
_KEY_FUNCTIONS: dict[str, Callable[[re.Match], str | None]] = {
    "package()": _package_key,
    "framework()": _framework_key,
}
_FLAGS: dict[str, int] = {"ignorecase": re.IGNORECASE}


@dataclass(frozen=True)
class _Rule:
    hints: tuple[str, ...] | None  # lower-case substrings; one must be in the lower-cased line
    pattern: re.Pattern
    key: str | Callable[[re.Match], str | None]
    convert: Callable[[re.Match], Any]
    priority: int
    every: bool  # one fact per match (finditer) instead of the first match only


def _bind(row: EnvironmentRule) -> _Rule:
    """A row of data/environment.yaml with its names bound and its pattern compiled."""
    unknown = ([row.convert] if row.convert not in _CONVERTERS else []) + [f for f in row.flags if f not in _FLAGS]
    if row.key.endswith("()") and row.key not in _KEY_FUNCTIONS:
        unknown.append(row.key)
    if unknown:
        raise ValueError(f"data/environment.yaml: unknown name(s) {unknown} in the rule {row.pattern!r}")
    flags = 0
    for name in row.flags:
        flags |= _FLAGS[name]
    return _Rule(row.hints, re.compile(row.pattern, flags), _KEY_FUNCTIONS.get(row.key, row.key),
                 _CONVERTERS[row.convert], row.priority, row.every)


@dataclass(frozen=True)
class _Table:
    rules: tuple[_Rule, ...]
    unhinted: tuple[int, ...]  # rules tried on every line
    by_hint: tuple[tuple[str, tuple[int, ...]], ...]  # which rules a hint lets through


@cache
def _table() -> _Table:
    rules = tuple(_bind(row) for row in environment_rules())
    return _Table(
        rules,
        tuple(i for i, rule in enumerate(rules) if rule.hints is None),
        tuple((hint, tuple(i for i, rule in enumerate(rules) if rule.hints and hint in rule.hints))
              for hint in sorted({h for rule in rules for h in rule.hints or ()})),
    )


# ---------------------------------------------------------------------------- collecting


def _same_gpu(a: str | None, b: str | None) -> bool:
    """Could these two names be the same board? (nvidia-smi truncates long names with "...")."""
    if not a or not b:
        return True
    ka, kb = (" ".join(_words(n.rstrip(". "))) for n in (a, b))
    return ka == kb or (a.endswith("...") and kb.startswith(ka)) or (b.endswith("...") and ka.startswith(kb))


class _Collected:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.priority: dict[str, int] = {}
        self.gpus: list[dict[str, Any]] = []

    def offer(self, key: str, value: Any, priority: int) -> bool:
        if key == "gpus":
            return self._merge_gpu(value)
        if key in self.values:
            if self.values[key] == value:
                # The same value seen again, perhaps by a surer rule: no new evidence.
                self.priority[key] = max(priority, self.priority[key])
                return False
            if priority <= self.priority[key]:
                return False
        self.values[key] = value
        self.priority[key] = priority
        return True

    def _merge_gpu(self, new: dict[str, Any]) -> bool:
        name = new.get("name")
        target = None
        if new.get("index") is not None:
            target = next(
                (g for g in self.gpus if g.get("index") == new["index"] and _same_gpu(g.get("name"), name)),
                None,
            )
        if target is None and name:
            target = next(
                (
                    g
                    for g in self.gpus
                    if g.get("name") and _same_gpu(g["name"], name)
                    and (g.get("index") is None or new.get("index") is None)
                ),
                None,
            )
        if target is None:
            self.gpus.append(dict(new))
            return True
        changed = False
        for k, v in new.items():
            if target.get(k) is None:
                target[k] = v
                changed = True
        # Prefer a full name over nvidia-smi's truncated one ("Tesla V100-SXM2...").
        old = target.get("name") or ""
        if new.get("name") and old.endswith("...") and not new["name"].endswith("..."):
            target["name"] = new["name"]
            changed = True
        return changed

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for group in ("framework", "packages"):
            found = {k.split(".", 1)[1]: v for k, v in self.values.items() if k.startswith(group + ".")}
            if found:
                out[group] = dict(sorted(found.items()))
        for key in ("cuda_runtime", "cuda_toolkit", "cuda_driver", "driver_version", "cudnn", "cudnn_built"):
            if key in self.values:
                out[key] = self.values[key]
        if self.gpus:
            out["gpus"] = [self._finish_gpu(g) for g in sorted(self.gpus, key=_gpu_order)]
        for key in ("cpu_model", "cpu_flags", "python", "os", "glibc", "torch_arch_list"):
            if key in self.values:
                out[key] = self.values[key]
        if "os" not in out and "os_name" in self.values:  # /etc/os-release without PRETTY_NAME
            out["os"] = " ".join(filter(None, (self.values["os_name"], self.values.get("os_version"))))
        return out

    @staticmethod
    def _finish_gpu(gpu: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"index": gpu.get("index"), "name": gpu.get("name")}
        cc = gpu.get("compute_capability") or (gpu_compute_capability(gpu["name"]) if gpu.get("name") else None)
        if cc:
            out["compute_capability"] = cc
            out["sm"] = _sm(cc)
        if gpu.get("pci_bus_id"):
            out["pci_bus_id"] = gpu["pci_bus_id"]
        return out


def _gpu_order(gpu: dict[str, Any]) -> tuple[int, int]:
    index = gpu.get("index")
    return (0, index) if index is not None else (1, 0)


def _derived(key: str, value: Any) -> list[tuple[str, Any, int]]:
    """Facts that follow from another fact (at low priority, so printed values win)."""
    out: list[tuple[str, Any, int]] = []
    if not isinstance(value, str):
        return out
    if key.startswith("packages."):
        package = key.split(".", 1)[1]
        if framework := _framework(package):
            out.append((f"framework.{framework}", value, 1))
        if package in ("pytorch-cuda",):
            out.append(("cuda_runtime", _major_minor(value), 2))
        elif package in ("cudatoolkit", "cuda-version") or package.startswith("nvidia-cuda-runtime"):
            out.append(("cuda_runtime", _major_minor(value), 0))
        elif package == "cudnn" or package.startswith("nvidia-cudnn"):
            out.append(("cudnn", ".".join(value.split(".")[:3]), 0))
    if key == "cuda_toolkit":
        # With nothing better, the toolkit a program was built with is its CUDA runtime.
        out.append(("cuda_runtime", value, 0))
    if key == "framework.torch" and (cu := re.search(r"\+cu(\d)(\d+)?\b", value)):
        digits = cu[1] + (cu[2] or "")
        out.append(("cuda_runtime", f"{int(digits[:-1])}.{digits[-1]}", 2))
    return [(k, v, p) for k, v, p in out if v]


def parse_environment(lines: Iterable[Line]) -> tuple[dict, list[Evidence]]:
    """Environment facts printed in these lines, and one Evidence per fact found."""
    collected = _Collected()
    evidence: list[Evidence] = []

    def offer(line: Line, key: str, value: Any, priority: int) -> None:
        if value is None or not collected.offer(key, value, priority):
            return
        evidence.append(Evidence(kind="env", text=line.text, loc=line.loc, facts={"key": key, "value": value}))
        for dkey, dvalue, dpriority in _derived(key, value):
            offer(line, dkey, dvalue, dpriority)

    table = _table()
    rules, unhinted, by_hint = table.rules, table.unhinted, table.by_hint
    for line in lines:
        text = line.text
        if not text or len(text) > 4000:
            continue
        low = text.lower()
        chosen = set(unhinted)
        for hint, rule_indexes in by_hint:
            if hint in low:
                chosen.update(rule_indexes)
        for rule in (rules[i] for i in sorted(chosen)):
            matches = rule.pattern.finditer(text) if rule.every else [rule.pattern.search(text)]
            for m in matches:
                if m is None:
                    continue
                key = rule.key(m) if callable(rule.key) else rule.key
                if key is None:
                    continue
                offer(line, key, rule.convert(m), rule.priority)
    return collected.result(), evidence
