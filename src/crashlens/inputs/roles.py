"""Which text inputs are logs: source code and configuration files of a bundle are read but are
not evidence (data/input_roles.yaml says which, by name and first lines).

    text_role("artifacts/train.py", b"import torch\n") -> ("source", "a .py file")
    text_role("artifacts/run.log", ...)                  -> ("log", "")
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import PurePosixPath
from typing import Any

from ..knowledge import data

__all__ = ["text_role"]


@cache
def _roles() -> dict[str, Any]:
    doc = data("input_roles.yaml")
    return {**doc, "shebang_re": re.compile(doc["shebang"].encode())}


def text_role(name: str, head: bytes) -> tuple[str, str]:
    """("log" | "notebook" | "elastic-error" | "run-manifest" | "run-samples" | "source" | "config" |
    "other", why) for a text input named
    `name` starting with `head`."""
    r = _roles()
    base = PurePosixPath(name.replace("\\", "/").rsplit("!", 1)[-1]).name
    ext = PurePosixPath(base).suffix.lower()
    if head.lstrip()[:1] == b"{" and all(k.encode() in head for k in r["flight_recorder_when"]):
        return "flight-recorder", "an NCCL Flight Recorder dump (JSON)"
    if r["run_manifest_when"].encode() in head:
        return "run-manifest", "the manifest of a crashlens run bundle: the run's exit and armed switches"
    if base in r["run_samples_names"] and head.lstrip()[:5] == b'{"t":':
        return "run-samples", "a crashlens run bundle's samples: memory, disks and GPUs while the job ran"
    for rule in r["not_evidence"]:
        if base == rule.get("name") or (rule.get("when") and rule["when"].encode() in head):
            return "other", rule["why"]
    if ext in r["notebook_extensions"] and head.lstrip()[:1] == b"{":
        return "notebook", "a Jupyter notebook: the outputs of its cells"
    if head.lstrip()[:1] == b"{" and all(k.encode() in head for k in r["elastic_error_when"]):
        return "elastic-error", "a torchelastic error file: the traceback it holds"
    if ext in r["log_extensions"] and base not in r["config_names"]:
        return "log", ""
    if base in r["source_names"] or ext in r["source_extensions"]:
        return "source", f"source code ({ext or base})"
    if base in r["config_names"] or ext in r["config_extensions"]:
        if any(marker.encode() in head for marker in r["config_is_log_when"]):
            return "log", ""
        return "config", f"a configuration file ({ext or base})"
    if not ext and r["shebang_re"].match(head):
        return "source", "a script (#! line)"
    return "log", ""
